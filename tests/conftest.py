"""Shared fixtures: the hub's test secret, a controllable clock, real servers."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import pytest
from werkzeug.serving import make_server

from hypothesis import settings as _hypothesis_settings

# No per-example deadline: a deadline is a timing assertion, and fails on a busy machine.
_hypothesis_settings.register_profile("bailing", deadline=None)
_hypothesis_settings.load_profile("bailing")

# real redis-server fixtures: ``redis_server`` (shared) and ``redis_server_factory``;
# PEP 3333 servers: ``wsgi_server`` (wsgiref, waitress, Werkzeug) and ``uwsgi``
pytest_plugins = ["tests._redis", "tests._servers", "tests._postgres", "pytester"]

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
        # a short poll interval lets shutdown() return in milliseconds, not 0.5 s
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01},
                                  daemon=True)
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


_MARKER_FIXTURES = {"redis_server": "redis", "redis_server_factory": "redis", "gunicorn": "slow",
                    "postgres_server": "postgres", "postgres_database": "postgres"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark tests by the real servers they start (``-m "not slow"``, ``-m redis``)."""
    for item in items:
        for fixture in set(getattr(item, "fixturenames", ())) & _MARKER_FIXTURES.keys():
            item.add_marker(_MARKER_FIXTURES[fixture])


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def gunicorn():
    """Start real gunicorn servers in subprocesses: ``start(app_spec, workers=1, env={})``.

    ``app_spec`` is a gunicorn app spec such as ``"tests.idem_app:create_app()"``.
    Returns the base URL once the port accepts connections; every server is
    stopped at the end of the test.
    """
    import os
    import socket
    import subprocess
    import sys
    import time
    from pathlib import Path

    import tempfile

    procs: list[subprocess.Popen] = []
    logs: list = []
    root = str(Path(__file__).resolve().parent.parent)

    def start(app_spec: str, workers: int = 1, env: dict[str, str] | None = None) -> str:
        port = free_port()
        environment = dict(os.environ, PYTHONPATH=root, **(env or {}))
        # a file, not a pipe nobody reads: a server that logs a lot would block once it is full
        log = tempfile.TemporaryFile()
        logs.append(log)
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-w", str(workers), "-b", f"127.0.0.1:{port}",
             "--graceful-timeout", "2", app_spec],
            env=environment, cwd=root, stdout=log, stderr=subprocess.STDOUT,
        )
        procs.append(proc)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                return f"http://127.0.0.1:{port}"
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    output = log.read().decode(errors="replace")
                    raise AssertionError(f"gunicorn did not start: {output[-2000:]}")
                time.sleep(0.1)

    yield start
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    for log in logs:
        log.close()
