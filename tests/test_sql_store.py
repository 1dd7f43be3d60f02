"""The SQL store on real PostgreSQL and MariaDB servers: what the shared store tests do not cover.

The shared promises (reservations, leases, uncertain calls, signatures,
approvals) are in ``tests/test_stores.py``. Here: how the store is configured
(a URL, the app's own engine, a Flask-SQLAlchemy ``db``), the schema and its
command, passwords in messages, a database restarted under the store, and
cleanup that never waits for a claim.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from flask import Flask, jsonify
from flask.testing import FlaskCliRunner
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy.orm import Mapped, mapped_column

from bailing_flask import Bailing, tool
from bailing_flask.stores import EntryMeta, SQLStore, StoredResponse, StoreUnavailable, store_from_url
from bailing_flask.stores._sql_schema import SCHEMA_VERSION, TABLES, VERSION_TABLE, schema_sql
from bailing_flask.testing import HubSimulator

from ._mariadb import PASSWORD
from .helpers import STRONG_SECRET, sql_store, sql_url
from bailing_flask._state import state_of
from bailing_flask._pipeline.idempotency import idempotency_of

BACKENDS = ["postgresql", "mariadb"]
META = EntryMeta(tool="refund_create", job_id="job-1", subject="t1:u1")
OK = StoredResponse(201, (("Content-Type", "application/json"),), b'{"ok":true}')


def claim(store: SQLStore, key: str, token: str = "token-a") -> Any:
    return store.claim(key, token=token, lease_seconds=30.0, retention_seconds=600.0, meta=META)


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest) -> str:
    """A fresh, empty database (no tables) of each server."""
    return sql_url(request, request.param)


def _execute(store: SQLStore, statement: str) -> None:
    store._db.admin(lambda conn: (conn.cursor().execute(statement), conn.commit()))


# --- configuration ----------------------------------------------------------------------------


def test_importing_the_package_imports_no_sqlalchemy() -> None:
    code = ("import sys, bailing_flask, bailing_flask.stores, bailing_flask.extension, "
            "bailing_flask.cli; print('sqlalchemy' in sys.modules)")
    root = str(Path(__file__).resolve().parent.parent)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": root}, timeout=120)
    assert done.stdout.strip() == "False", done.stderr


@pytest.mark.parametrize("url", [
    "postgresql+psycopg://app:hunter2@127.0.0.1:1/shop",
    "postgresql://app:hunter2@127.0.0.1:1/shop",
    "mysql+pymysql://app:hunter2@127.0.0.1:1/shop",
    "mariadb+pymysql://app:hunter2@127.0.0.1:1/shop",
])
def test_store_from_url_builds_the_sql_store_without_connecting(url: str) -> None:
    store = store_from_url(url)
    assert isinstance(store, SQLStore)
    assert "hunter2" not in repr(store) and "app@" not in repr(store)
    assert store.display.endswith("127.0.0.1:1/shop")
    with pytest.raises(StoreUnavailable) as info:  # nothing listens on port 1
        store.ping()
    assert "hunter2" not in str(info.value) and "127.0.0.1:1/shop" in str(info.value)
    store.close()


@pytest.mark.parametrize(("url", "driver"), [
    ("postgresql://app:hunter2@127.0.0.1:1/shop", "postgresql+psycopg"),
    ("mysql://app:hunter2@127.0.0.1:1/shop", "mysql+pymysql"),
    ("mariadb://app:hunter2@127.0.0.1:1/shop", "mariadb+pymysql"),
])
def test_a_url_without_a_driver_uses_the_one_the_extra_installs(url: str, driver: str) -> None:
    """SQLAlchemy 2.0 would pick psycopg2 or mysqlclient, which ``bailing_flask[postgresql]`` and
    ``[mysql]`` do not install: the error would tell the user to install what they have."""
    store = store_from_url(url)
    assert store.display == f"{driver}://127.0.0.1:1/shop"
    store.close()


@pytest.mark.parametrize("url", [
    "postgresql+nosuchdriver://app:hunter2@db/shop",
    "oracle://app:hunter2@db/shop",
    "postgresql+psycopg://app:hunter2@db:notaport/shop",
])
def test_bad_sql_urls_are_refused_clearly_without_the_password(url: str) -> None:
    from bailing_flask.errors import ConfigurationError

    with pytest.raises(ConfigurationError) as info:
        store_from_url(url)
    assert "hunter2" not in str(info.value)


def test_a_wrong_password_never_appears_in_the_error(request: pytest.FixtureRequest) -> None:
    url = sql_url(request, "mariadb")  # MariaDB's account logs in with a password
    store = SQLStore(url.replace(PASSWORD, "hunter2-wrong"))
    with pytest.raises(StoreUnavailable) as info:
        claim(store, "k1")
    message = str(info.value)
    assert "hunter2" not in message and "Access denied" in message
    assert PASSWORD not in repr(SQLStore(url))


def test_keys_longer_than_the_column_are_refused_before_the_database(
        request: pytest.FixtureRequest) -> None:
    store = sql_store(request, "postgresql")
    with pytest.raises(ValueError, match="512 bytes"):
        claim(store, "k" * 513)
    with pytest.raises(ValueError, match="512 bytes"):
        store.remember_signature("ж" * 300, ttl_seconds=5.0)
    assert claim(store, "k" * 512) is None
    store.close()


# --- the schema -------------------------------------------------------------------------------


def test_missing_tables_are_a_clear_error_naming_the_command(url: str) -> None:
    store = SQLStore(url)
    for call in (store.ping, lambda: claim(store, "k1"), lambda: store.get("k1"),
                 lambda: store.remember_signature("s", ttl_seconds=5.0)):
        with pytest.raises(StoreUnavailable) as info:
            call()
        assert "do not exist" in str(info.value)
        assert "`flask bailing store init`" in str(info.value)
    store.create_schema()
    assert claim(store, "k1") is None  # the same store object works once they exist
    store.close()


def test_an_outdated_or_newer_schema_is_refused(url: str) -> None:
    store = SQLStore(url)
    store.create_schema()
    _execute(store, f"UPDATE {VERSION_TABLE} SET version = 0")
    with pytest.raises(StoreUnavailable, match="schema version 0.*Upgrade them with "
                                               "`flask bailing store init`"):
        store.ping()
    _execute(store, f"UPDATE {VERSION_TABLE} SET version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreUnavailable, match="written by a newer bailing_flask"):
        SQLStore(url).ping()
    store.create_schema()  # the command sets it to this version again
    store.ping()
    store.close()


def test_the_schema_is_created_once_whoever_runs_the_command_at_once(url: str) -> None:
    errors: list[BaseException] = []

    def init() -> None:
        try:
            SQLStore(url).create_schema()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=init) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    SQLStore(url).ping()


def _app(store: Any) -> Flask:
    app = Flask("sql_store_cli")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE=store)
    Bailing(app)
    return app


def test_store_init_creates_the_tables_and_says_so(url: str) -> None:
    app = _app(url)
    runner = FlaskCliRunner(app)
    before = runner.invoke(args=["bailing", "status", "--json"])
    assert "flask bailing store init" in before.output
    done = runner.invoke(args=["bailing", "store", "init"])
    assert done.exit_code == 0, done.output
    assert "tables are ready" in done.output and f"schema version {SCHEMA_VERSION}" in done.output
    assert all(table in done.output for table in TABLES)
    assert runner.invoke(args=["bailing", "store", "init"]).exit_code == 0  # every deploy
    status = runner.invoke(args=["bailing", "status", "--json"])
    assert '"reachable": true' in status.output and '"backend": "SQLStore"' in status.output


@pytest.mark.parametrize("dialect", ["postgresql", "mysql"])
def test_store_init_sql_prints_the_ddl_that_makes_a_working_store(
        dialect: str, request: pytest.FixtureRequest) -> None:
    url = sql_url(request, "postgresql" if dialect == "postgresql" else "mariadb")
    runner = FlaskCliRunner(_app(url))
    printed = runner.invoke(args=["bailing", "store", "init", "--sql"])
    assert printed.exit_code == 0 and printed.output == schema_sql(dialect)  # type: ignore[arg-type]
    other = "mysql" if dialect == "postgresql" else "postgresql"
    assert runner.invoke(args=["bailing", "store", "init", "--sql", "--dialect", other]
                         ).output == schema_sql(other)  # type: ignore[arg-type]
    store = SQLStore(url)
    with pytest.raises(StoreUnavailable):
        store.ping()  # printing created nothing
    for statement in printed.output.split(";"):  # applied by hand, as a migration would
        if statement.strip():
            _execute(store, statement)
    assert claim(store, "k1") is None
    store.close()


def test_store_init_explains_itself_for_other_stores(tmp_path: Path) -> None:
    runner = FlaskCliRunner(_app(f"sqlite:///{tmp_path / 'idem.db'}"))
    done = runner.invoke(args=["bailing", "store", "init"])
    assert done.exit_code == 0 and "nothing to do" in done.output
    refused = runner.invoke(args=["bailing", "store", "init", "--sql"])
    assert refused.exit_code != 0 and "--dialect" in refused.output


# --- the app's own engine ---------------------------------------------------------------------


def _shop(url: str, share: str) -> tuple[Flask, Any]:
    app = Flask("sql_store_shop")
    app.config.update(SQLALCHEMY_DATABASE_URI=url, BAILING_SECRETS=[STRONG_SECRET])
    db = SQLAlchemy(app)

    class Refund(db.Model):  # type: ignore[name-defined,misc]
        id: Mapped[int] = mapped_column(primary_key=True)
        order_id: Mapped[int]

    with app.app_context():
        db.create_all()
        app.config["BAILING_STORE"] = SQLStore(db.engine if share == "engine" else db)
        app.config["BAILING_STORE"].create_schema()
    bailing = Bailing(app)
    bailing.authorizer(lambda call: True)

    @app.post("/refunds/<int:order_id>")
    @tool(scope="refund.write")
    def refund_create(order_id: int) -> Any:
        db.session.add(Refund(order_id=order_id))
        db.session.commit()
        db.session.add(Refund(order_id=-order_id))
        db.session.rollback()  # the app's own transactions still roll back
        return jsonify(ok=True, refunds=db.session.query(Refund).count()), 201

    return app, db


@pytest.mark.parametrize("share", ["engine", "flask-sqlalchemy"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_the_store_shares_the_apps_engine_and_gives_its_connections_back(
        backend: str, share: str, request: pytest.FixtureRequest) -> None:
    app, db = _shop(sql_url(request, backend), share)
    hub = HubSimulator(app, STRONG_SECRET)
    first = hub.build_call("refund_create", {"order_id": 7}, subject="t1:u1")
    answers = [hub.replay(first) for _ in range(3)]
    assert [a.status for a in answers] == [201, 201, 201]
    assert [a.headers.get("Idempotent-Replayed") for a in answers] == [None, "true", "true"]
    assert answers[0].json()["refunds"] == 1  # ran once; the rolled-back row is not there
    assert hub.call("refund_create", {"order_id": 8}, subject="t1:u1").json()["refunds"] == 2
    with app.app_context():
        assert db.engine.pool.checkedout() == 0  # nothing held between calls
        store = app.config["BAILING_STORE"]
        assert [e.meta.tool for e in store.list(state="completed")] == ["refund_create"] * 2


# --- faults -----------------------------------------------------------------------------------


def test_the_same_store_serves_again_after_the_database_restarts(
        request: pytest.FixtureRequest) -> None:
    # its kept connection died with the server: the next statement finds out and runs again
    # on a new one, so no call sees the restart once the server is back
    server = request.getfixturevalue("mariadb_server")
    store = sql_store(request, "mariadb")
    assert claim(store, "before") is None
    server.kill()
    with pytest.raises(StoreUnavailable):
        claim(store, "during")
    server.start()
    assert claim(store, "after") is None
    assert store.complete("before", token="token-a", response=OK, retention_seconds=60.0)
    held = claim(store, "before", "token-b")
    assert held is not None and held.outcome == "completed"
    store.close()


def test_cleanup_deletes_in_batches_and_never_waits_for_a_locked_row(
        request: pytest.FixtureRequest) -> None:
    import psycopg

    from bailing_flask.stores import sql as sql_module

    clock = [1_000_000.0]
    store = sql_store(request, "postgresql", lambda: clock[0])
    for number in range(7):
        store.claim(f"dead-{number}", token="t", lease_seconds=1.0, retention_seconds=2.0,
                    meta=META)
    clock[0] += 10
    holder = psycopg.connect(store._db.engine.url.render_as_string(hide_password=False)
                             .replace("postgresql+psycopg", "postgresql"))
    holder.execute("SELECT 1 FROM bailing_store_entries WHERE entry_key = 'dead-3' FOR UPDATE")
    original = sql_module.CLEANUP_BATCH
    sql_module.CLEANUP_BATCH = 2
    try:
        done: list[int] = []
        worker = threading.Thread(target=lambda: done.append(store.cleanup(limit=100)))
        worker.start()
        worker.join(60)  # it would wait for the holder's lock forever
        assert done == [6]  # the locked row is left for the next round
    finally:
        sql_module.CLEANUP_BATCH = original
        holder.rollback()
        holder.close()
    assert store.cleanup() == 1
    store.close()


def _session_id(store: SQLStore, dialect: str) -> int:
    cursor = store._db._kept_connection().cursor()
    cursor.execute("SELECT pg_backend_pid()" if dialect == "postgresql" else "SELECT CONNECTION_ID()")
    return int(cursor.fetchone()[0])


def test_a_worker_forked_from_a_loaded_app_never_uses_the_parents_connections(url: str) -> None:
    """gunicorn ``--preload`` forks workers from a master that made the store and its tables:
    the threads of a new worker, noticing the fork at once, get connections of its own,
    never a session the master still holds or left idle in the pool."""
    if not hasattr(os, "fork"):
        pytest.skip("needs fork()")
    dialect = "postgresql" if url.startswith("postgresql") else "mysql"
    store = SQLStore(url)
    store.create_schema()  # leaves an idle connection in the master's pool

    def sessions(conn: Any) -> set[int]:
        cursor = conn.cursor()
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                       if dialect == "postgresql" else
                       "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = DATABASE()")
        return {int(row[0]) for row in cursor.fetchall()}

    masters = store._db.admin(sessions)  # on that pooled connection, given back to the pool
    assert masters
    workers, threads = 8, 8
    seen: list[list[int]] = []
    for worker in range(workers):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            answer: list[int] = []
            try:
                sys.setswitchinterval(1e-6)
                barrier = threading.Barrier(threads)

                def request(key: str) -> None:
                    barrier.wait()
                    assert claim(store, key) is None
                    answer.append(_session_id(store, dialect))

                running = [threading.Thread(target=request, args=(f"w{worker}-{i}",), daemon=True)
                           for i in range(threads)]
                for thread in running:
                    thread.start()
                for thread in running:
                    thread.join(30)
            finally:
                os.write(write, json.dumps(answer).encode())
                os._exit(0)
        os.close(write)
        with os.fdopen(read) as reply:
            seen.append(json.loads(reply.read() or "[]"))
        os.waitpid(pid, 0)
    assert [len(sessions) for sessions in seen] == [threads] * workers  # every request answered
    everyone = [session for sessions in seen for session in sessions]
    assert masters.isdisjoint(everyone)
    store.close()


def test_a_store_object_in_the_configuration_is_the_store_calls_use() -> None:
    # init_app accepted a store object, and the first side effect then failed: the store was
    # always built from a URL
    from bailing_flask.stores import MemoryStore

    store = MemoryStore()
    app = _app(store)
    assert idempotency_of(state_of(app)).store() is store


@pytest.mark.parametrize("page", ["docs/cli.rst", "docs/concepts/idempotency.rst"])
def test_the_docs_show_what_store_init_prints(page: str, request: pytest.FixtureRequest) -> None:
    url = sql_url(request, "postgresql")
    done = FlaskCliRunner(_app(url)).invoke(args=["bailing", "store", "init"])
    shown = done.output.replace(SQLStore(url).display, "postgresql+psycopg://db.internal:5432/shop")
    text = (Path(__file__).resolve().parent.parent / page).read_text(encoding="utf-8")
    assert "   $ flask --app shop bailing store init\n   " + shown in text


@pytest.mark.parametrize("backend", BACKENDS)
def test_operators_list_and_resolve_uncertain_calls_in_the_sql_store(
        backend: str, request: pytest.FixtureRequest) -> None:
    url = sql_url(request, backend)
    store = sql_store(request, backend, url=url)
    assert claim(store, "idem:refund-42") is None
    assert store.mark_uncertain("idem:refund-42", token="token-a", note="the view raised OSError")
    runner = FlaskCliRunner(_app(url))
    listed = runner.invoke(args=["bailing", "idempotency", "list"])
    assert listed.exit_code == 0 and "idem:refund-42  uncertain" in listed.output
    done = runner.invoke(args=["bailing", "idempotency", "resolve", "idem:refund-42", "--note",
                               "refund 42 is in the ledger", "--status", "201"])
    assert done.exit_code == 0, done.output
    held = claim(store, "idem:refund-42", "token-b")
    assert held is not None and held.outcome == "completed" and held.entry.response is not None
    assert held.entry.response.status == 201 and held.entry.note == "refund 42 is in the ledger"
    assert runner.invoke(args=["bailing", "idempotency", "list"]).output.strip() == "0 entries"
    store.close()
