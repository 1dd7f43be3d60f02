"""``flask bailing check --exercise``: every pattern that answered hub calls instead of the gate.

Each row of the issue's table, and the other answers the exercise must
recognise (a redirect, a 404/405, an HTML error page, a cached response),
is reproduced in a real app with the real extension, and must be reported
with its culprit, a fix and a failing exit status. No view with a side
effect may run.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
from flask import Flask

from bailing_flask.exercise import ExerciseReport, run_exercise
from bailing_flask.testing import HubSimulator

from .apps import exercise_apps
from .apps.async_app import create_app as create_async_app
from .helpers import STRONG_SECRET
from .apps.legacy_app import create_app, notes


def failures(report: ExerciseReport) -> dict[tuple[str, str], Any]:
    return {(r.target.split(" (")[0], r.check): r for r in report.results if r.status == "fail"}


def one(report: ExerciseReport, target: str, check: str) -> Any:
    matches = [r for r in report.results if r.target.split(" (")[0] == target and r.check == check]
    assert len(matches) == 1, report.render()
    return matches[0]


@pytest.fixture(autouse=True)
def _clear() -> None:
    exercise_apps.RAN.clear()


def test_the_integrated_legacy_app_passes_and_nothing_ran():
    app = create_app(fresh_tool=False)
    report = run_exercise(app, subject="t1:alice")
    assert report.ok, report.render()
    assert {r.status for r in report.results} == {"pass"}
    with app.app_context():
        assert notes() == []  # the write tools' views never ran
    # and the read tools did run, as the real subject
    assert one(report, "tool api_me", "subject").summary.endswith("""'{"name":"alice","tenant":"t1"}'""")


def test_row_global_before_request_guard():
    report = run_exercise(create_app(guard="naive"))
    result = one(report, "tool api_notes_post", "probe")
    assert result.status == "fail" and "HTTP 401" in result.summary
    assert result.culprit == ("before_request function "
                              "tests.apps.legacy_app.create_app.<locals>.require_session answered 401")
    assert "bailing_flask.is_hub_request()" in result.fix
    assert not report.ok


def test_row_method_view_decorators_login_required():
    report = run_exercise(create_app(bridge=False), subject="t1:alice")
    result = one(report, "tool api_notes_get", "stack")
    assert result.status == "fail"
    assert "redirect to /login" in result.summary
    assert result.culprit.startswith("Flask-Login's login_required (login_manager.unauthorized())")
    assert "bailing.bridge_flask_login(login_manager)" in result.fix
    # the probe itself was fine: the gate refused it before the decorators
    assert one(report, "tool api_notes_get", "probe").status == "pass"


def test_row_login_required_between_the_route_and_tool():
    report = run_exercise(create_app(bridge=False, login_view=False), subject="t1:alice")
    result = one(report, "tool api_me", "stack")
    assert result.status == "fail" and "HTTP 401" in result.summary and "HTML" in result.summary
    assert result.culprit.startswith("Flask-Login's login_required")
    assert one(report, "tool api_me", "subject").status == "fail"


def test_row_csrf_protect():
    report = run_exercise(create_app(csrf_exempt=False))
    result = one(report, "tool api_notes_post", "probe")
    assert result.status == "fail" and "HTTP 400" in result.summary
    assert result.culprit.startswith("Flask-WTF's CSRFProtect: before_request function flask_wtf.csrf.")
    assert result.culprit.endswith("raised CSRFError")
    assert "BAILING_CSRF_EXEMPT" in result.fix
    assert one(report, "tool api_notes_get", "probe").status == "pass"  # GET is not checked


def test_row_limiter_keyed_on_the_remote_address():
    report = run_exercise(create_app(limiter_key="remote", fresh_tool=False))
    assert list(failures(report)) == [("limiter", "config")]
    assert "bailing_flask.rate_limit_key" in one(report, "limiter", "config").fix


def test_row_limiter_that_answers_429_is_named():
    report = run_exercise(create_app(limiter_key="remote", limit="2/minute", fresh_tool=False))
    limited = [r for r in report.results if r.culprit and "Flask-Limiter: before_request" in r.culprit]
    assert limited and "HTTP 429" in limited[0].summary
    assert "rate_limit_key" in limited[0].fix


def test_row_async_views_and_authorizers_work_and_are_exercised():
    app, _, seen = create_async_app()
    report = run_exercise(app, subject="t1:alice")
    assert report.ok, report.render()
    assert one(report, "tool whoami", "subject").summary.endswith("""'{"name":"alice"}'""")
    assert seen["notes"] == []


def test_row_async_view_without_flask_async(monkeypatch):
    app, _, _ = create_async_app()
    HubSimulator(app, STRONG_SECRET).document()  # started while asgiref was there
    monkeypatch.setitem(sys.modules, "asgiref", None)
    monkeypatch.setitem(sys.modules, "asgiref.sync", None)
    report = run_exercise(app)
    result = one(report, "tool note", "stack")
    assert result.status == "fail"
    assert result.culprit.startswith("the request raised RuntimeError") and "async" in result.culprit


def test_fresh_login_required_can_never_pass():
    result = one(run_exercise(create_app(), subject="t1:alice"), "tool api_notes_purge", "stack")
    assert result.status == "fail" and "fresh_login_required" in result.summary


@pytest.mark.parametrize("factory, check, culprit, fix", [
    (exercise_apps.redirecting, "probe",
     "before_request function tests.apps.exercise_apps.redirecting.<locals>.force_https answered 301",
     "is_hub_request"),
    (exercise_apps.aborting_404, "probe",
     "before_request function tests.apps.exercise_apps.aborting_404.<locals>.retired_api_versions raised NotFound",
     "is_hub_request"),
    (exercise_apps.method_filter_405, "probe",
     "before_request function tests.apps.exercise_apps.method_filter_405.<locals>.no_deletes raised "
     "MethodNotAllowed", "is_hub_request"),
    (exercise_apps.unrouted_404, "probe", "routing answered 404 before any view", "SERVER_NAME"),
    (exercise_apps.html_error_page, "probe",
     "before_request function tests.apps.exercise_apps.html_error_page.<locals>.open_tenant_db raised RuntimeError",
     "is_hub_request"),
])
def test_other_answers_are_named(factory, check, culprit, fix):
    report = run_exercise(factory())
    target = "tool item_delete"
    result = one(report, target, check)
    assert result.status == "fail", report.render()
    assert result.culprit == culprit
    assert fix in result.fix
    assert exercise_apps.RAN == []


def test_the_redirect_target_and_html_page_are_in_the_summary():
    result = one(run_exercise(exercise_apps.redirecting()), "tool item_list", "probe")
    assert "redirect to https://localhost/api/items" in result.summary
    page = one(run_exercise(exercise_apps.html_error_page()), "tool item_list", "probe")
    assert "HTTP 500 (an HTML page" in page.summary


def test_a_cached_response_between_the_route_and_tool():
    app, _ = exercise_apps.cached()
    clean = run_exercise(app)
    assert one(clean, "tool prices", "stack").status == "pass"
    # the exercise stopped before the view: nothing of it was cached
    assert app.test_client().get("/api/prices").json == {"fresh": True, "prices": [1, 2, 3]}
    exercise_apps.RAN.clear()
    report = run_exercise(app)  # the public page primed the cache above
    result = one(report, "tool prices", "stack")
    assert result.status == "fail"
    assert "answered 200 without calling the view: a cached response (Flask-Caching" in result.culprit
    assert exercise_apps.RAN == []


def test_an_authorizer_that_admits_the_probe_subject_runs_nothing():
    report = run_exercise(exercise_apps.admits_everyone())
    result = one(report, "tool item_delete", "probe")
    assert result.status == "fail" and "ADMITTED the probe subject" in result.summary
    assert one(report, "authz_probe", "fetch").status == "fail"
    assert exercise_apps.RAN == []


def test_the_cli_exit_status_and_output():
    good = create_app(fresh_tool=False).test_cli_runner().invoke(
        args=["bailing", "check", "--exercise", "--subject", "t1:alice"])
    assert good.exit_code == 0, good.output
    assert "exercise: " in good.output and " 0 failed" in good.output
    bad = create_app(guard="naive").test_cli_runner().invoke(args=["bailing", "check", "--exercise"])
    assert bad.exit_code == 1
    assert "culprit: before_request function tests.apps.legacy_app.create_app.<locals>.require_session" in bad.output
    assert "fix: make it step aside for hub requests" in bad.output


def test_the_exercise_leaves_the_apps_hooks_as_they_were():
    app: Flask = create_app()
    before = {key: list(funcs) for key, funcs in app.before_request_funcs.items()}
    unauthorized = app.login_manager.unauthorized
    run_exercise(app)
    assert {key: list(funcs) for key, funcs in app.before_request_funcs.items()} == before
    assert app.login_manager.unauthorized == unauthorized


def test_an_app_that_serves_no_catalog_is_exercised_all_the_same():
    app, _ = exercise_apps.base(BAILING_CATALOG_PATH=None)
    exercise_apps.add_tools(app)
    report = run_exercise(app)
    assert report.ok, report.render()
    assert [r.target for r in report.results][0] == "authz_probe"
