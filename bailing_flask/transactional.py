"""Exactly once: the idempotency record commits in the app's own database transaction.

The store mode (:mod:`bailing_flask._pipeline.idempotency`) reserves a call in a store
of its own, runs the view, then records the answer. The view's commit and
that record are two writes, so a crash between them leaves a call
*uncertain*. In the transaction mode there is one write: the reservation
row is inserted at the start of the view's own database transaction, the
view's changes follow in the same transaction, the answer is written into
that row, and one commit makes all of it durable -- or a rollback (an
exception, a ``5xx``, a killed worker, a lost connection) leaves nothing.

* A repeat of a committed call finds the row and gets its answer; nothing
  runs.
* A repeat of a call whose transaction rolled back finds no row and runs:
  nothing had happened.
* A duplicate arriving while the first still runs collides with the first
  one's uncommitted row on the table's primary key: PostgreSQL makes its
  ``INSERT`` wait for the first transaction (then it sees the committed row
  and gets the answer), SQLite makes it wait for the database's write lock
  (``busy_timeout``); a wait that times out answers
  ``409 idempotency_in_progress``. Never two effects.
* There is no lease and no "uncertain" state: an uncommitted row is
  invisible to everyone else and vanishes with its transaction.

The one thing that can break this is a view that ends the package's
transaction itself (``COMMIT`` on a DB-API connection). The SQLAlchemy
adapter turns the view's ``session.commit()`` into a flush for the
duration of the call, so SQLAlchemy views keep their code; on a DB-API
connection the view must leave ``BEGIN``/``COMMIT`` to the package and use
savepoints for nested blocks. If a view commits anyway, the package logs an
error; a committed row that still has no answer (the worker died after the
view's own commit) is reported as uncertain, the only way one can arise.

Adapters: :class:`SQLAlchemyTransaction` (Flask-SQLAlchemy, or any
SQLAlchemy ``Session``) and :class:`DBAPITransaction` (a plain ``sqlite3``
or ``psycopg`` 3 connection). Nothing here imports SQLAlchemy or a driver
until an adapter uses it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from flask import Response, current_app
from werkzeug.exceptions import HTTPException

from bailing_flask.wire.headers import is_hop_by_hop
from bailing_flask.errors import ConfigurationError
from bailing_flask.lint.codes import Finding, finding
from bailing_flask.responses import ErrorInfo
from bailing_flask.stores.base import (
    Entry,
    EntryMeta,
    ListState,
    StoredResponse,
    StoreUnavailable,
    _decode_headers,
    _encode_headers,
)

if TYPE_CHECKING:  # pragma: no cover
    from sqlalchemy import MetaData, Table
    from sqlalchemy.orm import Session

    from bailing_flask.context import ToolCall
    from bailing_flask._pipeline.idempotency import Idempotency
    from bailing_flask._pipeline.registry import Tool

__all__ = [
    "TABLE_NAME",
    "TransactionAdapter",
    "SQLAlchemyTransaction",
    "DBAPITransaction",
    "create_table_sql",
]

logger = logging.getLogger("bailing_flask")

#: The default name of the table that holds the records.
TABLE_NAME = "bailing_idempotency"
_RUNNING = "running"
_COMPLETED = "completed"
#: response headers never stored (nor any hop-by-hop header); as in the store mode
_SKIPPED_HEADERS = {"content-length", "date", "server", "set-cookie"}
_CLEANUP_INTERVAL = 300.0
_REPLAY_HEADER = "Idempotent-Replayed"


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
    """The database gave up waiting for a lock (another transaction holds it)."""


@dataclass(frozen=True)
class _Record:
    key: str
    token: str
    meta: EntryMeta
    created_at: float
    expires_at: float


def _classify(exc: BaseException) -> str | None:
    """``"duplicate"``, ``"busy"``, ``"error"`` for a database error, ``None`` for anything else."""
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
            return "busy"
        return "error"
    if sqlstate is not None or tmodule.startswith(("psycopg", "sqlalchemy")) or is_sqlalchemy:
        if name == "IntegrityError" and sqlstate is None:
            return "duplicate"  # another dialect's unique violation (MySQL 1062, ...)
        return "error"
    return None


def _unavailable(adapter: object, exc: BaseException) -> StoreUnavailable:
    target = getattr(exc, "orig", None) or exc
    return StoreUnavailable(f"{adapter!r}: {type(target).__name__}: {str(target)[:200]}")


class _CallTransaction(ABC):
    """One call's transaction on the app's own connection or session."""

    #: set when the view ended the package's transaction itself (DB-API ``COMMIT``)
    ended_by_view: str | None = None

    @abstractmethod
    def reserve(self, record: _Record) -> None:
        """Insert the running row; raises :class:`_Duplicate` or :class:`_Busy`."""

    @contextmanager
    def guard(self, record: _Record) -> Iterator[None]:
        """Around the view: keep the view's own commits inside the transaction."""
        yield

    @abstractmethod
    def complete(self, record: _Record, response: StoredResponse) -> None:
        """Write the answer into the row (re-inserting it if the view rolled back)."""

    @abstractmethod
    def commit(self) -> None:
        """The one commit; raises :class:`StoreUnavailable` when it did not report success."""

    @abstractmethod
    def rollback(self) -> None:
        """Undo everything of this call (never raises)."""


class TransactionAdapter(ABC):
    """Gives the transaction mode the current request's transaction.

    Use :class:`SQLAlchemyTransaction` or :class:`DBAPITransaction`. The
    administrative methods (``get``, ``list``, ``resolve``, ``cleanup``) run
    in transactions of their own, in an app context (``flask bailing
    idempotency`` uses them).
    """

    table_name: str
    #: create the table on the first call (else a migration does)
    create_on_first_use: bool
    _created: bool
    _lock: threading.Lock

    def _ensure_table(self) -> None:
        if self._created or not self.create_on_first_use:
            return
        with self._lock:
            if self._created:
                return
            try:
                self.create_table()
            except Exception as exc:  # noqa: BLE001 - the INSERT will say what is wrong
                logger.error("bailing: could not create table %s (%s); create it with a migration",
                             self.table_name, exc)
            self._created = True

    @abstractmethod
    def begin(self) -> _CallTransaction:
        """The transaction of the call now running (in a request)."""

    @abstractmethod
    def get(self, key: str) -> Entry | None:
        """The committed record of ``key``, expired or not."""

    @abstractmethod
    def list(self, *, state: ListState | None = None, limit: int = 100) -> list[Entry]:
        """Live records, oldest first (``in_progress`` never lists anything: running rows are not
        committed; ``uncertain`` lists the rows a view committed without their answer)."""

    @abstractmethod
    def resolve(self, key: str, *, response: StoredResponse | None, note: str,
                retention_seconds: float, now: float) -> bool:
        """Settle a record by operator decision (``None``: delete it so the call may run)."""

    @abstractmethod
    def delete_expired(self, key: str, now: float) -> None:
        """Delete the record of ``key`` if its retention is over."""

    @abstractmethod
    def cleanup(self, *, now: float, limit: int = 1000) -> int:
        """Delete up to ``limit`` expired records; returns how many."""

    @abstractmethod
    def create_table(self) -> None:
        """Create the table if it does not exist."""


#: The two statements on the request path, with ``?`` placeholders (see :func:`_placeholders`).
_INSERT_SQL = (
    "INSERT INTO {t} (call_key, state, token, tool, job_id, subject, unsigned_key, created_at, "
    "expires_at, status, headers, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_COMPLETE_SQL = "UPDATE {t} SET state = ?, status = ?, headers = ?, body = ? WHERE call_key = ? AND token = ?"


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


_COLUMNS = ("call_key", "state", "token", "tool", "job_id", "subject", "unsigned_key", "created_at",
            "expires_at", "status", "headers", "body", "note")


def _matches(entry: Entry, state: ListState | None) -> bool:
    if state is None:
        return True
    if state == "completed":
        return entry.state == "completed"
    if state == "uncertain":
        return entry.state == "in_progress"
    return False  # in_progress: an uncommitted row is invisible


# -- SQLAlchemy -------------------------------------------------------------------------------


class SQLAlchemyTransaction(TransactionAdapter):
    """The transaction mode on a SQLAlchemy ``Session`` (Flask-SQLAlchemy's ``db.session``).

    :param session: a Flask-SQLAlchemy ``SQLAlchemy`` object (``db``), a
        ``scoped_session``, or a function returning the ``Session`` the
        current request's views use.
    :param metadata: the ``MetaData`` to define the table on. Default:
        Flask-SQLAlchemy's ``db.metadata``, so ``db.create_all()`` and
        Alembic's autogenerate (Flask-Migrate) see the table; a private
        one otherwise.
    :param table_name: the table's name (default ``bailing_idempotency``).
    :param create_table: create the table on first use if it does not
        exist (``CREATE TABLE`` rights needed); ``False`` when a migration
        creates it.

    During a transactional call, the view's ``session.commit()`` is a
    ``flush()`` (ids and constraints are checked, nothing ends) and its
    ``session.rollback()`` rolls back and takes the reservation again; the
    package commits once, after the answer is written into the row.
    """

    def __init__(self, session: Any, *, metadata: MetaData | None = None,
                 table_name: str = TABLE_NAME, create_table: bool = True) -> None:
        self.table_name = _check_identifier(table_name)
        self._source = session
        self._metadata = metadata
        self.create_on_first_use = create_table
        self._created = False
        self._lock = threading.Lock()
        # defined now, so a db.create_all() or an Alembic autogenerate that follows sees it
        self._table: Table = _define_table(self._metadata_for_table(), self.table_name)
        #: the request path's two statements per DB-API paramstyle (built on first use)
        self._sql: dict[str, tuple[str, str]] = {}

    def __repr__(self) -> str:
        return f"SQLAlchemyTransaction(table={self.table_name!r})"

    @property
    def table(self) -> Table:
        """The SQLAlchemy ``Table`` of the records, on ``metadata``."""
        return self._table

    def _metadata_for_table(self) -> MetaData:
        if self._metadata is not None:
            return self._metadata
        metadata = getattr(self._source, "metadata", None)
        from sqlalchemy import MetaData

        return metadata if isinstance(metadata, MetaData) else MetaData()

    def session(self) -> Session:
        """The current ``Session``."""
        from sqlalchemy.orm import Session, scoped_session

        source = self._source
        inner = getattr(source, "session", None)
        if isinstance(inner, scoped_session):  # Flask-SQLAlchemy
            current = inner()
        elif isinstance(source, scoped_session):
            current = source()
        elif callable(source):
            current = source()
        else:
            raise ConfigurationError(
                "SQLAlchemyTransaction needs Flask-SQLAlchemy's db, a scoped_session or a function "
                f"returning the current Session, not {type(source).__name__}"
            )
        if not isinstance(current, Session):
            raise ConfigurationError(f"SQLAlchemyTransaction: {source!r} gave {type(current).__name__}, "
                                     "not a SQLAlchemy Session")
        return current

    def _connection(self, session: Session) -> Any:
        return session.connection(bind_arguments={"clause": self.table})

    def create_table(self) -> None:
        session = self.session()
        bind = session.get_bind(clause=self.table)
        from sqlalchemy.engine import Engine

        if isinstance(bind, Engine):
            with bind.begin() as connection:
                if connection.dialect.name == "postgresql":
                    connection.exec_driver_sql(_PG_DDL_LOCK)
                self.table.create(connection, checkfirst=True)
        else:  # a session bound to a connection (tests joining an external transaction)
            self.table.create(bind, checkfirst=True)

    def begin(self) -> _CallTransaction:
        self._ensure_table()
        return _SQLAlchemyCall(self, self.session())

    # -- administration (own transactions) --

    @contextmanager
    def _admin(self) -> Iterator[Any]:
        session = self.session()
        real = type(session)
        try:
            yield self._connection(session)
            real.commit(session)
        except BaseException as exc:
            real.rollback(session)
            if _classify(exc) is not None:
                raise _unavailable(self, exc) from exc
            raise

    def _select(self) -> Any:
        from sqlalchemy import select

        table = self.table
        return select(*(table.c[name] for name in _COLUMNS))

    def get(self, key: str) -> Entry | None:
        with self._admin() as connection:
            row = connection.execute(self._select().where(self.table.c.call_key == key)).first()
        return None if row is None else _entry(row)

    def list(self, *, state: ListState | None = None, limit: int = 100) -> list[Entry]:
        table = self.table
        now = time.time()
        query = self._select().where(table.c.expires_at > now)
        if state == "completed":
            query = query.where(table.c.state == _COMPLETED)
        elif state in ("uncertain", "in_progress"):
            query = query.where(table.c.state == _RUNNING)
        with self._admin() as connection:
            rows = connection.execute(query.order_by(table.c.created_at).limit(limit)).all()
        return [entry for entry in map(_entry, rows) if _matches(entry, state)]

    def resolve(self, key: str, *, response: StoredResponse | None, note: str,
                retention_seconds: float, now: float) -> bool:
        from sqlalchemy import delete, update

        table = self.table
        alive = (table.c.call_key == key) & (table.c.expires_at > now)
        with self._admin() as connection:
            if response is None:
                result = connection.execute(delete(table).where(alive))
            else:
                result = connection.execute(update(table).where(alive).values(
                    state=_COMPLETED, token="", status=response.status,
                    headers=_encode_headers(response.headers), body=response.body, note=note,
                    expires_at=now + retention_seconds,
                ))
        return bool(result.rowcount)

    def delete_expired(self, key: str, now: float) -> None:
        from sqlalchemy import delete

        table = self.table
        with self._admin() as connection:
            connection.execute(delete(table).where((table.c.call_key == key)
                                                   & (table.c.expires_at <= now)))

    def cleanup(self, *, now: float, limit: int = 1000) -> int:
        from sqlalchemy import delete, select

        table = self.table
        with self._admin() as connection:
            keys = [row[0] for row in connection.execute(
                select(table.c.call_key).where(table.c.expires_at <= now).limit(limit))]
            if keys:
                connection.execute(delete(table).where(table.c.call_key.in_(keys)
                                                       & (table.c.expires_at <= now)))
        return len(keys)


def _define_table(metadata: MetaData, name: str) -> Table:
    from sqlalchemy import Column, Float, Index, Integer, LargeBinary, String, Table, Text

    existing = metadata.tables.get(name)
    if existing is not None:
        return existing
    return Table(
        name, metadata,
        Column("call_key", String(100), primary_key=True),
        Column("state", String(16), nullable=False),
        Column("token", String(32), nullable=False),
        Column("tool", Text, nullable=False),
        Column("job_id", Text, nullable=False),
        Column("subject", Text),
        Column("unsigned_key", Text),
        # double precision everywhere (a Unix time in seconds needs more than a 4-byte float)
        Column("created_at", Float(precision=53), nullable=False),
        Column("expires_at", Float(precision=53), nullable=False),
        Column("status", Integer),
        Column("headers", Text),
        Column("body", LargeBinary),
        Column("note", Text),
        Index(f"{name}_expires_at", "expires_at"),
    )


class _SQLAlchemyCall(_CallTransaction):
    def __init__(self, adapter: SQLAlchemyTransaction, session: Session) -> None:
        self.adapter = adapter
        self.session = session
        self.real = type(session)
        self.lost = False
        self._transaction: Any = None
        self._conn: Any = None

    def _connection(self) -> Any:
        # the session's connection, looked up again whenever its transaction changed (the view
        # rolled back or closed the session)
        transaction = self.session.get_transaction()
        if transaction is None or transaction is not self._transaction:
            self._conn = self.adapter._connection(self.session)
            self._transaction = self.session.get_transaction()
        return self._conn

    def _execute(self, which: int, values: tuple[Any, ...]) -> int:
        """Run the INSERT (0) or the UPDATE (1) on the session's own connection; the row count.

        Straight through the driver's cursor of the connection the session's transaction
        holds (so in that transaction): SQLAlchemy's statement execution costs more than the
        two small statements themselves, on every call.
        """
        try:
            connection = self._connection()
            paramstyle = connection.dialect.paramstyle
            statements = self.adapter._sql.get(paramstyle)
            if statements is None:
                table = self.adapter.table_name
                statements = (_placeholders(_INSERT_SQL, table, paramstyle),
                              _placeholders(_COMPLETE_SQL, table, paramstyle))
                self.adapter._sql[paramstyle] = statements
            cursor = connection.connection.cursor()
            try:
                cursor.execute(statements[which], _parameters(values, paramstyle))
                return int(cursor.rowcount)
            finally:
                cursor.close()
        except BaseException as exc:
            kind = _classify(exc)
            if kind == "duplicate":
                raise _Duplicate() from exc
            if kind == "busy":
                raise _Busy(str(getattr(exc, "orig", exc))) from exc
            if kind == "error":
                raise _unavailable(self.adapter, exc) from exc
            raise

    def _insert(self, record: _Record, *values: Any) -> None:
        self._execute(0, _insert_values(record, *values))

    def reserve(self, record: _Record) -> None:
        self._insert(record)

    @contextmanager
    def guard(self, record: _Record) -> Iterator[None]:
        session, real = self.session, self.real

        def commit() -> None:
            # the view's commit: its changes reach the database inside the call's transaction
            session.flush()

        def rollback() -> None:
            # the view gave up its changes (say, after an IntegrityError): the reservation
            # went with them, so take it again at once
            real.rollback(session)
            try:
                self._insert(record)
            except (_Duplicate, _Busy, StoreUnavailable):
                real.rollback(session)
                self.lost = True

        session.commit = commit  # type: ignore[method-assign]
        session.rollback = rollback  # type: ignore[method-assign]
        try:
            yield
        finally:
            del session.commit
            del session.rollback

    def complete(self, record: _Record, response: StoredResponse) -> None:
        if self.lost:
            raise _Duplicate()
        headers = _encode_headers(response.headers)
        updated = self._execute(1, (_COMPLETED, response.status, headers, response.body, record.key,
                                    record.token))
        if not updated:  # the view closed the session: insert the finished row
            self._insert(record, _COMPLETED, response.status, headers, response.body)

    def commit(self) -> None:
        try:
            self.real.commit(self.session)
        except BaseException as exc:
            if _classify(exc) is None:
                raise
            self.rollback()
            raise _unavailable(self.adapter, exc) from exc

    def rollback(self) -> None:
        try:
            self.real.rollback(self.session)
        except Exception:  # noqa: BLE001 - a broken connection: its transaction is gone anyway
            logger.warning("bailing: rollback failed", exc_info=True)


# -- DB-API --------------------------------------------------------------------------------------


class DBAPITransaction(TransactionAdapter):
    """The transaction mode on a plain DB-API connection: ``sqlite3`` or ``psycopg`` 3.

    :param connection: a function returning the connection the current
        request's views use (say, your ``get_db()`` that keeps one in ``g``).
    :param dialect: ``"sqlite"`` or ``"postgresql"``; detected from the
        connection's driver when left out.
    :param table_name: the table's name (default ``bailing_idempotency``).
    :param create_table: create the table on first use if it does not exist.

    The package begins the transaction (``BEGIN IMMEDIATE`` on SQLite, so the
    write lock is taken before the view reads anything; ``BEGIN`` on an
    autocommit psycopg connection) unless one is already open on the
    connection, in which case the call joins it. The view must not
    ``COMMIT`` or ``ROLLBACK`` it: nested blocks use savepoints
    (``SAVEPOINT``/``RELEASE``; psycopg's ``conn.transaction()`` does so by
    itself when a transaction is open). A view that ends the transaction
    anyway is logged as an error.
    """

    def __init__(self, connection: Callable[[], Any], *,
                 dialect: Literal["sqlite", "postgresql"] | None = None,
                 table_name: str = TABLE_NAME, create_table: bool = True) -> None:
        if not callable(connection):
            raise ConfigurationError("DBAPITransaction needs a function returning the request's connection")
        if dialect not in (None, "sqlite", "postgresql"):
            raise ConfigurationError(f"DBAPITransaction: dialect must be 'sqlite' or 'postgresql', not {dialect!r}")
        self.table_name = _check_identifier(table_name)
        self._get = connection
        self.dialect = dialect
        self.create_on_first_use = create_table
        self._created = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"DBAPITransaction(dialect={self.dialect!r}, table={self.table_name!r})"

    def connection(self) -> tuple[Any, str]:
        conn = self._get()
        dialect = self.dialect or _detect_dialect(conn)
        return conn, dialect

    def sql(self, dialect: str, statement: str) -> str:
        """``statement`` with ``{t}`` as the table and ``?`` placeholders in the driver's style."""
        return _placeholders(statement, self.table_name, "qmark" if dialect == "sqlite" else "format")

    def create_table(self) -> None:
        conn, dialect = self.connection()
        with self._own(conn, dialect) as cursor:
            if dialect == "postgresql":
                cursor.execute(_PG_DDL_LOCK)
            for statement in create_table_sql(dialect, self.table_name).split(";\n"):
                if statement.strip():
                    cursor.execute(statement)

    def begin(self) -> _CallTransaction:
        self._ensure_table()
        try:
            conn, dialect = self.connection()
        except Exception as exc:
            if _classify(exc) is None:
                raise
            raise _unavailable(self, exc) from exc  # the database cannot be reached: 503
        return _DBAPICall(self, conn, dialect)

    @contextmanager
    def _own(self, conn: Any, dialect: str) -> Iterator[Any]:
        """A short transaction of the package's own (or a part of the app's open one, which it
        then leaves open: never commit what the app began)."""
        joined = _in_transaction(conn, dialect)
        cursor = conn.cursor()
        _begin(conn, dialect, immediate=False)
        try:
            yield cursor
            if not joined and _in_transaction(conn, dialect):
                _commit(conn, dialect)
        except BaseException as exc:
            _rollback(conn, dialect)
            if _classify(exc) is not None:
                raise _unavailable(self, exc) from exc
            raise
        finally:
            cursor.close()

    def get(self, key: str) -> Entry | None:
        conn, dialect = self.connection()
        with self._own(conn, dialect) as cursor:
            cursor.execute(self.sql(dialect, f"SELECT {', '.join(_COLUMNS)} FROM {{t}} WHERE call_key = ?"),
                           (key,))
            row = cursor.fetchone()
        return None if row is None else _entry(tuple(row))

    def list(self, *, state: ListState | None = None, limit: int = 100) -> list[Entry]:
        conn, dialect = self.connection()
        where = ""
        if state == "completed":
            where = f" AND state = '{_COMPLETED}'"
        elif state in ("uncertain", "in_progress"):
            where = f" AND state = '{_RUNNING}'"
        with self._own(conn, dialect) as cursor:
            cursor.execute(self.sql(dialect, f"SELECT {', '.join(_COLUMNS)} FROM {{t}} WHERE expires_at > ?"
                                    f"{where} ORDER BY created_at LIMIT ?"), (time.time(), int(limit)))
            rows = cursor.fetchall()
        return [entry for entry in (_entry(tuple(row)) for row in rows) if _matches(entry, state)]

    def resolve(self, key: str, *, response: StoredResponse | None, note: str,
                retention_seconds: float, now: float) -> bool:
        conn, dialect = self.connection()
        with self._own(conn, dialect) as cursor:
            if response is None:
                cursor.execute(self.sql(dialect, "DELETE FROM {t} WHERE call_key = ? AND expires_at > ?"),
                               (key, now))
            else:
                cursor.execute(self.sql(dialect, "UPDATE {t} SET state = ?, token = '', status = ?, "
                                        "headers = ?, body = ?, note = ?, expires_at = ? "
                                        "WHERE call_key = ? AND expires_at > ?"),
                               (_COMPLETED, response.status, _encode_headers(response.headers),
                                response.body, note, now + retention_seconds, key, now))
            return bool(cursor.rowcount)

    def delete_expired(self, key: str, now: float) -> None:
        conn, dialect = self.connection()
        with self._own(conn, dialect) as cursor:
            cursor.execute(self.sql(dialect, "DELETE FROM {t} WHERE call_key = ? AND expires_at <= ?"),
                           (key, now))

    def cleanup(self, *, now: float, limit: int = 1000) -> int:
        conn, dialect = self.connection()
        with self._own(conn, dialect) as cursor:
            cursor.execute(self.sql(dialect, "DELETE FROM {t} WHERE call_key IN (SELECT call_key FROM {t} "
                                    "WHERE expires_at <= ? LIMIT ?)"), (now, int(limit)))
            return max(0, int(cursor.rowcount))


def _detect_dialect(conn: Any) -> str:
    module = type(conn).__module__
    if module.startswith("sqlite3"):
        return "sqlite"
    if module.startswith("psycopg") and not module.startswith("psycopg2"):
        return "postgresql"
    raise ConfigurationError(
        f"DBAPITransaction supports sqlite3 and psycopg 3 connections, not {type(conn).__module__}."
        f"{type(conn).__name__}; pass dialect= for a wrapper, or use SQLAlchemyTransaction"
    )


def _in_transaction(conn: Any, dialect: str) -> bool:
    if dialect == "sqlite":
        return bool(conn.in_transaction)
    return int(conn.info.transaction_status) != 0  # psycopg: TransactionStatus.IDLE


def _begin(conn: Any, dialect: str, *, immediate: bool) -> bool:
    """Open a transaction unless one is open (``False``: joined it, or the driver opens it)."""
    if dialect == "sqlite":
        if conn.in_transaction:
            return False
        conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
        return True
    status = int(conn.info.transaction_status)
    if status == 3:  # INERROR: the app's transaction already failed
        raise StoreUnavailable("the connection's transaction has failed (roll it back first)")
    if status == 0 and conn.autocommit:
        conn.execute("BEGIN")
        return True
    return False  # psycopg opens one with the first statement, or one is open


def _commit(conn: Any, dialect: str) -> None:
    if dialect == "sqlite" and getattr(conn, "autocommit", -1) is True:
        conn.execute("COMMIT")  # Python 3.12's autocommit=True: commit() does nothing
    else:
        conn.commit()


def _rollback(conn: Any, dialect: str) -> None:
    try:
        if dialect == "sqlite" and getattr(conn, "autocommit", -1) is True:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        else:
            conn.rollback()
    except Exception:  # noqa: BLE001 - a broken connection: its transaction is gone anyway
        logger.warning("bailing: rollback failed", exc_info=True)


class _DBAPICall(_CallTransaction):
    def __init__(self, adapter: DBAPITransaction, conn: Any, dialect: str) -> None:
        self.adapter = adapter
        self.conn = conn
        self.dialect = dialect

    def _execute(self, statement: str, params: tuple[Any, ...]) -> Any:
        try:
            cursor = self.conn.cursor()
            cursor.execute(self.adapter.sql(self.dialect, statement), params)
            return cursor
        except BaseException as exc:
            kind = _classify(exc)
            if kind == "duplicate":
                raise _Duplicate() from exc
            if kind == "busy":
                raise _Busy(str(exc)) from exc
            if kind == "error":
                raise _unavailable(self.adapter, exc) from exc
            raise

    def _begin(self) -> None:
        try:
            _begin(self.conn, self.dialect, immediate=True)
        except BaseException as exc:
            kind = _classify(exc)
            if kind == "busy":
                raise _Busy(str(exc)) from exc
            if kind is not None:
                raise _unavailable(self.adapter, exc) from exc
            raise

    def _insert(self, record: _Record, *values: Any) -> None:
        self._execute(_INSERT_SQL, _insert_values(record, *values))

    def reserve(self, record: _Record) -> None:
        self._begin()
        self._insert(record)

    def complete(self, record: _Record, response: StoredResponse) -> None:
        headers = _encode_headers(response.headers)
        if not _in_transaction(self.conn, self.dialect):
            # the view committed or rolled back the package's transaction: what it did is
            # already final or gone; record the answer now, in a transaction of its own
            self.ended_by_view = "the view ended the transaction itself (COMMIT or ROLLBACK)"
            self._begin()
        cursor = self._execute(_COMPLETE_SQL, (_COMPLETED, response.status, headers, response.body,
                                               record.key, record.token))
        if not cursor.rowcount:
            self._insert(record, _COMPLETED, response.status, headers, response.body)

    def commit(self) -> None:
        try:
            _commit(self.conn, self.dialect)
        except BaseException as exc:
            if _classify(exc) is None:
                raise
            self.rollback()
            raise _unavailable(self.adapter, exc) from exc

    def rollback(self) -> None:
        _rollback(self.conn, self.dialect)


# -- the mode -------------------------------------------------------------------------------------


def resolve_adapter(value: Any, app: Any) -> TransactionAdapter | None:
    """``BAILING_TRANSACTION`` as an adapter: an adapter, ``"sqlalchemy"`` or ``None``."""
    if value is None or isinstance(value, TransactionAdapter):
        return value
    if isinstance(value, str) and value.strip().lower() in ("sqlalchemy", "flask_sqlalchemy",
                                                            "flask-sqlalchemy"):
        db = app.extensions.get("sqlalchemy")
        if db is None:
            raise ConfigurationError("BAILING_TRANSACTION = 'sqlalchemy' needs Flask-SQLAlchemy "
                                     "initialised on this app (db.init_app(app))")
        return SQLAlchemyTransaction(db)
    raise ConfigurationError(
        "BAILING_TRANSACTION must be SQLAlchemyTransaction(...), DBAPITransaction(...), 'sqlalchemy' "
        f"or None, not {type(value).__name__}"
    )


class TransactionalIdempotency:
    """Runs side-effecting calls exactly once inside the app's own transaction."""

    def __init__(self, idempotency: Idempotency) -> None:
        self.idempotency = idempotency
        self.state = idempotency.state
        self._adapter: TransactionAdapter | None = None
        self._resolved = False
        self._lock = threading.Lock()
        self._last_cleanup = time.monotonic()
        self.clock: Callable[[], float] = time.time

    def adapter(self) -> TransactionAdapter | None:
        if not self._resolved:
            with self._lock:
                if not self._resolved:
                    self._adapter = resolve_adapter(self.state.config("BAILING_TRANSACTION"),
                                                    self.state.app)
                    self._resolved = True
        return self._adapter

    def run(self, tool: Tool, call: ToolCall, execute: Callable[[], Response]) -> Response:
        from bailing_flask._pipeline.idempotency import call_key

        adapter = self.adapter()
        if adapter is None:
            self.state.warn_once(
                ("transaction", tool.name),
                "bailing: tool %r runs in the transaction mode but BAILING_TRANSACTION is not set; "
                "refusing its calls", tool.name, level=logging.ERROR,
            )
            return self.state.error_response(ErrorInfo.make("idempotency_store_unavailable"))
        now = self.clock()
        retention = float(self.state.config("BAILING_IDEMPOTENCY_RETENTION"))
        record = _Record(
            key=call_key(tool, call), token=os.urandom(12).hex(),
            meta=EntryMeta(tool=tool.name, job_id=call.job_id, subject=call.subject,
                           unsigned_key=call.unsigned.idempotency_key),
            created_at=now, expires_at=now + retention,
        )
        for attempt in (1, 2):
            try:
                transaction = adapter.begin()
            except StoreUnavailable as exc:
                return self._unavailable(tool, exc)
            try:
                transaction.reserve(record)
            except _Duplicate:
                transaction.rollback()
                answer = self._existing(adapter, tool, call, record, last=attempt == 2)
                if answer is not None:
                    return answer
                continue  # the committed row was gone (expired, or resolved to run again)
            except _Busy as exc:
                transaction.rollback()
                logger.info("bailing: call %s of tool %r waits for the same call in another "
                            "transaction (%s): 409", record.key, tool.name, exc)
                return self.state.error_response(ErrorInfo.make("idempotency_in_progress"))
            except StoreUnavailable as exc:
                transaction.rollback()
                return self._unavailable(tool, exc)
            except BaseException:
                transaction.rollback()
                raise
            return self._first_run(adapter, transaction, tool, record, execute)
        return self.state.error_response(ErrorInfo.make("idempotency_in_progress"))

    def _unavailable(self, tool: Tool, exc: StoreUnavailable) -> Response:
        logger.error("bailing: the database is unavailable (%s); refusing the side effect of %r",
                     exc, tool.name)
        return self.state.error_response(ErrorInfo.make("idempotency_store_unavailable"))

    def _existing(self, adapter: TransactionAdapter, tool: Tool, call: ToolCall, record: _Record,
                  *, last: bool) -> Response | None:
        try:
            entry = adapter.get(record.key)
        except StoreUnavailable as exc:
            return self._unavailable(tool, exc)
        now = self.clock()
        if entry is None or entry.expires_at <= now:
            if entry is not None:
                try:
                    adapter.delete_expired(record.key, now)
                except StoreUnavailable as exc:
                    return self._unavailable(tool, exc)
            if last:
                return self.state.error_response(ErrorInfo.make("idempotency_in_progress"))
            return None
        if entry.state == "completed" and entry.response is not None:
            return _replayed(tool, call, record.key, entry)
        logger.warning("bailing: call %s of tool %r was committed without its answer (the view "
                       "committed the transaction itself, then the worker died); resolve it with "
                       "`flask bailing idempotency`", record.key, tool.name)
        return self.state.error_response(ErrorInfo.make("idempotency_uncertain"))

    def _first_run(self, adapter: TransactionAdapter, transaction: _CallTransaction, tool: Tool,
                   record: _Record, execute: Callable[[], Response]) -> Response:
        stored: StoredResponse | None = None
        try:
            with transaction.guard(record):
                try:
                    response = execute()
                except HTTPException as exc:
                    if exc.code is None or exc.code >= 500:
                        raise
                    # abort(404) and the like: an answer, recorded like a returned 4xx
                    response = current_app.make_response(current_app.handle_user_exception(exc))
                if response.status_code < 500:
                    stored = StoredResponse(
                        status=response.status_code,
                        headers=tuple((name, value) for name, value in response.headers.items()
                                      if name.lower() not in _SKIPPED_HEADERS and not is_hop_by_hop(name)),
                        body=response.get_data(),
                    )
        except BaseException as exc:
            transaction.rollback()
            logger.info("bailing: call %s of tool %r raised %s: its transaction rolled back, an "
                        "identical call runs again", record.key, tool.name, type(exc).__name__)
            raise
        if stored is None:
            transaction.rollback()
            logger.info("bailing: call %s of tool %r answered HTTP %d: its transaction rolled back, "
                        "an identical call runs again", record.key, tool.name, response.status_code)
            return response
        try:
            transaction.complete(record, stored)
            transaction.commit()
        except (_Duplicate, _Busy):
            transaction.rollback()
            logger.warning("bailing: call %s of tool %r lost its reservation (the view rolled back) "
                           "to an identical call; its changes rolled back", record.key, tool.name)
            return self.state.error_response(ErrorInfo.make("idempotency_in_progress"))
        except StoreUnavailable as exc:
            transaction.rollback()
            logger.error("bailing: the transaction of call %s of tool %r failed to commit (%s); an "
                         "identical call tells what happened: answered from the record if it "
                         "committed, run again if not", record.key, tool.name, exc)
            return self.state.error_response(ErrorInfo.make("transaction_failed"))
        except BaseException:
            transaction.rollback()
            raise
        if transaction.ended_by_view:
            logger.error(
                "bailing: the view of transactional tool %r ended the package's transaction itself "
                "(%s); its changes were committed before the answer was recorded, so this call was "
                "not exactly-once. Leave COMMIT to bailing_flask and use savepoints in the view",
                tool.name, transaction.ended_by_view,
            )
        self._maybe_cleanup(adapter)
        return response

    def _maybe_cleanup(self, adapter: TransactionAdapter) -> None:
        """Now and then, after a call's commit: delete expired records in a small transaction."""
        now = time.monotonic()
        if now - self._last_cleanup < _CLEANUP_INTERVAL:
            return
        self._last_cleanup = now
        try:
            adapter.cleanup(now=self.clock(), limit=1000)
        except Exception:  # noqa: BLE001 - retried at the next interval
            logger.warning("bailing: cleanup of %s failed", adapter.table_name, exc_info=True)


def _replayed(tool: Tool, call: ToolCall, key: str, entry: Entry) -> Response:
    if entry.meta.unsigned_key != call.unsigned.idempotency_key:
        logger.warning(
            "bailing: suspicious repeat of call %s (tool %r, job %r): the unsigned "
            "X-Bailing-Idempotency-Key changed from %r to %r; answered from the record",
            key, tool.name, call.job_id, entry.meta.unsigned_key, call.unsigned.idempotency_key,
        )
    stored = entry.response
    assert stored is not None
    response = Response(stored.body, status=stored.status)
    response.headers.clear()
    for name, value in stored.headers:
        if not is_hop_by_hop(name):
            response.headers.add(name, value)
    response.headers[_REPLAY_HEADER] = "true"
    return response


def findings(app: Any, tool: Tool) -> list[Finding]:
    """Registry findings about a tool's transaction mode (``flask bailing check``)."""
    from bailing_flask._pipeline.idempotency import Idempotency
    if not Idempotency.applies(tool) or not in_transaction_mode(tool, app.config):
        return []
    out: list[Finding] = []
    key = tool.operation_key
    if app.config.get("BAILING_TRANSACTION") is None:
        out.append(finding("transaction_not_configured", key, name=tool.name))
    outcome = tool.options.outcome
    if outcome is not None and outcome.side_effect in ("external", "notify"):
        out.append(finding("transactional_external_effect", key, name=tool.name,
                           effect=outcome.side_effect))
    return out


def in_transaction_mode(tool: Tool, config: Any) -> bool:
    """Whether ``tool`` (a de-duplicated one) runs in the transaction mode."""
    explicit = tool.options.transactional
    if explicit is not None:
        return bool(explicit)
    return bool(config.get("BAILING_TRANSACTIONAL"))
