"""What the tests share besides fixtures: the hub's test secrets, a hand-moved clock, raw requests.

Fixtures live in ``conftest.py`` (and the ``tests._redis``, ``tests._servers``,
``tests._postgres``, ``tests._mariadb`` plugins); the apps the tests serve live in ``tests/apps/``.
"""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import subprocess
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bailing_flask.testing import HubRequest

from typing import Any
from bailing_flask._state import state_of

#: The secret of the hub's frozen test vectors (the hub's published test vectors).
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


def sqlite_in_g(app: Any, path: str | Path) -> Any:
    """The usual ``get_db()`` of a DB-API app: one ``sqlite3`` connection per app context, kept
    in ``flask.g`` and closed when the context ends. Installs the teardown; returns ``get_db``."""
    import sqlite3

    from flask import g

    def get_db() -> sqlite3.Connection:
        if "db" not in g:
            g.db = sqlite3.connect(path)
        return g.db  # type: ignore[no-any-return]

    @app.teardown_appcontext
    def close_db(exc: BaseException | None = None) -> None:
        conn = g.pop("db", None)
        if conn is not None:
            conn.close()

    return get_db


@contextmanager
def one_process_at_a_time(path: str | Path) -> Iterator[None]:
    """Hold an exclusive lock on ``<path>.migrate-lock`` for the block, across processes.

    gunicorn workers that start together each create the app's tables; on
    one SQLite file, one at a time (PostgreSQL takes an advisory lock instead).
    """
    import fcntl

    with open(f"{path}.migrate-lock", "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def sqlite_wal(path: str | Path, timeout: float = 30.0) -> Any:
    """A ``sqlite3`` connection in autocommit mode on ``path``, switched to WAL once.

    SQLite answers a second connection's ``PRAGMA journal_mode=WAL`` with
    "database is locked" at once, whatever the busy timeout; a worker that
    gets it while importing the app fails to boot, and gunicorn then stops the
    whole server, resetting the connections it holds. So the first one to see
    the file in another mode switches it under :func:`one_process_at_a_time`.
    """
    import sqlite3

    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None)
    if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        with one_process_at_a_time(path):
            conn.execute("PRAGMA journal_mode=WAL")
    return conn


def reconfigure(app: Any, **changes: Any) -> None:
    """Give ``app`` a copy of its configuration with ``changes`` (``Config`` attribute names).

    ``init_app`` reads the configuration once, so a test that changes a
    setting between two calls swaps the object every reader reads (as the
    ``bailing_fake_hub`` fixture does for the hub's URL); what ``init_app``
    built from it, the middleware and the endpoints, stays as it was.
    """
    import dataclasses

    from bailing_flask import Bailing

    state = state_of(app)
    state.config = dataclasses.replace(state.config, **changes)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def resigned(secret: str, request: HubRequest, body: bytes) -> HubRequest:
    """``request`` with another body, signed again by the hub's secret (a new call identity).

    Everything else -- method, path, subject, job, client, scope and the
    unsigned idempotency key -- stays as the hub sent it.
    """
    from bailing_flask.testing import signed_headers

    headers = dict(request.headers)
    headers.update(signed_headers(
        secret, request.method, request.path_with_query, body,
        subject=headers.get("X-Bailing-On-Behalf-Of"), job_id=headers.get("X-Bailing-Job-Id"),
        client=headers.get("X-Bailing-Client"), tool_scope=headers.get("X-Bailing-Tool-Scope"),
        idempotency_key=headers.get("X-Bailing-Idempotency-Key"),
    ))
    return HubRequest(request.method, request.path_with_query, headers, body)


def flask_command(app_spec: str, *args: str, env: dict[str, str] | None = None) -> Any:
    """Run the real ``flask`` CLI on ``app_spec`` in a subprocess, from the repository's root.

    Returns the ``CompletedProcess`` (``stdout`` and ``stderr`` as text).
    """
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    environ = {**os.environ, "PYTHONPATH": str(root), **(env or {})}
    environ.pop("FLASK_APP", None)
    return subprocess.run([sys.executable, "-m", "flask", "--app", app_spec, *args], cwd=root,
                          env=environ, capture_output=True, text=True, timeout=600, check=False)

def make_self_signed_certificate(directory: Path) -> tuple[str, str]:
    """A self-signed certificate (its own CA) for ``127.0.0.1`` and ``localhost``, made with openssl."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=120,
    )
    return str(cert), str(key)


#: the script that sends requests with node's fetch, as the hub does
HUB_FETCH_SCRIPT = Path(__file__).resolve().parent / "hub_fetch.mjs"


@dataclass
class NodeCall:
    """One request for :func:`hub_fetch`: its headers, and a body of its own if it has one."""

    headers: dict[str, str]
    body: str | None = None


def hub_fetch(url: str, method: str, body: str, calls: list[NodeCall],
              timeout: float = 60.0) -> list[dict[str, Any]]:
    """Send ``calls`` with node's ``fetch`` from one process, one after another, like the hub.

    The hub's HTTP client is node's ``fetch`` (one keep-alive pool, string
    bodies); how it reacts to a server that closes or resets a connection
    is not what Python's clients do. ``body`` is sent with every call that
    has none of its own. Each result is ``{"status", "content_type",
    "text"}``, or ``{"error", "cause"}`` when ``fetch`` failed (``fetch
    failed`` caused by ``write EPIPE``, for one).
    """
    node = shutil.which("node")
    if node is None:
        pytest.fail("node was not found on PATH; these tests send requests with node's fetch, "
                    "the hub's HTTP client: install Node.js 18 or later (apt-get install -y "
                    "nodejs)", pytrace=False)
    job = {"url": url, "method": method, "body": body, "timeout_ms": int(timeout * 1000),
           "calls": [{"headers": call.headers, "body": call.body} for call in calls]}
    done = subprocess.run([node, str(HUB_FETCH_SCRIPT)], input=json.dumps(job).encode(),
                          capture_output=True, timeout=timeout * (len(calls) + 1))
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    results: list[dict[str, Any]] = json.loads(done.stdout)
    return results

#: the SQL store's backends in the shared store tests: ``mysql`` is MariaDB without
#: ``INSERT ... RETURNING`` (how the store runs on MySQL, which has none)
SQL_BACKENDS = ("postgresql", "mariadb", "mysql")


def sql_url(request: Any, backend: str, server: Any = None) -> str:
    """The URL of a new database for ``backend``: a fresh one per test (``postgres_database`` or
    ``mariadb_database``), or with ``server``, one that lives as long as that server."""
    if server is None:
        fixture = "postgres_database" if backend == "postgresql" else "mariadb_database"
        return str(request.getfixturevalue(fixture).url)
    import uuid

    name = "t_shared_" + uuid.uuid4().hex[:8]
    if backend == "postgresql":
        import psycopg

        with psycopg.connect(server.conninfo(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return str(server.url(name))
    admin = server.admin()
    try:
        with admin.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
    finally:
        admin.close()
    return str(server.url(name))


def sql_store(request: Any, backend: str, clock: Any = None, *, url: str | None = None) -> Any:
    """A :class:`SQLStore` on an empty database of ``backend``, its tables created.

    Without ``url``: one database per server and test session, emptied for each test
    (creating a database and its tables for every test would be most of the run).
    """
    from bailing_flask.stores import SQLStore

    if url is None:
        server = request.getfixturevalue(
            "postgres_server" if backend == "postgresql" else "mariadb_server")
        url = getattr(server, "shared_store_url", None)
        if url is None:
            url = server.shared_store_url = sql_url(request.session, backend, server)
        fresh = False
    else:
        fresh = True
    store = SQLStore(url, **({} if clock is None else {"clock": clock}))
    if backend == "mysql":
        store._returning = lambda: False  # type: ignore[method-assign]
    store.create_schema()
    if not fresh:
        store._db.run(_empty_tables)
    return store


def _empty_tables(cursor: Any) -> None:
    from bailing_flask.stores._sql_schema import APPROVALS, ENTRIES, SIGNATURES

    for table in (ENTRIES, SIGNATURES, APPROVALS):
        cursor.execute(f"DELETE FROM {table}")
