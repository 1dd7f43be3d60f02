"""How :class:`~bailing_flask.stores.SQLStore` reaches its database: engine, connections, errors.

* A URL makes an engine of the store's own (SQLAlchemy ``create_engine``,
  with short connect and statement timeouts unless the URL sets its own).
  Each thread keeps one connection of that engine's pool, in autocommit
  mode: a statement is one round trip, with no ``BEGIN``/``COMMIT`` around
  it and no pool checkout per call.
* An ``Engine`` (``db.engine``), or a Flask-SQLAlchemy ``db`` (its engine
  looked up on first use, inside the app's context), is the app's: its pool,
  credentials, TLS and events apply. The store checks a connection out for
  each operation and gives it back as it found it, so the app's pool is
  never held by idle threads (PostgreSQL: autocommit for the statement, a
  local switch; MySQL: a ``COMMIT`` after it).
* A connection the server dropped (a restart, a failover) is found out by
  the statement that uses it; every operation of the store is safe to
  repeat for the same token, so it is repeated once on a fresh connection
  before the caller sees :class:`StoreUnavailable`.
* Never across ``fork()``: a child forgets the connections its parent
  opened without closing them (that would end the parent's sessions).

SQLAlchemy is imported here, when a store is built, never by ``import
bailing_flask``. Messages name the database as ``driver://host:port/name``:
never a user name or a password.
"""

from __future__ import annotations

import importlib.util
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from bailing_flask.errors import ConfigurationError
from bailing_flask.stores._entries import StoreUnavailable
from bailing_flask.stores._sql_schema import Dialect, SchemaError, check_schema

__all__ = ["Database"]

#: seconds to wait for a connection, and for a statement, of an engine the store made
CONNECT_TIMEOUT = 3
STATEMENT_TIMEOUT = 10

_T = TypeVar("_T")


def _import_sqlalchemy() -> Any:
    try:
        import sqlalchemy
    except ImportError:  # pragma: no cover - exercised only without SQLAlchemy
        raise ConfigurationError(
            "The SQL idempotency store needs SQLAlchemy and a driver: pip install "
            "'bailing_flask[postgresql]' (psycopg) or 'bailing_flask[mysql]' (PyMySQL)."
        ) from None
    return sqlalchemy


def describe(url: Any) -> str:
    """``driver://host:port/database`` of a SQLAlchemy URL: no user name, no password."""
    port = f":{url.port}" if url.port else ""
    return f"{url.drivername}://{url.host or 'localhost'}{port}/{url.database or ''}"


def dialect_of(name: str) -> Dialect:
    if name == "postgresql":
        return "postgresql"
    if name in ("mysql", "mariadb"):
        return "mysql"
    raise ConfigurationError(
        f"SQLStore supports PostgreSQL and MySQL/MariaDB, not {name!r} (for SQLite use "
        "sqlite:///path.db, the SQLite store)."
    )


#: the driver each extra installs (``bailing_flask[postgresql]``, ``[mysql]``), used for a URL
#: that names none (SQLAlchemy 2.0 would pick psycopg2 or mysqlclient, which the extras do not install)
_EXTRA_DRIVERS = {"postgresql": "psycopg", "mysql": "pymysql", "mariadb": "pymysql"}


def engine_from_url(url: str) -> Any:
    """An engine of the store's own for ``url``, with timeouts unless the URL sets them."""
    sqlalchemy = _import_sqlalchemy()
    try:
        parsed = sqlalchemy.engine.make_url(url)
    except Exception:
        raise ConfigurationError(
            "Invalid SQL store URL; expected e.g. postgresql+psycopg://user:password@host/db "
            "or mysql+pymysql://user:password@host/db"
        ) from None
    name = parsed.get_backend_name()
    dialect_of(name)
    driver = _EXTRA_DRIVERS[name]
    if "+" not in parsed.drivername and importlib.util.find_spec(driver) is not None:
        parsed = parsed.set(drivername=f"{name}+{driver}")
    query = dict(parsed.query)
    connect_args: dict[str, Any] = {}
    if name == "postgresql":
        if "connect_timeout" not in query:
            connect_args["connect_timeout"] = CONNECT_TIMEOUT
        if "options" not in query:
            connect_args["options"] = f"-c statement_timeout={STATEMENT_TIMEOUT * 1000}"
    else:
        for option, value in (("connect_timeout", CONNECT_TIMEOUT),
                              ("read_timeout", STATEMENT_TIMEOUT),
                              ("write_timeout", STATEMENT_TIMEOUT)):
            if option not in query:
                connect_args[option] = value
        if "charset" not in query:
            connect_args["charset"] = "utf8mb4"
    try:
        # one kept connection per thread (see Database): no limit but the server's
        return sqlalchemy.create_engine(parsed, connect_args=connect_args, pool_size=8,
                                        max_overflow=-1, pool_reset_on_return=None)
    except ImportError as exc:
        package = "postgresql" if name == "postgresql" else "mysql"
        raise ConfigurationError(
            f"The SQL store URL names a driver that is not installed ({exc.name or exc}): "
            f"pip install 'bailing_flask[{package}]', or name an installed driver in the URL."
        ) from None
    except Exception as exc:
        raise ConfigurationError(
            f"Invalid SQL store URL for {describe(parsed)}: {type(exc).__name__}"
        ) from None


#: a statement (or transaction) the database chose as a deadlock's victim is run again
_DEADLOCK_ATTEMPTS = 5


def _is_deadlock(exc: BaseException) -> bool:
    """PostgreSQL's deadlock or serialization failure, MySQL's 1213 (and lock wait 1205)."""
    if getattr(exc, "sqlstate", None) in ("40P01", "40001"):
        return True
    args: tuple[Any, ...] = tuple(getattr(exc, "args", ()))
    return bool(args) and args[0] in (1213, 1205)


class _Retry(Exception):
    """The connection was dead: run the work again on a new one."""


class Database:
    """The store's database: where its engine comes from, and its connections.

    :param source: a URL, an ``Engine``, or an object with an ``engine``
        attribute (Flask-SQLAlchemy's ``db``) read on first use.
    """

    def __init__(self, source: Any) -> None:
        self._sqlalchemy = _import_sqlalchemy()
        self._lazy: Any = None
        self._engine: Any = None
        if isinstance(source, str):
            self._engine = engine_from_url(source)
            self.owned = True
        elif isinstance(source, self._sqlalchemy.engine.Engine):
            self._engine = source
            self.owned = False
        elif hasattr(type(source), "engine") or hasattr(source, "get_engine"):
            self._lazy = source
            self.owned = False
        else:
            raise ConfigurationError(
                "SQLStore takes a database URL, a SQLAlchemy Engine (db.engine) or a "
                f"Flask-SQLAlchemy object, not {type(source).__name__}."
            )
        self._resolve_lock = threading.Lock()
        self._local = threading.local()
        #: connections kept by threads of this process: id -> (pid, thread, connection)
        self._kept: dict[int, tuple[int, threading.Thread, Any]] = {}
        self._generation = 0
        self._pid = os.getpid()
        self._checked = False
        #: process id -> the lock its threads reset under after a fork (made in that process)
        self._fork_locks: dict[int, threading.Lock] = {}
        self._dialect: Dialect | None = None
        self.returning = False
        self.where = "SQL store"
        if self._engine is not None:
            self._bind(self._engine)

    def _bind(self, engine: Any) -> None:
        self._engine = engine
        self._dialect = dialect_of(engine.dialect.name)
        self.where = f"SQL store at {describe(engine.url)}"
        self._password = engine.url.password or None
        dbapi = engine.dialect.loaded_dbapi
        self._errors: tuple[type[BaseException], ...] = (
            dbapi.Error, self._sqlalchemy.exc.SQLAlchemyError, OSError)

    @property
    def engine(self) -> Any:
        if self._engine is None:
            with self._resolve_lock:
                if self._engine is None:
                    try:
                        engine = self._lazy.engine
                    except RuntimeError as exc:  # Flask-SQLAlchemy outside an app context
                        raise StoreUnavailable(
                            f"SQL store: cannot reach the app's engine ({exc}); use the store "
                            "inside the app, or pass db.engine"
                        ) from None
                    self._bind(engine)
        return self._engine

    @property
    def dialect(self) -> Dialect:
        if self._dialect is None:
            self.engine  # noqa: B018 - resolves it
        assert self._dialect is not None
        return self._dialect

    # -- errors ---------------------------------------------------------------------------

    def unavailable(self, exc: BaseException, what: str = "is unavailable") -> StoreUnavailable:
        target = getattr(exc, "orig", None) or exc
        text = str(target).strip().splitlines()[0] if str(target).strip() else ""
        if self._password:
            text = text.replace(self._password, "***")
        return StoreUnavailable(f"{self.where} {what}: {type(target).__name__}: {text[:300]}")

    # -- connections ----------------------------------------------------------------------

    def run(self, work: Callable[[Any], _T]) -> _T:
        """``work(cursor)`` on a connection outside any transaction; its answer.

        Repeated once on a fresh connection when the first one turns out to
        be dead. Every failure is :class:`StoreUnavailable`.
        """
        self.engine  # noqa: B018 - resolves a Flask-SQLAlchemy engine on first use
        for attempt in range(1, _DEADLOCK_ATTEMPTS + 1):
            try:
                with self._connection() as (raw, cursor):
                    try:
                        self._check_schema_once(cursor)
                        return work(cursor)
                    except self._errors as exc:
                        if attempt == 1 and self._is_disconnect(exc, raw, cursor):
                            self._discard(raw, exc)
                            raise _Retry from exc
                        if attempt < _DEADLOCK_ATTEMPTS and _is_deadlock(exc):
                            # the database rolled it back: run it again, a moment later
                            time.sleep(random.uniform(0.001, 0.005) * attempt)
                            raise _Retry from exc
                        raise
            except _Retry:
                continue
            except StoreUnavailable:
                raise
            except self._errors as exc:
                raise self.unavailable(exc) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _is_disconnect(self, exc: BaseException, raw: Any, cursor: Any) -> bool:
        if not isinstance(exc, self._engine.dialect.loaded_dbapi.Error):
            return False
        try:
            return bool(self._engine.dialect.is_disconnect(exc, raw.dbapi_connection, cursor))
        except Exception:  # pragma: no cover - a dialect that cannot tell
            return False

    @contextmanager
    def _connection(self) -> Iterator[tuple[Any, Any]]:
        if self.owned:
            raw = self._kept_connection()
            cursor = raw.cursor()
            try:
                yield raw, cursor
            finally:
                _close_quietly(cursor)
            return
        raw = self._engine.raw_connection()
        dbapi = raw.dbapi_connection
        postgresql = self._dialect == "postgresql"
        try:
            if postgresql:
                dbapi.autocommit = True
            cursor = raw.cursor()
            try:
                yield raw, cursor
                if not postgresql:
                    dbapi.commit()
            finally:
                _close_quietly(cursor)
        except BaseException:
            if not postgresql and raw.is_valid:
                _rollback_quietly(dbapi)
            raise
        finally:
            if postgresql and raw.is_valid:
                try:
                    dbapi.autocommit = False
                except Exception:  # broken meanwhile: the pool finds out
                    raw.invalidate()
            raw.close()

    def _kept_connection(self) -> Any:
        """This thread's connection of the store's own engine, checked out once and kept."""
        pid = os.getpid()
        if pid != self._pid:
            self._after_fork(pid)
        local = self._local  # after the check: a child's, never the parent's
        raw = getattr(local, "raw", None)
        if raw is not None and local.generation == self._generation and raw.is_valid:
            return raw
        local.raw = None
        self._release_dead_threads(pid)
        raw = self._engine.raw_connection()
        try:
            self._engine.dialect.set_isolation_level(raw.dbapi_connection, "AUTOCOMMIT")
        except BaseException:
            raw.invalidate()
            raw.close()
            raise
        self._kept[id(raw)] = (pid, threading.current_thread(), raw)
        local.raw, local.generation = raw, self._generation
        return raw

    def _discard(self, raw: Any, exc: BaseException) -> None:
        """Drop a dead connection; the next use of this thread opens a new one."""
        try:
            raw.invalidate(exc)
        except Exception:  # pragma: no cover - already gone
            pass
        if self.owned:
            self._kept.pop(id(raw), None)
            self._local.raw = None
            try:
                raw.close()
            except Exception:  # pragma: no cover
                pass

    def _release_dead_threads(self, pid: int) -> None:
        for ident, (owner, thread, raw) in list(self._kept.items()):
            if owner == pid and not thread.is_alive() and self._kept.pop(ident, None) is not None:
                _close_quietly(raw)

    def _after_fork(self, pid: int) -> None:
        """A forked child: forget the parent's connections without closing them.

        Every thread of a new worker may notice at once; one resets, under a
        lock made in this process, while the others wait for it. The process
        id is set last, so a thread that sees it also sees the parent's pool
        replaced: no thread of the child checks out a connection the parent
        left idle (one socket and one server session in two processes).
        """
        with self._fork_locks.setdefault(pid, threading.Lock()):
            if self._pid == pid:
                return
            if self.owned and self._engine is not None:
                self._engine.dispose(close=False)
            self._kept = {}
            self._local = threading.local()
            self._generation += 1
            self._pid = pid

    def _check_schema_once(self, cursor: Any) -> None:
        # no lock: checking twice is harmless, and a lock held across a round trip would be
        # inherited held by a process forked meanwhile, which could then never check
        if not self._checked:
            check_schema(cursor, self.dialect, self.where)
            self._checked = True

    def transaction(self, work: Callable[[Any], _T]) -> _T:
        """``work(cursor)`` inside one transaction, committed if it returns; repeated like :meth:`run`."""
        begin = "BEGIN" if self.dialect == "postgresql" else "START TRANSACTION"

        def in_transaction(cursor: Any) -> _T:
            cursor.execute(begin)
            try:
                answer = work(cursor)
                cursor.execute("COMMIT")
            except BaseException:
                try:
                    cursor.execute("ROLLBACK")
                except Exception:  # the original error is the one worth reporting
                    pass
                raise
            return answer

        return self.run(in_transaction)

    def admin(self, work: Callable[[Any], _T]) -> _T:
        """``work(dbapi_connection)`` on a connection of its own (schema commands)."""
        if self.owned and os.getpid() != self._pid:
            self._after_fork(os.getpid())
        raw = self.engine.raw_connection()
        try:
            return work(raw.dbapi_connection)
        except self._errors as exc:
            raise self.unavailable(exc, "refused") from exc
        finally:
            raw.close()

    def forget_schema_check(self) -> None:
        self._checked = False

    def close(self) -> None:
        pid = os.getpid()
        self._generation += 1
        for ident, (owner, _thread, raw) in list(self._kept.items()):
            if owner == pid and self._kept.pop(ident, None) is not None:
                _close_quietly(raw)
        if self.owned and self._engine is not None and pid == self._pid:
            self._engine.dispose()


def _close_quietly(thing: Any) -> None:
    try:
        thing.close()
    except Exception:
        pass


def _rollback_quietly(dbapi: Any) -> None:
    try:
        dbapi.rollback()
    except Exception:
        pass
