"""An app whose ordinary code writes to its database on every request the exercise sends.

Three patterns of long-lived apps: a ``before_request`` function that logs
each visit, a subject loader that creates the users it does not know, and a
decorator on a tool's view that charges a credit. Each commits. The
database is a real SQLite file (``EXERCISE_DB``), reached through
Flask-SQLAlchemy (``create_app()``) or through a plain ``sqlite3``
connection kept in ``g`` (``create_app('dbapi')``); ``transaction=True``
configures the package's transaction adapter for it. Start it with
``flask --app 'tests.apps.exercise_db_app:create_app()' bailing check --exercise``.
"""

from __future__ import annotations

import functools
import os
import sqlite3
from collections.abc import Callable
from typing import Any

from flask import Flask, jsonify, request

from bailing_flask import Bailing, get_current_call, tool

from ..helpers import STRONG_SECRET, sqlite_in_g

TABLES = ("visits", "users", "charges")
#: every call of the app's own functions, in this process (the database forgets; this does not)
CALLS: list[str] = []


def _path() -> str:
    return os.environ["EXERCISE_DB"]


def rows(path: str | None = None) -> dict[str, int]:
    """How many rows each table holds, read from the file with a connection of its own."""
    with sqlite3.connect(path or _path()) as conn:
        return {table: conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] for table in TABLES}


def create_schema(path: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS visits (id INTEGER PRIMARY KEY, path TEXT)")
        conn.execute("CREATE TABLE IF NOT EXISTS users (id INTEGER PRIMARY KEY, subject TEXT UNIQUE)")
        conn.execute("CREATE TABLE IF NOT EXISTS charges (id INTEGER PRIMARY KEY, subject TEXT)")
        conn.execute("INSERT OR IGNORE INTO users (subject) VALUES ('t1:alice')")


def create_app(kind: str = "sqlalchemy", transaction: bool = True,
               hold: Callable[[Any], Any] | None = None) -> Flask:
    """``hold``: a decorator put in front of ``charge_credit`` on both tools (a test's pause)."""
    path = _path()
    create_schema(path)
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    if kind == "sqlalchemy":
        execute, commit = _sqlalchemy(app, path, transaction)
    else:
        execute, commit = _dbapi(app, path, transaction)
    bailing = Bailing(app)

    @app.before_request
    def log_visit() -> None:
        CALLS.append("log_visit")
        execute("INSERT INTO visits (path) VALUES (?)", (request.path,))
        commit()

    @bailing.subject_loader
    def load_or_create_user(subject: str) -> Any:
        CALLS.append("load_or_create_user")
        found = execute("SELECT subject FROM users WHERE subject = ?", (subject,)).fetchone()
        if found is None:  # "first time we see this user: provision an account"
            execute("INSERT INTO users (subject) VALUES (?)", (subject,))
            commit()
        return subject

    bailing.authorizer(lambda call: call.user == "t1:alice")

    def charge_credit(view: Any) -> Any:
        @functools.wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            CALLS.append("charge_credit")
            call = get_current_call()
            execute("INSERT INTO charges (subject) VALUES (?)", (call.subject if call else None,))
            commit()
            return view(*args, **kwargs)

        return wrapper if hold is None else hold(wrapper)

    @app.get("/api/report")
    @charge_credit
    @tool(scope="report.read")
    def report() -> Any:
        """A report that costs one credit."""
        return jsonify(report="ok")

    @app.post("/api/notes")
    @charge_credit
    @tool(scope="note.write")
    def add_note() -> Any:
        """Add a note."""
        return jsonify(ok=True), 201

    if transaction:
        @app.post("/api/credits")
        @tool(scope="credit.write", repeats="transaction")
        def add_credit() -> Any:
            """Add a credit, recorded in the app's own transaction."""
            execute("INSERT INTO charges (subject) VALUES (?)", ("credit",))
            return jsonify(ok=True), 201

    return app


def _sqlalchemy(app: Flask, path: str, transaction: bool) -> tuple[Any, Any]:
    from flask_sqlalchemy import SQLAlchemy
    from sqlalchemy import text

    app.config["SQLALCHEMY_DATABASE_URI"] = f"sqlite:///{path}"
    if transaction:
        app.config["BAILING_TRANSACTION"] = "sqlalchemy"
    db = SQLAlchemy(app)

    def execute(sql: str, params: tuple[Any, ...]) -> Any:
        names = iter(f"p{i}" for i in range(len(params)))
        statement = text("".join(next(names).join((":", "")) if c == "?" else c for c in sql))
        return db.session.execute(statement, {f"p{i}": v for i, v in enumerate(params)})

    return execute, db.session.commit


def _dbapi(app: Flask, path: str, transaction: bool) -> tuple[Any, Any]:
    from bailing_flask.transactional import DBAPITransaction

    get_db = sqlite_in_g(app, path)
    if transaction:
        app.config["BAILING_TRANSACTION"] = DBAPITransaction(get_db)
    return (lambda sql, params: get_db().execute(sql, params)), (lambda: get_db().commit())
