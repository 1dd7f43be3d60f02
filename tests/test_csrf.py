"""Flask-WTF's ``CSRFProtect``: verified tool calls pass, browsers are still checked."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask

from bailing_flask.testing import HubSimulator, signed_headers

from .helpers import STRONG_SECRET
from .apps.legacy_app import create_app, notes
from bailing_flask._state import state_of


def logged_in(app: Flask, name: str = "alice") -> tuple[Any, str]:
    browser = app.test_client()
    token = browser.get("/login").json["csrf_token"]
    assert browser.post("/login", data={"name": name, "csrf_token": token}).status_code == 200
    return browser, token


def stored(app: Flask) -> list[tuple[str, str]]:
    with app.app_context():
        return notes()


@pytest.mark.parametrize("order", ["before", "after"])
def test_a_verified_tool_call_needs_no_csrf_token(order):
    app = create_app(csrf=order)
    hub = HubSimulator(app, STRONG_SECRET)
    assert hub.call("api_notes_post", {"text": "agent"}, subject="t1:alice").status == 201
    assert hub.call("api_feedback", {"text": "agent"}, subject="t1:alice").status == 201
    assert stored(app) == [("alice", "agent"), ("alice", "feedback: agent")]


@pytest.mark.parametrize("order", ["before", "after"])
def test_an_unsigned_browser_post_to_the_same_route_still_needs_its_token(order):
    app = create_app(csrf=order)
    browser, token = logged_in(app)
    missing = browser.post("/api/v1/feedback", json={"text": "page"})
    assert missing.status_code == 400 and b"CSRF" in missing.data
    ok = browser.post("/api/v1/feedback", json={"text": "page"}, headers={"X-CSRFToken": token})
    assert ok.status_code == 201
    form = browser.post("/api/v1/feedback", data={"text": "form", "csrf_token": token})
    assert form.status_code == 201, form.get_data(as_text=True)
    assert stored(app) == [("alice", "feedback: page"), ("alice", "feedback: form")]


def test_a_signed_post_to_a_route_that_is_not_a_tool_is_still_checked():
    app = create_app()
    response = app.test_client().post(
        "/login", data=b"{}", content_type="application/json",
        headers=signed_headers(STRONG_SECRET, "POST", "/login", b"{}", subject="t1:alice"))
    assert response.status_code == 400 and b"CSRF" in response.data


def test_only_the_request_is_exempted_never_the_view():
    app = create_app()
    HubSimulator(app, STRONG_SECRET).call("api_notes_post", {"text": "x"}, subject="t1:alice")
    csrf = app.extensions["csrf"]
    assert not csrf._exempt_views and not csrf._exempt_blueprints


def test_with_the_exemption_off_every_write_tool_gets_csrfs_400():
    app = create_app(csrf_exempt=False)
    response = HubSimulator(app, STRONG_SECRET).call("api_notes_post", {"text": "x"}, subject="t1:alice")
    assert response.status == 400 and b"CSRF" in response.body
    assert stored(app) == []


@pytest.mark.parametrize("order", ["before", "after"])
def test_attack_one_apps_exemption_does_not_exempt_another_app_sharing_the_csrf_protect(order):
    """A module-level ``csrf = CSRFProtect()`` serves several apps: the app that keeps
    ``BAILING_CSRF_EXEMPT`` off still checks the hub's posts, whichever app came first."""
    from flask_wtf.csrf import CSRFProtect

    shared = CSRFProtect()
    exempt = create_app(csrf=order, csrf_protect=shared)
    strict = create_app(csrf=order, csrf_exempt=False, csrf_protect=shared)
    for app in (exempt, strict, exempt):  # each app's first request, then again
        response = HubSimulator(app, STRONG_SECRET).call("api_notes_post", {"text": "x"}, subject="t1:alice")
        assert response.status == (201 if app is exempt else 400), response.body
    assert stored(strict) == []


def test_the_hubs_posts_to_the_packages_own_endpoints_are_not_csrf_checked():
    import json
    import time

    from bailing_flask import Bailing
    from bailing_flask.wire import sign_callback

    token = "client-token-0123456789-abcdefghijklmnop"
    app = create_app(BAILING_CLIENT_TOKENS=[token])
    finished: list[str] = []
    state_of(app).callbacks.job_finished(lambda job: finished.append(job.job_id))
    body = json.dumps({"job_id": "job-9", "request_id": "r", "status": "done",
                       "updated_at": "2026-01-01T00:00:00Z"}).encode()
    ts = str(int(time.time() * 1000))
    callback = app.test_client().post(
        "/.well-known/bailing/callbacks/job", data=body,
        headers={"Content-Type": "application/json", "X-Bailing-Timestamp": ts,
                 "X-Bailing-Signature": sign_callback(token, ts, body)})
    assert callback.status_code == 200 and finished == ["job-9"]
    probe = HubSimulator(app, STRONG_SECRET).probe()
    assert probe.status == 200 and probe.json() == {"authorized": False}
