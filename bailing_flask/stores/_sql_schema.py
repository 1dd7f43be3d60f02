"""The tables of :class:`~bailing_flask.stores.SQLStore`: their DDL per database, and the checks.

The tables are created by ``flask bailing store init`` (:func:`create_schema`),
or by hand from the DDL it prints with ``--sql`` (:func:`schema_sql`), never
when the package is imported nor by a request. The store reads the schema's
version once per process before its first statement (:func:`check_schema`):
a missing or older table is a :class:`SchemaError` naming the command.

Names are distinct from the transaction mode's ``bailing_idempotency`` table
(which lives in the same database in a different shape), and from the SQLite
store's, so both modes can share one database.

MySQL/MariaDB columns that hold arbitrary text (keys, tokens, notes, job ids,
approvers) are binary (``VARBINARY``/``BLOB``, UTF-8 written by the store):
equality is byte for byte whatever the server's collation (a case- or
accent-insensitive collation would make two keys one, a ``PAD SPACE`` one
would ignore trailing spaces), and no connection character set can change
them. JSON columns hold ASCII only.
"""

from __future__ import annotations

from typing import Any, Literal

from bailing_flask.stores._entries import StoreUnavailable

__all__ = ["SCHEMA_VERSION", "TABLES", "Dialect", "SchemaError", "schema_sql", "check_schema",
           "create_schema", "INIT_COMMAND"]

Dialect = Literal["postgresql", "mysql"]

#: Bumped when the tables change; ``flask bailing store init`` upgrades older ones.
SCHEMA_VERSION = 1

ENTRIES = "bailing_store_entries"
SIGNATURES = "bailing_store_signatures"
APPROVALS = "bailing_store_approvals"
VERSION_TABLE = "bailing_store_schema"
TABLES = (ENTRIES, SIGNATURES, APPROVALS, VERSION_TABLE)

INIT_COMMAND = "flask bailing store init"

#: the longest key or signature the tables take, in bytes of UTF-8
MAX_KEY_BYTES = 512

_POSTGRESQL = f"""
CREATE TABLE IF NOT EXISTS {ENTRIES} (
    entry_key        TEXT PRIMARY KEY,
    state            TEXT NOT NULL,
    token            TEXT NOT NULL,
    created_at       DOUBLE PRECISION NOT NULL,
    lease_expires_at DOUBLE PRECISION NOT NULL,
    expires_at       DOUBLE PRECISION NOT NULL,
    meta             TEXT NOT NULL,
    status           INTEGER,
    headers          TEXT,
    body             BYTEA,
    note             TEXT
);
CREATE INDEX IF NOT EXISTS {ENTRIES}_expires_at ON {ENTRIES} (expires_at);
CREATE INDEX IF NOT EXISTS {ENTRIES}_created_at ON {ENTRIES} (created_at, entry_key);
CREATE TABLE IF NOT EXISTS {SIGNATURES} (
    signature  TEXT PRIMARY KEY,
    nonce      TEXT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS {SIGNATURES}_expires_at ON {SIGNATURES} (expires_at);
CREATE TABLE IF NOT EXISTS {APPROVALS} (
    approval_id BIGINT PRIMARY KEY,
    job_id      TEXT NOT NULL,
    tool        TEXT NOT NULL,
    status      TEXT NOT NULL,
    received_at DOUBLE PRECISION NOT NULL,
    expires_at  DOUBLE PRECISION NOT NULL,
    request     TEXT NOT NULL,
    decision_id TEXT,
    approver    TEXT,
    decided_at  DOUBLE PRECISION,
    used_by     TEXT,
    used_at     DOUBLE PRECISION
);
CREATE INDEX IF NOT EXISTS {APPROVALS}_job ON {APPROVALS} (job_id, tool);
CREATE INDEX IF NOT EXISTS {APPROVALS}_received_at ON {APPROVALS} (received_at, approval_id);
CREATE INDEX IF NOT EXISTS {APPROVALS}_expires_at ON {APPROVALS} (expires_at);
CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);
"""

_KEY = f"VARBINARY({MAX_KEY_BYTES})"
_MYSQL = f"""
CREATE TABLE IF NOT EXISTS {ENTRIES} (
    entry_key        {_KEY} NOT NULL PRIMARY KEY,
    state            VARCHAR(16) CHARACTER SET ascii NOT NULL,
    token            {_KEY} NOT NULL,
    created_at       DOUBLE NOT NULL,
    lease_expires_at DOUBLE NOT NULL,
    expires_at       DOUBLE NOT NULL,
    meta             MEDIUMTEXT CHARACTER SET ascii NOT NULL,
    status           INTEGER,
    headers          MEDIUMTEXT CHARACTER SET ascii,
    body             LONGBLOB,
    note             BLOB,
    claims           BIGINT NOT NULL DEFAULT 0,
    INDEX {ENTRIES}_expires_at (expires_at),
    INDEX {ENTRIES}_created_at (created_at, entry_key)
) ENGINE=InnoDB;
CREATE TABLE IF NOT EXISTS {SIGNATURES} (
    signature  {_KEY} NOT NULL PRIMARY KEY,
    nonce      VARBINARY(64) NOT NULL,
    expires_at DOUBLE NOT NULL,
    claims     BIGINT NOT NULL DEFAULT 0,
    INDEX {SIGNATURES}_expires_at (expires_at)
) ENGINE=InnoDB;
CREATE TABLE IF NOT EXISTS {APPROVALS} (
    approval_id BIGINT NOT NULL PRIMARY KEY,
    job_id      {_KEY} NOT NULL,
    tool        {_KEY} NOT NULL,
    status      VARCHAR(16) CHARACTER SET ascii NOT NULL,
    received_at DOUBLE NOT NULL,
    expires_at  DOUBLE NOT NULL,
    request     MEDIUMTEXT CHARACTER SET ascii NOT NULL,
    decision_id BLOB,
    approver    BLOB,
    decided_at  DOUBLE,
    used_by     {_KEY},
    used_at     DOUBLE,
    INDEX {APPROVALS}_job (job_id, tool),
    INDEX {APPROVALS}_received_at (received_at, approval_id),
    INDEX {APPROVALS}_expires_at (expires_at)
) ENGINE=InnoDB;
CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (
    id      INTEGER NOT NULL PRIMARY KEY,
    version INTEGER NOT NULL
) ENGINE=InnoDB;
"""

#: the row that records the version (written last: a half-created schema is never "ready")
_SET_VERSION = {
    "postgresql": (f"INSERT INTO {VERSION_TABLE} (id, version) VALUES (1, {SCHEMA_VERSION}) "
                   "ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version"),
    "mysql": (f"INSERT INTO {VERSION_TABLE} (id, version) VALUES (1, {SCHEMA_VERSION}) "
              "ON DUPLICATE KEY UPDATE version = VALUES(version)"),
}

#: workers or hosts running ``store init`` together: one at a time (the lock ends with the
#: transaction on PostgreSQL, and is released explicitly on MySQL)
_LOCK = {
    "postgresql": ("SELECT pg_advisory_xact_lock(8152017)", None),
    "mysql": ("SELECT GET_LOCK('bailing_store_init', 60)", "SELECT RELEASE_LOCK('bailing_store_init')"),
}


class SchemaError(StoreUnavailable):
    """The store's tables are missing, older than this version, or newer.

    A :class:`StoreUnavailable`, so a call meanwhile is refused with 503 like
    any other store failure; the message names the command that fixes it.
    """


def schema_sql(dialect: Dialect) -> str:
    """The DDL of the store's tables for ``dialect``, ready to apply by hand or in a migration.

    Every statement is idempotent (``IF NOT EXISTS``, an upsert of the version row).
    """
    if dialect not in _SET_VERSION:
        raise ValueError(f"dialect must be 'postgresql' or 'mysql', not {dialect!r}")
    body = _POSTGRESQL if dialect == "postgresql" else _MYSQL
    return body.lstrip() + _SET_VERSION[dialect] + ";\n"


def statements(dialect: Dialect) -> list[str]:
    """:func:`schema_sql` as single statements, the version row last."""
    return [part.strip() for part in schema_sql(dialect).split(";") if part.strip()]


def check_schema(cursor: Any, dialect: Dialect, where: str) -> None:
    """Raise :class:`SchemaError` unless the store's tables exist at :data:`SCHEMA_VERSION`.

    ``cursor`` is a DB-API cursor of a connection not inside a transaction of
    its own (autocommit); a failure of the query other than a missing table
    is the caller's to report.
    """
    try:
        cursor.execute(f"SELECT version FROM {VERSION_TABLE} WHERE id = 1")
        row = cursor.fetchone()
    except Exception as exc:
        if not _missing_table(exc):
            raise
        raise SchemaError(
            f"{where}: the store's tables do not exist in this database. Create them with "
            f"`{INIT_COMMAND}` (or apply the DDL that `{INIT_COMMAND} --sql` prints)."
        ) from None
    version = None if row is None else int(row[0])
    if version is None or version < SCHEMA_VERSION:
        raise SchemaError(
            f"{where}: the store's tables are at schema version {version or 0}, this "
            f"bailing_flask needs {SCHEMA_VERSION}. Upgrade them with `{INIT_COMMAND}` "
            f"(or apply the DDL that `{INIT_COMMAND} --sql` prints)."
        )
    if version > SCHEMA_VERSION:
        raise SchemaError(
            f"{where}: the store's tables are at schema version {version}, written by a newer "
            f"bailing_flask (this one knows {SCHEMA_VERSION}); upgrade bailing_flask on this host."
        )


def _missing_table(exc: BaseException) -> bool:
    """Whether a driver's error says the table does not exist (PostgreSQL 42P01, MySQL 1146)."""
    if getattr(exc, "sqlstate", None) == "42P01":
        return True
    args: tuple[Any, ...] = tuple(getattr(exc, "args", ()))
    return bool(args) and args[0] == 1146


def create_schema(dbapi_connection: Any, dialect: Dialect) -> None:
    """Create (or upgrade) the tables on a DB-API connection, then record the version.

    Safe to run on every deploy and from several hosts at once (a lock in the
    database makes them take turns). On PostgreSQL all of it is one
    transaction; MySQL commits each ``CREATE`` by itself, so the version row
    is written last.
    """
    lock, unlock = _LOCK[dialect]
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(lock)
        cursor.fetchall()
        try:
            for statement in statements(dialect):
                cursor.execute(statement)
            dbapi_connection.commit()
        finally:
            if unlock is not None:
                cursor.execute(unlock)
                cursor.fetchall()
    except BaseException:
        try:
            dbapi_connection.rollback()
        except Exception:  # the original error is the one worth reporting
            pass
        raise
    finally:
        cursor.close()


def init_command(store: Any, show_sql: bool, dialect: str | None) -> str:
    """What ``flask bailing store init [--sql] [--dialect ...]`` prints (and does).

    ``store`` is the app's store (``None`` with ``--sql --dialect``): a
    :class:`~bailing_flask.stores.SQLStore` has its tables created, any other
    store needs nothing.
    """
    if show_sql and dialect is not None:
        return schema_sql(dialect)  # type: ignore[arg-type]
    if not hasattr(store, "create_schema"):
        if show_sql:
            raise ValueError(
                f"BAILING_STORE is a {type(store).__name__}, not a SQL store: pass --dialect "
                "postgresql or --dialect mysql to print the SQL store's DDL.")
        return (f"BAILING_STORE is a {type(store).__name__}: it needs no tables created "
                "(only the SQL store does); nothing to do.\n")
    if show_sql:
        return str(store.schema_sql())
    store.create_schema()
    store.ping()
    return (f"The idempotency store's tables are ready in {store.display} (schema version "
            f"{SCHEMA_VERSION}): {', '.join(TABLES)}.\n")
