"""The exercise runs the app's code: which database it writes to, and taking the writes back.

``before_request`` functions, the subject loader and the authorizer run
for every request of the exercise, the view's decorators for the admitted
ones, the views of read-only tools with ``--subject``. Whatever they write
goes to the app's database. Where the package can reach that database it
takes the writes back:

* a SQLAlchemy engine (Flask-SQLAlchemy's, or the one of
  :class:`~bailing_flask.transactional.SQLAlchemyTransaction`): for the
  exercise's own requests every ``COMMIT`` through the engine is a
  ``ROLLBACK``, so a commit discards instead of keeping, and what was not
  committed is rolled back when the connection goes back to the pool;
* :class:`~bailing_flask.transactional.DBAPITransaction`: the connection
  ``get_db()`` keeps in ``flask.g`` is handed to the app, for each of the
  exercise's requests, through a proxy whose ``commit()`` rolls back, and
  the request's work is rolled back when the request ends.

Both hold for the exercise's requests only: each is sent in a context of
its own, which :func:`roll_back_here` marks, and the engine's commit and
the ``before_request`` function ask that mark. A request the same process
serves meanwhile (another thread, the hub's call) commits as it always does.
A thread the view hands its request to (``copy_current_request_context``)
commits through the engine in that request, and is rolled back too; a thread
that runs without the request (only an app context, or none), and the
connection a DB-API thread opens for itself, commit as they always do.

Anything else (another database, a file, an e-mail, an HTTP call, a
transaction block the app opens itself on a DB-API connection such as
psycopg's ``conn.transaction()``) is not reached, and the exercise says
what it reaches before it runs.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from flask import Flask, g, has_request_context, request

from bailing_flask.declare import EXERCISE_KEY
from bailing_flask.transactional import DBAPITransaction, SQLAlchemyTransaction, resolve_adapter

__all__ = ["Database", "databases", "rolled_back", "roll_back_here"]

#: Whether the writes of the current context are taken back: set only in the context
#: of one of the exercise's requests (:func:`roll_back_here`), which no other thread or
#: request sees, and which no header or environ key can set.
_ROLL_BACK_HERE: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "bailing_flask.roll_back_here", default=False)


def roll_back_here() -> None:
    """Take back what the app commits in the current context. For a context made for
    one of the exercise's requests (``contextvars.Context().run(...)``), which ends with it."""
    _ROLL_BACK_HERE.set(True)


@dataclass
class Database:
    """One database the app's code may write to during the exercise."""

    #: the URL (password hidden) or file, and who uses it
    name: str
    #: whether the exercise takes back what is written to it
    rolled_back: bool
    #: why it cannot, when it cannot
    why_not: str | None = None
    engine: Any = None
    adapter: DBAPITransaction | None = None

    def describe(self) -> str:
        if self.rolled_back:
            return f"{self.name}: every write is rolled back"
        return f"{self.name}: writes are NOT rolled back ({self.why_not})"


def _engines(app: Flask, adapter: Any) -> dict[int, tuple[Any, str]]:
    found: dict[int, tuple[Any, str]] = {}
    db = app.extensions.get("sqlalchemy")
    engines = getattr(db, "engines", None) if db is not None else None
    for key, engine in (engines or {}).items():
        found[id(engine)] = (engine, "Flask-SQLAlchemy" + (f" bind {key!r}" if key else ""))
    if isinstance(adapter, SQLAlchemyTransaction):
        try:
            bind = adapter.session().get_bind(clause=adapter.table)
        except Exception:  # described below as unreachable
            bind = None
        engine = getattr(bind, "engine", bind)
        if engine is not None and id(engine) not in found:
            found[id(engine)] = (engine, "SQLAlchemyTransaction")
    return found


def _dbapi_name(adapter: DBAPITransaction) -> str:
    conn, dialect = adapter.connection()
    if dialect == "sqlite":
        rows = conn.execute("PRAGMA database_list").fetchall()
        files = [str(row[2]) for row in rows if row[1] == "main"]
        return f"sqlite:///{files[0]}" if files and files[0] else "sqlite (in memory)"
    dsn = getattr(getattr(conn, "info", None), "dsn", "")  # psycopg leaves the password out
    return f"postgresql ({dsn})" if dsn else "postgresql"


def databases(app: Flask) -> list[Database]:
    """The databases the package knows the app to use, each with whether it can be rolled back."""
    from bailing_flask._state import state_of

    found: list[Database] = []
    with app.app_context():
        try:
            adapter = resolve_adapter(state_of(app).config.transaction, app)
        except Exception as exc:  # the settings check reports it
            adapter = None
            found.append(Database("BAILING_TRANSACTION", False, f"it is invalid: {exc}"))
        for engine, who in _engines(app, adapter).values():
            url = engine.url.render_as_string(hide_password=True)
            found.append(Database(f"{url} ({who})", True, engine=engine))
        if isinstance(adapter, DBAPITransaction):
            try:
                name = f"{_dbapi_name(adapter)} (DBAPITransaction)"
            except Exception as exc:
                found.append(Database("DBAPITransaction", False,
                                      f"its connection could not be opened outside a request: "
                                      f"{type(exc).__name__}"))
            else:
                found.append(Database(name, True, adapter=adapter))
    return found


@contextlib.contextmanager
def _engine_commits_roll_back(engine: Any) -> Iterator[None]:
    """While the block runs, a commit through ``engine`` in a context :func:`roll_back_here`
    marked is a rollback; every other commit commits."""
    dialect = engine.dialect
    had_own = "do_commit" in vars(dialect)
    saved = vars(dialect).get("do_commit")
    commit, rollback = dialect.do_commit, dialect.do_rollback

    def do_commit(dbapi_connection: Any) -> None:
        (rollback if _ROLL_BACK_HERE.get() or _handed_an_exercise_request() else commit)(dbapi_connection)

    dialect.do_commit = do_commit
    try:
        yield
    finally:
        if had_own:
            dialect.do_commit = saved
        else:
            del dialect.do_commit


def _handed_an_exercise_request() -> bool:
    """A thread the view hands its request to (``copy_current_request_context``, an executor)
    runs in a context of its own, without the mark, but in the exercise's request."""
    return has_request_context() and EXERCISE_KEY in request.environ


class _Uncommitted:
    """The request's DB-API connection, as the app gets it during the exercise: nothing commits."""

    def __init__(self, connection: Any) -> None:
        object.__setattr__(self, "_connection", connection)

    @property
    def __wrapped__(self) -> Any:
        """The connection itself (``DBAPITransaction`` reads its dialect from it)."""
        return self._connection

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._connection, name, value)

    def commit(self) -> None:
        self._connection.rollback()

    def close(self) -> None:  # closed by the app's teardown, after the exercise rolled it back
        pass

    def __enter__(self) -> _Uncommitted:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._connection.rollback()


_G_KEY = "_bailing_exercise_connection"


class _DBAPIRollback:
    """Per request: the connection ``get_db()`` keeps in ``g`` commits nothing, and is rolled back."""

    def __init__(self, adapter: DBAPITransaction) -> None:
        self.adapter = adapter
        self.unreachable: str | None = None
        #: the package's table was created (if missing) by one of the exercise's requests
        self.made_table = False

    def begin(self) -> None:
        if not _ROLL_BACK_HERE.get():  # not one of the exercise's requests: the app's own
            return
        try:
            # the package's own table, as the app's first call creates it (create_table=True):
            # committed in a transaction of its own, before the request's connection is made
            # one that commits nothing (else the table is rolled back before the call's insert)
            if not self.adapter._created and self.adapter.create_on_first_use:
                self.adapter._ensure_table()
                self.made_table = True
            conn, _ = self.adapter.connection()
        except Exception as exc:  # the app's own code answers for it when it asks
            self.unreachable = f"get_db() raised {type(exc).__name__} in a request"
            return
        for key, value in list(vars(g._get_current_object()).items()):
            if value is conn:
                setattr(g, key, _Uncommitted(conn))
                setattr(g, _G_KEY, (key, conn))
                return
        self.unreachable = ("the connection get_db() returns is not kept in flask.g, so the app "
                            "commits on it directly")

    def end(self, exc: BaseException | None = None) -> None:
        kept = g.pop(_G_KEY, None)
        if kept is None:
            return
        key, conn = kept
        conn.rollback()
        setattr(g, key, conn)  # the app's teardown closes the connection itself


@contextlib.contextmanager
def rolled_back(app: Flask, found: list[Database]) -> Iterator[list[str]]:
    """Take back what the app writes to ``found`` while the block runs; yields notes for the report."""
    notes: list[str] = []
    with contextlib.ExitStack() as stack:
        for database in found:
            if database.engine is not None:
                stack.enter_context(_engine_commits_roll_back(database.engine))
            elif database.adapter is not None:
                watcher = _DBAPIRollback(database.adapter)
                before = app.before_request_funcs.setdefault(None, [])
                teardown = app.teardown_request_funcs.setdefault(None, [])
                before.insert(0, watcher.begin)   # before the app's own functions
                teardown.insert(0, watcher.end)   # teardown functions run in reverse: this one last
                stack.callback(_remove, before, watcher.begin)
                stack.callback(_remove, teardown, watcher.end)
                stack.callback(_note_unreachable, notes, database, watcher)
        yield notes


def _remove(funcs: list[Any], func: Any) -> None:
    for index, listed in enumerate(funcs):
        if listed == func:
            del funcs[index]
            return


def _note_unreachable(notes: list[str], database: Database, watcher: _DBAPIRollback) -> None:
    if watcher.made_table:
        notes.append(f"{database.name}: bailing_flask created its table "
                     f"{watcher.adapter.table_name} where it was missing, as the app's first "
                     "tool call does (committed: it is the package's, not the app's data)")
    if watcher.unreachable:
        database.rolled_back = False
        database.why_not = watcher.unreachable
        notes.append(database.describe())
