"""Authorization is mandatory and fail-closed; the subject is the signed one."""

from __future__ import annotations

import logging

import pytest
from flask import Flask, Response

from bailing_flask import Bailing, ErrorInfo, NotVerifiedError, current_call, current_subject, tool
from bailing_flask.signals import tool_called, tool_denied
from bailing_flask.testing import HubSimulator

from .helpers import STRONG_SECRET
from bailing_flask._state import state_of
from bailing_flask._pipeline.catalog import catalog_of


def test_allowed_subject_reads_its_own_tenant(hub):
    response = hub.call("order_get", {"order_id": 101}, subject="t1:u1")
    assert response.status == 200, response.text
    assert response.json() == {"order_id": 101, "tenant": "t1", "subject": "t1:u1"}


def test_cross_tenant_subject_is_forbidden(hub):
    response = hub.call("order_get", {"order_id": 101}, subject="t2:u9")
    assert response.status == 403
    assert response.json()["reason"] == "forbidden"
    assert response.json()["error"] == "forbidden"
    assert "t1" not in response.text  # no data in the refusal


def test_missing_subject_on_subject_required_tool(hub):
    response = hub.call("order_get", {"order_id": 101})
    assert response.status == 403
    assert response.json()["reason"] == "subject_required"


def test_unknown_subject_is_forbidden(hub):
    assert hub.call("order_get", {"order_id": 101}, subject="t1:nobody").status == 403


def test_read_only_user_cannot_write(hub):
    args = {"order_id": 101, "amount": 5, "reason": "broken"}
    assert hub.call("refund_create", args, subject="t1:u2").status == 403
    allowed = hub.call("refund_create", args, subject="t1:u1")
    assert allowed.status == 200, allowed.text
    assert allowed.json() == {"ok": True, "status": "pending_approval",
                              "message": "Refund request created.", "business_id": "r-101"}


def test_subject_loader_raising_denies(hub):
    assert hub.call("order_get", {"order_id": 101}, subject="boom:u1").status == 403


def test_authorizer_raising_denies_and_logs(hub, caplog):
    with caplog.at_level(logging.ERROR, logger="bailing_flask"):
        response = hub.call("raises", subject="t1:u1")
    assert response.status == 403
    assert response.json()["reason"] == "forbidden"
    assert "ZeroDivisionError" in caplog.text


def test_authorizer_returning_truthy_non_bool_denies(hub, caplog):
    with caplog.at_level(logging.WARNING, logger="bailing_flask"):
        response = hub.call("truthy", subject="t1:u1")
    assert response.status == 403
    assert "returned str, not True" in caplog.text


def test_per_tool_authorizer_overrides_the_app_one(hub):
    # t1:u3 has no permission at all: the app-wide authorizer refuses ...
    assert hub.call("order_search", subject="t1:u3").status == 403
    # ... while whoami's own authorizer only wants a known user
    assert hub.call("whoami", subject="t1:u3").status == 200
    assert hub.call("whoami", subject="t3:stranger").status == 403
    assert hub.call("whoami").status == 403


def test_unsigned_request_to_a_tool_is_401(authz_app):
    response = authz_app.test_client().get("/api/orders/101")
    assert response.status_code == 401
    assert response.json["reason"] == "missing_signature"


def test_tool_that_also_serves_humans_lets_unsigned_requests_through(authz_app, hub):
    assert authz_app.test_client().get("/api/both").json == {"signed": False}
    assert hub.call("both", subject="t1:u1").json() == {"signed": True}


def test_tool_without_any_authorizer_answers_403_and_is_logged():
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=STRONG_SECRET, BAILING_PUBLIC_CATALOG=True)
    Bailing(app)

    @app.get("/open")
    @tool(scope="x.read")
    def open_door():
        return "should never run"

    from bailing_flask.testing import signed_headers

    response = app.test_client().get("/open", headers=signed_headers(STRONG_SECRET, "GET", "/open"))
    assert response.status_code == 403
    assert response.json["reason"] == "no_authorizer"
    assert [f.code for f in catalog_of(state_of(app)).errors] == ["no_authorizer"]


@pytest.mark.parametrize("served_first", [False, True])
def test_an_authorizer_registered_after_the_tools_compiled_puts_them_in_the_catalog(served_first):
    """The catalog and the calls agree on whether an authorizer exists, whenever it was registered:
    a factory that compiles early (a check, a first request) and registers it afterwards."""
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=STRONG_SECRET)
    bailing = Bailing(app)

    @app.get("/open")
    @tool(scope="x.read")
    def open_door():
        return "ran"

    hub = HubSimulator(app, STRONG_SECRET)
    assert hub.fetch_catalog().json()["paths"] == {}
    if served_first:
        app.test_client().get("/nowhere")
    bailing.authorizer(lambda call: True)
    assert list(hub.fetch_catalog().json()["paths"]) == ["/open"]
    assert catalog_of(state_of(app)).errors == []
    assert hub.call("open_door", {}).body == b"ran"


def test_scope_comes_from_our_declaration_not_the_unsigned_header(authz_app):
    seen = []
    bailing = state_of(authz_app).callbacks
    original = bailing.authorizer_func

    def spy(call):
        seen.append((call.tool.name, call.tool.scope, call.unsigned.tool_scope))
        return original(call)

    bailing.authorizer_func = spy
    hub = HubSimulator(authz_app, STRONG_SECRET)
    request = hub.build_call("order_get", {"order_id": 101}, subject="t1:u1")
    hub.replay(request, tool_scope="admin.everything")
    assert seen == [("order_get", "order.read", "admin.everything")]


def test_error_handler_restyles_every_refusal(authz_app, hub):
    bailing = state_of(authz_app).callbacks
    seen = []

    @bailing.error_handler
    def restyle(error: ErrorInfo):
        seen.append((error.status, error.reason))
        return {"code": 0, "msg": error.reason}, error.status

    assert hub.call("order_get", {"order_id": 101}, subject="t2:u9").json() == {
        "code": 0, "msg": "forbidden"}
    bad = hub.build_call("order_get", {"order_id": 101}, subject="t1:u1")
    response = hub.replay(bad, signature="sha256=" + "1" * 64)
    assert response.status == 401
    assert response.json() == {"code": 0, "msg": "bad_signature"}
    assert seen == [(403, "forbidden"), (401, "bad_signature")]


def test_accessors_raise_outside_verified_requests(authz_app):
    with authz_app.test_request_context("/api/orders/101"):
        from bailing_flask import get_current_call

        assert get_current_call() is None
        with pytest.raises(NotVerifiedError):
            current_call.subject  # noqa: B018
        with pytest.raises(NotVerifiedError):
            bool(current_subject)


def test_signals_report_calls_and_denials(authz_app, hub):
    called, denied = [], []

    def on_called(sender, call, response, duration_ms):
        called.append((call.tool.name, call.subject, response.status_code))

    def on_denied(sender, tool, call, reason, status):
        denied.append((tool.name, reason, status))

    tool_called.connect(on_called, authz_app)
    tool_denied.connect(on_denied, authz_app)
    try:
        hub.call("order_get", {"order_id": 101}, subject="t1:u1")
        hub.call("order_get", {"order_id": 201}, subject="t1:u1")
    finally:
        tool_called.disconnect(on_called, authz_app)
        tool_denied.disconnect(on_denied, authz_app)
    assert called == [("order_get", "t1:u1", 200)]
    assert denied == [("order_get", "forbidden", 403)]


def test_one_audit_record_per_call_without_sensitive_values(hub, caplog):
    with caplog.at_level(logging.INFO, logger="bailing_flask.audit"):
        hub.call("phone", {"order_id": 101, "amount": 5, "reason": "secret-note"}, subject="t1:u1")
        hub.call("order_search", {"keyword": "lamp"}, subject="t1:u1")
    records = [r.bailing for r in caplog.records if hasattr(r, "bailing")]
    assert [r["tool"] for r in records] == ["phone", "order_search"]
    assert records[0]["arguments"] == ["amount", "order_id", "reason"]
    assert records[0]["status"] == 200 and records[0]["subject"] == "t1:u1"
    assert records[0]["client"] == "crm" and records[0]["duration_ms"] is not None
    assert "secret-note" not in caplog.text
    assert "lamp" not in caplog.text


def hub_of_a_tool_answering(answer) -> HubSimulator:
    """A hub for an app whose one read tool, ``big``, answers ``answer()``."""
    app = Flask(__name__)
    app.config["BAILING_SECRETS"] = STRONG_SECRET
    bailing = Bailing(app)
    bailing.authorizer(lambda call: True)

    @app.get("/big")
    @tool(scope="x.read")
    def big():
        return answer()

    return HubSimulator(app, STRONG_SECRET)


def test_oversized_success_body_is_warned_about_once(caplog):
    hub = hub_of_a_tool_answering(lambda: "é" * 9000)
    with caplog.at_level(logging.WARNING, logger="bailing_flask"):
        hub.call("big")
        hub.call("big")
    assert caplog.text.count("answered 9000 UTF-16 units") == 1


@pytest.mark.parametrize("answer, warned", [
    (lambda: Response([b"a" * 5000, b"b" * 5000]), "answered 10000 UTF-16 units"),  # no length
    (lambda: "\u00e9" * 5000, None),  # 10000 bytes, 5000 units: within what the model reads
    (lambda: "a" * 8192, None),
    (lambda: Response(iter([b"a" * 9000]), mimetype="text/plain"), None),  # streamed: not read
], ids=["chunks", "multibyte-within", "at-the-limit", "streamed"])
def test_a_success_body_is_measured_in_utf16_units_whatever_its_form(caplog, answer, warned):
    hub = hub_of_a_tool_answering(answer)
    with caplog.at_level(logging.WARNING, logger="bailing_flask"):
        assert hub.call("big").status == 200
    if warned is None:
        assert "UTF-16 units" not in caplog.text
    else:
        assert caplog.text.count(warned) == 1


def test_tool_result_takes_any_extra_fields_through_data():
    from bailing_flask import tool_result

    app = Flask(__name__)
    with app.app_context():
        response = tool_result("rejected", "Not refundable.", data={"status_detail": "x", "url": "y"},
                               reason="order_not_refundable")
    assert response.status_code == 422
    assert response.json == {"ok": False, "status": "rejected", "message": "Not refundable.",
                             "status_detail": "x", "url": "y", "reason": "order_not_refundable"}
