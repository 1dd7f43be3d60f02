"""An app whose side effect is a row in the app's own database, in the transaction mode.

Configured from the environment so gunicorn workers and ``flask`` CLI
subprocesses build the same app (``create_app(**config)`` overrides):

``TXN_BACKEND``
    ``sqlalchemy`` (Flask-SQLAlchemy, ``TXN_DATABASE`` is a SQLAlchemy URL),
    ``sqlite3`` or ``psycopg`` (a plain DB-API connection per request in
    ``g``; ``TXN_DATABASE`` is a file path or a libpq conninfo string).
``TXN_KILL_FILE``
    A file naming the moment to SIGKILL the worker at: ``in_view`` (after the
    business row, before the view returns), ``before_commit`` (the answer is
    in the row, the COMMIT not sent), ``after_commit`` (committed, nothing
    sent yet), ``during_response`` (committed, part of the body sent) or
    ``after_raw_commit`` (right after a view's own ``COMMIT``, ``misuse``
    ``raw_commit``). The file is removed before the kill, so the replay does
    not die too.
``TXN_DELAY``
    Seconds the view sleeps after its insert (concurrency tests).

Every view commits by itself, as views do: ``db.session.commit()``, or the
DB-API ``transaction()`` helper below, which opens a savepoint when a
transaction is already open (the package's).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from flask import Flask, abort, g, jsonify
from pydantic import BaseModel, Field
from sqlalchemy.orm import Mapped, mapped_column

from bailing_flask import Bailing, current_call, tool
from bailing_flask.transactional import DBAPITransaction, SQLAlchemyTransaction, create_table_sql

from ..helpers import one_process_at_a_time, sqlite_wal


class RefundBody(BaseModel):
    order_id: int = Field(description="Order.", ge=1, le=10**9)
    amount: float = Field(description="Amount.", gt=0, le=10**6)
    fail: int = Field(0, description="Answer with this status after the insert (tests).", ge=0, le=599)
    crash: bool = Field(False, description="Raise after the insert (tests).")
    refuse: int = Field(0, description="abort() with this status after the insert (tests).", ge=0, le=599)
    twice: bool = Field(False, description="Insert a duplicate order id, catch it, roll back (tests).")
    commit_early: bool = Field(False, description="DB-API: COMMIT on the connection itself (tests).")
    misuse: str = Field("", description="What the view does to the session after its insert "
                        "(tests; see MISUSES).", max_length=40)


#: What a view may do to its SQLAlchemy session after its first insert (``misuse``):
#: ``commit_close`` commit() then close(); ``close`` an uncommitted second row, then close();
#: ``rollback`` an uncommitted second row, then rollback(); ``remove`` db.session.remove();
#: ``nested`` a second row in begin_nested() and a third in a savepoint it rolls back;
#: ``raw_commit`` execute(text("COMMIT")), then a second row; ``other_connection`` a second row
#: committed on another connection of the engine; ``remove_then_commit`` db.session.remove(),
#: then a second row committed by the new session.
MISUSES = ("commit_close", "close", "rollback", "remove", "nested", "raw_commit",
           "other_connection", "remove_then_commit")


def _kill_at(moment: str) -> None:
    path = os.environ.get("TXN_KILL_FILE")
    if not path:
        return
    try:
        with open(path, encoding="utf-8") as fh:
            wanted = fh.read().strip()
    except FileNotFoundError:
        return
    if wanted == moment:
        os.unlink(path)
        os.kill(os.getpid(), signal.SIGKILL)


class KillingConnection:
    """A DB-API connection that can die just before or just after its commit."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)

    def commit(self) -> None:
        _kill_at("before_commit")
        self._raw.commit()
        _kill_at("after_commit")


def _schema(backend: str) -> list[str]:
    key = "INTEGER PRIMARY KEY" if backend == "sqlite3" else "SERIAL PRIMARY KEY"
    return [f"CREATE TABLE IF NOT EXISTS refunds (id {key}, order_id INTEGER NOT NULL, "
            "amount REAL NOT NULL, job TEXT, ref TEXT UNIQUE)"]


def connect(backend: str, database: str, timeout: float = 15) -> Any:
    if backend == "sqlite3":
        return sqlite_wal(database, timeout)
    import psycopg

    return psycopg.connect(database)


def count(config: dict[str, Any]) -> int:
    """How many business rows exist (from outside the app)."""
    backend, database = config["TXN_BACKEND"], config["TXN_DATABASE"]
    if backend == "sqlalchemy":
        from sqlalchemy import create_engine, text

        engine = create_engine(database)
        try:
            with engine.connect() as conn:
                return int(conn.execute(text("SELECT COUNT(*) FROM refunds")).scalar_one())
        finally:
            engine.dispose()
    conn = connect(backend, database)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM refunds").fetchone()[0])
    finally:
        conn.close()


def create_app(**config: Any) -> Flask:
    app = Flask("txn_app")
    app.config.update(
        BAILING_SECRETS=[os.environ.get("BAILING_TEST_SECRET", "x" * 40)],
        BAILING_STORE="memory://",
        TXN_BACKEND=os.environ.get("TXN_BACKEND", "sqlalchemy"),
        TXN_DATABASE=os.environ.get("TXN_DATABASE", "sqlite://"),
        TXN_DELAY=float(os.environ.get("TXN_DELAY", "0")),
        TXN_SQLITE_TIMEOUT=15.0,  # seconds a SQLite connection waits for the write lock
    )
    app.config.update(config)
    backend = app.config["TXN_BACKEND"]
    if backend == "sqlalchemy":
        insert, rollback, commit_early, misuse = _sqlalchemy(app)
    else:
        insert, rollback, commit_early, misuse = _dbapi(app, backend)
    bailing = Bailing(app)
    bailing.authorizer(lambda call: call.subject is not None)

    @app.post("/api/refunds")
    @tool(scope="refund.write", body=RefundBody, repeats="transaction")
    def refund_create() -> Any:
        """Create a refund (the side effect is one row, committed by the view)."""
        body = current_call.args
        ref = current_call.job_id if body.get("twice") else None
        refund_id = insert(body["order_id"], body["amount"], ref)
        if body.get("twice"):  # the same ref again: a unique violation the view handles
            try:
                insert(body["order_id"], body["amount"], ref)
            except Exception:  # noqa: BLE001 - IntegrityError of either stack
                rollback()
                refund_id = insert(body["order_id"] + 1, body["amount"])
        if body.get("commit_early"):
            commit_early()
        if body.get("misuse"):
            misuse(body["misuse"], body["order_id"], body["amount"])
        _kill_at("in_view")
        if app.config["TXN_DELAY"]:
            time.sleep(app.config["TXN_DELAY"])
        if body.get("crash"):
            raise RuntimeError("the view failed after its insert")
        if body.get("refuse"):
            abort(body["refuse"])
        if body.get("fail"):
            return jsonify(ok=False, refund_id=refund_id), body["fail"]
        return jsonify(ok=True, refund_id=refund_id), 201

    @app.post("/api/refunds/stored")
    @tool(scope="refund.write", body=RefundBody)
    def refund_create_store_mode() -> Any:
        """The same view in the store mode (for comparison)."""
        body = current_call.args
        return jsonify(ok=True, refund_id=insert(body["order_id"], body["amount"])), 201

    @app.get("/api/refunds/count")
    @tool(scope="refund.read")
    def refund_count() -> Any:
        """How many refunds exist."""
        return jsonify(count=count(app.config))

    original = app.wsgi_app

    def dying_response(environ: Any, start_response: Any) -> Iterator[bytes]:
        chunks = original(environ, start_response)
        try:
            for chunk in chunks:
                if len(chunk) > 4 and os.environ.get("TXN_KILL_FILE"):
                    yield chunk[:4]
                    _kill_at("during_response")
                    yield chunk[4:]
                else:
                    yield chunk
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()

    app.wsgi_app = dying_response  # type: ignore[method-assign,assignment]
    return app


@contextmanager
def _one_migration_at_a_time(database: str) -> Iterator[None]:
    """Serialise the schema creation of gunicorn workers that start together on one SQLite file.

    ``create_all`` checks for each table and then creates it, so two workers
    both see it missing and the second one fails to boot ("table already
    exists"), which makes gunicorn stop the whole server. PostgreSQL takes an
    advisory lock inside the transaction instead.
    """
    if not database.startswith("sqlite:///"):
        yield
        return
    with one_process_at_a_time(database[len("sqlite:///"):]):
        yield


def _sqlalchemy(app: Flask) -> tuple[Any, Any, Any]:
    from flask_sqlalchemy import SQLAlchemy
    from sqlalchemy import event

    database = app.config["TXN_DATABASE"]
    app.config.setdefault("SQLALCHEMY_DATABASE_URI", database)
    if database.startswith("sqlite"):
        app.config.setdefault("SQLALCHEMY_ENGINE_OPTIONS",
                              {"connect_args": {"timeout": app.config["TXN_SQLITE_TIMEOUT"]}})
    db = SQLAlchemy()

    class Refund(db.Model):  # type: ignore[name-defined,misc]
        __tablename__ = "refunds"
        id: Mapped[int] = mapped_column(primary_key=True)
        order_id: Mapped[int]
        amount: Mapped[float]
        job: Mapped[str | None]
        ref: Mapped[str | None] = mapped_column(unique=True)

    db.init_app(app)
    app.config["BAILING_TRANSACTION"] = SQLAlchemyTransaction(db)
    with app.app_context(), _one_migration_at_a_time(database):
        with db.engine.begin() as conn:
            if database.startswith("sqlite"):
                conn.exec_driver_sql("PRAGMA journal_mode=WAL")
            else:  # gunicorn workers start together: one migrates at a time
                conn.exec_driver_sql("SELECT pg_advisory_xact_lock(8152016)")
            db.metadata.create_all(conn)  # the records table too: it is defined on db.metadata
    session_class = db.session.session_factory.class_
    # the transaction's own commit, not the release of a savepoint (which fires the same events)
    event.listen(session_class, "before_commit", lambda session: session.get_nested_transaction()
                 is None and _kill_at("before_commit"))
    event.listen(session_class, "after_commit", lambda session: session.get_nested_transaction()
                 is None and _kill_at("after_commit"))

    def insert(order_id: int, amount: float, ref: str | None = None) -> int:
        refund = Refund(order_id=order_id, amount=amount, job=current_call.job_id, ref=ref)
        db.session.add(refund)
        db.session.commit()  # as views do; in the transaction mode this is a flush
        return int(refund.id)

    def rollback() -> None:
        db.session.rollback()

    def commit_early() -> None:
        raise AssertionError("not for the SQLAlchemy backend")

    def misuse(mode: str, order_id: int, amount: float) -> None:
        from sqlalchemy import insert as sql_insert, text

        second = Refund(order_id=order_id + 1, amount=amount, job=current_call.job_id)
        if mode == "commit_close":
            db.session.commit()
            db.session.close()
        elif mode in ("close", "rollback"):
            db.session.add(second)
            db.session.flush()  # written, not committed: close() and rollback() undo it
            db.session.close() if mode == "close" else db.session.rollback()
        elif mode == "remove":
            db.session.remove()
        elif mode == "nested":
            with db.session.begin_nested():
                db.session.add(second)
            try:
                with db.session.begin_nested():
                    db.session.add(Refund(order_id=order_id + 2, amount=amount, ref="dup"))
                    db.session.add(Refund(order_id=order_id + 3, amount=amount, ref="dup"))
            except Exception:  # noqa: BLE001 - IntegrityError: that savepoint rolled back
                pass
            db.session.commit()
        elif mode == "raw_commit":
            db.session.execute(text("COMMIT"))
            _kill_at("after_raw_commit")
            insert(order_id + 1, amount)
        elif mode == "other_connection":
            with db.engine.connect() as other:
                other.execute(sql_insert(Refund).values(order_id=order_id + 1, amount=amount,
                                                        job=current_call.job_id))
                other.commit()
        elif mode == "remove_then_commit":
            db.session.remove()
            insert(order_id + 1, amount)  # a new session: its commit is a real one
        else:
            raise AssertionError(mode)

    return insert, rollback, commit_early, misuse


def _dbapi(app: Flask, backend: str) -> tuple[Any, Any, Any]:
    database = app.config["TXN_DATABASE"]
    dialect = "sqlite" if backend == "sqlite3" else "postgresql"
    setup = connect(backend, database)
    try:  # the app's migration: its own table and the records table
        if backend == "psycopg":  # gunicorn workers start together: one migrates at a time
            setup.execute("SELECT pg_advisory_xact_lock(8152016)")
        for statement in _schema(backend) + create_table_sql(dialect).split(";\n"):
            if statement.strip():
                setup.execute(statement)
        setup.commit()
    finally:
        setup.close()

    def get_db() -> Any:
        if "txn_db" not in g:
            g.txn_db = KillingConnection(connect(backend, database, app.config["TXN_SQLITE_TIMEOUT"]))
        return g.txn_db

    @app.teardown_appcontext
    def close_db(exc: BaseException | None = None) -> None:
        conn = g.pop("txn_db", None)
        if conn is not None:
            conn.close()

    # dialect= because KillingConnection hides the driver; the migration created the table
    app.config["BAILING_TRANSACTION"] = DBAPITransaction(get_db, dialect=dialect,  # type: ignore[arg-type]
                                                         create_table=False)

    @contextmanager
    def transaction(conn: Any) -> Iterator[Any]:
        """The app's own helper: BEGIN/COMMIT, or a savepoint inside an open transaction."""
        if backend == "psycopg":
            with conn.transaction():  # BEGIN/COMMIT, or a savepoint inside an open transaction
                yield conn
            return
        nested = conn.in_transaction
        conn.execute("SAVEPOINT app" if nested else "BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK TO app" if nested else "ROLLBACK")
            if nested:
                conn.execute("RELEASE app")
            raise
        conn.execute("RELEASE app" if nested else "COMMIT")

    def insert(order_id: int, amount: float, ref: str | None = None) -> int:
        conn = get_db()
        with transaction(conn):
            cursor = conn.execute(
                "INSERT INTO refunds (order_id, amount, job, ref) VALUES (?, ?, ?, ?) RETURNING id".replace(
                    "?", "?" if backend == "sqlite3" else "%s"),
                (order_id, amount, current_call.job_id, ref))
            return int(cursor.fetchone()[0])

    def rollback() -> None:
        pass  # the helper rolled its savepoint back already

    def commit_early() -> None:
        get_db().commit()  # what a transactional view must not do

    def misuse(mode: str, order_id: int, amount: float) -> None:
        if mode == "raw_commit":  # what a transactional view must not do, then more
            get_db().commit()
            _kill_at("after_raw_commit")
            insert(order_id + 1, amount)
        elif mode == "rollback":  # the connection's own ROLLBACK: the reservation goes too
            get_db().rollback()
        elif mode == "commit_close":  # the legacy pattern, on the connection itself
            get_db().commit()
            get_db().close()
        else:
            raise AssertionError(mode)

    return insert, rollback, commit_early, misuse


def query(config: dict[str, Any], sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` (``?`` placeholders) on the app's database, from outside the app."""
    backend, database = config["TXN_BACKEND"], config["TXN_DATABASE"]
    if backend == "sqlalchemy":
        from sqlalchemy import create_engine

        engine = create_engine(database)
        try:
            with engine.connect() as conn:
                paramstyle = conn.dialect.paramstyle
                text = sql if paramstyle == "qmark" else sql.replace("?", "%s")
                return [tuple(row) for row in conn.exec_driver_sql(text, params).all()]
        finally:
            engine.dispose()
    conn = connect(backend, database)
    try:
        text = sql if backend == "sqlite3" else sql.replace("?", "%s")
        return [tuple(row) for row in conn.execute(text, params).fetchall()]
    finally:
        conn.close()
