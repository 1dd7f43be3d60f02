"""The shop's own SQLite database: schema, one connection per request, transactions.

These are the legacy business tables. bailing_flask never reads or writes
them. It keeps one table of its own here, ``bailing_idempotency``: the
refund request tool runs in the transaction mode, so the record of each
call commits in the same transaction as the refund request it files
(:func:`init_app` creates the table, as a migration would). The other side
effects keep their records in the idempotency store (``BAILING_STORE``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager

from flask import Flask, current_app, g

from bailing_flask.transactional import create_table_sql

__all__ = ["SCHEMA", "connect", "get_db", "init_app", "transaction"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS tenants (
    id   TEXT PRIMARY KEY,
    name TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS users (
    tenant_id     TEXT NOT NULL REFERENCES tenants(id),
    user_id       TEXT NOT NULL,
    display_name  TEXT NOT NULL,
    password_hash TEXT NOT NULL,
    PRIMARY KEY (tenant_id, user_id)
);
CREATE TABLE IF NOT EXISTS permissions (
    tenant_id  TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    permission TEXT NOT NULL,
    PRIMARY KEY (tenant_id, user_id, permission),
    FOREIGN KEY (tenant_id, user_id) REFERENCES users(tenant_id, user_id)
);
CREATE TABLE IF NOT EXISTS customers (
    id        INTEGER PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    name      TEXT NOT NULL,
    phone     TEXT NOT NULL,
    email     TEXT NOT NULL
);
-- orders.internal_note: what the support staff note about an order (back office only, never an agent)
CREATE TABLE IF NOT EXISTS orders (
    id           INTEGER PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenants(id),
    customer_id  INTEGER NOT NULL REFERENCES customers(id),
    order_no     TEXT NOT NULL UNIQUE,
    item         TEXT NOT NULL,
    amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
    status       TEXT NOT NULL
                 CHECK (status IN ('pending', 'paid', 'shipped', 'cancelled', 'refunded')),
    created_at   TEXT NOT NULL,
    internal_note TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS orders_by_tenant ON orders (tenant_id, created_at);
CREATE TABLE IF NOT EXISTS refund_requests (
    id           INTEGER PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenants(id),
    order_id     INTEGER NOT NULL REFERENCES orders(id),
    amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
    reason       TEXT NOT NULL,
    status       TEXT NOT NULL
                 CHECK (status IN ('submitted', 'pending_approval', 'executed', 'rejected')),
    requested_by TEXT NOT NULL,
    job_id       TEXT,
    created_at   TEXT NOT NULL,
    executed_by  TEXT,
    executed_at  TEXT
);
CREATE INDEX IF NOT EXISTS refund_requests_by_order ON refund_requests (order_id);
"""


def connect(path: str) -> sqlite3.Connection:
    """Open the database in autocommit mode; writes use :func:`transaction` explicitly.

    Autocommit plus explicit ``BEGIN IMMEDIATE`` makes the check-then-write
    sequences (refundable amount, then insert) atomic across threads and
    processes, which Python's implicit transactions would not guarantee.
    """
    conn = sqlite3.connect(path, timeout=10, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def get_db() -> sqlite3.Connection:
    """The connection of the current request (or app context), opened on first use."""
    if "db" not in g:
        g.db = connect(current_app.config["DATABASE"])
    return g.db  # type: ignore[no-any-return]


def close_db(exc: BaseException | None = None) -> None:
    conn = g.pop("db", None)
    if conn is not None:
        conn.close()


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """A write transaction that takes the write lock up front (no lost updates).

    Inside a transaction that is already open -- bailing_flask's, around a tool
    in the transaction mode, which began with ``BEGIN IMMEDIATE`` itself -- it is
    a savepoint instead: its work commits, or rolls back, with the call.
    """
    if conn.in_transaction:
        conn.execute("SAVEPOINT service")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK TO service")
            conn.execute("RELEASE service")
            raise
        conn.execute("RELEASE service")
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _add_missing_columns(conn: sqlite3.Connection) -> None:
    """Bring a database created by an older version of the demo up to the schema."""
    columns = {row["name"] for row in conn.execute("PRAGMA table_info(orders)")}
    if "internal_note" not in columns:
        conn.execute("ALTER TABLE orders ADD COLUMN internal_note TEXT NOT NULL DEFAULT ''")


def init_app(app: Flask) -> None:
    """Create the schema (and bailing_flask's table), seed the demo data on first run, close
    connections per request."""
    from .seed import seed_if_empty

    with closing(connect(app.config["DATABASE"])) as conn:
        conn.executescript(SCHEMA)
        _add_missing_columns(conn)
        # the records of tools in the transaction mode (the migration bailing_flask documents)
        conn.executescript(create_table_sql("sqlite"))
        seed_if_empty(conn)
    app.teardown_appcontext(close_db)
