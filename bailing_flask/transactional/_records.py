"""The records table of the transaction mode: its DDL, its rows and the statements on it.

Shared by both adapters: what a row holds (:class:`_Record`, :func:`_entry`),
the two statements of the request path in any DB-API paramstyle, and how a
driver's exception is read (:func:`_classify`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bailing_flask.errors import ConfigurationError
from bailing_flask.stores import Entry, EntryMeta, StoredResponse, StoreUnavailable
# the one import of a store internal in this package: the JSON of the headers, as the stores
# keep it (ListState and _encode_headers are imported from here by the other modules)
from bailing_flask.stores._entries import ListState as ListState
from bailing_flask.stores._entries import _decode_headers
from bailing_flask.stores._entries import _encode_headers as _encode_headers

#: The default name of the table that holds the records.
TABLE_NAME = "bailing_idempotency"
_RUNNING = "running"
_COMPLETED = "completed"


def create_table_sql(dialect: str = "postgresql", table_name: str = TABLE_NAME) -> str:
    """The DDL of the records table, for a migration (``CREATE TABLE IF NOT EXISTS``).

    :param dialect: ``"postgresql"`` or ``"sqlite"``.

    ``call_key`` is the primary key: its unique index is what makes a
    concurrent duplicate wait for, or collide with, the first call's row.
    """
    if dialect not in ("sqlite", "postgresql"):
        raise ConfigurationError(f"create_table_sql: dialect must be 'sqlite' or 'postgresql', not {dialect!r}")
    _check_identifier(table_name)
    double = "REAL" if dialect == "sqlite" else "DOUBLE PRECISION"
    blob = "BLOB" if dialect == "sqlite" else "BYTEA"
    return (
        f"CREATE TABLE IF NOT EXISTS {table_name} (\n"
        "    call_key     VARCHAR(100) NOT NULL PRIMARY KEY,\n"
        "    state        VARCHAR(16)  NOT NULL,\n"
        "    token        VARCHAR(32)  NOT NULL,\n"
        "    tool         TEXT         NOT NULL,\n"
        "    job_id       TEXT         NOT NULL,\n"
        "    subject      TEXT,\n"
        "    unsigned_key TEXT,\n"
        f"    created_at   {double} NOT NULL,\n"
        f"    expires_at   {double} NOT NULL,\n"
        "    status       INTEGER,\n"
        "    headers      TEXT,\n"
        f"    body         {blob},\n"
        "    note         TEXT\n"
        ");\n"
        f"CREATE INDEX IF NOT EXISTS {table_name}_expires_at ON {table_name} (expires_at);\n"
    )


#: Taken before creating the table on PostgreSQL: workers starting together would otherwise race
#: in ``CREATE TABLE IF NOT EXISTS`` (one of them failing on the catalog's unique index).
_PG_DDL_LOCK = "SELECT pg_advisory_xact_lock(8152016)"


def _check_identifier(name: str) -> str:
    if not isinstance(name, str) or not name.isidentifier() or not name.isascii() or len(name) > 48:
        raise ConfigurationError(f"table_name must be a plain SQL identifier, not {name!r}")
    return name



# -- what the run needs from a database ------------------------------------------------------


class _Duplicate(Exception):
    """A committed row with this key exists (the primary key refused ours)."""


class _Busy(Exception):
    """The database gave up waiting for a lock (another transaction holds it).

    ``whole_database``: SQLite's one write lock, which any other process may hold (a backup, a
    migration): that is a busy database, not a duplicate of this call."""

    def __init__(self, message: str = "", *, whole_database: bool = False) -> None:
        super().__init__(message)
        self.whole_database = whole_database


class _EndedByView(Exception):
    """The view ended the call's transaction itself, or committed outside it: the answer
    cannot be recorded with the view's writes (the call is left uncertain)."""


class _ApprovalTaken(Exception):
    """Another call's committed transaction spent the approval this call wanted to spend."""


@dataclass(frozen=True)
class _Record:
    key: str
    token: str
    meta: EntryMeta
    created_at: float
    expires_at: float
    #: ``business_approval`` tools: the approval this call spends, ``(approval_id, when its row
    #: expires)``; a row of its own, inserted in the call's transaction (see _approval_values)
    approval: tuple[int, float] | None = None


def _classify(exc: BaseException) -> str | None:
    """``"duplicate"``, ``"busy"``, ``"locked"`` (SQLite's database lock), ``"error"`` for a
    database error, ``None`` for anything else."""
    orig = getattr(exc, "orig", None)  # SQLAlchemy's DBAPIError wraps the driver's exception
    module = type(exc).__module__
    is_sqlalchemy = module.startswith("sqlalchemy")
    target = orig if isinstance(orig, BaseException) else exc
    tmodule = type(target).__module__
    name = type(target).__name__
    sqlstate = getattr(target, "sqlstate", None) or getattr(target, "pgcode", None)
    if sqlstate == "23505":
        return "duplicate"
    if sqlstate in ("55P03", "57014", "40P01", "40001"):
        return "busy"  # lock_not_available, query_canceled (timeouts), deadlock, serialization
    text = str(target).lower()
    if tmodule.startswith("sqlite3"):
        if name == "IntegrityError" and ("unique" in text or "primary key" in text):
            return "duplicate"
        if name == "OperationalError" and ("locked" in text or "busy" in text):
            return "locked"
        return "error"
    if sqlstate is not None or tmodule.startswith(("psycopg", "sqlalchemy")) or is_sqlalchemy:
        if name == "IntegrityError" and sqlstate is None:
            return "duplicate"  # another dialect's unique violation (MySQL 1062, ...)
        return "error"
    return None


def _unavailable(adapter: object, exc: BaseException) -> StoreUnavailable:
    target = getattr(exc, "orig", None) or exc
    return StoreUnavailable(f"{adapter!r}: {type(target).__name__}: {str(target)[:200]}")


#: The two statements on the request path, with ``?`` placeholders (see :func:`_placeholders`).
_INSERT_SQL = (
    "INSERT INTO {t} (call_key, state, token, tool, job_id, subject, unsigned_key, created_at, "
    "expires_at, status, headers, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_COMPLETE_SQL = "UPDATE {t} SET state = ?, status = ?, headers = ?, body = ? WHERE call_key = ? AND token = ?"

#: An approval spent in the transaction mode is a row of the same table: ``call_key`` is
#: ``approval:<id>``, ``state`` is ``approval``, ``note`` the key of the call that spent it. Its
#: primary key makes a second transaction spending it wait for the first (PostgreSQL) or for
#: the write lock (SQLite), then fail as a duplicate; a rollback takes it back with the call.
_APPROVAL = "approval"
_APPROVAL_PREFIX = "approval:"
_INSERT_APPROVAL_SQL = (
    "INSERT INTO {t} (call_key, state, token, tool, job_id, subject, unsigned_key, created_at, "
    "expires_at, status, headers, body, note) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _placeholders(statement: str, table: str, paramstyle: str) -> str:
    """``statement`` for ``table`` in a DB-API ``paramstyle`` (positional parameters)."""
    text = statement.replace("{t}", table)
    if paramstyle == "qmark":
        return text
    if paramstyle in ("format", "pyformat"):
        return text.replace("?", "%s")
    pieces = text.split("?")
    if paramstyle == "numeric":
        return "".join(f"{piece}:{i}" if i < len(pieces) else piece for i, piece in enumerate(pieces, 1))
    if paramstyle == "named":
        return "".join(f"{piece}:p{i}" if i < len(pieces) else piece for i, piece in enumerate(pieces, 1))
    raise ConfigurationError(f"unsupported DB-API paramstyle {paramstyle!r}")


def _parameters(values: tuple[Any, ...], paramstyle: str) -> Any:
    if paramstyle == "named":
        return {f"p{i}": value for i, value in enumerate(values, 1)}
    return values


def _insert_values(record: _Record, state: str = _RUNNING, status: int | None = None,
                   headers: str | None = None, body: bytes | None = None) -> tuple[Any, ...]:
    return (record.key, state, record.token, record.meta.tool, record.meta.job_id,
            record.meta.subject, record.meta.unsigned_key, record.created_at, record.expires_at,
            status, headers, body)


def _approval_values(record: _Record) -> tuple[Any, ...]:
    """The row of the approval ``record`` spends, for :data:`_INSERT_APPROVAL_SQL`."""
    assert record.approval is not None
    approval_id, expires_at = record.approval
    return (f"{_APPROVAL_PREFIX}{approval_id}", _APPROVAL, record.token, record.meta.tool,
            record.meta.job_id, record.meta.subject, None, record.created_at,
            max(expires_at, record.expires_at), None, None, None, record.key)


def _entry(row: Any) -> Entry:
    """A database row (a sequence in column order) as the store API's :class:`Entry`."""
    (key, state, token, tool, job_id, subject, unsigned_key, created_at, expires_at,
     status, headers, body, note) = row
    response = None
    if state == _COMPLETED and status is not None:
        response = StoredResponse(status=int(status), headers=_decode_headers(headers or "[]"),
                                  body=bytes(body or b""))
    return Entry(
        key=str(key),
        state="completed" if state == _COMPLETED else "in_progress",
        token=str(token),
        created_at=float(created_at),
        # a running row others can see was committed without its answer: uncertain at once
        lease_expires_at=float(created_at),
        expires_at=float(expires_at),
        meta=EntryMeta(tool=str(tool), job_id=str(job_id), subject=subject, unsigned_key=unsigned_key),
        response=response,
        note=note,
    )


def _call_entry(row: Any) -> Entry | None:
    """:func:`_entry`, or ``None`` for the row of a spent approval: not a call to show or settle."""
    entry = _entry(row)
    return None if entry.key.startswith(_APPROVAL_PREFIX) else entry


def _settled_rows(seen: Entry | None) -> tuple[tuple[str, ...], str | None]:
    """The states and the token of the rows an operator's decision may change: a call's
    (never a spent approval's), and with ``seen`` only while it still has the state and token
    it was read with (``None``: any token)."""
    if seen is None:
        return (_RUNNING, _COMPLETED), None
    return (_COMPLETED if seen.state == "completed" else _RUNNING,), seen.token


_COLUMNS = ("call_key", "state", "token", "tool", "job_id", "subject", "unsigned_key", "created_at",
            "expires_at", "status", "headers", "body", "note")


def _matches(entry: Entry, state: ListState | None) -> bool:
    if entry.key.startswith(_APPROVAL_PREFIX):
        return False  # the row of a spent approval, not a call
    if state is None:
        return True
    if state == "completed":
        return entry.state == "completed"
    if state == "uncertain":
        return entry.state == "in_progress"
    return False  # in_progress: an uncommitted row is invisible
