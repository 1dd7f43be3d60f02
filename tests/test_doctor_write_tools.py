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
