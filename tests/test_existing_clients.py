"""Exposing a route as a tool never cuts off the clients it already serves without saying so.

A tool route refuses unsigned requests (``401 missing_signature``) unless it
is declared ``allow_unsigned=True``: the safe default. What must not happen
is that this break goes unnoticed: ``check --exercise`` lets unsigned
requests through each such route's own stack (as if ``allow_unsigned=True``
were set, the view never runs) and names every route where the app's own
code answered them; at run time the first refused unsigned request that
carries credentials logs one warning per route; ``flask bailing tools``
shows the setting.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from typing import Any

import pytest

from bailing_flask.exercise import ExerciseReport, run_exercise
from bailing_flask.testing import HubSimulator

from .apps.clients_app import RAN, create_app
from .helpers import STRONG_SECRET


def unsigned(report: ExerciseReport, tool: str) -> Any:
    [result] = [r for r in report.results if r.check == "unsigned" and r.target.startswith(f"tool {tool} ")]
    return result


@pytest.fixture(scope="module")
def report() -> ExerciseReport:
    return run_exercise(create_app(), subject="t1:alice")


def test_a_token_guarded_route_that_now_refuses_its_bearer_clients_is_named(report):
    found = unsigned(report, "api_tickets")
    assert found.status == "warn", report.render()
    assert "the app's own clients are cut off" in found.summary
    # the app's own answer, from Flask-HTTPAuth's login_required, and the package's answer now
    assert "HTTP 401 '{\"error\":\"unauthorized\"}'" in found.summary
    assert "flask_httpauth" in found.summary and "now bailing_flask answers them 401 missing_signature" in found.summary
    assert found.fix is not None and "allow_unsigned=True" in found.fix and "allow_unsigned=False" in found.fix


def test_a_before_request_guard_in_front_of_the_route_is_named(report):
    found = unsigned(report, "legacy_orders")
    assert found.status == "warn"
    assert "before_request function tests.apps.clients_app.create_app.<locals>.require_session" in found.summary
    assert "a client whose credentials pass the before_request function now gets 401 missing_signature" \
        in found.summary


def test_a_route_no_check_of_the_app_guards_is_named_too(report):
    found = unsigned(report, "api_fresh")
    assert found.status == "warn"
    assert "reach the declared view" in found.summary


def test_a_route_that_chose_either_way_passes(report):
    assert unsigned(report, "api_articles").status == "pass"  # allow_unsigned=True
    chose_hub = unsigned(report, "api_summary")  # allow_unsigned=False
    assert chose_hub.status == "pass" and "as declared" in chose_hub.summary


def test_the_unsigned_requests_never_run_a_view():
    RAN.clear()
    report = run_exercise(create_app())  # without --subject no view runs: the unsigned requests run none
    assert [r for r in report.results if r.check == "unsigned" and r.status == "warn"]
    assert RAN == [] and "views: none (no view was run)" in report.render()


def test_probe_only_sends_no_unsigned_request():
    report = run_exercise(create_app(), probe_only=True)
    assert [r for r in report.results if r.check == "unsigned"] == []


def test_the_cli_warns_and_keeps_the_exit_status_of_warnings():
    result = create_app().test_cli_runner().invoke(
        args=["bailing", "check", "--exercise", "--subject", "t1:alice"])
    assert result.exit_code == 0, result.output
    assert "WARN  unsigned tool api_tickets (GET /api/v1/tickets): the app's own clients are cut off" \
        in result.output
    assert "fix: if the route's existing clients must keep working, declare it @tool(..., allow_unsigned=True)" \
        in result.output
    # the plan says the unsigned requests run the decorators
    assert ("unsigned requests (two each, the decorators above run, never the view): api_fresh, "
            "api_tickets, legacy_orders") in result.output


def test_check_alone_names_the_tool_routes_that_refuse_unsigned_requests():
    result = create_app().test_cli_runner().invoke(args=["bailing", "check"])
    assert result.exit_code == 0, result.output
    assert ("unsigned requests: refused (401 missing_signature) by 3 tool route(s) that do not set "
            "allow_unsigned: api_fresh, api_tickets, legacy_orders; any client of the app's own that calls "
            "them is refused (check --exercise names the routes the app's own code serves)") in result.output


def test_tools_shows_whether_each_tool_takes_unsigned_requests():
    app = create_app()
    listing = app.test_cli_runner().invoke(args=["bailing", "tools"])
    header, *lines = listing.output.splitlines()
    assert header.split()[6] == "UNSIGNED"
    column = {line.split()[0]: line.split()[6] for line in lines if line.strip()}
    assert column == {"api_tickets": "refused", "api_articles": "allowed", "api_summary": "refused",
                      "api_fresh": "refused", "legacy_orders": "refused"}
    as_json = json.loads(app.test_cli_runner().invoke(args=["bailing", "tools", "--json"]).output)
    assert {t["name"]: t["allow_unsigned"] for t in as_json["tools"]}["api_articles"] is True


def _get(base: str, path: str, headers: dict[str, str]) -> tuple[int, dict[str, Any], str]:
    request = urllib.request.Request(base + path, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


def _cut_off(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "refused an unsigned request with" in r.getMessage()]


def test_a_bearer_client_refused_by_a_tool_route_is_logged_once_per_route_without_its_token(
        live_server, caplog):
    base = live_server(create_app())
    caplog.set_level(logging.WARNING, logger="bailing_flask")
    for _ in range(3):
        status, headers, _ = _get(base, "/api/v1/tickets", {"Authorization": "Bearer tok-alice"})
        assert status == 401 and headers["X-Bailing-Reason"] == "missing_signature"
    [message] = _cut_off(caplog)
    assert "an Authorization: Bearer header" in message and "GET /api/v1/tickets" in message
    assert "allow_unsigned=True" in message
    assert "tok-alice" not in caplog.text


def test_a_session_cookie_refused_by_a_tool_route_is_logged(live_server, caplog):
    base = live_server(create_app())
    caplog.set_level(logging.WARNING, logger="bailing_flask")
    login = urllib.request.Request(base + "/login", data=b"", method="POST")
    with urllib.request.urlopen(login, timeout=60) as response:
        cookie = response.headers["Set-Cookie"].split(";", 1)[0]
    assert cookie.startswith("session=")
    status, headers, _ = _get(base, "/legacy/orders", {"Cookie": cookie})
    assert status == 401 and headers["X-Bailing-Reason"] == "missing_signature"
    [message] = _cut_off(caplog)
    assert "the 'session' cookie" in message and "GET /legacy/orders" in message
    assert cookie.split("=", 1)[1] not in caplog.text


def test_requests_without_credentials_and_routes_that_chose_are_not_logged(live_server, caplog):
    base = live_server(create_app())
    caplog.set_level(logging.WARNING, logger="bailing_flask")
    assert _get(base, "/api/v1/tickets", {})[0] == 401
    assert _get(base, "/legacy/orders", {"Cookie": "theme=dark"})[0] == 401
    assert _get(base, "/api/v1/hub/summary", {"Authorization": "Bearer tok-alice"})[0] == 401
    assert _cut_off(caplog) == []


def test_allow_unsigned_keeps_the_existing_clients_working_and_the_hub_still_signed(live_server):
    app = create_app()
    base = live_server(app)
    status, _, body = _get(base, "/api/v1/articles", {"Authorization": "Bearer tok-alice"})
    assert status == 200 and json.loads(body)["reader"] == "alice"
    assert _get(base, "/api/v1/articles", {"Authorization": "Bearer wrong"})[0] == 401  # the app's own check
    hub = HubSimulator(app, STRONG_SECRET)
    assert hub.call("api_articles", {}, subject="t2:bob").json()["reader"] == "bob"
