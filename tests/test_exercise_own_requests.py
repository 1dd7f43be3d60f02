"""What the exercise changes for its run holds for its own requests only.

The exercise sends unsigned requests to tools as if they declared
``allow_unsigned=True``, and keeps the de-duplication and replay records of
its calls in a throwaway store. Both hold in the context each of its
requests is sent in, and nowhere else: a client of the app, or the hub,
served by the same process while the exercise holds one of its requests in
a slow decorator, meets the tool's own ``allow_unsigned`` and the app's own
store, and its commits commit (the exercise's own are rolled back). Each check signs its own job id (so ``BAILING_REJECT_REPLAYS`` never
refuses one check's request as a repeat of another's), and a call the
exercise stops before the view is never recorded as uncertain.
"""

from __future__ import annotations

import functools
import http.client
import logging
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import pytest
from flask import Flask, request

from bailing_flask import Bailing, tool
from bailing_flask.declare import EXERCISE_KEY
from bailing_flask.exercise import run_exercise
from bailing_flask.responses import REASON_HEADER, REPLAY_HEADER
from bailing_flask.testing import HubSimulator

from .apps import exercise_db_app
from .helpers import STRONG_SECRET

DEADLINE = 60.0


class Held:
    """A decorator of the app's that holds the exercise's first request it sees until released."""

    def __init__(self) -> None:
        self.holding = threading.Event()
        self.release = threading.Event()

    def __call__(self, view: Any) -> Any:
        @functools.wraps(view)
        def decorated(*args: Any, **kwargs: Any) -> Any:
            if EXERCISE_KEY in request.environ and not self.holding.is_set():
                self.holding.set()
                self.release.wait(DEADLINE)
            return view(*args, **kwargs)

        return decorated


def refund_app(held: Held, ran: list[str], authorizer: Callable[[Any], bool],
               allow_unsigned: bool | None = False) -> Flask:
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    bailing = Bailing(app)
    bailing.subject_loader(lambda subject: subject)
    bailing.authorizer(authorizer)

    @app.post("/refunds")
    @held
    @tool(scope="refund.write", allow_unsigned=allow_unsigned)
    def refund_post() -> Any:
        """Refund an order."""
        ran.append("refund executed")
        return {"refunded": True}

    return app


def while_held(held: Held, action: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Run ``action`` in another thread once the exercise holds its request; then release it."""
    got: list[Any] = []

    def run() -> None:
        try:
            if held.holding.wait(DEADLINE):
                got.append(action())
        finally:
            held.release.set()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, got


def unsigned_post(base_url: str) -> tuple[int, str | None]:
    url = urlsplit(base_url)
    connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=DEADLINE)
    try:
        connection.request("POST", "/refunds", body=b"{}", headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        response.read()
        return response.status, response.headers.get(REASON_HEADER)
    finally:
        connection.close()


def test_an_outside_unsigned_request_meanwhile_is_refused_while_the_exercise_lets_its_own_through(
        live_server: Any) -> None:
    held, ran = Held(), []
    # allow_unsigned not set: the exercise's unsigned check sends the tool unsigned requests
    app = refund_app(held, ran, authorizer=lambda call: False, allow_unsigned=None)
    base_url = live_server(app)
    thread, got = while_held(held, lambda: unsigned_post(base_url))
    run_exercise(app)
    thread.join(DEADLINE)
    assert held.holding.is_set()  # the exercise's own unsigned request did reach the decorators
    assert got == [(401, "missing_signature")]
    assert ran == []


def test_a_hub_call_meanwhile_is_recorded_in_the_apps_store_so_its_retry_is_answered_not_run_again(
        live_server: Any) -> None:
    held, ran = Held(), []
    app = refund_app(held, ran, authorizer=lambda call: call.subject == "t1:alice")
    hub = HubSimulator(live_server(app), STRONG_SECRET)
    call = hub.build_call("refund_post", {}, subject="t1:alice", job_id="job-42")
    thread, got = while_held(held, lambda: hub.replay(call))
    run_exercise(app, subject="t1:alice")
    thread.join(DEADLINE)
    assert held.holding.is_set()  # the exercise's stack request held its claim meanwhile
    assert [response.status for response in got] == [200]
    retried = hub.replay(call)
    assert (retried.status, retried.headers.get(REPLAY_HEADER)) == (200, "true")
    assert ran == ["refund executed"]


def test_a_write_tools_call_the_exercise_stops_before_the_view_is_never_logged_as_uncertain(
        caplog: pytest.LogCaptureFixture) -> None:
    held, ran = Held(), []
    held.holding.set()  # hold nothing
    app = refund_app(held, ran, authorizer=lambda call: call.subject == "t1:alice")
    with caplog.at_level(logging.INFO, logger="bailing_flask"):
        report = run_exercise(app, subject="t1:alice")
    stack = next(r for r in report.results if r.target.startswith("tool refund_post") and r.check == "stack")
    assert stack.status == "pass", report.render()  # the call was admitted and stopped at the view
    logged = [record.getMessage() for record in caplog.records]
    assert not [message for message in logged if "uncertain" in message or "ExerciseStop" in message]
    assert ran == []


def get(base_url: str, path: str) -> int:
    url = urlsplit(base_url)
    connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=DEADLINE)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


@pytest.mark.parametrize("kind", ["sqlalchemy", "dbapi"])
def test_a_request_served_meanwhile_commits_while_the_exercises_own_writes_are_rolled_back(
        live_server: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    monkeypatch.setenv("EXERCISE_DB", str(tmp_path / "app.db"))
    held = Held()
    app = exercise_db_app.create_app(kind, hold=held)
    base_url = live_server(app)
    # the app's before_request function logs and commits a visit on every request, a 404 included
    thread, got = while_held(held, lambda: get(base_url, "/not-a-tool"))
    report = run_exercise(app, subject="t1:alice")
    thread.join(DEADLINE)
    assert held.holding.is_set() and got == [404]
    assert any("every write was rolled back" in line for line in report.ran), report.ran
    # the outside visit stays; none of the exercise's visits and charges does
    assert exercise_db_app.rows() == {"visits": 1, "users": 1, "charges": 0}
