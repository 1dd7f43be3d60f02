"""Flask-Login's ``current_user`` for admitted hub calls, and for nothing else.

The obvious bridge (a ``request_loader`` that trusts any verified
signature) made every human page reachable as any user by anyone holding
the provider secret. ``bailing.bridge_flask_login`` sets the user only when
the gate admitted a call to a declared tool, for that request only.
"""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask, after_this_request, g, request
from flask_login import current_user

from bailing_flask.signals import tool_denied
from bailing_flask.testing import HubSimulator, signed_headers

from .helpers import STRONG_SECRET, raw_request
from .apps.legacy_app import create_app


@pytest.fixture
def app() -> Flask:
    return create_app()


@pytest.fixture
def hub(app: Flask) -> HubSimulator:
    return HubSimulator(app, STRONG_SECRET)


def record_user(app: Flask) -> list[Any]:
    """What ``current_user`` was when each response left (after the view or the refusal)."""
    seen: list[Any] = []

    @app.after_request
    def remember(response: Any) -> Any:
        seen.append((request.path, current_user.name if current_user.is_authenticated else None))
        return response

    return seen


def test_login_required_between_the_route_and_tool_sees_the_subjects_user(hub):
    response = hub.call("api_me", subject="t1:alice")
    assert response.status == 200, response.text
    assert response.json() == {"name": "alice", "tenant": "t1"}


def test_method_view_decorators_login_required(app, hub):
    assert hub.call("api_notes_post", {"text": "from the agent"}, subject="t1:alice").status == 201
    listing = hub.call("api_notes_get", subject="t1:alice")
    assert listing.status == 200 and listing.json() == {"notes": ["from the agent"]}
    assert hub.call("api_notes_get", subject="t1:bob").json() == {"notes": []}


def test_an_async_view_sees_the_user_too(hub):
    assert hub.call("api_stats", subject="t1:bob").json() == {"notes": 0, "user": "bob"}


def test_a_signed_request_to_a_human_page_is_not_logged_in(app):
    seen = record_user(app)
    client = app.test_client()
    for path in ("/api/v1/profile", "/whoami", "/"):
        response = client.get(path, headers=signed_headers(STRONG_SECRET, "GET", path, subject="t1:alice"))
        assert b"alice" not in response.data, path
    profile = client.get("/api/v1/profile",
                         headers=signed_headers(STRONG_SECRET, "GET", "/api/v1/profile", subject="t1:alice"))
    assert profile.status_code == 401  # the app's own guard, as for any stranger
    assert {user for _, user in seen} == {None}


def test_a_refused_call_never_sets_current_user(app, hub):
    seen = record_user(app)
    denied: list[Any] = []

    def on_denied(sender: Any, **extra: Any) -> None:
        denied.append((extra["reason"], current_user.is_authenticated))

    tool_denied.connect(on_denied, app)
    try:
        assert hub.call("api_notes_post", {"text": "x"}, subject="t1:bob").status == 403  # not a writer
        assert hub.call("api_notes_post", {"text": ""}, subject="t1:alice").status == 422  # bad input
        assert hub.call("api_me", subject="t1:mallory").status == 403  # unknown user
    finally:
        tool_denied.disconnect(on_denied, app)
    assert denied == [("forbidden", False), ("invalid_parameter", False), ("forbidden", False)]
    assert {user for _, user in seen} == {None}


def test_the_user_never_leaks_into_the_next_request(app, hub):
    browser = app.test_client()
    with app.app_context():  # one app context (and one g) around several requests
        assert hub.call("api_me", subject="t1:alice").status == 200
        assert "_login_user" not in g  # removed when the hub's request ended
        assert browser.get("/whoami").json["user"] is None


def test_the_hub_call_writes_no_session_and_rides_no_browser_session(app, hub):
    response = hub.call("api_me", subject="t1:alice")
    assert "Set-Cookie" not in response.headers
    # a browser session (bob's, freshly logged in) pasted onto alice's signed call changes nothing
    browser = app.test_client()
    browser.post("/login", data={"name": "bob", "csrf_token": browser.get("/login").json["csrf_token"]})
    cookie = "; ".join(f"{c.key}={c.value}" for c in browser._cookies.values())
    call = hub.build_call("api_me", subject="t1:alice")
    hijacked = hub.send("GET", call.path_with_query, {**call.headers, "Cookie": cookie})
    assert hijacked.json() == {"name": "alice", "tenant": "t1"}
    purge = hub.build_call("api_notes_purge", subject="t1:alice")
    fresh = hub.send("POST", purge.path_with_query, {**purge.headers, "Cookie": cookie}, purge.body)
    assert fresh.status == 403 and fresh.json()["reason"] == "fresh_login_required"


def test_fresh_login_required_refuses_hub_calls_with_a_reason(hub):
    response = hub.call("api_notes_purge", subject="t1:alice")
    assert response.status == 403
    assert response.json()["reason"] == "fresh_login_required"


def test_login_required_on_an_anonymous_admitted_call_is_a_json_refusal_not_a_redirect(hub):
    response = hub.call("api_opening_hours")
    assert response.status == 403, response.headers
    assert response.json()["reason"] == "login_required"
    assert hub.call("api_opening_hours", subject="t1:bob").json() == {"hours": "9-17"}


def test_humans_still_log_in_and_get_the_login_redirect():
    app = create_app(guard=None)
    browser = app.test_client()
    redirect = browser.get("/api/v1/profile")
    assert redirect.status_code == 302 and "/login" in redirect.headers["Location"]
    token = browser.get("/login").json["csrf_token"]
    assert browser.post("/login", data={"name": "bob", "csrf_token": token}).status_code == 200
    assert browser.get("/api/v1/profile").json == {"page": "profile", "name": "bob"}


def test_without_the_bridge_login_required_turns_hub_calls_away():
    hub = HubSimulator(create_app(bridge=False, guard=None), STRONG_SECRET)
    response = hub.send("GET", "/api/v1/me", hub.build_call("api_me", subject="t1:alice").headers)
    assert response.status == 302 and "/login" in response.headers["Location"]


def test_through_a_real_server(live_server):
    app = create_app()
    base = live_server(app)
    hub = HubSimulator(base, STRONG_SECRET)
    assert hub.call("api_me", subject="t1:alice").json() == {"name": "alice", "tenant": "t1"}
    assert hub.call("api_notes_post", {"text": "live"}, subject="t1:alice").status == 201
    # the next request on the same server (and thread pool) is nobody
    assert raw_request(base, "GET", "/whoami").body == b'{"session_keys":[],"user":null}\n'
    signed = signed_headers(STRONG_SECRET, "GET", "/whoami", subject="t1:alice")
    assert b'"user":null' in raw_request(base, "GET", "/whoami", signed).body


def test_through_gunicorn(gunicorn):
    base = gunicorn("tests.apps.legacy_app:create_app()")
    hub = HubSimulator(base, STRONG_SECRET)
    assert hub.call("api_me", subject="t1:alice").json() == {"name": "alice", "tenant": "t1"}
    refused = hub.call("api_notes_post", {"text": "x"}, subject="t1:bob")
    assert refused.status == 403 and refused.headers.get("X-Bailing-Reason") == "forbidden"
    assert raw_request(base, "GET", "/whoami").body == b'{"session_keys":[],"user":null}\n'


# -- a subject loader whose users Flask-Login cannot use -----------------------------------------


@pytest.mark.parametrize("kind", ["dict", "dataclass", "annotated"])
def test_a_loader_returning_what_flask_login_cannot_use_is_refused_with_a_clear_reason(kind, live_server,
                                                                                         caplog):
    from .apps.exercise_apps import RAN, login_bridge_with

    RAN.clear()
    app = login_bridge_with(kind)
    live = HubSimulator(live_server(app), STRONG_SECRET)
    response = live.call("me", subject="t1:alice")
    assert response.status == 500, response.text
    assert response.headers["Content-Type"].startswith("application/json")
    assert response.json()["reason"] == "login_user_invalid"
    assert "Traceback" not in response.text and "AttributeError" not in response.text
    assert RAN == []
    logged = [r.getMessage() for r in caplog.records if "login_user_invalid" in r.getMessage()]
    assert logged and "the subject loader tests.apps.exercise_apps.login_bridge_with.<locals>.load_account" \
        in logged[0]
    assert "the objects your login_manager.user_loader returns (a UserMixin)" in logged[0]
    # an unknown subject is still Flask-Login's anonymous user: login_required refuses it as before
    assert live.call("me", subject="t9:nobody").status == 403


def test_check_names_a_loader_declared_to_return_a_dict():
    from .apps.exercise_apps import login_bridge_with

    result = login_bridge_with("annotated").test_cli_runner().invoke(args=["bailing", "check"])
    assert result.exit_code == 1, result.output
    assert "login_user_invalid" in result.output
    assert ("the subject loader tests.apps.exercise_apps.login_bridge_with.<locals>.load_account is "
            "declared to return dict") in result.output


def test_the_flask_command_check_names_the_loader_too():
    from .helpers import flask_command

    result = flask_command("tests.apps.exercise_apps:login_bridge_with('annotated')", "bailing", "check")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "login_user_invalid" in result.stdout
    assert "load_account is declared to return dict" in result.stdout


def test_the_exercise_names_the_loader_whose_users_flask_login_cannot_use():
    from bailing_flask.exercise import run_exercise

    from .apps.exercise_apps import login_bridge_with

    report = run_exercise(login_bridge_with("dataclass"), subject="t1:alice")
    [result] = [r for r in report.results if r.check == "loader"]
    assert result.status == "fail" and not report.ok
    assert "returned a value of type Account, which Flask-Login cannot use as current_user" in result.summary
    assert result.culprit == "subject loader tests.apps.exercise_apps.login_bridge_with.<locals>.load_account"
