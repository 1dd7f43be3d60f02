"""A refusal sent before the body was read reaches the hub as an answer, not as a reset.

A server that closes a connection with request data still unread makes the
kernel reset it, and node's ``fetch`` (the hub's client), still sending the
body, then reports ``fetch failed`` instead of the ``413`` already on its
way; the hub records a side-effecting call as uncertain. wsgiref and uWSGI
close at once, gunicorn after 64 KiB. The middleware answers first and then
reads the rest of the body and throws it away, no further than four times
the body limit and no longer than the body deadline.

The hub's calls go out with node's ``fetch`` over real sockets to wsgiref,
waitress, Werkzeug, gunicorn (sync and gthread) and uWSGI; the bounds are
checked on real sockets too. Durations only catch a hang, never a speed.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from bailing_flask.wire import BailingMiddleware
from bailing_flask.testing import signed_headers

from ._faults import deadlines_armed, send_slowly
from ._servers import gunicorn_serving, serving, uwsgi_serving
from .helpers import STRONG_SECRET, NodeCall, hub_fetch, raw_request
from .apps.live_apps import _echo

MiB = 1024 * 1024
SERVERS = ("wsgiref", "waitress", "werkzeug", "gunicorn-sync", "gunicorn-gthread", "uwsgi")
#: the servers whose connection the middleware drains (the others drain or buffer themselves)
DRAINED = ("wsgiref", "gunicorn-sync", "gunicorn-gthread", "uwsgi")
TRIES = 8
#: far longer than any deadline here: reaching it means the server never let go
GIVE_UP = 12.0


@contextmanager
def echo_server(kind: str, max_body: int | None = None,
                body_timeout: float = 60.0) -> Iterator[str]:
    """The middleware's echo app on ``kind``; the default body limit (10 MiB) unless given."""
    options: dict[str, Any] = {"body_timeout": body_timeout}
    env = {"BAILING_TEST_SECRET": STRONG_SECRET, "BAILING_TEST_BODY_TIMEOUT": str(body_timeout)}
    if max_body is not None:
        options["max_body_size"] = max_body
        env["BAILING_TEST_MAX_BODY"] = str(max_body)
    if kind in ("wsgiref", "waitress", "werkzeug"):
        with serving(BailingMiddleware(_echo, STRONG_SECRET, **options), kind) as base:
            yield base
        return
    if kind == "uwsgi":
        server = uwsgi_serving("tests.live_uwsgi", env=env)
    else:
        if kind == "gunicorn-gthread":
            env["GUNICORN_CMD_ARGS"] = "-k gthread --threads 4"
        server = gunicorn_serving("tests.apps.live_apps:middleware_app()", env=env)
    with server as base:
        yield base


@pytest.fixture(scope="module", params=SERVERS)
def hub_facing(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """``(kind, base_url)`` with the default limit; a minute of body deadline (a loaded machine)."""
    with echo_server(request.param) as base:
        yield request.param, base


def hub_call(body: str, **options: Any) -> NodeCall:
    """The headers of a signed ``POST /upload`` as the hub sends it."""
    headers = signed_headers(STRONG_SECRET, "POST", "/upload", body.encode(), **options)
    return NodeCall({**headers, "content-type": "application/json"})


def note(size: int) -> str:
    """A JSON body of ``size`` bytes and more, like the hub's ``JSON.stringify`` output."""
    return '{"note":"' + "x" * size + '"}'


def outcome(result: dict[str, Any]) -> str:
    """A result's status and reason, or what made ``fetch`` fail."""
    if "status" not in result:
        return f"{result['error']} ({result['cause']})"
    try:
        return f"{result['status']} {json.loads(result['text'])['reason']}"
    except (ValueError, KeyError, TypeError):
        return f"{result['status']} {result['text'][:80]!r}"


@pytest.mark.slow
def test_the_hubs_call_past_the_body_limit_gets_the_413_and_not_fetch_failed(hub_facing):
    kind, base = hub_facing
    body = note(11 * MiB)
    small = note(2000)
    calls = [hub_call(body) for _ in range(TRIES)]
    calls.append(NodeCall(hub_call(small).headers, small))  # the pool still works afterwards
    results = hub_fetch(base + "/upload", "POST", body, calls)
    assert [outcome(r) for r in results] == (
        ["413 body_too_large"] * TRIES + [f"200 {results[-1].get('text', '')[:80]!r}"]), kind
    refusal = json.loads(results[0]["text"])
    assert results[0]["content_type"] == "application/json; charset=utf-8"
    assert refusal["error"] == "body_too_large" and refusal["message"]
    assert json.loads(results[-1]["text"])["length"] == len(small)


@pytest.mark.slow
def test_a_stale_call_with_a_large_body_gets_its_401_and_not_fetch_failed(hub_facing):
    """Refused on its headers, before the body is read: the body is still on its way."""
    kind, base = hub_facing
    body = note(9 * MiB)
    stale = [hub_call(body, ts=int(time.time()) - 3600) for _ in range(TRIES)]
    results = hub_fetch(base + "/upload", "POST", body, stale)
    assert [outcome(r) for r in results] == ["401 timestamp_out_of_window"] * TRIES, kind


@pytest.fixture(scope="module", params=DRAINED)
def strict(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """``(kind, base_url)``: bodies over 1000 bytes refused, a half-second body deadline."""
    with echo_server(request.param, max_body=1000, body_timeout=0.5) as base:
        yield request.param, base


def reason(answer: bytes) -> str:
    return json.loads(answer.partition(b"\r\n\r\n")[2])["reason"]


@pytest.mark.slow
def test_a_client_trickling_a_refused_body_is_cut_off_at_the_body_deadline(strict):
    kind, base = strict
    # within the drain's bound (1 MiB for a 1000-byte limit), at 20 bytes a second
    declared = 900_000
    exchange = send_slowly(base, "/upload", signed_headers(STRONG_SECRET, "POST", "/upload", b""),
                           length=declared, interval=0.05, give_up=GIVE_UP)
    assert exchange.status == 413, (kind, exchange.answer[:200])
    assert reason(exchange.answer) == "body_too_large"
    assert exchange.closed_after is not None and exchange.closed_after < GIVE_UP, kind
    assert exchange.sent < declared
    body = b"x" * 900
    after = raw_request(base, "POST", "/upload",
                        signed_headers(STRONG_SECRET, "POST", "/upload", body), body)
    assert after.status == 200 and json.loads(after.body)["length"] == 900, kind


@pytest.mark.slow
def test_a_body_declared_far_past_the_drains_bound_is_not_drained(strict):
    """Four times the limit, at least 1 MiB: a larger declared body is left to the server."""
    kind, base = strict
    declared = 50_000_000
    exchange = send_slowly(base, "/upload", signed_headers(STRONG_SECRET, "POST", "/upload", b""),
                           length=declared, piece=b"y" * 65536, interval=0.01, give_up=GIVE_UP)
    assert exchange.closed_after is not None and exchange.closed_after < GIVE_UP, kind
    assert exchange.sent < declared


# The bounds themselves, on a connected pair of sockets: the middleware reads from
# one end as a server would, the test writes the client's bytes into the other.


@contextmanager
def connection(
    server_key: str | None = "gunicorn.socket",
) -> Iterator[tuple[socket.socket, dict[str, Any]]]:
    """``(client, environ)``: a refused request's environ over a real socket pair.

    ``server_key`` is where the server puts the connection; ``None`` leaves
    only the socket-backed ``wsgi.input``, as wsgiref does.
    """
    client, server = socket.socketpair()
    stream = server.makefile("rb")
    environ: dict[str, Any] = {"REQUEST_METHOD": "POST", "PATH_INFO": "/upload",
                               "wsgi.input": stream}
    if server_key is not None:
        environ[server_key] = server
    try:
        yield client, environ
    finally:
        stream.close()
        client.close()
        server.close()


def refuse(environ: dict[str, Any], headers: dict[str, str], max_body: int = 1000,
           body_timeout: float | None = 30.0) -> dict[str, Any]:
    """Run a refused request through the middleware; the server closes the answer at once."""
    app = BailingMiddleware(_echo, STRONG_SECRET, max_body_size=max_body, body_timeout=body_timeout)
    for name, value in headers.items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    seen: list[str] = []
    result = app(environ, lambda status, headers: seen.append(status))
    answer = b"".join(result)
    getattr(result, "close", lambda: None)()  # as a server does
    return {"status": seen[0], **json.loads(answer)}


def feed(client: socket.socket, data: bytes) -> threading.Thread:
    """Send ``data`` from the client's side and end it, in the background (past the buffers)."""
    def send() -> None:
        client.sendall(data)
        client.shutdown(socket.SHUT_WR)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def leftover(environ: dict[str, Any], writer: threading.Thread) -> bytes:
    """What the drain left unread on the server's side, once the client has sent everything."""
    rest = environ["wsgi.input"].read()
    writer.join(60)
    return rest


@pytest.mark.parametrize("server_key", ["gunicorn.socket", None], ids=["gunicorn", "wsgiref"])
def test_the_drain_reads_the_declared_body_and_not_a_byte_of_the_next_request(server_key):
    """wsgiref's stream does not stop at the body: reading on would eat the next request."""
    declared = 600_000
    next_request = b"GET /next HTTP/1.1\r\nHost: x\r\n\r\n"
    with connection(server_key) as (client, environ):
        environ["CONTENT_LENGTH"] = str(declared)
        writer = feed(client, b"b" * declared + next_request)
        refusal = refuse(environ, signed_headers(STRONG_SECRET, "POST", "/upload", b""))
        assert refusal["status"].startswith("413") and refusal["reason"] == "body_too_large"
        assert leftover(environ, writer) == next_request
    assert deadlines_armed() == 0


def test_a_declared_body_past_four_times_the_limit_is_left_unread():
    from bailing_flask.wire.drain import FACTOR

    limit = 400_000
    with connection() as (client, environ):
        environ["CONTENT_LENGTH"] = str(FACTOR * limit + 1)
        writer = feed(client, b"b" * 1000)
        refusal = refuse(environ, signed_headers(STRONG_SECRET, "POST", "/upload", b""),
                         max_body=limit)
        assert refusal["reason"] == "body_too_large"
        assert leftover(environ, writer) == b"b" * 1000


def test_a_chunked_body_is_drained_no_further_than_four_times_the_limit():
    """A server that decodes chunked uploads ends the stream; an endless one stops at the bound."""
    from bailing_flask.wire.drain import FACTOR

    limit = 400_000
    bound = FACTOR * limit
    with connection() as (client, environ):
        # the decoded stream as gunicorn hands it over, already past the limit when refused
        environ.update({"HTTP_TRANSFER_ENCODING": "chunked", "wsgi.input_terminated": True})
        writer = feed(client, b"c" * (bound + 300_000))
        refusal = refuse(environ, {**signed_headers(STRONG_SECRET, "POST", "/upload", b""),
                                   "X-Bailing-Timestamp": "12x"}, max_body=limit)
        assert refusal["reason"] == "malformed_timestamp"
        assert len(leftover(environ, writer)) == 300_000


def test_a_chunked_body_wsgiref_passes_on_undecoded_is_left_alone():
    """wsgiref does not decode chunked uploads and never ends the stream: nothing is read."""
    with connection(None) as (client, environ):
        environ["HTTP_TRANSFER_ENCODING"] = "chunked"
        writer = feed(client, b"5\r\nhello\r\n")
        refusal = refuse(environ, {**signed_headers(STRONG_SECRET, "POST", "/upload", b""),
                                   "X-Bailing-Timestamp": "12x"})
        assert refusal["reason"] == "malformed_timestamp"
        assert leftover(environ, writer) == b"5\r\nhello\r\n"


@pytest.mark.parametrize("server_key", ["gunicorn.socket", None], ids=["gunicorn", "wsgiref"])
def test_a_stalled_refused_body_is_given_up_at_the_body_deadline(server_key):
    """The client declares a body, sends a little of it and waits: the read side is shut."""
    with connection(server_key) as (client, environ):
        environ["CONTENT_LENGTH"] = "500000"
        client.sendall(b"b" * 1000)
        # a drain that never gave up would wait for the client; this one gives up in the end
        unstick = threading.Timer(GIVE_UP, client.shutdown, (socket.SHUT_WR,))
        unstick.start()
        try:
            started = time.monotonic()
            refusal = refuse(environ, signed_headers(STRONG_SECRET, "POST", "/upload", b""),
                             body_timeout=0.2)
            assert time.monotonic() - started < GIVE_UP
            # shut on the connection, not only on a descriptor: the server's own reads end too
            assert environ["wsgi.input"].read() == b""
        finally:
            unstick.cancel()
        assert refusal["reason"] == "body_too_large"
    assert deadlines_armed() == 0


def test_without_a_body_deadline_nothing_is_drained():
    """``BAILING_BODY_TIMEOUT`` off: no bound on time, so no drain (the server closes)."""
    with connection() as (client, environ):
        environ["CONTENT_LENGTH"] = "5000"
        writer = feed(client, b"b" * 5000)
        refusal = refuse(environ, signed_headers(STRONG_SECRET, "POST", "/upload", b""),
                         body_timeout=None)
        assert refusal["reason"] == "body_too_large"
        assert leftover(environ, writer) == b"b" * 5000
