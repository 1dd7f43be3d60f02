"""Flask-Limiter with ``bailing_flask.rate_limit_key``: one bucket per acting subject."""

from __future__ import annotations

from typing import Any

from flask import Flask, jsonify
from flask_limiter import Limiter

from bailing_flask import Bailing, is_tool_call, rate_limit_key, tool
from bailing_flask.testing import HubSimulator, signed_headers

from .helpers import STRONG_SECRET, raw_request
from .apps.legacy_app import create_app
from .apps.limiter_app import create_app as limiter_app
from ._redis import redis_server  # noqa: F401  (a fixture)


def statuses(hub: HubSimulator, name: str, subject: str | None, times: int) -> list[int]:
    return [hub.call(name, subject=subject).status for _ in range(times)]


def test_each_hub_user_has_its_own_bucket():
    hub = HubSimulator(create_app(limit="2/minute"), STRONG_SECRET)
    assert statuses(hub, "api_me", "t1:alice", 3) == [200, 200, 429]
    assert statuses(hub, "api_me", "t1:bob", 2) == [200, 200]  # not alice's bucket


def test_keyed_on_the_remote_address_every_hub_user_shares_one_bucket():
    hub = HubSimulator(create_app(limit="2/minute", limiter_key="remote"), STRONG_SECRET)
    assert statuses(hub, "api_me", "t1:alice", 2) == [200, 200]
    assert statuses(hub, "api_me", "t1:bob", 1) == [429]


def test_anonymous_hub_calls_share_one_bucket_and_humans_keep_theirs():
    app = create_app(limit="2/minute")
    hub = HubSimulator(app, STRONG_SECRET)
    assert statuses(hub, "api_opening_hours", None, 3)[2] == 429
    browser = app.test_client()
    assert [browser.get("/", environ_base={"REMOTE_ADDR": "10.0.0.7"}).status_code
            for _ in range(3)] == [200, 200, 429]
    assert browser.get("/", environ_base={"REMOTE_ADDR": "10.0.0.8"}).status_code == 200


def test_a_signed_request_to_a_human_page_is_keyed_like_any_visitor():
    app = create_app(limit="1/minute", guard=None)
    client = app.test_client()
    headers = signed_headers(STRONG_SECRET, "GET", "/", subject="t1:alice")
    assert client.get("/", headers=headers).status_code == 200
    assert client.get("/").status_code == 429  # same address, same bucket: the subject bought nothing


def test_per_tool_limits_for_hub_calls_only():
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://",
                      RATELIMIT_STORAGE_URI="memory://")
    bailing = Bailing(app)
    bailing.authorizer(lambda call: True)
    limiter = Limiter(key_func=rate_limit_key, app=app)

    @app.get("/export")
    @limiter.limit("1/minute", exempt_when=lambda: not is_tool_call())
    @tool(scope="export.read")
    def export() -> Any:
        """An expensive export."""
        return jsonify(ok=True)

    hub = HubSimulator(app, STRONG_SECRET)
    assert statuses(hub, "export", "t1:alice", 2) == [200, 429]
    assert statuses(hub, "export", "t1:bob", 1) == [200]
    browser = app.test_client()
    assert [browser.get("/export").status_code for _ in range(3)] == [401, 401, 401]  # never 429


# -- replays never drain a user's bucket -----------------------------------------------------


def replay_statuses(base: str, request: Any, times: int) -> list[int]:
    """Send the same captured request ``times`` times, byte for byte."""
    return [raw_request(base, request.method, request.path_with_query, request.headers).status
            for _ in range(times)]


def test_replays_of_a_captured_read_never_drain_the_subjects_bucket(live_server: Any) -> None:
    base = live_server(limiter_app(STRONG_SECRET, limit="3/minute"))
    hub = HubSimulator(base, STRONG_SECRET)
    captured = hub.build_call("me", subject="t1:bob")
    # bob's call, then five replays of it: they count like any visitor from their address
    assert replay_statuses(base, captured, 6) == [200, 200, 200, 200, 429, 429]
    # bob's bucket holds his one genuine call
    assert [hub.call("me", subject="t1:bob").status for _ in range(3)] == [200, 200, 429]


def test_replays_are_recognised_across_gunicorn_workers(gunicorn: Any, redis_server: Any,
                                                        tmp_path: Any) -> None:
    base = gunicorn("tests.apps.limiter_app:create_app()", workers=2, env={
        "BAILING_TEST_SECRET": STRONG_SECRET,
        "BAILING_TEST_STORE": f"sqlite:///{tmp_path / 'bailing.sqlite3'}",
        "BAILING_TEST_LIMITER": redis_server.url,
    })
    hub = HubSimulator(base, STRONG_SECRET)
    captured = hub.build_call("me", subject="t1:bob")
    statuses = replay_statuses(base, captured, 8)
    assert statuses[:4] == [200, 200, 200, 200] and set(statuses[4:]) == {429}
    assert [hub.call("me", subject="t1:bob").status for _ in range(3)] == [200, 200, 429]


def test_with_rejected_replays_the_first_call_is_not_taken_for_a_replay(live_server: Any) -> None:
    app = limiter_app(STRONG_SECRET, limit="3/minute")
    app.config["BAILING_REJECT_REPLAYS"] = True
    base = live_server(app)
    hub = HubSimulator(base, STRONG_SECRET)
    captured = hub.build_call("me", subject="t1:bob")
    assert replay_statuses(base, captured, 3) == [200, 401, 401]
    assert hub.call("me", subject="t1:bob").status == 200
