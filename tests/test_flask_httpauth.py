"""Flask-HTTPAuth's ``login_required`` for admitted hub calls, and for nothing else.

The obvious bridge (return ``call.user`` from ``verify_token``) silently
does nothing: Flask-HTTPAuth never calls ``verify_token`` for a request
without a token, and a hub call has none, so every tool behind
``@auth.login_required`` answered ``401`` with ``WWW-Authenticate``.
``bailing.bridge_flask_httpauth(auth)`` authenticates an admitted call as
the subject loader's user, checks ``role=`` with the app's
``get_user_roles``, and leaves every other request to Flask-HTTPAuth.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from flask import g

from bailing_flask.exercise import run_exercise
from bailing_flask.testing import PROBE_SUBJECT, HubSimulator, signed_headers

from .apps.httpauth_app import ASKED, CLOSED, agent, basic_header, create_app, credentials
from .helpers import STRONG_SECRET, raw_request

SCHEMES = ["token", "basic", "multi"]


@pytest.fixture(autouse=True)
def fresh_desk() -> Iterator[None]:
    ASKED.clear()
    CLOSED.clear()
    yield
    ASKED.clear()
    CLOSED.clear()


def json_refusal(response: Any, status: int, reason: str) -> None:
    assert response.status == status, response.text
    assert response.headers["Content-Type"].startswith("application/json")
    assert response.json()["reason"] == reason
    assert not any(name.lower() == "www-authenticate" for name in response.headers)


# -- the hub's calls, over a socket ----------------------------------------------------------


@pytest.mark.parametrize("scheme", SCHEMES)
def test_login_required_passes_admitted_calls_as_the_subjects_user(scheme, live_server):
    hub = HubSimulator(live_server(create_app(scheme)), STRONG_SECRET)
    document = hub.document()
    assert sorted(document["paths"]) == ["/api/v1/kb/{article_id}", "/api/v1/me", "/api/v1/queue",
                                         "/api/v1/status", "/api/v1/tickets",
                                         "/api/v1/tickets/{ticket_id}/close"]
    assert hub.probe().json() == {"authorized": False}
    # two agents of two tenants: each is itself, and sees its own tenant's tickets
    assert hub.call("api_me", subject="t1:alice").json() == {"login": "alice", "tenant": "t1"}
    assert hub.call("api_me", subject="t2:bob").json() == {"login": "bob", "tenant": "t2"}
    assert hub.call("api_tickets", subject="t1:alice").json()["tickets"] == [
        {"id": 1, "title": "printer on fire"}, {"id": 3, "title": "password reset"}]
    assert hub.call("api_tickets", subject="t2:bob").json()["tickets"] == [{"id": 2, "title": "vpn down"}]
    assert hub.call("api_close_ticket", {"ticket_id": 1}, subject="t1:alice").json() == {
        "closed": 1, "by": "alice"}
    assert hub.call("api_article", {"article_id": 7}, subject="t2:bob").json() == {
        "article": 7, "reader": "bob"}
    # the user came from the subject loader: no credential callback ran
    assert not [a for a in ASKED if a[0] in ("verify_token", "verify_password")]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_roles_come_from_the_apps_get_user_roles(scheme, live_server):
    hub = HubSimulator(live_server(create_app(scheme)), STRONG_SECRET)
    refused = hub.call("api_tickets", subject="t1:carol")  # the authorizer admits carol; she has no role
    json_refusal(refused, 403, "role_required")
    json_refusal(hub.call("api_close_ticket", {"ticket_id": 2}, subject="t2:bob"), 403, "role_required")
    assert CLOSED == []
    main = "basic" if scheme == "basic" else "token"
    assert ("roles", main, "carol") in ASKED and ("roles", main, "bob") in ASKED


@pytest.mark.parametrize("scheme", SCHEMES)
def test_no_user_is_a_json_refusal_and_optional_runs_as_nobody(scheme, live_server):
    hub = HubSimulator(live_server(create_app(scheme)), STRONG_SECRET)
    json_refusal(hub.call("api_queue"), 403, "login_required")  # anonymous: admitted, but no agent
    assert hub.call("api_status").json() == {"open": True, "agent": None}
    assert hub.call("api_status", subject="t1:alice").json() == {"open": True, "agent": "alice"}


def test_without_the_bridge_flask_httpauth_turns_every_hub_call_away():
    hub = HubSimulator(create_app("token", bridge=False), STRONG_SECRET)
    response = hub.call("api_me", subject="t1:alice")
    assert response.status == 401 and response.text == "Unauthorized Access"
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="Authentication Required"'


# -- what the bridge leaves alone -------------------------------------------------------------


def _unsigned_requests(scheme: str) -> list[tuple[str, str, dict[str, str]]]:
    alice, carol = agent("alice"), agent("carol")
    cred = "basic" if scheme == "basic" else "token"
    requests = [
        ("GET", "/api/v1/profile", {}),
        ("GET", "/api/v1/profile", credentials(cred, alice)),  # type: ignore[arg-type]
        ("GET", "/api/v1/profile", {"Authorization": "Bearer not-a-token"}),
        ("GET", "/api/v1/profile", {"Authorization": basic_header("alice", "wrong")}),
        ("GET", "/api/v1/profile", {"Authorization": "Bearer"}),
        ("GET", "/api/v1/kb/4", {}),  # the route the web client shares with the hub
        ("GET", "/api/v1/kb/4", credentials(cred, carol)),  # type: ignore[arg-type]
        ("GET", "/api/v1/kb/4", {"Authorization": "Bearer not-a-token"}),
        ("OPTIONS", "/api/v1/tickets", {"Origin": "https://desk.example",
                                        "Access-Control-Request-Method": "GET"}),
        ("GET", "/api/v1/kb/4", {**credentials(cred, alice), "Origin": "https://desk.example"}),  # type: ignore[arg-type]
        ("GET", "/whoami", {}),
    ]
    if scheme == "multi":
        requests.append(("GET", "/api/v1/kb/4", credentials("basic", alice)))
    return requests


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("error_handler", [None, "before", "after"])
def test_unsigned_requests_are_answered_byte_for_byte_as_without_the_bridge(scheme, error_handler):
    bridged = create_app(scheme, error_handler=error_handler).test_client()  # type: ignore[arg-type]
    plain = create_app(scheme, bridge=False, error_handler=error_handler).test_client()  # type: ignore[arg-type]
    statuses = []
    for method, path, headers in _unsigned_requests(scheme):
        ASKED.clear()
        expected = plain.open(path, method=method, headers=headers)
        asked = list(ASKED)
        ASKED.clear()
        got = bridged.open(path, method=method, headers=headers)
        assert (got.status_code, sorted(got.headers.items()), got.get_data()) == (
            expected.status_code, sorted(expected.headers.items()), expected.get_data()), (method, path)
        assert ASKED == asked, (method, path)  # the same callbacks ran, with the same arguments
        statuses.append(got.status_code)
    assert 200 in statuses and 401 in statuses  # the app's own answers, both ways


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_signed_request_to_a_page_that_is_not_a_tool_is_not_authenticated(scheme, live_server):
    base = live_server(create_app(scheme))
    for path in ("/api/v1/profile", "/whoami"):
        signed = signed_headers(STRONG_SECRET, "GET", path, subject="t1:alice")
        response = raw_request(base, "GET", path, signed)
        assert b"alice" not in response.body, path
    profile = raw_request(base, "GET", "/api/v1/profile",
                          signed_headers(STRONG_SECRET, "GET", "/api/v1/profile", subject="t1:alice"))
    assert profile.status == 401 and profile.headers["WWW-Authenticate"]  # Flask-HTTPAuth's, as for anyone


def test_a_refused_call_never_reaches_flask_httpauth_or_the_view():
    hub = HubSimulator(create_app("multi"), STRONG_SECRET)
    json_refusal(hub.call("api_close_ticket", {"ticket_id": 1}, subject=PROBE_SUBJECT), 403, "forbidden")
    json_refusal(hub.call("api_me", subject="t9:nobody"), 403, "forbidden")
    json_refusal(hub.call("api_article", {"article_id": "x"}, subject="t1:alice"), 404, "no_such_tool")
    assert ASKED == [] and CLOSED == []


def test_an_authorization_header_on_an_admitted_call_picks_neither_the_user_nor_the_scheme():
    """A captured signed call, replayed with someone else's credentials: the header is not signed."""
    hub = HubSimulator(create_app("multi"), STRONG_SECRET)
    root = agent("root")
    for header in (credentials("token", root)["Authorization"], basic_header("root", root.password)):
        ASKED.clear()
        call = hub.build_call("api_tickets", subject="t1:carol")
        response = hub.send("GET", call.path_with_query, {**call.headers, "Authorization": header})
        json_refusal(response, 403, "role_required")  # carol, whose roles the main scheme asked for
        assert ASKED == [("roles", "token", "carol")], header
    call = hub.build_call("api_me", subject="t2:bob")
    stolen = {**call.headers, "Authorization": basic_header("root", root.password)}
    assert hub.send("GET", call.path_with_query, stolen).json() == {"login": "bob", "tenant": "t2"}


def test_the_user_never_leaks_into_the_next_request():
    app = create_app("token")
    hub = HubSimulator(app, STRONG_SECRET)
    browser = app.test_client()
    with app.app_context():  # one app context (and one g) around several requests
        assert hub.call("api_me", subject="t1:alice").status == 200
        assert "flask_httpauth_user" not in g
        assert browser.get("/whoami").json == {"agent": None}


def test_an_admitted_call_left_over_from_another_request_is_never_trusted():
    """The bridge's fast path remembers the admitted call in a context variable; only a hint."""
    from bailing_flask.integrations import _ADMITTED

    app = create_app("token")
    hub = HubSimulator(app, STRONG_SECRET)
    calls: list[Any] = []

    @app.after_request
    def remember(response: Any) -> Any:
        calls.append(_ADMITTED.get())
        return response

    hub.document()  # the catalog fetch first: no call is admitted there
    assert hub.call("api_me", subject="t1:alice").status == 200
    assert calls[0] is None
    left_over = calls[1]
    assert left_over is not None and _ADMITTED.get() is None  # cleared when the request ended
    token = _ADMITTED.set(left_over)  # as if a teardown had not run
    try:
        response = app.test_client().get("/api/v1/profile")
        assert response.status_code == 401 and response.data == b"Unauthorized Access"
    finally:
        _ADMITTED.reset(token)


def test_the_user_never_leaks_across_requests_of_a_real_server(live_server):
    base = live_server(create_app("token"))
    hub = HubSimulator(base, STRONG_SECRET)
    for _ in range(3):
        assert hub.call("api_me", subject="t1:alice").json()["login"] == "alice"
        assert raw_request(base, "GET", "/whoami").body == b'{"agent":null}\n'


def test_an_error_handler_registered_after_the_bridge_still_refuses_hub_calls_with_json():
    app = create_app("token", error_handler="after")
    hub = HubSimulator(app, STRONG_SECRET)
    json_refusal(hub.call("api_tickets", subject="t1:carol"), 403, "role_required")
    json_refusal(hub.call("api_queue"), 403, "login_required")
    human = app.test_client().get("/api/v1/profile")
    assert human.status_code == 401 and human.json == {"error": "unauthorized"}  # the app's handler


def test_digest_auth_is_bridged_too():
    from flask import Flask
    from flask_httpauth import HTTPDigestAuth

    from bailing_flask import Bailing, tool

    app = Flask("digest_desk")
    app.config.update(SECRET_KEY="digest-nonces", BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    auth = HTTPDigestAuth()
    auth.get_password(lambda login: {"alice": "pw-alice"}.get(login))
    bailing = Bailing(app)
    bailing.bridge_flask_httpauth(auth)
    bailing.subject_loader(lambda subject: subject.partition(":")[2] if subject == "t1:alice" else None)
    bailing.authorizer(lambda call: call.user is not None)

    @app.get("/me")
    @auth.login_required
    @tool(scope="profile.read")
    def me() -> Any:
        """Who the acting agent is."""
        return {"login": auth.current_user()}

    @app.get("/page")
    @auth.login_required
    def page() -> Any:
        return {"login": auth.current_user()}

    assert HubSimulator(app, STRONG_SECRET).call("me", subject="t1:alice").json() == {"login": "alice"}
    human = app.test_client().get("/page")
    assert human.status_code == 401 and human.headers["WWW-Authenticate"].startswith("Digest realm=")


def test_bridging_something_else_is_a_clear_error():
    from bailing_flask import Bailing

    with pytest.raises(TypeError, match="expected a flask_httpauth HTTPTokenAuth"):
        Bailing().bridge_flask_httpauth(object())


def test_bridging_twice_wraps_once():
    from flask_httpauth import HTTPTokenAuth

    from bailing_flask import Bailing

    auth = HTTPTokenAuth()
    Bailing().bridge_flask_httpauth(auth)
    first = auth.authenticate
    Bailing().bridge_flask_httpauth(auth)
    assert auth.authenticate is first


# -- flask bailing check --exercise --------------------------------------------------------------


def test_the_exercise_names_flask_httpauth_when_it_answers_a_hub_call():
    report = run_exercise(create_app("token", bridge=False), subject=["t1:alice", "t2:bob"])
    assert not report.ok
    stack = next(r for r in report.results if r.target.startswith("tool api_me ") and r.check == "stack")
    assert stack.status == "fail", report.render()
    assert stack.culprit == ("Flask-HTTPAuth: login_required of the HTTPTokenAuth (scheme 'Bearer') "
                             "answered 401: a hub call carries no credentials of its own, so it is not "
                             "authenticated")
    assert stack.fix is not None and "bailing.bridge_flask_httpauth(auth)" in stack.fix
    assert "something other than bailing_flask answered" not in report.render()


def test_the_exercise_passes_with_the_bridge():
    report = run_exercise(create_app("multi"), subject=["t1:alice", "t2:bob"])
    assert report.ok, report.render()
    ran = [r for r in report.results if r.check == "subject" and r.status == "pass"]
    assert {r.target.split()[1] for r in ran} >= {"api_me", "api_tickets", "api_article"}


def test_the_exercise_warns_about_a_user_the_authorizer_admits_and_the_role_refuses():
    report = run_exercise(create_app("token"), subject="t1:carol")
    tickets = [r for r in report.results if r.target.startswith("tool api_tickets ") and r.check != "unsigned"]
    # @tool above login_required(role=...): the role check is part of the declared view
    assert [(r.check, r.status) for r in tickets] == [("probe", "pass"), ("stack", "pass"),
                                                      ("subject", "warn")], report.render()
    assert "the authorizer admitted 't1:carol'" in tickets[2].summary
    assert "403 role_required" in tickets[2].summary
    close = next(r for r in report.results if r.target.startswith("tool api_close_ticket ")
                 and r.check == "stack")
    assert close.status == "warn" and "refused 't1:carol' (403 role_required" in close.summary
    assert report.ok  # warnings: carol is a user the tools refuse, not a broken stack


def test_the_exercise_leaves_flask_httpauth_as_it_found_it():
    from flask_httpauth import HTTPBasicAuth, HTTPTokenAuth

    before = (HTTPTokenAuth.__dict__["authenticate"], HTTPBasicAuth.__dict__["authenticate"])
    run_exercise(create_app("multi", bridge=False), probe_only=True)
    assert (HTTPTokenAuth.__dict__["authenticate"], HTTPBasicAuth.__dict__["authenticate"]) == before


def test_through_gunicorn(gunicorn):
    base = gunicorn("tests.apps.httpauth_app:create_app('multi')")
    hub = HubSimulator(base, STRONG_SECRET)
    assert hub.call("api_me", subject="t2:bob").json() == {"login": "bob", "tenant": "t2"}
    json_refusal(hub.call("api_tickets", subject="t1:carol"), 403, "role_required")
    assert raw_request(base, "GET", "/whoami").body == b'{"agent":null}\n'


def test_the_exercise_warns_when_the_authorizer_admits_a_subject_the_view_does_not_know():
    from flask import Flask
    from flask_httpauth import HTTPTokenAuth

    from bailing_flask import Bailing, tool

    app = Flask("careless_desk")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    auth = HTTPTokenAuth()
    bailing = Bailing(app)
    bailing.bridge_flask_httpauth(auth)
    bailing.subject_loader(lambda subject: None)  # knows nobody
    bailing.authorizer(lambda call: call.subject != PROBE_SUBJECT)  # and admits the rest

    @app.get("/queue")
    @auth.login_required
    @tool(scope="queue.read")
    def queue() -> Any:
        """How many tickets wait."""
        return {"waiting": 0}

    report = run_exercise(app, subject="t1:alice")
    subject = next(r for r in report.results if r.check == "subject")
    assert subject.status == "warn", report.render()
    assert "admitted 't1:alice' without a user (the subject loader returned None)" in subject.summary
