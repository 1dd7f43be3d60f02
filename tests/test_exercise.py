"""``flask bailing check --exercise``: every pattern that answered hub calls instead of the gate.

Each row of the issue's table, and the other answers the exercise must
recognise (a redirect, a 404/405, an HTML error page, a cached response),
is reproduced in a real app with the real extension, and must be reported
with its culprit, a fix and a failing exit status. No view with a side
effect may run.
"""

from __future__ import annotations

import functools
import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from flask import Flask, copy_current_request_context

from bailing_flask.exercise import ExerciseReport, run_exercise
from bailing_flask.testing import HubSimulator

from .apps import exercise_apps, exercise_db_app
from .apps.async_app import create_app as create_async_app
from .helpers import STRONG_SECRET, flask_command, sqlite_in_g
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
    # its tools also serve the app's own sessions: the unsigned check says so (tests/test_existing_clients.py)
    assert {r.status for r in report.results if r.check != "unsigned"} == {"pass"}
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


def test_a_hand_written_remote_address_key_is_found_by_what_the_limiter_counts():
    # `lambda: request.remote_addr` is not called get_remote_address: the exercise sends two
    # subjects' calls from one address and sees Flask-Limiter count them in one bucket
    report = run_exercise(create_app(limiter_key="lambda", fresh_tool=False))
    assert list(failures(report)) == [("limiter", "config")], report.render()
    result = one(report, "limiter", "config")
    assert result.culprit == "Flask-Limiter (key_func=tests.apps.legacy_app.create_app.<locals>.<lambda>)"
    assert "'1000 per 1 minute'" in result.summary and "'127.0.0.1'" in result.summary
    assert "bailing_flask.rate_limit_key" in result.fix
    assert exercise_apps.RAN == []


def test_a_limiter_keyed_on_the_subject_passes_the_two_users_check():
    result = one(run_exercise(create_app(fresh_tool=False)), "limiter", "config")
    assert result.status == "pass" and "a bucket each" in result.summary


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
     "set BAILING_BASE_URL to it (or pass --https)"),
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
    clean = run_exercise(app, subject="t1:alice")
    assert one(clean, "tool prices", "stack").status == "pass"
    # the exercise stopped before the view: its stop was never cached (only the view's real answer)
    assert app.test_client().get("/api/prices").json == {"fresh": True, "prices": [1, 2, 3]}
    exercise_apps.RAN.clear()
    report = run_exercise(app, subject="t1:alice")  # the cache is primed now
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
    tables = ("before_request_funcs", "after_request_funcs", "teardown_request_funcs")

    def hooks() -> dict[str, Any]:
        return {table: {key: list(funcs) for key, funcs in getattr(app, table).items()} for table in tables}

    before = hooks()
    ext = app.extensions["bailing"].callbacks
    loader, authorizer = ext.subject_loader_func, ext.authorizer_func
    unauthorized = app.login_manager.unauthorized
    run_exercise(app, subject="t1:alice")
    assert hooks() == before
    assert (ext.subject_loader_func, ext.authorizer_func) == (loader, authorizer)
    assert app.login_manager.unauthorized == unauthorized


def test_the_exercise_leaves_the_database_engines_as_they_were(db_file):
    app = exercise_db_app.create_app("sqlalchemy")
    with app.app_context():
        dialect = app.extensions["sqlalchemy"].engine.dialect
    run_exercise(app, subject="t1:alice")
    assert "do_commit" not in vars(dialect)  # commits commit again
    with app.test_request_context("/"):
        app.preprocess_request()  # the visit log of a real request
    assert exercise_db_app.rows()["visits"] == 1


# -- a cache that answers the second subject with the first one's answer -----------------------


@pytest.mark.parametrize("key, decorator", [("path", "@cache.cached"), ("memoize", "@cache.memoize")])
def test_a_cache_that_gives_the_second_subject_the_first_subjects_answer_is_named(key, decorator):
    app, _ = exercise_apps.shared_cache(key)
    report = run_exercise(app, subject=["t1:alice", "t2:bob"])
    result = one(report, "tool orders", "cache")
    assert result.status == "fail", report.render()
    assert "'t2:bob' was answered 200 without the view running" in result.summary
    assert "with the very bytes 't1:alice' got" in result.summary
    assert result.culprit.startswith(f"Flask-Caching's {decorator} on "
                                     "tests.apps.exercise_apps.shared_cache.<locals>.orders")
    assert "bailing_flask.cache_key" in result.fix
    assert exercise_apps.RAN == ["orders"]  # the view ran once, for alice; bob got her bytes
    assert not report.ok


@pytest.mark.parametrize("key", ["subject", "memoize-subject"])
def test_a_cache_keyed_with_cache_key_runs_the_view_for_each_subject(key):
    app, _ = exercise_apps.shared_cache(key)
    report = run_exercise(app, subject=["t1:alice", "t2:bob"])
    assert one(report, "tool orders", "cache").status == "pass", report.render()
    assert exercise_apps.RAN == ["orders", "orders"]
    assert report.ok, report.render()


@pytest.mark.parametrize("key, status", [("path", "warn"), ("memoize", "warn"), ("subject", "pass"),
                                         ("memoize-subject", "pass")])
def test_without_a_second_subject_the_cache_key_is_read(key, status):
    if key == "memoize-subject" and sys.version_info < (3, 11):
        pytest.skip("Python 3.10 has no code qualnames: make_name=cache_key under memoize is not recognised")
    app, _ = exercise_apps.shared_cache(key)
    for subjects in ([], ["t1:alice"]):
        result = one(run_exercise(app, subject=subjects), "tool orders", "cache")
        assert result.status == status, result
        assert result.summary.startswith("Flask-Caching's @cache.")


def test_the_cli_finds_the_shared_cache_with_two_subjects():
    result = flask_command("tests.apps.exercise_apps:shared_cache_app()", "bailing", "check", "--exercise",
                           "--subject", "t1:alice", "--subject", "t2:bob")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAIL  cache    tool orders (GET /api/orders): 't2:bob' was answered 200" in result.stdout
    assert ("culprit: Flask-Caching's @cache.cached on tests.apps.exercise_apps.shared_cache.<locals>.orders"
            in result.stdout)


# -- the app's own code, and what it writes --------------------------------------------------


@pytest.fixture
def db_file(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "app.db"
    monkeypatch.setenv("EXERCISE_DB", str(path))
    exercise_db_app.CALLS.clear()
    return path


@pytest.mark.parametrize("kind", ["sqlalchemy", "dbapi"])
def test_with_the_transaction_adapter_nothing_the_app_writes_during_the_exercise_stays(db_file, kind):
    app = exercise_db_app.create_app(kind)
    before = exercise_db_app.rows()
    first = run_exercise(app, subject="t1:alice")
    report = run_exercise(app, subject="t1:alice")
    # the visit log, the provisioned probe user and the charged credits all ran ...
    assert {"log_visit", "load_or_create_user", "charge_credit"} <= set(exercise_db_app.CALLS)
    # ... and none of their rows is left
    assert exercise_db_app.rows() == before == {"visits": 0, "users": 1, "charges": 0}
    assert f"sqlite:///{db_file}" in "\n".join(report.plan)
    # the transaction mode's tool runs on the exercise's uncommitted connection like the others
    assert one(report, "tool add_credit", "stack").status == "pass", report.render()
    if kind == "dbapi":  # the package's own table is the one thing kept, and the report says so
        made = "bailing_flask created its table bailing_idempotency where it was missing"
        assert any(made in line for line in first.ran), first.ran
        assert not any(made in line for line in report.ran)  # once: the second run found it
    assert any("every write was rolled back" in line for line in report.ran), report.ran


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Python 3.10 has no code qualnames: a decorator "
                    "made by functools.wraps is named by its code's name only")
def test_before_it_runs_the_exercise_says_which_app_code_runs_and_on_which_database(db_file):
    app = exercise_db_app.create_app("sqlalchemy")
    seen: list[tuple[str, list[str]]] = []
    run_exercise(app, subject="t1:alice", on_plan=lambda plan: seen.append((plan, list(exercise_db_app.CALLS))))
    [(plan, calls_then)] = seen
    assert calls_then == []  # said before anything of the app ran
    assert "before_request (every request): tests.apps.exercise_db_app.create_app.<locals>.log_visit" in plan
    assert "subject loader: tests.apps.exercise_db_app.create_app.<locals>.load_or_create_user" in plan
    assert "authorizer: tests.apps.exercise_db_app.create_app.<locals>.<lambda>" in plan
    assert ("tool report (GET /api/report): decorators "
            "tests.apps.exercise_db_app.create_app.<locals>.charge_credit; the view, as 't1:alice'") in plan
    assert "tool add_note (POST /api/notes): decorators" in plan and "never the view" in plan
    assert f"sqlite:///{db_file} (Flask-SQLAlchemy): every write is rolled back" in plan


def test_a_database_the_exercise_cannot_roll_back_is_said_before_and_after(db_file):
    app = exercise_db_app.create_app("dbapi", transaction=False)
    report = run_exercise(app, subject="t1:alice")
    plan = "\n".join(report.plan)
    assert "what this code writes stays written" in plan and "--probe-only" in plan
    assert exercise_db_app.rows()["charges"] > 0  # the decorators really ran: nothing pretends otherwise


def test_the_report_never_says_nothing_ran_when_the_apps_code_ran(db_file):
    report = run_exercise(exercise_db_app.create_app("sqlalchemy"), subject="t1:alice")
    text = report.render()
    assert "nothing was run" not in text and "the view was not run)" not in text
    ran = "\n".join(report.ran)
    assert "tests.apps.exercise_db_app.create_app.<locals>.log_visit" in ran
    assert "subject loader: " in ran and "subject loader: 0 call(s)" not in ran
    assert "view stacks (the decorators in front of the view) of: add_credit, add_note, report" in ran
    assert "views: report as 't1:alice'" in ran


def test_a_subject_loader_that_returns_a_user_for_the_probe_subject_is_an_error(db_file):
    report = run_exercise(exercise_db_app.create_app("sqlalchemy"))
    result = one(report, "subject_loader", "loader")
    assert result.status == "fail" and not report.ok
    assert "returned a value of type str for the probe subject '__bailing_authz_probe__:nobody'" in result.summary
    assert "marks this provider suspect" in result.summary
    assert result.culprit == "subject loader tests.apps.exercise_db_app.create_app.<locals>.load_or_create_user"
    assert exercise_db_app.rows()["users"] == 1  # and the user it made is gone again


def test_probe_only_runs_no_decorator_and_no_view(db_file):
    app = exercise_db_app.create_app("dbapi", transaction=False)  # nothing is rolled back here
    report = run_exercise(app, subject="t1:alice", probe_only=True)
    assert {r.check for r in report.results} <= {"fetch", "probe", "loader", "config"}
    assert "charge_credit" not in exercise_db_app.CALLS
    assert exercise_db_app.rows()["charges"] == 0
    assert "nothing of the view's stack (probe requests only)" in "\n".join(report.plan)


def test_the_cli_prints_the_plan_first_and_leaves_the_database_as_it_was(tmp_path):
    env = {"EXERCISE_DB": str(tmp_path / "cli.db")}
    args = ("bailing", "check", "--exercise", "--subject", "t1:alice")
    for _ in range(2):
        result = flask_command("tests.apps.exercise_db_app:create_app()", *args, env=env)
        out = result.stdout
        assert result.returncode == 1, out + result.stderr  # the provisioning loader
        assert out.index("the exercise runs this app's own code") < out.index("PASS  fetch    catalog")
        assert "FAIL  loader   subject_loader" in out
        assert "every write was rolled back" in out
    assert exercise_db_app.rows(env["EXERCISE_DB"]) == {"visits": 0, "users": 1, "charges": 0}
    probe_only = flask_command("tests.apps.exercise_db_app:create_app('dbapi', False)", *args,
                               "--probe-only", "--json", env=env)
    document = json.loads(probe_only.stdout)
    assert "the exercise runs this app's own code" in probe_only.stderr  # the plan, before the JSON
    assert {r["check"] for r in document["exercise"]["results"]} <= {"fetch", "probe", "loader", "config"}
    assert exercise_db_app.rows(env["EXERCISE_DB"])["charges"] == 0


# -- an after_request function that rewrites the gate's refusals ------------------------------


def test_an_after_request_function_that_turns_refusals_into_successes_is_named():
    report = run_exercise(exercise_apps.rewrites_refusals())
    result = one(report, "tool item_delete", "probe")
    assert result.status == "fail"
    assert "the gate refused with 403 forbidden (the view did not run)" in result.summary
    assert "HTTP 200" in result.summary and "the hub and the audit disagree" not in result.summary
    assert "the two disagree" in result.summary
    assert result.culprit == ("after_request function "
                              "tests.apps.exercise_apps.rewrites_refusals.<locals>.always_ok rewrote it")
    assert exercise_apps.RAN == []


def test_the_cli_names_the_after_request_function():
    result = flask_command("tests.apps.exercise_apps:rewrites_refusals()", "bailing", "check", "--exercise")
    assert result.returncode == 1
    assert ("culprit: after_request function tests.apps.exercise_apps.rewrites_refusals.<locals>.always_ok "
            "rewrote it") in result.stdout


def in_a_thread(view: Any) -> Any:
    """An app's decorator that runs the view in a thread it hands the request to, and waits."""
    @functools.wraps(view)
    def decorated(*args: Any, **kwargs: Any) -> Any:
        got: list[tuple[bool, Any]] = []

        def run() -> None:
            try:
                got.append((True, view(*args, **kwargs)))
            except BaseException as exc:  # the exercise stops a write tool's call before its view
                got.append((False, exc))

        thread = threading.Thread(target=copy_current_request_context(run))
        thread.start()
        thread.join(60)
        ok, value = got[0]
        if not ok:
            raise value
        return value

    return decorated


def test_what_a_thread_the_view_hands_its_request_to_commits_is_rolled_back_too(db_file):
    app = exercise_db_app.create_app("sqlalchemy", hold=in_a_thread)
    before = exercise_db_app.rows()
    report = run_exercise(app, subject="t1:alice")
    assert "charge_credit" in exercise_db_app.CALLS  # the decorator charged, in its thread ...
    assert exercise_db_app.rows() == before  # ... and none of its charges stays
    assert any("every write was rolled back" in line for line in report.ran), report.ran


def test_sample_arguments_the_gate_refuses_are_named_and_no_subject_is_asked_for():
    from pydantic import BaseModel, Field

    from bailing_flask import Bailing, tool

    class Phone(BaseModel):
        phone: str = Field(pattern=r"^\+?[0-9]{5,19}$", description="The new number.")

    app = Flask(__name__)
    app.config["BAILING_SECRETS"] = [STRONG_SECRET]
    bailing = Bailing(app)
    bailing.subject_loader(lambda subject: subject)
    bailing.authorizer(lambda call: call.user == "t1:alice")

    @app.put("/phone")
    @tool(scope="phone.write", body=Phone, subject_required=True)
    def phone_put() -> Any:
        """Change the phone number."""
        return {"ok": True}

    result = one(run_exercise(app, subject="t1:alice"), "tool phone_put", "stack")
    assert result.status == "warn"
    assert "(422 invalid_parameter: phone)" in result.summary, result.summary
    assert "--subject does not change them" in result.fix


def test_the_exercise_calls_a_tool_with_its_own_first_example():
    """An id that exists, a value that meets a pattern: the author's example, not a made-up 1."""
    from pydantic import BaseModel, Field

    from bailing_flask import Bailing, Param, current_call, tool

    class Phone(BaseModel):
        phone: str = Field(pattern=r"^\+?[0-9]{5,19}$", description="The new number.")

    app = Flask(__name__)
    app.config["BAILING_SECRETS"] = [STRONG_SECRET]
    bailing = Bailing(app)
    bailing.subject_loader(lambda subject: subject)
    owned = {("t1:alice", 1001)}
    bailing.authorizer(lambda call: (call.user, call.args.get("order_id")) in owned)
    seen: list[Any] = []

    @app.put("/orders/<int:order_id>/phone")
    @tool(scope="phone.write", body=Phone, subject_required=True,
          examples=[{"order_id": 1001, "phone": "+8613800001001"}])
    def phone_put(order_id: int) -> Any:
        """Change the phone number of an order's customer."""
        return {"ok": True}

    @app.get("/orders/<int:order_id>")
    @tool(scope="order.read", readonly=True, subject_required=True,
          params=[Param("order_id", location="path", description="The order's id.")],
          examples=[{"order_id": 1001}])
    def order_get(order_id: int) -> Any:
        """Read one order."""
        seen.append((order_id, current_call.subject))
        return {"order_id": order_id}

    report = run_exercise(app, subject="t1:alice")
    assert one(report, "tool phone_put", "stack").status == "pass"
    assert one(report, "tool order_get", "subject").status == "pass"
    assert (1001, "t1:alice") in seen  # the view ran, as the subject, on the example's order


def test_the_exercise_takes_a_field_example_where_the_tool_gives_none():
    from pydantic import BaseModel, Field

    from bailing_flask import Bailing, tool

    class Phone(BaseModel):
        phone: str = Field(pattern=r"^\+?[0-9]{5,19}$", examples=["+493012345678"])

    app = Flask(__name__)
    app.config["BAILING_SECRETS"] = [STRONG_SECRET]
    bailing = Bailing(app)
    bailing.subject_loader(lambda subject: subject)
    bailing.authorizer(lambda call: call.user == "t1:alice" and call.body.phone == "+493012345678")

    @app.put("/phone")
    @tool(scope="phone.write", body=Phone, subject_required=True)
    def phone_put() -> Any:
        """Change the phone number."""
        return {"ok": True}

    assert one(run_exercise(app, subject="t1:alice"), "tool phone_put", "stack").status == "pass"


@pytest.mark.parametrize("mode", ["store", "transaction"])
def test_a_business_approval_tools_decorators_are_exercised_with_the_exercises_own_approval(
        tmp_path, mode):
    """Such a tool is admitted only with this business's approval of the exact call: the exercise
    approves its own request in its throwaway store, so the decorators in front of the view run;
    no approval reaches the app's store, and the transaction mode's spent-approval row is rolled
    back with everything else."""
    import sqlite3

    from bailing_flask import Bailing, Param, tool
    from bailing_flask._pipeline.idempotency import idempotency_of
    from bailing_flask._state import state_of
    from bailing_flask.transactional import DBAPITransaction

    database = tmp_path / "app.sqlite3"
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://",
                      BAILING_HUB_URL="http://127.0.0.1:9", BAILING_CLIENT_TOKENS=["c" * 40])
    if mode == "transaction":
        app.config["BAILING_TRANSACTION"] = DBAPITransaction(sqlite_in_g(app, database))
    bailing = Bailing(app)
    bailing.subject_loader(lambda subject: subject)
    bailing.authorizer(lambda call: call.user == "t1:alice")
    bailing.approval_request(lambda request: None)  # staff decide elsewhere (never asked here)
    ran: list[str] = []

    def audited(view: Any) -> Any:
        @functools.wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            ran.append("audited")
            return view(*args, **kwargs)
        return wrapper

    @app.post("/payouts/<int:payout_id>")
    @audited
    @tool(scope="payout.execute", risk="high", business_approval=True,
          repeats="transaction" if mode == "transaction" else "replay",
          params=[Param("payout_id", location="path", description="The payout to send.")],
          examples=[{"payout_id": 7}])
    def payout(payout_id: int) -> Any:
        """Send a payout."""
        ran.append("view")
        return {"ok": True}, 201

    result = one(run_exercise(app, subject="t1:alice"), "tool payout", "stack")
    assert result.status == "pass", result.summary
    assert "with an approval the exercise gave its own request" in result.summary
    assert "audited" in ran and "view" not in ran  # the decorators ran, the view did not
    with app.app_context():
        store = idempotency_of(state_of(app)).store()
        assert store.list_approvals() == [] and store.list(state=None) == []
    if mode == "transaction":
        with sqlite3.connect(database) as conn:
            assert conn.execute("SELECT COUNT(*) FROM bailing_idempotency").fetchone() == (0,)


def test_an_example_argument_the_tool_does_not_declare_is_left_out():
    """A stale example (a field since removed) would make every request a 422: its declared
    arguments are used, the rest is not sent."""
    from pydantic import BaseModel, ConfigDict, Field

    from bailing_flask import Bailing, tool

    class Charge(BaseModel):
        model_config = ConfigDict(extra="forbid")
        amount: int = Field(ge=1, le=1000)
        kind: str = Field(json_schema_extra={"enum": ["card", "cash"]}, examples=["wire"])

    app = Flask(__name__)
    app.config["BAILING_SECRETS"] = [STRONG_SECRET]
    bailing = Bailing(app)
    bailing.subject_loader(lambda subject: subject)
    bailing.authorizer(lambda call: call.user == "t1:alice" and call.body.amount == 10)

    @app.post("/charges")
    @tool(scope="charge.write", body=Charge, subject_required=True,
          examples=[{"amount": 10, "currency": "EUR"}])
    def charge() -> Any:
        """Charge the customer."""
        return {"ok": True}

    from bailing_flask._pipeline.samples import sample_arguments
    from bailing_flask.testing import HubSimulator

    document = HubSimulator(app, STRONG_SECRET).fetch_catalog().json()
    operation = document["paths"]["/charges"]["post"]
    # no currency; kind's example is not one of its enum values
    assert sample_arguments(operation) == {"amount": 10, "kind": "card"}
    assert one(run_exercise(app, subject="t1:alice"), "tool charge", "stack").status == "pass"
