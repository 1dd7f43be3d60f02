"""Shared fixtures: the hub's test secret, a controllable clock, real servers."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from hypothesis import settings as _hypothesis_settings
from werkzeug.serving import make_server

from .helpers import STRONG_SECRET, VECTOR_TS, FrozenClock, free_port

# No per-example deadline: a deadline is a timing assertion, and fails on a busy machine.
_hypothesis_settings.register_profile("bailing", deadline=None)
_hypothesis_settings.load_profile("bailing")

# real redis-server fixtures: ``redis_server`` (shared) and ``redis_server_factory``;
# PEP 3333 servers: ``wsgi_server`` (wsgiref, waitress, Werkzeug) and ``uwsgi``
pytest_plugins = ["tests._redis", "tests._servers", "tests._postgres", "tests._mariadb", "pytester"]


@pytest.fixture
def vector_clock() -> FrozenClock:
    """A clock standing at the frozen vectors' timestamp."""
    return FrozenClock(VECTOR_TS)


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
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def authz_app():
    """The multi-tenant fixture app of tests/apps/authz_app.py."""
    from .apps.authz_app import create_app

    app, _ = create_app()
    return app


@pytest.fixture
def hub(authz_app):
    """A HubSimulator calling the authz app in-process, like the hub would."""
    from bailing_flask.testing import HubSimulator

    return HubSimulator(authz_app, STRONG_SECRET)


_MARKER_FIXTURES = {"redis_server": "redis", "redis_server_factory": "redis", "gunicorn": "slow",
                    "postgres_server": "postgres", "postgres_database": "postgres",
                    "mariadb_server": "mariadb", "mariadb_database": "mariadb"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark tests by the real servers they start (``-m "not slow"``, ``-m redis``)."""
    for item in items:
        for fixture in set(getattr(item, "fixturenames", ())) & _MARKER_FIXTURES.keys():
            item.add_marker(_MARKER_FIXTURES[fixture])


@pytest.fixture
def gunicorn():
    """Start real gunicorn servers in subprocesses: ``start(app_spec, workers=1, env={})``.

    ``app_spec`` is a gunicorn app spec such as ``"tests.apps.idem_app:create_app()"``.
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
