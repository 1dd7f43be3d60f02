"""Shared fixtures: the hub's test secret, a controllable clock, real servers."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import pytest
from werkzeug.serving import make_server

# real redis-server fixtures: ``redis_server`` (shared) and ``redis_server_factory``
pytest_plugins = ["tests._redis"]

#: The secret of the hub's frozen test vectors (CONTRACT.md §2.5).
HUB_SECRET = "bailing-test-secret"
#: The ts of every frozen vector.
VECTOR_TS = 1718000000
#: A secret long enough not to trigger the short-secret warning.
STRONG_SECRET = "s3cr3t-for-tests-0123456789abcdefghijklmnop"


class FrozenClock:
    """A clock the test moves by hand."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def vector_clock() -> FrozenClock:
    """A clock standing at the frozen vectors' timestamp."""
    return FrozenClock(VECTOR_TS)


@dataclass
class RawResponse:
    status: int
    headers: http.client.HTTPMessage
    body: bytes


def raw_request(
    base_url: str,
    method: str,
    target: str,
    headers: dict[str, str] | None = None,
    body: bytes | Iterable[bytes] | None = None,
    *,
    chunked: bool = False,
) -> RawResponse:
    """Send one request with the request-target exactly as given (no re-quoting).

    Header values are sent as ISO-8859-1 bytes, which is how the hub's HTTP
    client sends characters up to U+00FF.
    """
    host, port = base_url.split("//", 1)[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.putrequest(method, target, skip_accept_encoding=True)
        for name, value in (headers or {}).items():
            conn.putheader(name, value.encode("latin-1"))
        if chunked:
            conn.putheader("Transfer-Encoding", "chunked")
            conn.endheaders()
            for piece in body or []:
                conn.send(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            conn.send(b"0\r\n\r\n")
        else:
            data = body if isinstance(body, bytes) else b"".join(body or [])
            if data or method not in ("GET", "HEAD"):
                conn.putheader("Content-Length", str(len(data)))
            conn.endheaders(data or None)
        response = conn.getresponse()
        return RawResponse(response.status, response.headers, response.read())
    finally:
        conn.close()


@pytest.fixture
def live_server() -> Iterator[Callable[..., str]]:
    """Start WSGI apps on real loopback sockets (Werkzeug's threaded server).

    Returns a function ``start(app) -> base_url``; every server is shut down
    at the end of the test.
    """
    servers = []

    def start(app: object) -> str:
        server = make_server("127.0.0.1", 0, app, threaded=True)  # type: ignore[arg-type]
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        servers.append((server, thread))
        return f"http://127.0.0.1:{server.server_port}"

    yield start
    for server, thread in servers:
        server.shutdown()
        thread.join(timeout=5)


@pytest.fixture
def authz_app():
    """The multi-tenant fixture app of tests/authz_app.py."""
    from .authz_app import create_app

    app, _ = create_app()
    return app


@pytest.fixture
def hub(authz_app):
    """A HubSimulator calling the authz app in-process, like the hub would."""
    from bailing_flask.testing import HubSimulator

    return HubSimulator(authz_app, STRONG_SECRET)
