"""What the tests share besides fixtures: the hub's test secrets, a hand-moved clock, raw requests.

Fixtures live in ``conftest.py`` (and the ``tests._redis``, ``tests._servers``,
``tests._postgres``, ``tests._mariadb`` plugins); the apps the tests serve live in ``tests/apps/``.
"""

from __future__ import annotations

import http.client
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
