"""Exactly once: the record commits in the view's own transaction (bailing_flask.transactional).

In-process tests run every rule on four stacks: Flask-SQLAlchemy on SQLite
and on PostgreSQL, and plain DB-API connections (sqlite3, psycopg). The
tests that kill real gunicorn workers are in test_transactional_kill.py.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from flask import Blueprint, Flask, jsonify

from bailing_flask import Bailing, ConfigurationError, ToolDeclarationError, tool, tool_defaults
from bailing_flask.responses import REPLAY_HEADER
from bailing_flask.stores import StoredResponse
from bailing_flask.testing import HubSimulator, signed_headers
from bailing_flask.transactional import DBAPITransaction, SQLAlchemyTransaction, create_table_sql

from .helpers import STRONG_SECRET, FrozenClock
from .apps.txn_app import count, create_app
from bailing_flask._state import state_of
from bailing_flask._pipeline.registry import registry_of
from bailing_flask._pipeline.idempotency import idempotency_of

ARGS = {"order_id": 7, "amount": 12.5}
BACKENDS = ["sqlalchemy-sqlite", "sqlite3", "psycopg", "sqlalchemy-postgresql"]


def backend_config(kind: str, request: Any, tmp_path: Any) -> dict[str, str]:
    if kind == "sqlalchemy-sqlite":
        return {"TXN_BACKEND": "sqlalchemy", "TXN_DATABASE": f"sqlite:///{tmp_path / 'app.sqlite3'}"}
    if kind == "sqlite3":
        return {"TXN_BACKEND": "sqlite3", "TXN_DATABASE": str(tmp_path / "app.sqlite3")}
    database = request.getfixturevalue("postgres_database")
    if kind == "psycopg":
        return {"TXN_BACKEND": "psycopg", "TXN_DATABASE": database.conninfo}
    return {"TXN_BACKEND": "sqlalchemy", "TXN_DATABASE": database.url}


@pytest.fixture(params=BACKENDS)
def config(request, tmp_path):
    return backend_config(request.param, request, tmp_path)


@pytest.fixture
def app(config):
    app = create_app(BAILING_SECRETS=[STRONG_SECRET], **config)
    yield app
    db = app.extensions.get("sqlalchemy")
    if db is not None:
        with app.app_context():
            db.engine.dispose()


@pytest.fixture
def hub(app):
    return HubSimulator(app, STRONG_SECRET)


def rows(app: Flask) -> int:
    return count(app.config)


def records(app: Flask, state: str | None = None) -> list[Any]:
    adapter = idempotency_of(state_of(app)).transactional().adapter()
    with app.app_context():
        return adapter.list(state=state)  # type: ignore[union-attr,arg-type]


def test_a_repeat_of_a_committed_call_gets_the_stored_answer_and_runs_nothing(app, hub):
    request = hub.build_call("refund_create", ARGS, subject="t1:u1")
    first = hub.replay(request)
    second = hub.replay(request)
    assert first.status == 201, first.text
    assert REPLAY_HEADER not in first.headers
    assert (second.status, second.body) == (201, first.body)
    assert second.headers.get(REPLAY_HEADER) == "true"
    assert second.headers.get("Content-Type") == first.headers.get("Content-Type")
    assert rows(app) == 1
    (record,) = records(app)
    assert record.state == "completed" and record.meta.subject == "t1:u1"
    assert record.meta.tool == "refund_create" and record.response.status == 201


def test_a_different_job_is_another_call(app, hub):
    assert hub.call("refund_create", ARGS, subject="t1:u1").status == 201
    assert hub.call("refund_create", ARGS, subject="t1:u1").status == 201
    assert rows(app) == 2


def test_a_view_that_raised_rolled_back_and_an_identical_call_runs_again(app, hub, caplog):
    caplog.set_level(logging.INFO, logger="bailing_flask")
    request = hub.build_call("refund_create", {**ARGS, "crash": True}, subject="t1:u1")
    for _ in range(2):  # the second attempt runs the view again: nothing was uncertain
        assert hub.replay(request).status == 500
        assert rows(app) == 0  # its insert rolled back with the reservation
    assert records(app) == []
    assert caplog.text.count("raised RuntimeError: its transaction rolled back") == 2


def test_a_5xx_rolls_back_and_runs_again(app, hub):
    request = hub.build_call("refund_create", {**ARGS, "fail": 503}, subject="t1:u1")
    answers = [hub.replay(request) for _ in range(2)]
    assert [a.status for a in answers] == [503, 503]
    assert all(REPLAY_HEADER not in a.headers for a in answers)
    assert rows(app) == 0 and records(app) == []


@pytest.mark.parametrize("flag", ["refuse", "fail"])
def test_a_4xx_answer_commits_with_the_views_changes_and_is_replayed(app, hub, flag):
    request = hub.build_call("refund_create", {**ARGS, flag: 409}, subject="t1:u1")
    first, second = hub.replay(request), hub.replay(request)
    assert (first.status, second.status) == (409, 409)
    assert second.headers.get(REPLAY_HEADER) == "true" and second.body == first.body
    assert rows(app) == 1


def test_a_view_that_handles_its_own_integrity_error_keeps_exactly_once(app, hub, config):
    """The view commits, catches the unique violation and rolls back, as views do."""
    request = hub.build_call("refund_create", {**ARGS, "twice": True}, subject="t1:u1")
    first, second = hub.replay(request), hub.replay(request)
    assert first.status == 201, first.text
    assert second.headers.get(REPLAY_HEADER) == "true" and second.body == first.body
    # rollback() goes back to the view's last commit, as it would without the package (the
    # DB-API helper rolled its savepoint back): the first row and the replacement
    assert rows(app) == 2
    assert [r.state for r in records(app)] == ["completed"]


def test_concurrent_duplicates_one_runs_the_others_wait_and_get_its_answer(config, tmp_path):
    app = create_app(BAILING_SECRETS=[STRONG_SECRET], TXN_DELAY=0.3, **config)
    hub = HubSimulator(app, STRONG_SECRET)
    request = hub.build_call("refund_create", ARGS, subject="t1:u1")
    with ThreadPoolExecutor(max_workers=6) as pool:
        answers = list(pool.map(lambda _: hub.replay(request), range(6)))
    statuses = [a.status for a in answers]
    assert rows(app) == 1
    assert set(statuses) <= {201, 409}, [a.text for a in answers]
    fresh = [a for a in answers if a.status == 201 and REPLAY_HEADER not in a.headers]
    assert len(fresh) == 1
    assert all(a.body == fresh[0].body for a in answers if a.status == 201)
    assert records(app, "uncertain") == []


def test_an_expired_record_is_forgotten(app, hub):
    clock = FrozenClock(1_900_000_000.0)
    idempotency_of(state_of(app)).transactional().clock = clock
    request = hub.build_call("refund_create", ARGS, subject="t1:u1")
    assert hub.replay(request).status == 201
    clock.now += Bailing.config(app).idempotency_retention - 1
    assert hub.replay(request).headers.get(REPLAY_HEADER) == "true"
    clock.now += 2
    again = hub.replay(request)
    assert again.status == 201 and REPLAY_HEADER not in again.headers
    assert rows(app) == 2


def test_the_store_mode_tool_of_the_same_app_still_uses_the_store(app, hub):
    request = hub.build_call("refund_create_store_mode", ARGS, subject="t1:u1")
    assert hub.replay(request).status == 201
    assert hub.replay(request).headers.get(REPLAY_HEADER) == "true"
    assert records(app) == []  # recorded in BAILING_STORE, not in the app's table
    assert len(idempotency_of(state_of(app)).store().list(state="completed")) == 1


@pytest.mark.parametrize("kind", ["sqlalchemy-sqlite", "sqlite3"])
def test_a_committed_row_without_an_answer_is_uncertain_and_resolvable(kind, request, tmp_path):
    """The only way to uncertainty: the view committed itself and the worker died before the
    answer. Simulated by turning a finished row back into a running one."""
    config = backend_config(kind, request, tmp_path)
    app = create_app(BAILING_SECRETS=[STRONG_SECRET], **config)
    hub = HubSimulator(app, STRONG_SECRET)
    call = hub.build_call("refund_create", ARGS, subject="t1:u1")
    assert hub.replay(call).status == 201
    path = tmp_path / "app.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE bailing_idempotency SET state = 'running', status = NULL, body = NULL")
    refused = hub.replay(call)
    assert (refused.status, refused.json()["reason"]) == (409, "idempotency_uncertain")
    runner = app.test_cli_runner()
    listed = runner.invoke(args=["bailing", "idempotency", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    (line,) = [json.loads(x) for x in listed.output.splitlines() if x.startswith("{")]
    assert line["state"] == "uncertain" and line["tool"] == "refund_create"
    resolved = runner.invoke(args=["bailing", "idempotency", "resolve", line["key"], "--status", "201",
                                   "--body", '{"ok":true,"refund_id":1}', "--note", "row 1 exists"])
    assert resolved.exit_code == 0, resolved.output
    answered = hub.replay(call)
    assert answered.status == 201 and answered.json() == {"ok": True, "refund_id": 1}
    assert rows(app) == 1


@pytest.mark.parametrize("kind", ["sqlalchemy-sqlite", "sqlite3"])
def test_a_decision_on_a_row_that_changed_since_it_was_read_changes_nothing(kind, request, tmp_path):
    """The operator's decision applies to the row as read (its state and token), in the same
    statement as the write: a row another operator settled meanwhile is left as it is."""
    config = backend_config(kind, request, tmp_path)
    app = create_app(BAILING_SECRETS=[STRONG_SECRET], **config)
    hub = HubSimulator(app, STRONG_SECRET)
    call = hub.build_call("refund_create", ARGS, subject="t1:u1")
    assert hub.replay(call).status == 201
    with sqlite3.connect(tmp_path / "app.sqlite3") as conn:
        conn.execute("UPDATE bailing_idempotency SET state = 'running', status = NULL, body = NULL")
    with app.app_context():
        adapter = idempotency_of(state_of(app)).transactional().adapter()
        (seen,) = adapter.list(state="uncertain")
        answer = StoredResponse(201, (), b'{"refund_id":1}')
        now = time.time()
        assert adapter.resolve(seen.key, response=answer, note="first", retention_seconds=60,
                               now=now, seen=seen)
        for response in (None, StoredResponse(200, (), b"{}")):  # a second operator's older read
            assert not adapter.resolve(seen.key, response=response, note="second",
                                       retention_seconds=60, now=now, seen=seen)
        settled = adapter.get(seen.key)
    assert settled is not None and settled.response == answer and settled.note == "first"
    assert hub.replay(call).json() == {"refund_id": 1}
    with app.app_context():  # two operators who both read the settled row: one decision applies
        later = StoredResponse(201, (), b'{"refund_id":2}')
        assert adapter.resolve(settled.key, response=later, note="third", retention_seconds=60,
                               now=now, seen=settled)
        assert not adapter.resolve(settled.key, response=None, note="fourth", retention_seconds=60,
                                   now=now, seen=settled)
        final = adapter.get(settled.key)
    assert final is not None and final.response == later and final.note == "third"


def test_an_adapter_whose_resolve_predates_seen_is_still_resolved_by_the_command(tmp_path):
    """A ``TransactionAdapter`` written before ``seen=``: the command resolves through it as
    before (the record it read, checked just before), instead of failing on the argument."""
    path = tmp_path / "app.sqlite3"

    class Older(DBAPITransaction):
        def resolve(self, key: str, *, response: StoredResponse | None, note: str,  # type: ignore[override]
                    retention_seconds: float, now: float) -> bool:
            return super().resolve(key, response=response, note=note,
                                   retention_seconds=retention_seconds, now=now)

    connections: dict[int, sqlite3.Connection] = {}

    def get_db() -> sqlite3.Connection:
        ident = threading.get_ident()
        if ident not in connections:
            connections[ident] = sqlite3.connect(path, isolation_level=None)
        return connections[ident]

    app, ran = _plain_app(BAILING_TRANSACTION=Older(get_db))
    hub = HubSimulator(app, STRONG_SECRET)
    call = hub.build_call("shop_default_mode", {}, subject="t1:u1")
    assert hub.replay(call).status == 200
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE bailing_idempotency SET state = 'running', status = NULL, body = NULL")
        (key,) = conn.execute("SELECT call_key FROM bailing_idempotency").fetchone()
    resolved = app.test_cli_runner().invoke(
        args=["bailing", "idempotency", "resolve", key, "--rerun", "--note", "nothing happened"])
    assert resolved.exit_code == 0, resolved.output
    assert hub.replay(call).status == 200 and ran == [1, 1]  # it ran again, as decided


SQLALCHEMY = ["sqlalchemy-sqlite", "sqlalchemy-postgresql"]


@pytest.fixture
def make_app(request, tmp_path):
    """``make_app(kind)``: the test app on one stack (its engine disposed afterwards)."""
    made: list[Flask] = []

    def make(kind: str, **extra: Any) -> Flask:
        app = create_app(BAILING_SECRETS=[STRONG_SECRET], **backend_config(kind, request, tmp_path),
                         **extra)
        made.append(app)
        return app

    yield make
    for app in made:
        db = app.extensions.get("sqlalchemy")
        if db is not None:
            with app.app_context():
                db.engine.dispose()


@pytest.mark.parametrize("kind", SQLALCHEMY)
@pytest.mark.parametrize("misuse, business_rows", [
    ("commit_close", 1),  # the legacy pattern: commit() then close()
    ("close", 1),         # close() undoes only what the view had not committed
    ("rollback", 1),      # so does rollback(): back to the view's last commit, not further
    ("remove", 1),        # db.session.remove() closes the session the same way
    ("nested", 2),        # begin_nested() blocks, one of them rolled back
])
def test_a_view_that_closes_or_rolls_back_its_session_keeps_its_committed_rows_exactly_once(
        kind, misuse, business_rows, make_app):
    """A completed record never goes without the rows the view committed."""
    app = make_app(kind)
    hub = HubSimulator(app, STRONG_SECRET)
    request = hub.build_call("refund_create", {**ARGS, "misuse": misuse}, subject="t1:u1")
    first, second = hub.replay(request), hub.replay(request)
    assert first.status == 201, first.text
    assert second.headers.get(REPLAY_HEADER) == "true" and second.body == first.body
    assert rows(app) == business_rows
    assert [r.state for r in records(app)] == ["completed"]


@pytest.mark.parametrize("kind, misuse", [
    ("sqlalchemy-sqlite", "raw_commit"), ("sqlalchemy-postgresql", "raw_commit"),
    # on SQLite another connection cannot write while the call's transaction holds the lock:
    # its write fails in the view (database is locked), so nothing commits outside
    ("sqlalchemy-postgresql", "other_connection"), ("sqlalchemy-postgresql", "remove_then_commit"),
    ("sqlite3", "raw_commit"), ("psycopg", "raw_commit"),
])
def test_a_view_that_commits_outside_the_calls_transaction_is_refused_and_left_uncertain(
        kind, misuse, make_app, caplog):
    """Its own COMMIT statement, a commit on another connection, a new session's commit: the
    answer cannot be recorded with those rows, so the call answers an error, keeps what the
    view wrote, and stays uncertain (never completed, never run again) until resolved."""
    app = make_app(kind)
    hub = HubSimulator(app, STRONG_SECRET)
    request = hub.build_call("refund_create", {**ARGS, "misuse": misuse}, subject="t1:u1")
    with caplog.at_level(logging.ERROR, logger="bailing_flask"):
        first = hub.replay(request)
    assert (first.status, first.json()["reason"]) == (500, "transaction_ended_by_view"), first.text
    assert "ended the package's transaction itself" in caplog.text
    assert rows(app) == 2  # both rows the view wrote are kept
    again = hub.replay(request)
    assert (again.status, again.json()["reason"]) == (409, "idempotency_uncertain")
    assert rows(app) == 2  # nothing ran again
    assert [r.state for r in records(app, "uncertain")] == ["in_progress"]
    assert records(app, "completed") == []


@pytest.mark.parametrize("kind", ["sqlite3", "psycopg"])
def test_a_dbapi_view_that_rolls_back_the_connection_is_refused_and_left_uncertain(kind, make_app):
    app = make_app(kind)
    hub = HubSimulator(app, STRONG_SECRET)
    request = hub.build_call("refund_create", {**ARGS, "misuse": "rollback"}, subject="t1:u1")
    first = hub.replay(request)
    assert (first.status, first.json()["reason"]) == (500, "transaction_ended_by_view"), first.text
    assert rows(app) == 0
    again = hub.replay(request)
    assert (again.status, again.json()["reason"]) == (409, "idempotency_uncertain")
    assert rows(app) == 0


def test_a_dbapi_view_that_commits_and_closes_the_connection_itself_is_not_a_lost_connection(
        make_app, caplog):
    """psycopg says ``closed`` after the view's own ``close()`` as after a cut; only a cut is
    ``broken``. The view ended the call's transaction: 500 and uncertain, as for its COMMIT."""
    app = make_app("psycopg")
    hub = HubSimulator(app, STRONG_SECRET)
    request = hub.build_call("refund_create", {**ARGS, "misuse": "commit_close"}, subject="t1:u1")
    with caplog.at_level(logging.ERROR, logger="bailing_flask"):
        first = hub.replay(request)
    assert (first.status, first.json()["reason"]) == (500, "transaction_ended_by_view"), first.text
    assert rows(app) == 1  # what the view committed stays
    again = hub.replay(request)
    assert (again.status, again.json()["reason"]) == (409, "idempotency_uncertain")
    assert rows(app) == 1


def test_a_database_error_before_the_view_refuses_the_side_effect_with_503(tmp_path):
    app = create_app(BAILING_SECRETS=[STRONG_SECRET], TXN_BACKEND="sqlalchemy",
                     TXN_DATABASE=f"sqlite:///{tmp_path / 'app.sqlite3'}")
    hub = HubSimulator(app, STRONG_SECRET)
    with app.app_context():
        app.extensions["sqlalchemy"].session.execute(
            __import__("sqlalchemy").text("DROP TABLE bailing_idempotency"))
        app.extensions["sqlalchemy"].session.commit()
    idempotency_of(state_of(app)).transactional().adapter().create_on_first_use = False
    response = hub.call("refund_create", ARGS, subject="t1:u1")
    assert (response.status, response.json()["reason"]) == (503, "idempotency_store_unavailable")
    assert rows(app) == 0


@pytest.mark.parametrize("kind", ["sqlalchemy-sqlite", "sqlite3"])
def test_a_sqlite_database_locked_by_another_process_answers_busy_with_retry_after(kind, make_app,
                                                                                   tmp_path):
    """Not "the same call is in progress": SQLite's one write lock says nothing about the call."""
    app = make_app(kind, TXN_SQLITE_TIMEOUT=0.2)
    hub = HubSimulator(app, STRONG_SECRET)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
         "c.execute('BEGIN IMMEDIATE'); print('locked', flush=True); sys.stdin.readline(); "
         "c.execute('ROLLBACK')", str(tmp_path / "app.sqlite3")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    request = hub.build_call("refund_create", ARGS, subject="t1:u1")
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        refused = hub.replay(request)
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=60)
    assert (refused.status, refused.json()["reason"]) == (503, "idempotency_store_busy")
    assert refused.headers.get("Retry-After") == "2"
    assert rows(app) == 0
    assert hub.replay(request).status == 201  # the lock is gone: the same call runs now
    assert rows(app) == 1


# -- configuration ---------------------------------------------------------------------------------


def _plain_app(**config: Any) -> tuple[Flask, list[int]]:
    """Two write tools and a read tool in a blueprint whose tools default to the transaction mode."""
    app = Flask("plain")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://", **config)
    ran: list[int] = []
    bailing = Bailing(app)
    bailing.authorizer(lambda call: True)
    shop = Blueprint("shop", __name__)
    tool_defaults(shop, repeats="transaction")

    @shop.post("/a")
    @tool(scope="a.write")
    def default_mode() -> Any:
        """The blueprint's mode."""
        ran.append(1)
        return jsonify(ok=True)

    @shop.post("/b")
    @tool(scope="b.write", repeats="replay")
    def store_mode() -> Any:
        """Store mode, always."""
        ran.append(2)
        return jsonify(ok=True)

    @shop.get("/c")
    @tool(scope="c.read")
    def read() -> Any:
        """A read tool: runs every call, in no mode."""
        ran.append(3)
        return jsonify(ok=True)

    app.register_blueprint(shop)
    return app, ran


def test_a_blueprint_default_puts_its_write_tools_in_the_transaction_mode(tmp_path):
    conn_path = str(tmp_path / "app.sqlite3")
    connections: dict[int, sqlite3.Connection] = {}

    def get_db() -> sqlite3.Connection:
        ident = threading.get_ident()
        if ident not in connections:
            connections[ident] = sqlite3.connect(conn_path, isolation_level=None)
        return connections[ident]

    app, ran = _plain_app(BAILING_TRANSACTION=DBAPITransaction(get_db))
    hub = HubSimulator(app, STRONG_SECRET)
    for tool_name in ("shop_default_mode", "shop_store_mode"):
        request = hub.build_call(tool_name, {}, subject="t1:u1")
        assert hub.replay(request).status == 200
        assert hub.replay(request).headers.get(REPLAY_HEADER) == "true"
    read = hub.build_call("shop_read", {}, subject="t1:u1")
    assert [hub.replay(read).status, hub.replay(read).status] == [200, 200]
    assert ran == [1, 2, 3, 3]
    keys = [row[0] for row in get_db().execute("SELECT tool FROM bailing_idempotency")]
    assert keys == ["shop_default_mode"]  # created on first use; the other tool kept the store
    listing = app.test_cli_runner().invoke(args=["bailing", "tools"])
    rows = {line.split()[0]: line.split() for line in listing.output.splitlines()[1:] if line.strip()}
    assert [rows[name][5] for name in ("shop_default_mode", "shop_store_mode", "shop_read")] == [
        "transaction", "replay", "-"]


@pytest.mark.parametrize("wrapping", ["wrapt", "__wrapped__"])
def test_a_wrapped_dbapi_connection_is_still_known_by_its_dialect(tmp_path, wrapping):
    """OpenTelemetry's DB-API instrumentation hands the app a wrapt proxy of the connection
    (its class is wrapt's); a wrapper may also name what it wraps as ``__wrapped__``. Either
    is seen through: the mode runs on the connection, no ``dialect=`` needed."""
    wrapt = pytest.importorskip("wrapt")  # flask-limiter brings it (through Deprecated)

    class Named:
        def __init__(self, conn: sqlite3.Connection) -> None:
            self.__wrapped__ = conn

        def __getattr__(self, name: str) -> Any:
            return getattr(self.__wrapped__, name)

    conn_path = str(tmp_path / "app.sqlite3")
    connections: dict[int, Any] = {}

    def get_db() -> Any:
        ident = threading.get_ident()
        if ident not in connections:
            conn = sqlite3.connect(conn_path, isolation_level=None)
            connections[ident] = wrapt.ObjectProxy(conn) if wrapping == "wrapt" else Named(conn)
        return connections[ident]

    app, ran = _plain_app(BAILING_TRANSACTION=DBAPITransaction(get_db))
    hub = HubSimulator(app, STRONG_SECRET)
    request = hub.build_call("shop_default_mode", {}, subject="t1:u1")
    assert hub.replay(request).status == 200
    assert hub.replay(request).headers.get(REPLAY_HEADER) == "true"
    assert ran == [1]
    with sqlite3.connect(conn_path) as conn:
        assert conn.execute("SELECT tool FROM bailing_idempotency").fetchall() == [("shop_default_mode",)]


def test_a_wrapper_whose_wrapped_attribute_fails_is_a_configuration_error():
    from bailing_flask.transactional._dbapi import _detect_dialect

    class Broken:
        @property
        def __wrapped__(self) -> Any:
            raise ValueError("closed")

    with pytest.raises(ConfigurationError, match="pass dialect= for a wrapper"):
        _detect_dialect(Broken())


def test_bailing_transactional_is_removed_and_names_repeats_transaction():
    app = Flask("removed")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_TRANSACTIONAL=True)
    with pytest.raises(ConfigurationError, match=r"BAILING_TRANSACTIONAL is removed: .*repeats='transaction'"):
        Bailing(app)
    with pytest.raises(ConfigurationError, match=r"'transactional' is removed: .*repeats='transaction'"):
        Bailing(secrets=[STRONG_SECRET], transactional=True)  # type: ignore[call-arg]


def test_a_transactional_tool_without_a_database_is_an_error_and_refused(caplog):
    app, ran = _plain_app()
    findings = {(f.code, f.severity, f.path) for f in registry_of(state_of(app)).findings}
    assert ("transaction_not_configured", "error", "POST /a") in findings
    assert not any(code == "transaction_not_configured" and path != "POST /a" for code, _, path in findings)
    # not in the served catalog any more; a signed call reaching it anyway is refused
    headers = signed_headers(STRONG_SECRET, "POST", "/a", b"", subject="t1:u1", job_id="j1")
    response = HubSimulator(app, STRONG_SECRET).send("POST", "/a", headers, b"")
    assert (response.status, response.json()["reason"]) == (503, "idempotency_store_unavailable")
    assert ran == []
    assert "BAILING_TRANSACTION is not set" in caplog.text


def test_an_external_side_effect_in_the_transaction_mode_is_a_warning():
    app = Flask("external")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_TRANSACTION="sqlalchemy")
    Bailing(app)

    @app.post("/mail")
    @tool(scope="mail.send", repeats="transaction",
          outcome={"result": "the mail is sent", "side_effect": "external"})
    def mail_send() -> Any:
        """Send a mail."""
        return jsonify(ok=True)

    findings = {f.code for f in registry_of(state_of(app)).findings}
    assert "transactional_external_effect" in findings


@pytest.mark.parametrize("options, message", [
    ({"transactional": True}, "transactional= is removed; write repeats='transaction'"),
    ({"transactional": False}, "transactional= is removed; leave it out"),
    ({"rerun_uncertain": True}, "rerun_uncertain= is removed; write repeats='transaction', which never "
                                "leaves a call uncertain"),
    ({"repeats": "transactional"}, "repeats: Input should be 'replay', 'transaction' or 'safe'"),
])
def test_the_old_transaction_options_are_refused_naming_repeats(options, message):
    with pytest.raises(ToolDeclarationError, match=re.escape(message)):
        tool(scope="x.write", **options)(lambda: None)


def test_bailing_transaction_sqlalchemy_names_the_apps_flask_sqlalchemy(tmp_path):
    from flask_sqlalchemy import SQLAlchemy

    app = Flask("named")
    app.config.update(SQLALCHEMY_DATABASE_URI=f"sqlite:///{tmp_path / 'x.sqlite3'}")
    db = SQLAlchemy(app)
    Bailing(app, secrets=[STRONG_SECRET], transaction="sqlalchemy")
    adapter = idempotency_of(state_of(app)).transactional().adapter()
    assert isinstance(adapter, SQLAlchemyTransaction)
    assert adapter.table.metadata is db.metadata  # db.create_all() and Alembic see the table
    with app.app_context():
        db.create_all()
        from alembic.autogenerate import compare_metadata
        from alembic.migration import MigrationContext

        with db.engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), db.metadata) == []
        db.engine.dispose()


def test_bailing_transaction_refuses_anything_else():
    from bailing_flask.errors import ConfigurationError
    from bailing_flask.transactional import resolve_adapter

    with pytest.raises(ConfigurationError, match="needs Flask-SQLAlchemy"):
        resolve_adapter("sqlalchemy", Flask("none"))
    with pytest.raises(ConfigurationError, match="must be SQLAlchemyTransaction"):
        resolve_adapter("postgresql://", Flask("none"))
    with pytest.raises(ConfigurationError, match="plain SQL identifier"):
        DBAPITransaction(lambda: None, table_name="x; DROP TABLE y")


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_the_documented_ddl_creates_the_table_the_adapter_uses(dialect, request, tmp_path):
    if dialect == "sqlite":
        conn: Any = sqlite3.connect(tmp_path / "m.sqlite3", isolation_level=None)
    else:
        import psycopg

        conn = psycopg.connect(request.getfixturevalue("postgres_database").conninfo, autocommit=True)
    try:
        for statement in create_table_sql(dialect).split(";\n"):
            if statement.strip():
                conn.execute(statement)
        adapter = DBAPITransaction(lambda: conn, create_table=False)
        assert adapter.list() == [] and adapter.get("idem:x") is None
        assert adapter.cleanup(now=0.0) == 0
    finally:
        conn.close()


def test_a_commit_the_database_refuses_answers_503_and_leaves_nothing(tmp_path):
    """A deferred constraint fails at COMMIT: the effect and the record are both gone."""
    from flask import g

    path = str(tmp_path / "fk.sqlite3")
    with sqlite3.connect(path) as conn:
        conn.executescript(
            "CREATE TABLE parent (id INTEGER PRIMARY KEY);"
            "CREATE TABLE child (id INTEGER PRIMARY KEY, parent_id INTEGER NOT NULL "
            "REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);" + create_table_sql("sqlite"))

    def get_db() -> sqlite3.Connection:
        if "fk_db" not in g:
            g.fk_db = sqlite3.connect(path, isolation_level=None)
            g.fk_db.execute("PRAGMA foreign_keys = ON")
        return g.fk_db  # type: ignore[no-any-return]

    app = Flask("fk")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET],
                      BAILING_TRANSACTION=DBAPITransaction(get_db, create_table=False))
    bailing = Bailing(app)
    bailing.authorizer(lambda call: True)
    ran: list[int] = []

    @app.post("/children")
    @tool(scope="child.write", repeats="transaction")
    def child_create() -> Any:
        """Create a child of a parent that does not exist (checked at COMMIT)."""
        ran.append(1)
        get_db().execute("INSERT INTO child (parent_id) VALUES (42)")
        return jsonify(ok=True), 201

    hub = HubSimulator(app, STRONG_SECRET)
    request = hub.build_call("child_create", {}, subject="t1:u1")
    for attempt in (1, 2):  # nothing was recorded, so the same call runs again
        response = hub.replay(request)
        assert (response.status, response.json()["reason"]) == (503, "transaction_failed")
        assert len(ran) == attempt
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM child").fetchone()[0] == 0
        assert conn.execute("SELECT COUNT(*) FROM bailing_idempotency").fetchone()[0] == 0


def test_a_missing_postgresql_fails_in_ci_and_skips_elsewhere(monkeypatch):
    """CI installs PostgreSQL (scripts/test.sh): there, its absence must not pass as a skip."""
    from ._postgres import _unavailable

    monkeypatch.delenv("BAILING_REQUIRE_POSTGRES", raising=False)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="apt-get install -y postgresql"):
        _unavailable("initdb not found")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception):
        _unavailable("initdb not found")


@pytest.mark.parametrize("kind", ["sqlalchemy-sqlite", "sqlite3"])
def test_the_audit_records_a_transaction_mode_repeat_as_replayed(request, tmp_path, kind):
    from bailing_flask.signals import audit_record

    app = create_app(BAILING_SECRETS=[STRONG_SECRET], **backend_config(kind, request, tmp_path))
    hub = HubSimulator(app, STRONG_SECRET)
    seen: list[dict[str, Any]] = []
    audit_record.connect(lambda sender, record: seen.append(record), app, weak=False)
    call = hub.build_call("refund_create", ARGS, subject="t1:u1")
    first, second = hub.replay(call), hub.replay(call)
    assert (first.status, second.headers.get(REPLAY_HEADER)) == (201, "true")
    assert [(r["tool"], r["replayed"]) for r in seen] == [("refund_create", False), ("refund_create", True)]
