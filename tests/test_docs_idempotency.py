"""docs/concepts/idempotency.rst: the page's code is apps the suite calls, its commands run at build time.

The docs build runs the page's commands in ``docs/examples/idempotency/``
(``seed.py``, ``bailing call`` twice with one job, ``idempotency list`` and
``resolve``, ``demo_calls.py``); these tests run the same commands and hold
the page's claims about them, and call the code the page includes from
there: the domain key, the Flask-SQLAlchemy and DB-API transaction modes,
the Alembic revision and the SQL store's configuration.
"""

from __future__ import annotations

import re
import sqlite3
import sys
from pathlib import Path

import pytest

from bailing_flask.testing import HubSimulator

from .test_docs_examples import EXAMPLES, ROOT, SECRET, run

IDEMPOTENCY = EXAMPLES / "idempotency"
PAGE = ROOT / "docs" / "concepts" / "idempotency.rst"
JOB = "0f8e3c2a-6b1d-4c55-9a57-2d4f8b9e1c03"
MODULES = ("shop", "sqlalchemy_refunds", "dbapi_refunds", "migration", "sql_store")


def command(*argv: str) -> str:
    done = run([sys.executable, *argv], IDEMPOTENCY)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def flask(*args: str) -> str:
    return command("-m", "flask", "--app", "shop", "bailing", *args)


def page_keys() -> list[str]:
    return re.findall(r"idempotency resolve (idem:[0-9a-f]{64})", PAGE.read_text(encoding="utf-8"))


@pytest.fixture
def examples(monkeypatch):
    monkeypatch.setenv("BAILING_SECRET", SECRET)
    monkeypatch.syspath_prepend(str(IDEMPOTENCY))
    for name in MODULES:
        monkeypatch.delitem(sys.modules, name, raising=False)
    yield
    for name in MODULES:
        sys.modules.pop(name, None)


def test_the_idempotency_pages_examples_pass_mypy_strict():
    done = run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", *(f"{m}.py" for m in MODULES),
                "seed.py"], IDEMPOTENCY)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_same_job_sent_twice_is_answered_from_the_record_and_the_operators_settle_the_uncertain():
    command("seed.py")
    call = ["call", "refund_create", '{"order_id": 1001, "amount": 20}', "--subject", "t1:alice", "--job", JOB]
    first, second = flask(*call), flask(*call)
    assert "< HTTP 201" in first and "Idempotent-Replayed" not in first
    assert "< HTTP 201" in second and "< Idempotent-Replayed: true" in second
    listed = flask("idempotency", "list")
    keys = re.findall(r"^(idem:[0-9a-f]{64})  uncertain .*note=the view raised TimeoutError$", listed, re.M)
    assert keys == page_keys() and "2 entries" in listed  # the keys the page resolves are these calls'
    recorded, rerun = keys
    flask("idempotency", "resolve", recorded, "--note", "refund 42 exists", "--status", "201",
          "--body", '{"ok": true, "status": "executed", "business_id": 42}')
    flask("idempotency", "resolve", rerun, "--rerun", "--note", "no refund was created")
    everything = flask("idempotency", "list", "--state", "all")
    assert f"{recorded}  completed" in everything and rerun not in everything


def test_the_example_apps_refund_request_runs_once_and_its_record_commits_with_it():
    shown = command("demo_calls.py").splitlines()
    assert shown[0].startswith("HTTP 201  Idempotent-Replayed: -  Refund request ")
    assert shown[1].startswith("HTTP 201  Idempotent-Replayed: true  ") and shown[1].split("  ")[2:] == shown[0].split("  ")[2:]
    assert shown[2:] == ["bailing_idempotency: [('refund_request_create', 'completed', 201)]",
                         "refund requests of order 1001: 1"]


def test_a_domain_key_makes_another_job_for_the_same_order_the_same_call(examples, tmp_path, monkeypatch):
    import shop

    shop.app.config["BAILING_STORE"] = "memory://"
    monkeypatch.setattr(shop.app, "instance_path", str(tmp_path))
    hub = HubSimulator(shop.app, SECRET)
    args = {"order_id": 1001, "reason": "Late"}
    first = hub.call("refund_request_create", args, subject="t1:alice", job_id="job-1")
    again = hub.call("refund_request_create", {**args, "reason": "Still late"}, subject="t1:alice", job_id="job-2")
    assert (first.status, again.status, again.headers.get("Idempotent-Replayed")) == (201, 201, "true")
    assert shop.REFUNDS == [{"order_id": 1001, "reason": "Late"}]


def test_the_flask_sqlalchemy_view_keeps_its_commit_and_runs_exactly_once(examples, tmp_path):
    import sqlalchemy_refunds

    app = sqlalchemy_refunds.create_app(f"sqlite:///{tmp_path / 'shop.db'}")
    hub = HubSimulator(app, SECRET)
    answers = [hub.call("refund_create", {"order_id": 7, "amount": 20}, subject="t1:alice", job_id=JOB)
               for _ in range(2)]
    assert [a.status for a in answers] == [201, 201] and answers[0].json() == answers[1].json()
    with sqlite3.connect(tmp_path / "shop.db") as conn:
        assert conn.execute("SELECT order_id, amount FROM refund").fetchall() == [(7, 20.0)]
        assert conn.execute("SELECT state, status FROM bailing_idempotency").fetchall() == [("completed", 201)]


def test_the_dbapi_view_writes_through_the_requests_connection_in_the_calls_transaction(
        examples, tmp_path, monkeypatch):
    monkeypatch.setenv("DATABASE", str(tmp_path / "shop.db"))
    import dbapi_refunds

    dbapi_refunds.migrate()
    hub = HubSimulator(dbapi_refunds.app, SECRET)
    answers = [hub.call("refund_create", {"order_id": 7, "amount": 20}, subject="t1:alice", job_id=JOB)
               for _ in range(2)]
    assert [a.status for a in answers] == [201, 201]
    assert answers[1].headers.get("Idempotent-Replayed") == "true"
    with sqlite3.connect(tmp_path / "shop.db") as conn:
        assert conn.execute("SELECT order_id, amount FROM refunds").fetchall() == [(7, 20.0)]
        assert conn.execute("SELECT state, status FROM bailing_idempotency").fetchall() == [("completed", 201)]


def test_the_alembic_revision_makes_the_table_the_adapter_defines(examples, tmp_path):
    import sqlalchemy as sa
    from alembic.migration import MigrationContext
    from alembic.operations import Operations

    import migration
    from bailing_flask.transactional import SQLAlchemyTransaction

    engine = sa.create_engine(f"sqlite:///{tmp_path / 'migrated.db'}")
    with engine.begin() as conn:
        with Operations.context(MigrationContext.configure(conn)):
            migration.upgrade()
        migrated = sa.inspect(conn)
        columns = {c["name"]: (str(c["type"]), c["nullable"]) for c in migrated.get_columns("bailing_idempotency")}
        indexes = [i["name"] for i in migrated.get_indexes("bailing_idempotency")]
    metadata = sa.MetaData()
    SQLAlchemyTransaction(lambda: None, metadata=metadata)
    reference = sa.create_engine(f"sqlite:///{tmp_path / 'reference.db'}")
    metadata.create_all(reference)
    with reference.connect() as conn:
        expected = sa.inspect(conn)
        assert columns == {c["name"]: (str(c["type"]), c["nullable"])
                           for c in expected.get_columns("bailing_idempotency")}
        assert indexes == [i["name"] for i in expected.get_indexes("bailing_idempotency")]
    with engine.begin() as conn:
        with Operations.context(MigrationContext.configure(conn)):
            migration.downgrade()
        assert not sa.inspect(conn).has_table("bailing_idempotency")


def test_the_ddl_shown_is_what_create_table_sql_returns():
    from bailing_flask.transactional import create_table_sql

    text = PAGE.read_text(encoding="utf-8")
    block = text.split(".. code-block:: sql\n   :class: unchecked\n\n", 1)[1].split("\n\n", 1)[0]
    shown = [re.sub(r"\s*-- .*$", "", line[3:]) for line in block.splitlines()]
    assert shown == create_table_sql("postgresql").strip().splitlines()


def test_each_way_to_give_the_sql_store_is_the_sql_store_calls_use(examples):
    import sqlalchemy as sa
    from flask import Flask
    from flask_sqlalchemy import SQLAlchemy

    import sql_store
    from bailing_flask import Bailing
    from bailing_flask._pipeline.idempotency import idempotency_of
    from bailing_flask._state import state_of
    from bailing_flask.stores import SQLStore

    db = SQLAlchemy()
    url = "postgresql+psycopg://shop:secret@db.internal/shop"
    for configure in (sql_store.store_from_a_url, lambda app: sql_store.store_on_the_apps_engine(app, db),
                      lambda app: sql_store.store_on_an_engine(app, sa.create_engine(url))):
        app = Flask("shop")
        app.config.update(BAILING_SECRETS=[SECRET], SQLALCHEMY_DATABASE_URI=url)
        db.init_app(app)
        configure(app)
        Bailing(app)
        with app.app_context():  # nothing connects until the first side effect
            assert isinstance(idempotency_of(state_of(app)).store(), SQLStore)
