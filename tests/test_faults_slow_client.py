"""Slow clients on real servers: a body sent a byte at a time, a 413 the client ignores.

Without a deadline a client that trickles its body holds a gunicorn gthread
or Werkzeug thread for as long as it likes, and gets a gunicorn sync worker
killed by the arbiter after 30 s (the client then sees gunicorn's own 500).
The middleware reads signed bodies and hub callbacks itself, so it bounds
that read (``BAILING_BODY_TIMEOUT``) and answers ``408 body_timeout``; after
a refusal that left the body unread it stops reading a second later, so
Werkzeug's drain after a 413 no longer lasts as long as the client sends.

Bounds on durations here are generous and only catch a hang, never a speed.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest
from flask import Flask, jsonify

from bailing_flask import Bailing, tool
from bailing_flask.wire import BailingMiddleware
from bailing_flask.errors import ConfigurationError
from bailing_flask.testing import sign_callback, signed_headers

from ._faults import deadlines_armed, send_slowly
from ._servers import gunicorn_serving, serving
from .helpers import STRONG_SECRET, raw_request
from .apps.live_apps import _echo

pytestmark = pytest.mark.slow

DEADLINE = 0.5
#: far longer than any deadline here: reaching it means the server never let go
GIVE_UP = 12.0
SERVERS = ("werkzeug", "gunicorn-sync", "gunicorn-gthread")


@contextmanager
def echo_server(kind: str, max_body: int = 1000) -> Iterator[str]:
    """The middleware's echo app (half-second body deadline) on ``kind``."""
    if kind == "werkzeug":
        app = BailingMiddleware(_echo, STRONG_SECRET, max_body_size=max_body,
                                body_timeout=DEADLINE)
        with serving(app, "werkzeug") as base:
            yield base
        return
    env = {"BAILING_TEST_SECRET": STRONG_SECRET, "BAILING_TEST_MAX_BODY": str(max_body),
           "BAILING_TEST_BODY_TIMEOUT": str(DEADLINE)}
    if kind == "gunicorn-gthread":
        env["GUNICORN_CMD_ARGS"] = "-k gthread --threads 4"
    with gunicorn_serving("tests.apps.live_apps:middleware_app()", env=env, workers=2) as base:
        yield base


@pytest.fixture(scope="module", params=SERVERS)
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """``(kind, base_url)``: the echo app, bodies over 1000 bytes refused, on each server."""
    with echo_server(request.param) as base:
        yield request.param, base


def signed(body: bytes = b"x" * 900) -> dict[str, str]:
    return signed_headers(STRONG_SECRET, "POST", "/upload", body)


def reason(answer: bytes) -> str:
    return json.loads(answer.partition(b"\r\n\r\n")[2])["reason"]


def test_slow_loris_body_is_cut_off_at_the_read_deadline_and_the_server_serves_on(server):
    kind, base = server
    with ThreadPoolExecutor(max_workers=4) as pool:
        # four at once: more than a pair of sync workers can take in one round
        exchanges = list(pool.map(
            lambda i: send_slowly(base, "/upload", signed(), length=None if i % 2 else 900,
                                  interval=0.05, give_up=GIVE_UP),
            range(4)))
        for exchange in exchanges:
            assert exchange.status == 408, (kind, exchange.answer[:200])
            assert reason(exchange.answer) == "body_timeout"
            # the server let go long before the client would have: a 900-byte body takes 45 s
            assert exchange.closed_after is not None and exchange.closed_after < GIVE_UP
            assert exchange.sent < 900
    body = b"x" * 900
    after = raw_request(base, "POST", "/upload", signed(body), body)
    assert after.status == 200 and json.loads(after.body)["length"] == 900


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_413_connection_closes_soon_although_the_client_keeps_sending(server, chunked):
    """Werkzeug's server used to read the refused upload for as long as the client sent."""
    kind, base = server
    exchange = send_slowly(base, "/upload", signed(b""), length=None if chunked else 50_000_000,
                           piece=b"y" * 65536, interval=0.01, give_up=GIVE_UP)
    if kind == "werkzeug" or exchange.answer:
        # gunicorn closes at once with the rest of the upload unread: the reset may reach
        # the client before the answer does (a proxy in front drains; see the deployment docs)
        assert exchange.status == 413, (kind, exchange.answer[:200])
        assert reason(exchange.answer) == "body_too_large"
    assert exchange.closed_after is not None and exchange.closed_after < GIVE_UP, kind


def test_a_kept_alive_connection_is_not_cut_under_the_next_request_after_a_refusal(server):
    """The linger after a refusal ends with the answer on a server that keeps the connection.

    gunicorn's gthread worker keeps a connection open after a 401 and reads
    the next request from it; a linger still armed would shut the read side
    under that request.
    """
    kind, base = server
    if kind != "gunicorn-gthread":
        pytest.skip("only gunicorn's gthread worker keeps connections alive")
    host, port = base.split("//", 1)[1].rsplit(":", 1)
    body = b"x" * 900
    stale = signed_headers(STRONG_SECRET, "POST", "/upload", body, ts=int(time.time()) - 3600)

    def request(headers: dict[str, str]) -> bytes:
        return (f"POST /upload HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(body)}\r\n"
                + "".join(f"{k}: {v}\r\n" for k, v in headers.items())).encode() + b"\r\n" + body

    with socket.create_connection((host, int(port)), timeout=GIVE_UP) as sock:
        answers = []
        for headers in (stale, signed(body), signed(body)):
            sock.sendall(request(headers))
            answer = b""
            while not _complete(answer):
                chunk = sock.recv(65536)
                assert chunk, f"the connection was closed after {len(answers)} answers"
                answer += chunk
            answers.append(answer)
            time.sleep(DEADLINE + 0.3)  # past the linger of the refusal
    assert [a.split(b" ", 2)[1] for a in answers] == [b"401", b"200", b"200"]


def _complete(answer: bytes) -> bool:
    """Whether ``answer`` holds a whole response (sized or chunked)."""
    head, found, rest = answer.partition(b"\r\n\r\n")
    if not found:
        return False
    for line in head.lower().split(b"\r\n"):
        if line.startswith(b"content-length:"):
            return len(rest) >= int(line.split(b":", 1)[1])
    return rest.endswith(b"0\r\n\r\n")


def _flask_app() -> Flask:
    app = Flask("slow_client_app")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_BODY_TIMEOUT=DEADLINE,
                      BAILING_CLIENT_TOKENS=["client-token-0123456789abcdefghij"],
                      BAILING_STORE="memory://")
    bailing = Bailing(app)
    bailing.authorizer(lambda call: True)
    seen: list[object] = []
    bailing.job_finished(seen.append)

    @app.post("/notes")
    @tool(scope="notes.write", repeats="safe")
    def notes_create():
        """Write a note."""
        return jsonify(ok=True)

    app.config["SEEN"] = seen
    return app


def test_the_flask_setting_bounds_tool_calls_and_hub_callbacks_alike():
    app = _flask_app()
    stamp = int(time.time() * 1000)
    requests = [
        ("/notes", signed_headers(STRONG_SECRET, "POST", "/notes", b"{}" * 200)),
        ("/.well-known/bailing/callbacks/job",
         {"Content-Type": "application/json", "X-Bailing-Timestamp": str(stamp),
          "X-Bailing-Signature": sign_callback("client-token-0123456789abcdefghij", stamp,
                                               b"{}" * 200)}),
    ]
    with serving(app, "werkzeug") as base, ThreadPoolExecutor(max_workers=2) as pool:
        exchanges = list(pool.map(
            lambda item: send_slowly(base, item[0], item[1], length=400, give_up=GIVE_UP),
            requests))
    for exchange in exchanges:
        assert exchange.status == 408, exchange.answer[:200]
        assert reason(exchange.answer) == "body_timeout"
    assert app.config["SEEN"] == []


def test_the_413_that_lingers_sends_no_hop_by_hop_header():
    """How long the server keeps reading is bounded on the socket, not with a header."""
    app = BailingMiddleware(_echo, STRONG_SECRET, max_body_size=10, body_timeout=DEADLINE)
    left, right = socket.socketpair()
    seen: list[tuple[str, list[tuple[str, str]]]] = []
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/upload", "CONTENT_LENGTH": "5000",
               "werkzeug.socket": right, "wsgi.input": right.makefile("rb"),
               **{"HTTP_" + k.upper().replace("-", "_"): v for k, v in signed(b"").items()}}
    try:
        body = b"".join(app(environ, lambda status, headers: seen.append((status, headers))))
        (status, headers), = seen
        assert status.startswith("413") and json.loads(body)["reason"] == "body_too_large"
        assert {name.lower() for name, _ in headers} & {"connection", "keep-alive"} == set()
        left.sendall(b"more of the body")
        right.settimeout(GIVE_UP)
        # the linger shuts the read side: a read sees the end instead of waiting for more
        started = time.monotonic()
        while right.recv(1024):
            pass
        assert time.monotonic() - started < GIVE_UP
    finally:
        left.close()
        right.close()


@pytest.mark.parametrize("value", [-1, 3601, "10", True, float("nan")])
def test_body_timeout_must_be_a_number_of_seconds(value):
    with pytest.raises(ConfigurationError, match="body_timeout"):
        BailingMiddleware(_echo, STRONG_SECRET, body_timeout=value)


@pytest.mark.parametrize("value", [None, 0])
def test_body_timeout_can_be_turned_off(value):
    assert BailingMiddleware(_echo, STRONG_SECRET, body_timeout=value).body_timeout is None


def test_a_prompt_body_is_never_cut_off_by_the_deadline():
    """The deadline is armed for every signed body; one that arrives is untouched."""
    app = BailingMiddleware(_echo, STRONG_SECRET, body_timeout=5.0)
    with serving(app, "werkzeug") as base:
        for size in (1, 70_000, 1_500_000):  # one read, several, spooled to a file
            body = b"z" * size
            answer = raw_request(base, "POST", "/upload", signed(body), body)
            assert answer.status == 200 and json.loads(answer.body)["length"] == size
    # every deadline armed for those bodies was disarmed: none can fire later, under
    # whatever the connection carries next
    assert deadlines_armed() == 0


# -- the watchdog behind the deadlines ------------------------------------------------------


def _settled_watchdog() -> Any:
    """The process's watchdog, started, and sleeping until its next look."""
    from bailing_flask.wire import deadline

    first, _peer = socket.socketpair()
    deadline.disarm(deadline.arm(first, 10.0))  # starts the thread if nothing had
    watchdog = deadline._WATCHDOG
    give_up = time.monotonic() + GIVE_UP
    while getattr(watchdog, "_next_look", 0.0) == float("inf") and time.monotonic() < give_up:
        time.sleep(0.01)
    first.close()
    _peer.close()
    return watchdog


def test_arming_a_deadline_wakes_no_thread_per_request():
    """A request arms a deadline seconds ahead of the watchdog's next look: a dictionary
    insert, no thread woken (a wake per request cost a sync gunicorn worker ~100 µs of CPU)."""
    from bailing_flask.wire import deadline

    watchdog = _settled_watchdog()
    sock, peer = socket.socketpair()
    woken = 0
    for _ in range(200):
        watchdog._wake.clear()
        entry = deadline.arm(sock, 10.0)
        woken += watchdog._wake.is_set()
        assert deadline.disarm(entry) is False  # disarmed before its deadline
    sock.close()
    peer.close()
    assert woken <= 5, woken  # only an arm that met one of the thread's own looks (once a second)


def test_a_deadline_earlier_than_the_next_look_still_fires_on_time():
    """The watchdog sleeps until its next look, up to a second; a shorter deadline armed
    meanwhile wakes it, and the read side is shut once that deadline passes, not later."""
    from bailing_flask.wire import deadline

    _settled_watchdog()
    late, late_peer = socket.socketpair()
    soon, soon_peer = socket.socketpair()
    long_entry = deadline.arm(late, 30.0)
    started = time.monotonic()
    short_entry = deadline.arm(soon, 0.3)
    soon.settimeout(GIVE_UP)
    assert soon.recv(1) == b""  # the read side was shut: the blocked read returns at once
    elapsed = time.monotonic() - started
    assert deadline.disarm(short_entry) is True  # the watchdog took it before shutting the read side
    give_up = time.monotonic() + GIVE_UP
    while not short_entry.fired and time.monotonic() < give_up:  # set once shutdown returned
        time.sleep(0.01)
    assert short_entry.fired
    assert 0.3 <= elapsed < GIVE_UP
    assert deadline.disarm(long_entry) is False and not long_entry.fired
    for s in (late, late_peer, soon, soon_peer):
        s.close()
