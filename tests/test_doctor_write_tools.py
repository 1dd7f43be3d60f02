"""``flask bailing doctor`` checks every write tool against a live deployment.

What stands in front of a write tool (CSRF, a session guard, a redirect)
only shows with a write request. The doctor sends each POST/PUT/PATCH/DELETE
tool the hub's request as the probe subject, with an undeclared argument the
gate refuses before authorization, so nothing runs.
"""

from __future__ import annotations


import pytest

from bailing_flask.doctor import run_doctor

from .apps import exercise_apps
from .helpers import STRONG_SECRET
from .apps.legacy_app import create_app, notes


def test_an_integrated_legacy_app_passes_and_nothing_ran(live_server):
    app = create_app()
    report = run_doctor(live_server(app), STRONG_SECRET, subject="t1:alice")
    check = report.check("write_tools")
    assert check.status == "pass", report.render(verbose=True)
    assert check.summary == "3 write tool(s): the gate answered every one"
    assert "ok   POST /api/v1/notes (tool api_notes_post): the gate answered 422 unknown_parameter" in check.detail
    with app.app_context():
        assert notes() == []


def test_csrf_in_front_of_write_tools_is_caught(live_server):
    report = run_doctor(live_server(create_app(csrf_exempt=False)), STRONG_SECRET)
    check = report.check("write_tools")
    assert check.status == "fail" and not report.ok
    assert check.summary == "3 of 3 write tool(s) were answered by something other than the gate"
    assert "FAIL POST /api/v1/notes (tool api_notes_post): HTTP 400 (an HTML page): a CSRF check" in check.detail
    assert "BAILING_CSRF_EXEMPT" in check.fix


def test_a_session_guard_in_front_of_write_tools_is_caught(live_server):
    check = run_doctor(live_server(create_app(guard="naive")), STRONG_SECRET).check("write_tools")
    assert check.status == "fail"
    assert "HTTP 401 '{\"error\":\"session required\"}\\n': not the gate's refusal" in check.detail
    assert "is_hub_request()" in check.fix


def test_a_redirect_in_front_of_write_tools_is_caught(live_server):
    exercise_apps.RAN.clear()
    check = run_doctor(live_server(exercise_apps.redirecting()), STRONG_SECRET).check("write_tools")
    assert check.status == "fail"
    assert "HTTP 301 redirect to https://127.0.0.1:" in check.detail
    assert exercise_apps.RAN == []


def test_no_write_request_is_sent_when_the_probe_subject_may_be_authorized(live_server):
    exercise_apps.RAN.clear()
    report = run_doctor(live_server(exercise_apps.admits_everyone()), STRONG_SECRET)
    assert report.check("authz_probe").status == "fail"
    check = report.check("write_tools")
    assert check.status == "skip" and "no write request was sent" in check.summary
    assert "item_delete" not in exercise_apps.RAN  # (the read tool is called, as before)


def test_write_requests_can_be_turned_off(live_server):
    exercise_apps.RAN.clear()
    base = live_server(exercise_apps.clean())
    report = run_doctor(base, STRONG_SECRET, write_tools=False)
    assert report.check("write_tools").status == "skip"
    assert report.check("authz_probe").status == "pass"
    assert run_doctor(base, STRONG_SECRET).check("write_tools").status == "pass"
    assert exercise_apps.RAN == []  # neither run sent anything that ran a view


def test_the_write_probes_never_send_the_tools_own_examples(live_server):
    """An example names a record the author knows exists; a probe that some layer let through to
    a view would change it. The doctor's probes use made-up values only (the exercise, in process
    and rolled back, takes the examples)."""
    from typing import Any

    from flask import Flask, request
    from pydantic import BaseModel, Field

    from bailing_flask import Bailing, Param, tool

    class Limit(BaseModel):
        credit: int = Field(ge=1, le=10_000, examples=[2500])

    app = Flask(__name__)
    app.config["BAILING_SECRETS"] = [STRONG_SECRET]
    bailing = Bailing(app)
    bailing.subject_loader(lambda subject: None)
    bailing.authorizer(lambda call: call.user is not None)
    seen: list[tuple[str, Any]] = []

    @app.before_request
    def note_writes() -> None:
        if request.method == "PUT":
            seen.append((request.path, request.get_json(silent=True)))

    @app.put("/customers/<int:customer_id>/limit")
    @tool(scope="customer.write", body=Limit,
          params=[Param("customer_id", location="path", description="The customer.")],
          examples=[{"customer_id": 101, "credit": 5000}])
    def set_limit(customer_id: int) -> Any:
        """Set a customer's credit limit."""
        return {"ok": True}

    check = run_doctor(live_server(app), STRONG_SECRET).check("write_tools")
    assert check.status == "pass", check.detail
    ((path, body),) = seen
    assert path == "/customers/0/limit" and body["credit"] == 1  # made up, not 101 or 5000 or 2500
