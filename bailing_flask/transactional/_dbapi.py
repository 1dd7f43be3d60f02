"""The transaction mode on a plain DB-API connection: ``sqlite3`` or ``psycopg`` 3."""

from __future__ import annotations

import logging
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal

from bailing_flask.errors import ConfigurationError
from bailing_flask.stores import Entry, StoredResponse, StoreUnavailable
from bailing_flask.stores._entries import resolved_token
from bailing_flask.transactional._adapter import TransactionAdapter, _CallTransaction
from bailing_flask.transactional._records import (
    ListState,
    _COLUMNS,
    _COMPLETE_SQL,
    _COMPLETED,
    _INSERT_APPROVAL_SQL,
    _INSERT_SQL,
    _approval_values,
    _PG_DDL_LOCK,
    _RUNNING,
    TABLE_NAME,
    _Busy,
    _check_identifier,
    _classify,
    _Duplicate,
    _EndedByView,
    _call_entry,
    _entry,
    _settled_rows,
    _insert_values,
    _matches,
    _placeholders,
    _encode_headers,
    _Record,
    _unavailable,
    create_table_sql,
)

logger = logging.getLogger("bailing_flask")

#: the savepoint taken after the reservation: gone when the view ended the transaction itself
_MARK = "bailing_call"


class DBAPITransaction(TransactionAdapter):
    """The transaction mode on a plain DB-API connection: ``sqlite3`` or ``psycopg`` 3.

    :param connection: a function returning the connection the current
        request's views use (say, your ``get_db()`` that keeps one in ``g``).
    :param dialect: ``"sqlite"`` or ``"postgresql"``; detected from the
        connection's driver when left out, also through a proxy that
        forwards ``__class__`` (wrapt's, as OpenTelemetry's DB-API
        instrumentation wraps connections) or a wrapper that names the
        connection as ``__wrapped__``.
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
        return None if row is None else _call_entry(tuple(row))

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
                retention_seconds: float, now: float, seen: Entry | None = None) -> bool:
        conn, dialect = self.connection()
        states, token = _settled_rows(seen)
        rows = f"state IN ({', '.join('?' * len(states))})" + ("" if token is None else " AND token = ?")
        values = states if token is None else (*states, token)
        with self._own(conn, dialect) as cursor:
            if response is None:
                cursor.execute(self.sql(dialect, "DELETE FROM {t} WHERE call_key = ? AND expires_at > ? "
                                        f"AND {rows}"), (key, now, *values))
            else:
                cursor.execute(self.sql(dialect, "UPDATE {t} SET state = ?, token = ?, status = ?, "
                                        "headers = ?, body = ?, note = ?, expires_at = ? "
                                        f"WHERE call_key = ? AND expires_at > ? AND {rows}"),
                               (_COMPLETED, resolved_token(), response.status,
                                _encode_headers(response.headers),
                                response.body, note, now + retention_seconds, key, now, *values))
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
    """The dialect of a sqlite3 or psycopg 3 connection, also seen through a wrapper.

    A proxy that forwards ``__class__`` (wrapt's, as OpenTelemetry's DB-API
    instrumentation puts around a connection) passes the ``isinstance``
    check; a wrapper that names what it wraps as ``__wrapped__`` (the
    exercise's connection that commits nothing) is looked through.
    """
    seen = conn
    for _ in range(8):
        if isinstance(seen, sqlite3.Connection):
            return "sqlite"
        psycopg = sys.modules.get("psycopg")  # not imported: not one of its connections
        if psycopg is not None and isinstance(seen, psycopg.Connection):
            return "postgresql"
        module = type(seen).__module__
        if isinstance(module, str) and module.startswith("sqlite3"):
            return "sqlite"
        if isinstance(module, str) and module.startswith("psycopg") and not module.startswith("psycopg2"):
            return "postgresql"
        try:
            seen = getattr(seen, "__wrapped__", None)
        except Exception:  # a wrapper whose __wrapped__ fails names nothing
            break
        if seen is None:
            break
    raise ConfigurationError(
        f"DBAPITransaction supports sqlite3 and psycopg 3 connections, not {type(conn).__module__}."
        f"{type(conn).__name__}; pass dialect= for a wrapper that neither forwards __class__ nor "
        "names the connection as __wrapped__, or use SQLAlchemyTransaction"
    )


def _in_transaction(conn: Any, dialect: str) -> bool:
    if dialect == "sqlite":
        return bool(conn.in_transaction)
    return int(conn.info.transaction_status) != 0  # psycopg: TransactionStatus.IDLE


def _broken(conn: Any, dialect: str) -> bool:
    """Whether the connection was cut (psycopg's ``broken``): the server rolled its transaction back.

    Not ``closed``: a view that closed the connection itself ended the call's transaction.
    """
    return dialect != "sqlite" and bool(getattr(conn, "broken", False))


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
            if kind in ("busy", "locked"):
                raise _Busy(str(exc), whole_database=kind == "locked") from exc
            if kind == "error":
                raise _unavailable(self.adapter, exc) from exc
            raise

    def _begin(self) -> None:
        try:
            _begin(self.conn, self.dialect, immediate=True)
        except BaseException as exc:
            kind = _classify(exc)
            if kind in ("busy", "locked"):
                raise _Busy(str(exc), whole_database=kind == "locked") from exc
            if kind is not None:
                raise _unavailable(self.adapter, exc) from exc
            raise

    def _insert(self, record: _Record, *values: Any) -> None:
        self._execute(_INSERT_SQL, _insert_values(record, *values))

    def reserve(self, record: _Record) -> None:
        self._begin()
        self._insert(record)
        self._spend_approval(record)
        # marks the call's own transaction: a COMMIT or ROLLBACK of the view takes it away
        self._execute(f"SAVEPOINT {_MARK}", ())

    def _insert_approval(self, record: _Record) -> None:
        self._execute(_INSERT_APPROVAL_SQL, _approval_values(record))

    def complete(self, record: _Record, response: StoredResponse) -> None:
        if _broken(self.conn, self.dialect):  # cut, not ended by the view: a repeat tells
            raise StoreUnavailable(f"{self.adapter!r}: the connection was closed")
        if not _in_transaction(self.conn, self.dialect):
            self.ended_by_view = "the view committed or rolled back the connection itself"
            raise _EndedByView(self.ended_by_view)
        try:
            self._execute(f"RELEASE SAVEPOINT {_MARK}", ())
        except (StoreUnavailable, _Busy, _Duplicate) as exc:
            if isinstance(exc, StoreUnavailable) and _broken(self.conn, self.dialect):
                raise  # the connection was cut: the server rolled the transaction back
            self.ended_by_view = (f"the view committed or rolled back the connection itself "
                                  f"({str(exc.__cause__ or exc)[:120]})")
            raise _EndedByView(self.ended_by_view) from exc
        headers = _encode_headers(response.headers)
        cursor = self._execute(_COMPLETE_SQL, (_COMPLETED, response.status, headers, response.body,
                                               record.key, record.token))
        if not cursor.rowcount:
            self.ended_by_view = "the call's reservation was no longer in its transaction"
            raise _EndedByView(self.ended_by_view)

    def keep(self, record: _Record) -> None:
        if _in_transaction(self.conn, self.dialect):
            try:
                _commit(self.conn, self.dialect)
            except Exception:  # noqa: BLE001 - an aborted transaction: what it held is gone
                logger.warning("bailing: committing what the view left failed", exc_info=True)
                self.rollback()
        try:
            self._begin()
            self._insert(record)
            _commit(self.conn, self.dialect)
        except _Duplicate:
            self.rollback()  # the running row was committed (by the view's COMMIT)
        except Exception:  # noqa: BLE001
            self.rollback()
            raise

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
