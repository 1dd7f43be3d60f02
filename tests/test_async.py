"""``async def`` views, subject loaders, authorizers and handlers (flask[async])."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import pytest
from flask import Flask

from bailing_flask import Bailing, ConfigurationError, ToolDeclarationError, tool
from bailing_flask.wire import sign_callback
from bailing_flask.testing import HubSimulator

from .apps.async_app import CLIENT_TOKEN, create_app
from .helpers import STRONG_SECRET
from bailing_flask._state import state_of
from bailing_flask._pipeline.catalog import catalog_of


@pytest.fixture
def app_and_seen() -> tuple[Flask, dict[str, list[Any]]]:
    app, _, seen = create_app()
    return app, seen


def test_async_view_with_async_loader_and_authorizer(app_and_seen):
    app, _ = app_and_seen
    hub = HubSimulator(app, STRONG_SECRET)
    response = hub.call("whoami", subject="t1:alice")
    # the loader's coroutine was awaited: the view sees the user, not a coroutine object
    assert response.status == 200, response.text
    assert response.json() == {"name": "alice"}


def test_an_async_authorizer_denies_by_its_verdict_not_by_being_a_coroutine(app_and_seen):
    app, _ = app_and_seen
    hub = HubSimulator(app, STRONG_SECRET)
    assert hub.call("whoami", subject="t1:bob").status == 200
    denied = hub.call("note_create", {"text": "hi"}, subject="t1:bob")
    # restyled by the async error handler
    assert denied.status == 403 and denied.json() == {"problem": "not yours", "reason": "forbidden"}
    unknown = hub.call("whoami", subject="t1:nobody")
    assert unknown.status == 403


def test_async_method_view(app_and_seen):
    app, _ = app_and_seen
    hub = HubSimulator(app, STRONG_SECRET)
    response = hub.call("note", {"note_id": 7}, subject="t1:bob")
    assert response.status == 200 and response.json() == {"note_id": 7}


def test_async_domain_idempotency_key_runs_the_side_effect_once(app_and_seen):
    app, seen = app_and_seen
    hub = HubSimulator(app, STRONG_SECRET)
    first = hub.call("note_create", {"text": "once"}, subject="t1:alice", job_id="j1")
    again = hub.call("note_create", {"text": "once"}, subject="t1:alice", job_id="j2")
    assert (first.status, again.status) == (201, 201)
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert seen["notes"] == ["once"]
    assert seen["keys"] == ["t1:alice", "t1:alice"]


def test_probe_awaits_the_async_authorizer(app_and_seen):
    app, _ = app_and_seen
    hub = HubSimulator(app, STRONG_SECRET)
    assert hub.probe().json() == {"authorized": False}
    assert hub.probe("t1:bob").json() == {"authorized": True}


def test_async_callback_handler_runs(app_and_seen):
    app, seen = app_and_seen
    body = json.dumps({"job_id": "job-1", "request_id": "r", "status": "done",
                       "updated_at": "2026-01-01T00:00:00Z"}).encode()
    ts = str(int(time.time() * 1000))
    response = app.test_client().post(
        "/.well-known/bailing/callbacks/job", data=body,
        headers={"Content-Type": "application/json", "X-Bailing-Timestamp": ts,
                 "X-Bailing-Signature": sign_callback(CLIENT_TOKEN, ts, body)})
    assert response.status_code == 200, response.get_data(as_text=True)
    assert seen["jobs"] == ["job-1"]


@pytest.fixture
def without_asgiref(monkeypatch):
    """Flask without its async extra: importing asgiref fails, as it would."""
    monkeypatch.setitem(sys.modules, "asgiref", None)
    monkeypatch.setitem(sys.modules, "asgiref.sync", None)


def test_without_flask_async_an_async_callback_is_refused_when_registered(without_asgiref):
    bailing = Bailing()

    async def authorize(call: Any) -> bool:
        return True

    with pytest.raises(ConfigurationError, match=r"flask\[async\]"):
        bailing.authorizer(authorize)
    with pytest.raises(ConfigurationError, match=r"flask\[async\]"):
        bailing.subject_loader(authorize)
    with pytest.raises(ToolDeclarationError, match=r"flask\[async\]"):
        tool(scope="x.read", authorizer=authorize)(lambda: None)


def test_without_flask_async_an_async_view_is_an_error_finding(without_asgiref):
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET])
    bailing = Bailing(app)
    bailing.authorizer(lambda call: True)

    @app.get("/a")
    @tool(scope="a.read")
    async def a() -> Any:
        return {}

    catalog = catalog_of(state_of(app))
    codes = {(f.code, f.severity) for f in catalog.findings}
    assert ("async_view_without_flask_async", "error") in codes
    assert catalog.excluded == ["GET /a"]
