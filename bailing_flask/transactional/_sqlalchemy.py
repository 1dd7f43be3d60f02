"""The transaction mode on a SQLAlchemy ``Session`` (Flask-SQLAlchemy's ``db.session``)."""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

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
    _parameters,
    _placeholders,
    _encode_headers,
    _Record,
    _unavailable,
)

if TYPE_CHECKING:  # pragma: no cover
    from sqlalchemy import MetaData, Table
    from sqlalchemy.orm import Session

logger = logging.getLogger("bailing_flask")


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
    ``flush()`` and a savepoint (ids and constraints are checked, nothing
    ends), its ``session.rollback()`` and ``session.close()`` go back to its
    last commit; the package commits once, after the answer is written into
    the row.
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
        #: the request path's statements per DB-API paramstyle (built on first use)
        self._sql: dict[str, tuple[str, ...]] = {}

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
        return None if row is None else _call_entry(row)

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
                retention_seconds: float, now: float, seen: Entry | None = None) -> bool:
        from sqlalchemy import delete, update

        table = self.table
        states, token = _settled_rows(seen)
        alive = (table.c.call_key == key) & (table.c.expires_at > now) & table.c.state.in_(states)
        if token is not None:
            alive = alive & (table.c.token == token)
        with self._admin() as connection:
            if response is None:
                result = connection.execute(delete(table).where(alive))
            else:
                result = connection.execute(update(table).where(alive).values(
                    state=_COMPLETED, token=resolved_token(), status=response.status,
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


#: the call whose view is running on this thread (or task), for the engine's commit listener
_RUNNING_CALL: ContextVar[_SQLAlchemyCall | None] = ContextVar("bailing_txn_call", default=None)
#: engines whose commits are watched (a listener is added once per engine)
_WATCHED: weakref.WeakSet[Any] = weakref.WeakSet()
_WATCH_LOCK = threading.Lock()


def _on_engine_commit(connection: Any) -> None:
    """Any commit on a watched engine: during a transactional view, that is a commit outside
    the call's transaction (another connection or session) or of it (the view's own)."""
    call = _RUNNING_CALL.get()
    if call is not None:
        call.ended("the view committed a database transaction itself (a Connection or another "
                   "Session committed during the call)")


def _watch(engine: Any) -> None:
    if engine in _WATCHED:
        return
    from sqlalchemy import event

    with _WATCH_LOCK:
        if engine not in _WATCHED:
            event.listen(engine, "commit", _on_engine_commit)
            _WATCHED.add(engine)


class _SQLAlchemyCall(_CallTransaction):
    """One call on the session: the reservation row, then a savepoint marking the view's last
    commit. The view's ``commit()`` flushes and takes a new savepoint, its ``rollback()`` and
    ``close()`` go back to the last one (as they would go back to its last real commit); a
    savepoint that has vanished means the view ended the transaction itself (a ``COMMIT``
    statement), and a commit on the engine during the view means it committed outside."""

    def __init__(self, adapter: SQLAlchemyTransaction, session: Session) -> None:
        self.adapter = adapter
        self.session = session
        self.real = type(session)
        self.closed = False
        self._transaction: Any = None
        self._conn: Any = None
        #: the savepoints marking the view's commits, outermost first (see _commit_point)
        self._marks: list[Any] = []
        #: the error that cut the call's connection (the database, not the view, ended it)
        self.lost: BaseException | None = None

    def _connection(self) -> Any:
        # the session's connection, looked up again whenever its transaction changed
        transaction = self.session.get_transaction()
        if transaction is None or transaction is not self._transaction:
            self._conn = self.adapter._connection(self.session)
            self._transaction = self.session.get_transaction()
        return self._conn

    def _execute(self, which: int, values: tuple[Any, ...]) -> int:
        """Run the INSERT (0), the UPDATE (1) or an approval's INSERT (2) on the session's own
        connection; the row count.

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
                statements = tuple(_placeholders(statement, table, paramstyle) for statement in (
                    _INSERT_SQL, _COMPLETE_SQL, _INSERT_APPROVAL_SQL))
                self.adapter._sql[paramstyle] = statements
            cursor = connection.connection.cursor()
            try:
                cursor.execute(statements[which], _parameters(values, paramstyle))
                return int(cursor.rowcount)
            finally:
                cursor.close()
        except BaseException as exc:
            translated = _translated(self.adapter, exc)
            if translated is exc:
                raise
            raise translated from exc

    def _insert(self, record: _Record, *values: Any) -> None:
        self._execute(0, _insert_values(record, *values))

    def reserve(self, record: _Record) -> None:
        self._insert(record)
        self._spend_approval(record)
        _watch(self._conn.engine)
        try:
            self._marks.append(self.session.begin_nested())
        except BaseException as exc:
            translated = _translated(self.adapter, exc)
            if translated is exc:
                raise
            raise translated from exc

    def ended(self, how: str) -> None:
        if self.ended_by_view is None:
            self.ended_by_view = how

    def _savepoint_failed(self, exc: BaseException) -> None:
        """A savepoint statement failed: the view's COMMIT took it, or the connection was cut
        (then the server rolled the whole transaction back: nothing of the call happened)."""
        if getattr(exc, "connection_invalidated", False):
            if self.lost is None:
                self.lost = exc
            return
        self.ended(f"the view ended the call's transaction itself ({type(exc).__name__}: "
                   f"{str(exc)[:120]})")

    def _check_driver(self) -> None:
        """A driver with no transaction open while the session holds one: the view's own
        ``COMMIT`` or ``ROLLBACK`` statement ended it (seen before the savepoint would fail)."""
        if self.ended_by_view is None and _driver_idle(self._conn):
            self.ended("the view ended the call's transaction itself (a COMMIT or ROLLBACK "
                       "statement)")

    def _commit_point(self) -> None:
        """The view committed: a new savepoint inside the last one marks the point a later
        ``rollback()`` goes back to. Savepoints are released only at the end of the call, so
        the session's ``after_commit`` listeners run then, just before the real commit."""
        session = self.session
        if session.get_nested_transaction() is not self._marks[-1]:
            return  # inside the view's own begin_nested() block: the point stays where it was
        try:
            self._marks.append(session.begin_nested())
        except Exception as exc:  # noqa: BLE001 - the transaction is no longer the call's
            self._savepoint_failed(exc)

    def _back_to_commit_point(self) -> None:
        """The view rolled back: back to its last commit (the innermost savepoint)."""
        try:
            self._marks.pop().rollback()  # ROLLBACK TO SAVEPOINT; the ORM state follows
            self._marks.append(self.session.begin_nested())
        except Exception as exc:  # noqa: BLE001 - the savepoint is gone with the transaction
            self._savepoint_failed(exc)

    def _insert_approval(self, record: _Record) -> None:
        self._execute(2, _approval_values(record))

    @contextmanager
    def guard(self, record: _Record) -> Iterator[None]:
        session = self.session

        def commit() -> None:
            # the view's commit: its changes reach the database inside the call's
            # transaction, and a later rollback() or close() goes back to here
            self._check_driver()
            session.flush()
            if self.ended_by_view is None:
                self._commit_point()

        def rollback() -> None:
            # back to the view's last commit, as a rollback would without the package
            self._check_driver()
            if self.ended_by_view is None:
                self._back_to_commit_point()

        def close() -> None:
            # as close() would: what the view did not commit is undone and its objects are
            # detached; the session itself stays in the call's transaction until its commit
            rollback()
            session.expunge_all()
            self.closed = True

        session.commit = commit  # type: ignore[method-assign]
        session.rollback = rollback  # type: ignore[method-assign]
        session.close = close  # type: ignore[method-assign]
        token = _RUNNING_CALL.set(self)
        try:
            yield
        finally:
            _RUNNING_CALL.reset(token)
            del session.commit
            del session.rollback
            del session.close

    def complete(self, record: _Record, response: StoredResponse) -> None:
        self._check_driver()
        if self.ended_by_view is None and self.lost is None:
            try:  # RELEASE of the outermost savepoint: fails when a COMMIT of the view took it
                self._marks[0].commit()
            except Exception as exc:  # noqa: BLE001
                self._savepoint_failed(exc)
        if self.ended_by_view is None and self.lost is not None:
            # the connection was cut: the server rolled the transaction back, or (had the view
            # sent COMMIT itself) kept the running row; an identical call finds out which
            raise _unavailable(self.adapter, self.lost)
        if self.ended_by_view is not None:
            raise _EndedByView(self.ended_by_view)
        headers = _encode_headers(response.headers)
        updated = self._execute(1, (_COMPLETED, response.status, headers, response.body, record.key,
                                    record.token))
        if not updated:  # the reservation is gone with a transaction the view ended
            self.ended("the call's reservation was no longer in its transaction")
            raise _EndedByView(self.ended_by_view or "")

    def keep(self, record: _Record) -> None:
        """Commit what the transaction still holds, without the answer, and make sure the
        running row is committed: the call is uncertain."""
        try:
            # on the driver's connection: the session's bookkeeping of the savepoint is off
            self._connection().connection.dbapi_connection.commit()
        except Exception:  # noqa: BLE001 - an aborted transaction: what it held is gone
            logger.warning("bailing: committing what the view left failed", exc_info=True)
        self.rollback()  # the session forgets its transaction (nothing is left to roll back)
        try:
            self._insert(record)
            self.real.commit(self.session)
        except _Duplicate:
            self.rollback()  # the running row was committed (by the view's COMMIT)
        except Exception:  # noqa: BLE001
            self.rollback()
            raise

    def commit(self) -> None:
        try:
            self.real.commit(self.session)
        except BaseException as exc:
            if _classify(exc) is None:
                raise
            self.rollback()
            raise _unavailable(self.adapter, exc) from exc
        self._finish()

    def rollback(self) -> None:
        try:
            self.real.rollback(self.session)
        except Exception:  # noqa: BLE001 - a broken connection: its transaction is gone anyway
            logger.warning("bailing: rollback failed", exc_info=True)
        self._finish()

    def _finish(self) -> None:
        if self.closed:  # the view closed the session: close it now that the call is over
            self.closed = False
            try:
                self.real.close(self.session)
            except Exception:  # noqa: BLE001
                logger.warning("bailing: closing the session failed", exc_info=True)


def _driver_idle(connection: Any) -> bool:
    """Whether the driver's connection under ``connection`` has no transaction open (sqlite3,
    psycopg 3, psycopg2; ``False`` for a driver that does not tell)."""
    try:
        dbapi = connection.connection.dbapi_connection
    except Exception:  # noqa: BLE001 - an invalidated connection: the savepoint check decides
        return False
    if dbapi is None:
        return False
    in_transaction = getattr(dbapi, "in_transaction", None)  # sqlite3
    if isinstance(in_transaction, bool):
        return not in_transaction
    info = getattr(dbapi, "info", None)
    status = getattr(info, "transaction_status", None)  # psycopg 3
    if status is None and hasattr(dbapi, "get_transaction_status"):  # psycopg2
        status = dbapi.get_transaction_status()
    try:
        return status is not None and int(status) == 0  # IDLE
    except (TypeError, ValueError):
        return False


def _translated(adapter: SQLAlchemyTransaction, exc: BaseException) -> BaseException:
    kind = _classify(exc)
    if kind == "duplicate":
        return _Duplicate()
    if kind in ("busy", "locked"):
        return _Busy(str(getattr(exc, "orig", exc)), whole_database=kind == "locked")
    if kind == "error":
        return _unavailable(adapter, exc)
    return exc
