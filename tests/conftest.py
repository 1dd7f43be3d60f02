"""Shared fixtures: the hub's test secret, a controllable clock, real servers."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack

import pytest
from hypothesis import settings as _hypothesis_settings
from werkzeug.serving import make_server

from ._servers import gunicorn_serving
from .helpers import STRONG_SECRET, VECTOR_TS, FrozenClock

# No per-example deadline: a deadline is a timing assertion, and fails on a busy machine.
_hypothesis_settings.register_profile("bailing", deadline=None)
_hypothesis_settings.load_profile("bailing")

# real redis-server fixtures: ``redis_server`` (shared) and ``redis_server_factory``;
# PEP 3333 servers: ``wsgi_server`` (wsgiref, waitress, Werkzeug) and ``uwsgi``
# (tests/_installed.py: without a server, its tests skip with one summary line; fail in CI)
pytest_plugins = ["tests._installed", "tests._redis", "tests._servers", "tests._postgres", "tests._mariadb",
                  "pytester"]


@pytest.fixture
def vector_clock() -> FrozenClock:
    """A clock standing at the frozen vectors' timestamp."""
    return FrozenClock(VECTOR_TS)


@pytest.fixture
def live_server() -> Iterator[Callable[..., str]]:
    """Start WSGI apps on real loopback sockets (Werkzeug's threaded server).

    Returns a function ``start(app) -> base_url``; every server is shut down
    at the end of the test. ``start(app, tls=(certfile, keyfile))`` serves
    HTTPS (see the ``self_signed_certificate`` fixture).
    """
    servers = []

    def start(app: object, tls: tuple[str, str] | None = None) -> str:
        server = make_server("127.0.0.1", 0, app, threaded=True, ssl_context=tls)  # type: ignore[arg-type]
        # a short poll interval lets shutdown() return in milliseconds, not 0.5 s
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01},
                                  daemon=True)
        thread.start()
        servers.append((server, thread))
        return f"{'https' if tls else 'http'}://127.0.0.1:{server.server_port}"

    yield start
    for server, thread in servers:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture(scope="session")
def self_signed_certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """``(certfile, keyfile)``: a self-signed certificate for 127.0.0.1 and localhost (openssl)."""
    from .helpers import make_self_signed_certificate

    return make_self_signed_certificate(tmp_path_factory.mktemp("tls"))


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
def gunicorn() -> Iterator[Callable[..., str]]:
    """Start real gunicorn servers in subprocesses: ``start(app_spec, workers=1, env={})``.

    ``app_spec`` is a gunicorn app spec such as ``"tests.apps.idem_app:create_app()"``.
    Returns the base URL once a worker answers HTTP; every server is
    stopped at the end of the test (see ``tests._servers.gunicorn_serving``).
    """
    with ExitStack() as stack:
        yield lambda app_spec, workers=1, env=None: stack.enter_context(
            gunicorn_serving(app_spec, env, workers))
