"""The "Adding to an existing app" guide's code, run: every snippet is included from these files."""

from __future__ import annotations

import http.client
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner
from flask import Flask
from flask.cli import FlaskGroup

from bailing_flask import Bailing
from bailing_flask.exercise import run_exercise
from bailing_flask.testing import HubSimulator, signed_headers

from .helpers import STRONG_SECRET

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "docs" / "examples"))

from existing_app.extensions import db, limiter  # noqa: E402
from existing_app.factory import create_app  # noqa: E402
from existing_app.models import Refund, User  # noqa: E402
from bailing_flask._state import state_of
from bailing_flask._pipeline.catalog import catalog_of


def seeded(**config: Any) -> Flask:
    # the app serves https only (Flask-Talisman): the tests' browsers come over https, as real ones do
    config.setdefault("PREFERRED_URL_SCHEME", "https")
    app = create_app(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://", **config)
    with app.app_context():
        db.create_all()
        db.session.add_all([User(tenant="t1", login="alice", can_refund=True),
                            User(tenant="t1", login="bob"), User(tenant="t1", login="root")])
        db.session.commit()
        limiter.reset()
    return app


@pytest.fixture
def app() -> Flask:
    return seeded()


@pytest.fixture
def hub(app: Flask) -> HubSimulator:
    return HubSimulator(app, STRONG_SECRET)


def test_the_factory_runs_flask_routes_without_a_secret():
    result = CliRunner().invoke(FlaskGroup(create_app=lambda: create_app(BAILING_SECRETS=None)), ["routes"])
    assert result.exit_code == 0, result.output
    assert "/api/v1/refunds" in result.output


def test_login_required_and_method_view_decorators_work_for_hub_calls(app, hub):
    assert hub.call("api_me", subject="t1:alice").json() == {"login": "alice", "tenant": "t1"}
    created = hub.call("api_refunds_post", {"order_id": 7, "amount": 19.9}, subject="t1:alice")
    assert created.status == 201 and Decimal(created.json()["amount"]) == Decimal("19.9")
    listed = hub.call("api_refunds_get", subject="t1:alice").json()["refunds"]
    assert [(r["order_id"], Decimal(r["amount"])) for r in listed] == [(7, Decimal("19.9"))]
    assert hub.call("api_refunds_post", {"order_id": 7, "amount": 5}, subject="t1:bob").status == 403
    assert hub.call("api_stats", subject="t1:alice").json() == {"refunds": 1}
    with app.app_context():
        assert db.session.scalar(db.select(Refund.job_id)) is not None


def test_the_guards_step_aside_for_hub_calls_only(app, hub):
    assert hub.call("admin_user_list", subject="t1:bob").json() == {"users": ["alice", "bob", "root"]}
    browser = app.test_client()
    assert browser.get("/api/v1/me").json == {"error": "session required"}
    assert browser.get("/api/v1/admin/users").json == {"error": "session required"}
    # a signed request to a page that is not a tool is a stranger, whatever subject it names
    page = signed_headers(STRONG_SECRET, "GET", "/api/v1/admin/users/page", subject="t1:root")
    assert browser.get("/api/v1/admin/users/page", headers=page).status_code == 401


def test_csrf_stays_on_for_browsers_and_the_shared_route_reads_one_way(app, hub):
    assert hub.call("api_feedback", {"text": "from the agent"}, subject="t1:alice").status == 201
    browser = app.test_client()
    browser.environ_base["HTTP_REFERER"] = "https://localhost/login"  # Flask-WTF checks it over https
    token = browser.get("/login").json["csrf_token"]
    browser.post("/login", data={"login": "bob", "csrf_token": token})
    assert browser.post("/api/v1/feedback", json={"text": "hi"}).status_code == 400  # no token
    ok = browser.post("/api/v1/feedback", json={"text": "hi"}, headers={"X-CSRFToken": token})
    assert ok.status_code == 201
    bad = browser.post("/api/v1/feedback", json={"text": ""}, headers={"X-CSRFToken": token})
    assert bad.status_code == 422 and bad.json["parameters"] == ["text"]


def test_per_tool_limit_for_hub_users(hub):
    assert [hub.call("api_export", subject="t1:alice").status for _ in range(11)][-2:] == [200, 429]
    assert hub.call("api_export", subject="t1:bob").status == 200


def test_the_decimal_amount_drives_approval(app):
    catalog = catalog_of(state_of(app))
    assert catalog.excluded == []
    capability = catalog.served["paths"]["/api/v1/refunds"]["post"]["x-agent-capability"]
    assert capability["approval"]["when"] == [{"param": "amount", "op": ">", "value": 500}]


def test_the_cached_summary_keeps_one_entry_per_hub_user(app, hub):
    for _ in range(2):  # the second round comes from the cache
        assert hub.call("api_summary", subject="t1:alice").json() == {"login": "alice", "total": "0"}
        assert hub.call("api_summary", subject="t1:bob").json() == {"login": "bob", "total": "0"}


def test_the_guides_two_subject_exercise_finds_no_shared_answer(app):
    report = run_exercise(app, subject=["t1:alice", "t1:bob"])
    cached = [r for r in report.results if r.target.startswith("tool api_summary") and r.check == "cache"]
    assert [r.status for r in cached] == ["pass"], report.render()
    assert report.ok, report.render()


def test_the_exercise_passes(app):
    report = run_exercise(app, subject="t1:alice")
    assert report.ok, report.render()
    with app.app_context():
        assert db.session.scalar(db.select(db.func.count(Refund.id))) == 0  # no write ran


GUIDE_OUTPUT = Path(__file__).resolve().parent.parent / "docs" / "examples" / "existing_app" / "exercise-failure.txt"


def flask_cli(app: Flask, *args: str) -> Any:
    return CliRunner().invoke(FlaskGroup(create_app=lambda: app), list(args))


def test_the_guides_exercise_command_passes(app):
    result = flask_cli(app, "bailing", "check", "--exercise", "--subject", "t1:alice")
    assert result.exit_code == 0, result.output
    assert "0 failed" in result.output


def test_the_guides_exercise_failure_is_real_output(monkeypatch):
    import bailing_flask

    # the guard before its one line: it never steps aside
    monkeypatch.setattr(bailing_flask, "is_hub_request", lambda: False)
    result = flask_cli(seeded(), "bailing", "check", "--exercise")
    assert result.exit_code == 1
    shown = GUIDE_OUTPUT.read_text().splitlines()
    assert shown and all(line in result.output.splitlines() for line in shown), result.output


GUIDE_PLAN = GUIDE_OUTPUT.with_name("exercise-plan.txt")


@pytest.mark.skipif(sys.version_info < (3, 11), reason="the page shows Python 3.11's names of the wrappers "
                    "(code qualnames); 3.10 names a wrapper by its own name (flask_limiter._limits.__inner)")
def test_the_exercise_plan_the_cli_page_shows_is_real_output():
    result = flask_cli(seeded(), "bailing", "check", "--exercise", "--subject", "t1:alice",
                       "--subject", "t1:bob")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    shown = GUIDE_PLAN.read_text().splitlines()
    assert shown and lines[lines.index(shown[0]):lines.index(shown[0]) + len(shown)] == shown, result.output
    assert lines.index(shown[0]) < lines.index("PASS  fetch    catalog: answered by bailing_flask: HTTP 200")


# -- HTTPS only: Flask-Talisman --------------------------------------------------------------

TALISMAN_OUTPUT = GUIDE_OUTPUT.with_name("exercise-talisman.txt")
INTERNAL = "http://shop-api.internal:8000"


def test_the_guides_app_redirects_plain_http_and_the_hub_calls_https(app, hub):
    browser = seeded(PREFERRED_URL_SCHEME="http").test_client()
    redirected = browser.get("/api/v1/me")
    assert redirected.status_code == 302 and redirected.location == "https://localhost/api/v1/me"
    response = hub.call("api_me", subject="t1:alice")  # BAILING_BASE_URL is https: so is the call
    assert response.status == 200 and "Strict-Transport-Security" in response.headers


def test_the_guides_talisman_failure_is_real_output():
    app = seeded(BAILING_BASE_URL=None, PREFERRED_URL_SCHEME="http")
    result = flask_cli(app, "bailing", "check", "--exercise")
    assert result.exit_code == 1
    shown = TALISMAN_OUTPUT.read_text().splitlines()
    assert shown and all(line in result.output.splitlines() for line in shown), result.output
    assert flask_cli(app, "bailing", "check", "--exercise", "--https").exit_code == 0


def test_the_guides_internal_hop_is_exempt_for_verified_hub_requests_only(live_server):
    base = live_server(seeded(BAILING_BASE_URL=INTERNAL, PREFERRED_URL_SCHEME="http"))
    hub = HubSimulator(base, STRONG_SECRET)
    assert hub.call("api_me", subject="t1:alice").json() == {"login": "alice", "tenant": "t1"}

    def status(path: str, headers: dict[str, str]) -> int:
        conn = http.client.HTTPConnection(urlsplit(base).netloc, timeout=60)
        conn.request("GET", path, headers=headers)
        answer = conn.getresponse().status
        conn.close()
        return answer

    assert status("/api/v1/me", {}) == 302  # a browser over http is still sent to https
    assert status("/.well-known/bailing/tools.json", {}) == 302
    forged = signed_headers("a-guess-" + "x" * 40, "GET", "/api/v1/me", subject="t1:alice")
    assert status("/api/v1/me", forged) == 401  # refused below Flask, before Talisman's hook
    assert run_exercise(seeded(BAILING_BASE_URL=INTERNAL, PREFERRED_URL_SCHEME="http")).ok
