"""The code the docs include from ``docs/examples/``, run and type-checked.

The quickstart's shop, its tests and the testing page's tests run as a user
runs them (pytest in the example's folder, the package's plugin loaded by
its entry point); the quickstart's app passes ``mypy --strict``; the
operating page's audit record, direct sink, OpenTelemetry and Prometheus
snippets run against a real call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bailing_flask.audit import AUDIT_FIELD_DOCS, audit_line
from bailing_flask.testing import HubSimulator

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "examples"
QUICKSTART = EXAMPLES / "quickstart"
SECRET = "docs-example-provider-secret-0123456789abcdef"


def example_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BAILING_")}
    env.update(BAILING_SECRET=SECRET, PYTHONPATH=str(ROOT))
    return env


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=example_env(), capture_output=True, text=True, timeout=900)


def test_the_quickstart_app_passes_mypy_strict():
    result = run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "shop.py", "telemetry.py",
                  "audit_sink.py"], QUICKSTART)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(("folder", "files"), [("cli", ["shop.py", "seed.py"]),
                                              ("configuration", ["ways_in.py"]),
                                              ("base_url", ["shop.py"])])
def test_the_examples_of_the_reference_pages_pass_mypy_strict(folder, files):
    result = run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", *files], EXAMPLES / folder)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("folder", ["quickstart", "testing"])
def test_the_tests_the_docs_show_pass_with_the_plugin(folder):
    result = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", ".",
                  "-c", os.devnull], EXAMPLES / folder)
    assert result.returncode == 0, result.stdout + result.stderr
    assert " passed" in result.stdout and "skipped" not in result.stdout


def test_the_audit_record_shown_is_a_real_call_with_every_field():
    result = run([sys.executable, "audit_record.py"], QUICKSTART)
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert list(record) == list(AUDIT_FIELD_DOCS)
    assert (record["tool"], record["status"], record["subject"]) == ("order_get", 200, "t1:alice")


def test_the_sink_shown_writes_the_line_the_logger_would_log():
    result = run([sys.executable, "audit_sink.py"], QUICKSTART)
    assert result.returncode == 0, result.stderr
    line, counts = result.stdout.splitlines()
    record = json.loads(line)
    assert list(record) == list(AUDIT_FIELD_DOCS)
    assert (record["tool"], record["status"], record["job_id"]) == ("ping", 200, "job-7f3a")
    assert line == audit_line(record) and counts == "written 1, dropped 0, queued 0"


@pytest.fixture
def quickstart(monkeypatch):
    monkeypatch.setenv("BAILING_SECRET", SECRET)
    monkeypatch.syspath_prepend(str(QUICKSTART))


def test_the_opentelemetry_snippet_emits_a_span_per_call(quickstart):
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import telemetry

    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    app = telemetry.create_app(tracer_provider, MeterProvider())
    assert HubSimulator(app, SECRET).call("ping", subject="t1:alice").status == 200
    assert [span.name for span in spans.get_finished_spans()] == ["tool ping"]


def test_the_prometheus_recipe_counts_calls_and_refusals(quickstart):
    pytest.importorskip("prometheus_client")
    import prometheus_metrics

    app = prometheus_metrics.app
    hub = HubSimulator(app, SECRET)
    assert hub.call("order_get", {"order_id": 1001}, subject="t1:alice").status == 200
    assert hub.call("order_get", {"order_id": 1001}, subject="t2:bob").status == 403
    metrics = app.test_client().get("/metrics").text
    assert 'bailing_tool_calls_total{reason="",status="200",tool="order_get"} 1.0' in metrics
    assert 'bailing_refusals_total{event="tool_call",reason="forbidden"} 1.0' in metrics


@pytest.fixture
def ways_in(monkeypatch):
    monkeypatch.setenv("BAILING_SECRET", SECRET)
    monkeypatch.delenv("BAILING_STORE", raising=False)
    monkeypatch.syspath_prepend(str(EXAMPLES / "configuration"))
    import ways_in as module

    return module


def test_the_configuration_pages_app_config_is_read_once_at_init_app(ways_in):
    from bailing_flask import Bailing

    app = ways_in.from_app_config()
    assert list(Bailing.config(app).secrets) == [SECRET] and Bailing.config(app).store is None
    app.config["BAILING_SECRETS"] = ["another-secret-of-at-least-thirty-two-bytes"]
    assert list(Bailing.config(app).secrets) == [SECRET]  # changing app.config later changes nothing
    assert HubSimulator(app, SECRET).fetch_catalog().status == 200


def test_the_configuration_pages_constructor_takes_defaults_by_their_lower_case_name(ways_in):
    from flask import Flask

    from bailing_flask import Bailing, ConfigurationError

    assert Bailing.config(ways_in.from_defaults()).window == 120
    with pytest.raises(ConfigurationError, match="windo"):
        Bailing(Flask("typo"), secrets=[SECRET], windo=120)


def test_the_configuration_pages_factory_serves_several_apps_from_one_extension(ways_in):
    from bailing_flask import Bailing

    first = ways_in.create_app({"BAILING_SECRETS": [SECRET], "BAILING_WINDOW": 60})
    second = ways_in.create_app({"BAILING_SECRETS": [SECRET]})
    assert (Bailing.config(first).window, Bailing.config(second).window) == (60, 300)
    assert first.extensions["bailing"] is not second.extensions["bailing"]


def test_the_front_pages_app_serves_its_tool_to_the_user_its_authorizer_admits(monkeypatch):
    monkeypatch.setenv("BAILING_SECRET", SECRET)
    monkeypatch.syspath_prepend(str(EXAMPLES / "index"))
    import front_page

    hub = HubSimulator(front_page.app, SECRET)
    answer = hub.call("order_get", {"order_id": 1001}, subject="t1:alice")
    assert (answer.status, answer.json()) == (200, {"order_id": 1001, "tenant": "t1", "status": "paid"})
    assert hub.call("order_get", {"order_id": 1001}, subject="t2:bob").status == 403
    assert hub.call("order_get", {"order_id": 1001}, subject="t9:nobody").status == 403
    assert hub.probe().json() == {"authorized": False}


def _capability(app: Any) -> dict[str, Any]:
    from bailing_flask._pipeline.catalog import catalog_of
    from bailing_flask._state import state_of

    return catalog_of(state_of(app)).document["paths"]["/api/refunds/{request_id}/execute"]["post"][
        "x-agent-capability"]


def test_the_declaration_the_payloads_page_shows_has_the_capability_it_shows(monkeypatch):
    """The page renders the capability from options of its own; the declaration shown must match them."""
    from flask import Flask

    from bailing_flask import Bailing, tool

    monkeypatch.setenv("BAILING_SECRET", SECRET)
    monkeypatch.syspath_prepend(str(EXAMPLES / "hub_payloads"))
    import refund

    text = (ROOT / "docs" / "concepts" / "hub-payloads.rst").read_text(encoding="utf-8")
    rendered = text.split(".. bailing-json::\n\n", 1)[1].split("\n\n", 1)[0].strip()
    options = eval(rendered, {"capability": lambda **given: given})  # noqa: S307 - the page's own text
    app = Flask("rendered")
    app.config["BAILING_SECRETS"] = [SECRET]
    Bailing(app).authorizer(lambda call: True)
    declare = tool(name="refund_execute", **options)
    app.post("/api/refunds/<int:request_id>/execute")(declare(lambda request_id: {}))
    assert _capability(refund.app) == _capability(app)


@pytest.fixture
def guarded(monkeypatch):
    monkeypatch.setenv("BAILING_SECRET", SECRET)
    monkeypatch.syspath_prepend(str(EXAMPLES / "authorization"))
    import guarded as module

    module.AuditRow.rows.clear()
    return module


def test_the_authorization_pages_login_required_admits_admitted_calls_and_sends_browsers_to_log_in(guarded):
    hub = HubSimulator(guarded.app, SECRET)
    assert hub.call("order_get", {"order_id": 1001}, subject="t1:alice").json() == {"order_id": 1001}
    assert hub.call("order_get", {"order_id": 666}, subject="t1:alice").status == 403
    browser = guarded.app.test_client()
    assert browser.get("/api/orders/1001").status_code == 401  # unsigned: the package refuses it first
    with guarded.app.test_request_context("/api/orders/1001"):  # what the decorator does without a call
        assert guarded.login_required(lambda: "view")().location == "/login"


def test_the_authorization_pages_per_tool_authorizer_and_signals(guarded):
    hub = HubSimulator(guarded.app, SECRET)
    assert hub.call("whoami", subject="t1:alice", job_id="job-1").json() == {"subject": "t1:alice"}
    assert hub.call("whoami", subject="t9:nobody", job_id="job-2").status == 403
    assert guarded.AuditRow.rows == [
        {"job_id": "job-1", "subject": "t1:alice", "tool": "whoami", "status": 200, "key": "0"},
        {"job_id": "job-2", "tool": "whoami", "status": 403, "reason": "forbidden"},
    ]


def test_the_subject_pages_loader_and_what_a_view_reads_of_the_call(monkeypatch):
    monkeypatch.setenv("BAILING_SECRET", SECRET)
    monkeypatch.syspath_prepend(str(EXAMPLES / "subject"))
    import reading

    hub = HubSimulator(reading.app, SECRET)
    answer = hub.call("order_note", {"order_id": 7, "text": "call back"}, subject="t1:u1001", job_id="job-9")
    assert answer.json() == {"subject": "t1:u1001", "user": "u1001", "job_id": "job-9",
                             "scope": "order.write", "args": {"order_id": 7, "text": "call back"},
                             "same": True, "call": True}
    for unknown in ("t1:u9999", "no-separator", "__bailing_authz_probe__:nobody"):
        assert hub.call("order_note", {"order_id": 7, "text": "x"}, subject=unknown).status == 403, unknown
    with reading.app.test_request_context("/api/orders/7/notes"):
        from bailing_flask import NotVerifiedError, current_call, get_current_call

        assert get_current_call() is None
        with pytest.raises(NotVerifiedError):
            current_call.subject  # noqa: B018 - reading it is the test


def test_the_business_approval_pages_tool_runs_only_after_this_app_approved_it(monkeypatch):
    from types import SimpleNamespace

    from bailing_flask.hub.fake import serve

    with serve() as (fake, url):
        monkeypatch.setenv("BAILING_SECRET", SECRET)
        monkeypatch.setenv("BAILING_CLIENT_TOKEN", "docs-example-client-token-0123456789abcdef")
        monkeypatch.setenv("BAILING_HUB_URL", url)
        monkeypatch.syspath_prepend(str(EXAMPLES / "business_approval"))
        import payout

        hub = HubSimulator(payout.app, SECRET)
        hub.fake_hub = fake  # the approvals the simulator sends are opened there too
        refused = hub.call("refund_execute", {"request_id": 7}, subject="t1:alice", job_id="job-1")
        assert (refused.status, refused.json()["approval"]) == (403, "missing")
        sent = hub.send_approval_request("refund_execute", {"request_id": 7}, subject="t1:alice",
                                         job_id="job-1", approval_id=501)
        assert sent.status == 200 and len(payout.FINANCE_QUEUE) == 1
        pending = hub.call("refund_execute", {"request_id": 7}, subject="t1:alice", job_id="job-1")
        assert pending.json()["approval"] == "pending" and payout.PAID == []
        with payout.app.app_context():
            payout.finance_decides(501, "approved", SimpleNamespace(id="finance-1"))
        assert fake.decisions[0]["decision"] == "approved"
        paid = hub.call("refund_execute", {"request_id": 7}, subject="t1:alice", job_id="job-1")
        assert paid.status == 201 and payout.PAID == [7]


@pytest.fixture
def plain_wsgi(monkeypatch):
    monkeypatch.setenv("BAILING_SECRET", SECRET)
    monkeypatch.syspath_prepend(str(EXAMPLES / "verification"))
    import plain_wsgi as module

    return module


def test_the_verification_pages_refusal_is_what_a_malformed_timestamp_gets(plain_wsgi):
    from flask import Flask

    from bailing_flask import Bailing
    from bailing_flask.testing import signed_headers

    text = (ROOT / "docs" / "concepts" / "verification.rst").read_text(encoding="utf-8")
    block = text.split(".. code-block:: json\n   :class: unchecked\n\n", 1)[1].split("\n\n", 1)[0]
    app = Flask("stale")
    app.config["BAILING_SECRETS"] = [SECRET]
    Bailing(app)
    malformed = signed_headers(SECRET, "GET", "/api/ping", ts="1.5e9")
    answer = app.test_client().get("/api/ping", headers=malformed)
    assert answer.status_code == 401 and answer.json == json.loads(block)


def test_the_verification_pages_error_handler_restyles_every_refusal(plain_wsgi):
    from bailing_flask.testing import signed_headers

    hub = HubSimulator(plain_wsgi.app, SECRET)
    denied = hub.call("ping")  # anonymous: the authorizer says no
    assert (denied.status, denied.json()) == (403, {"code": 0, "msg": "forbidden"})
    forged_headers = signed_headers("another-secret" * 3, "GET", "/api/ping")
    forged = plain_wsgi.app.test_client().get("/api/ping", headers=forged_headers)
    assert (forged.status_code, forged.json) == (401, {"code": 0, "msg": "bad_signature"})


def test_the_verification_pages_plain_wsgi_app_reads_the_verified_call(plain_wsgi):
    from werkzeug.test import Client

    from bailing_flask.testing import signed_headers

    client = Client(plain_wsgi.application)
    headers = signed_headers(SECRET, "GET", "/agent-api/orders", subject="t1:alice", job_id="job-3",
                             tool_scope="order.read")
    answer = client.get("/agent-api/orders", headers=headers)
    assert json.loads(answer.get_data()) == {"subject": "t1:alice", "job_id": "job-3",
                                             "scope_header": "order.read"}
    assert client.get("/agent-api/orders").status_code == 401
    assert json.loads(client.get("/other").get_data())["subject"] is None


def test_the_callbacks_pages_help_desk_hears_the_hub_and_talks_back(monkeypatch):
    import re
    from types import SimpleNamespace

    from bailing_flask.hub.fake import serve

    token = "docs-example-client-token-0123456789abcdef"
    with serve() as (fake, url):
        fake.add_client("shop", token)
        fake.routes.add("after-sales")
        monkeypatch.setenv("BAILING_SECRET", SECRET)
        monkeypatch.setenv("BAILING_CLIENT_TOKEN", token)
        monkeypatch.setenv("BAILING_HUB_URL", url)
        monkeypatch.syspath_prepend(str(EXAMPLES / "callbacks"))
        import helpdesk

        hub = HubSimulator(helpdesk.app, SECRET)
        hub.fake_hub = fake
        with helpdesk.app.app_context():
            ticket = helpdesk.Ticket(status="open")
            helpdesk.db.session.add(ticket)
            helpdesk.db.session.commit()
            job = helpdesk.start_job(ticket)
            assert job.job_id == ticket.hub_job_id
            job_id = ticket.hub_job_id
        assert hub.send_job_finished(job_id=job_id, status="done", text="Refund approved.").status == 200
        assert hub.send_delivery(job_id=job_id, status="done", text="Refund approved.").status == 200
        assert len(helpdesk.NOTIFIED) == 1
        sent = hub.send_approval_request("refund_execute", {"request_id": 7}, subject="t1:u1",
                                         job_id=job_id, approval_id=77)
        assert sent.status == 200
        with helpdesk.app.app_context():
            assert (helpdesk.Ticket.query.one().status, helpdesk.Ticket.query.one().answer) == (
                "done", "Refund approved.")
            assert helpdesk.decide(77, True, SimpleNamespace(user_id="sup-1")) == ("approved", False)
            assert helpdesk.decide(77, True, SimpleNamespace(user_id="sup-1")) == ("approved", True)
        page = helpdesk.app.test_client().get("/help").get_data(as_text=True)
        assert re.fullmatch(rf'<script src="{url}/widget.js" data-entry="shop_help"\s+'
                            r'data-ticket="v1\.[\w-]+\.[0-9a-f]+" async></script>', page.strip()), page


def _page_json(page: str, first: str) -> Any:
    text = (ROOT / "docs" / "concepts" / page).read_text(encoding="utf-8")
    start = text.index("\n   " + first)
    block = text[start:].split("\n\n", 1)[0]
    return json.loads(block if block.lstrip().startswith("{\"error\"") else f"[{block}]")


def test_the_catalog_pages_declarations_become_the_catalog_and_the_refusal_it_shows(monkeypatch):
    monkeypatch.setenv("BAILING_SECRET", SECRET)
    monkeypatch.syspath_prepend(str(EXAMPLES / "catalog"))
    import declarations

    hub = HubSimulator(declarations.app, SECRET)
    operations = {op["operationId"]: op for methods in hub.document()["paths"].values()
                  for op in methods.values() if isinstance(op, dict) and "operationId" in op}
    assert sorted(operations) == ["order_get", "order_search", "refund_request_create", "staff_get",
                                  "staff_state_change"]
    search = operations["order_search"]
    assert search["x-agent-capability"]["scope"] == "shop.order.read"  # the blueprint's defaults
    assert search["x-agent-capability"]["subject"] == {"required": True}
    assert search["parameters"] == _page_json("catalog.rst", '{"name": "keyword"')
    assert [operations[name]["x-agent-capability"]["risk"]["level"]
            for name in ("staff_get", "staff_state_change")] == ["medium", "high"]
    refused = hub.call("order_search", {"status": "bogus"}, subject="t1:alice")
    assert (refused.status, refused.json()) == (422, _page_json("catalog.rst", '{"error": "invalid_arguments"'))
    assert hub.call("order_search", {"keyword": "earbuds"}, subject="t1:alice").json() == {
        "keyword": "earbuds", "page": 1}
