"""An app whose business approves its own money transfers, for tests through real servers.

Configured from the environment so gunicorn workers build the same app
(``create_app(**config)`` overrides):

``BAILING_TEST_SECRET``, ``BAILING_STORE``
    The provider secret, and the store the workers (and hosts) share: the
    approval records and the idempotency records live there.
``BAILING_HUB_URL``, ``APPROVAL_CLIENT_TOKEN``
    The (fake) hub that accepts the app's decisions, and the client token
    its approval requests are signed with. Every approval request is
    approved by the app's handler at once, through ``bailing.hub_client()``.
``APPROVAL_DATABASE``
    A SQLite file: one row per transfer that ran (``transfers``) and per
    export that ran (``exports``), the side effects to count.
``TXN_BACKEND``, ``TXN_DATABASE``
    Also serve ``transfer_txn`` in the transaction mode, on ``sqlite3`` (a
    file), ``psycopg`` (a libpq conninfo string) or ``sqlalchemy`` (a
    SQLAlchemy URL): its transfer is a row of that database.
``APPROVAL_FAIL_FILE``
    While this file exists, ``transfer_txn`` answers 500 after its insert (its
    transaction rolls back) and removes the file: the next call runs normally.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from flask import Flask, g, jsonify
from pydantic import BaseModel, Field
from sqlalchemy.orm import Mapped, mapped_column

from bailing_flask import Bailing, current_call, tool
from bailing_flask.hub.payloads import ApprovalRequest
from bailing_flask.transactional import DBAPITransaction, SQLAlchemyTransaction, create_table_sql

from ..helpers import sqlite_wal

SUBJECT = "t1:alice"


class Transfer(BaseModel):
    amount: float = Field(gt=0, le=10**6, description="Amount to send.")
    to: str = Field(min_length=1, max_length=100, description="Who receives it.")


class ExportQuery(BaseModel):
    limit: int = Field(ge=1, le=1000, description="Rows to export.")


def _effects(path: str) -> sqlite3.Connection:
    conn: sqlite3.Connection = sqlite_wal(path)
    conn.execute("CREATE TABLE IF NOT EXISTS transfers (id INTEGER PRIMARY KEY, job TEXT, "
                 "amount REAL, recipient TEXT)")
    conn.execute("CREATE TABLE IF NOT EXISTS exports (id INTEGER PRIMARY KEY, job TEXT)")
    return conn


def transfers(path: str, table: str = "transfers") -> int:
    """How many transfers (or exports) ran, from outside the app."""
    conn = _effects(path)
    try:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    finally:
        conn.close()


def create_app(**config: Any) -> Flask:
    app = Flask("approval_app")
    app.config.update(
        BAILING_SECRETS=[os.environ.get("BAILING_TEST_SECRET", "x" * 40)],
        BAILING_STORE=os.environ.get("BAILING_STORE", "memory://"),
        BAILING_HUB_URL=os.environ.get("BAILING_HUB_URL", "http://127.0.0.1:9"),
        BAILING_CLIENT_TOKENS=[os.environ.get("APPROVAL_CLIENT_TOKEN", "client-token-" + "y" * 32)],
        APPROVAL_DATABASE=os.environ.get("APPROVAL_DATABASE", ""),
        TXN_BACKEND=os.environ.get("TXN_BACKEND", ""),
        TXN_DATABASE=os.environ.get("TXN_DATABASE", ""),
        APPROVAL_FAIL_FILE=os.environ.get("APPROVAL_FAIL_FILE", ""),
    )
    app.config.update(config)
    if app.config["TXN_BACKEND"]:
        _transactional_transfer(app)  # sets BAILING_TRANSACTION, which init_app reads
    bailing = Bailing(app)
    bailing.authorizer(lambda call: call.subject == SUBJECT)

    @bailing.approval_request
    def approve_at_once(approval: ApprovalRequest) -> None:
        bailing.hub_client().decide_approval(approval, "approved", approver="finance-1",
                                             decision_id=f"biz:{approval.approval_id}")

    @app.post("/transfers")
    @tool(scope="money.transfer", risk="high", body=Transfer, business_approval=True)
    def transfer() -> Any:
        """Send money (the side effect is one row)."""
        conn = _effects(app.config["APPROVAL_DATABASE"])
        try:
            cursor = conn.execute("INSERT INTO transfers (job, amount, recipient) VALUES (?, ?, ?)",
                                  (current_call.job_id, current_call.args["amount"],
                                   current_call.args["to"]))
        finally:
            conn.close()
        return jsonify(transfer_id=cursor.lastrowid), 201

    @app.get("/exports")
    @tool(scope="customers.export", query=ExportQuery, business_approval=True)
    def export() -> Any:
        """Export customer rows (read-only: no de-duplication; each run is a row)."""
        conn = _effects(app.config["APPROVAL_DATABASE"])
        try:
            conn.execute("INSERT INTO exports (job) VALUES (?)", (current_call.job_id,))
        finally:
            conn.close()
        return jsonify(rows=[])

    return app


def _fail_once(app: Flask) -> bool:
    path = app.config["APPROVAL_FAIL_FILE"]
    if path and os.path.exists(path):
        os.unlink(path)
        return True
    return False


def connect(backend: str, database: str) -> Any:
    if backend == "sqlite3":
        return sqlite_wal(database)
    import psycopg

    return psycopg.connect(database)


def _transactional_transfer(app: Flask) -> None:
    backend, database = app.config["TXN_BACKEND"], app.config["TXN_DATABASE"]
    if backend == "sqlalchemy":
        insert, rollback = _sqlalchemy(app, database)
    else:
        insert, rollback = _dbapi(app, backend, database)

    @app.post("/transfers/txn")
    @tool(scope="money.transfer", risk="high", body=Transfer, business_approval=True,
          repeats="transaction")
    def transfer_txn() -> Any:
        """Send money in the app's own transaction."""
        if app.config.get("VIEW_ROLLS_BACK"):  # the view gives its work up, then does it again
            insert(commit=False)
            rollback()
        transfer_id = insert()
        if app.config.get("VIEW_COMMITS"):  # what a DB-API view must not do: COMMIT by itself
            g.txn_db.commit()
        if _fail_once(app):
            return jsonify(ok=False), 500
        return jsonify(transfer_id=transfer_id), 201


def _dbapi(app: Flask, backend: str, database: str) -> tuple[Any, Any]:
    dialect = "sqlite" if backend == "sqlite3" else "postgresql"
    key = "INTEGER PRIMARY KEY" if backend == "sqlite3" else "SERIAL PRIMARY KEY"
    setup = connect(backend, database)
    try:  # the app's migration: its own table and the records table
        if backend == "psycopg":  # gunicorn workers start together: one migrates at a time
            setup.execute("SELECT pg_advisory_xact_lock(8152017)")
        for statement in [f"CREATE TABLE IF NOT EXISTS transfers (id {key}, job TEXT, "
                          "amount REAL, recipient TEXT)", *create_table_sql(dialect).split(";\n")]:
            if statement.strip():
                setup.execute(statement)
        setup.commit()
    finally:
        setup.close()

    def get_db() -> Any:
        if "txn_db" not in g:
            g.txn_db = connect(backend, database)
        return g.txn_db

    @app.teardown_appcontext
    def close_db(exc: BaseException | None = None) -> None:
        conn = g.pop("txn_db", None)
        if conn is not None:
            conn.close()

    app.config["BAILING_TRANSACTION"] = DBAPITransaction(get_db, create_table=False)
    mark = "?" if backend == "sqlite3" else "%s"

    def insert(commit: bool = True) -> int:
        cursor = get_db().execute(
            f"INSERT INTO transfers (job, amount, recipient) VALUES ({mark}, {mark}, {mark}) "
            "RETURNING id", (current_call.job_id, current_call.args["amount"],
                             current_call.args["to"]))
        return int(cursor.fetchone()[0])

    def rollback() -> None:
        raise AssertionError("DB-API views leave the transaction to the package")

    return insert, rollback


def _sqlalchemy(app: Flask, database: str) -> tuple[Any, Any]:
    from flask_sqlalchemy import SQLAlchemy

    app.config.setdefault("SQLALCHEMY_DATABASE_URI", database)
    db = SQLAlchemy()

    class TransferRow(db.Model):  # type: ignore[name-defined,misc]
        __tablename__ = "transfers"
        id: Mapped[int] = mapped_column(primary_key=True)
        job: Mapped[str | None]
        amount: Mapped[float]
        recipient: Mapped[str]

    db.init_app(app)
    app.config["BAILING_TRANSACTION"] = SQLAlchemyTransaction(db)
    with app.app_context():
        db.create_all()  # the records table too: it is defined on db.metadata

    def insert(commit: bool = True) -> int:
        row = TransferRow(job=current_call.job_id, amount=current_call.args["amount"],
                          recipient=current_call.args["to"])
        db.session.add(row)
        if commit:
            db.session.commit()  # as views do; in the transaction mode this is a flush
        else:
            db.session.flush()
        return int(row.id)

    def rollback() -> None:
        db.session.rollback()

    return insert, rollback


def query(backend: str, database: str, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    """Rows of ``sql`` (``?`` placeholders) on the transactional database, from outside."""
    if backend == "sqlalchemy":
        from sqlalchemy import create_engine

        engine = create_engine(database)
        try:
            with engine.connect() as conn:
                return [tuple(row) for row in conn.exec_driver_sql(sql, params).all()]
        finally:
            engine.dispose()
    conn = connect(backend, database)
    try:
        text = sql if backend == "sqlite3" else sql.replace("?", "%s")
        return [tuple(row) for row in conn.execute(text, params).fetchall()]
    finally:
        conn.close()
