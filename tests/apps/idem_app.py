"""An app whose side effect is a row in a real SQLite file, for idempotency tests.

Configured from the environment so gunicorn workers and ``flask`` CLI
subprocesses build the same app:

``BAILING_TEST_SECRET``, ``BAILING_STORE``, ``IDEM_DATABASE`` (the business
table), ``IDEM_LEASE`` (seconds), ``IDEM_DELAY`` (seconds the view sleeps),
``IDEM_DEFER=1`` (``BAILING_IDEMPOTENCY_DEFER_COMPLETION``), ``IDEM_REJECT_REPLAYS=1``
(``BAILING_REJECT_REPLAYS``), ``IDEM_CLIENT_TOKEN`` (receive finished-job callbacks:
each handled one is a row of the ``callbacks`` table).
``create_app(IDEM_CATCH_ALL=True)`` adds an ``errorhandler(Exception)`` that
answers 200, as some apps do.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from typing import Literal

from flask import Flask, abort, jsonify
from pydantic import BaseModel, Field

from bailing_flask import Bailing, current_call, tool

from ..helpers import sqlite_wal


class RefundBody(BaseModel):
    order_id: int = Field(description="Order.", ge=1, le=10**9)
    amount: float = Field(description="Amount.", gt=0, le=10**6)
    die: bool = Field(False, description="Kill the worker after the side effect (tests).")
    die_at: Literal["", "before_effect", "after_answer"] = Field(
        "", description="Kill the worker before the side effect, or once the answer is sent.")
    fail: int = Field(0, description="Answer with this status instead (tests).", ge=0, le=599)
    crash: bool = Field(False, description="Raise after the side effect (tests).")
    refuse: int = Field(0, description="abort() with this status first (tests).", ge=0, le=599)


def _db(path: str) -> sqlite3.Connection:
    conn: sqlite3.Connection = sqlite_wal(path)
    conn.execute("CREATE TABLE IF NOT EXISTS refunds (id INTEGER PRIMARY KEY, order_id INT, "
                 "amount REAL, job TEXT)")
    return conn


def side_effects(path: str) -> int:
    with _db(path) as conn:
        return conn.execute("SELECT COUNT(*) FROM refunds").fetchone()[0]


def callbacks_handled(path: str) -> int:
    with _db(path) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS callbacks (job TEXT)")
        return conn.execute("SELECT COUNT(*) FROM callbacks").fetchone()[0]


def rows_by_order(path: str) -> dict[int, int]:
    """How many times each order's refund ran."""
    with _db(path) as conn:
        return dict(conn.execute("SELECT order_id, COUNT(*) FROM refunds GROUP BY order_id"))


def create_app(**config: object) -> Flask:
    app = Flask("idem_app")
    app.config.update(
        BAILING_SECRETS=[os.environ.get("BAILING_TEST_SECRET", "x" * 40)],
        BAILING_STORE=os.environ.get("BAILING_STORE", "memory://"),
        BAILING_IDEMPOTENCY_LEASE=float(os.environ.get("IDEM_LEASE", "600")),
        IDEM_DATABASE=os.environ.get("IDEM_DATABASE", ":memory:"),
        IDEM_DELAY=float(os.environ.get("IDEM_DELAY", "0")),
        BAILING_IDEMPOTENCY_DEFER_COMPLETION=os.environ.get("IDEM_DEFER") == "1",
        BAILING_REJECT_REPLAYS=os.environ.get("IDEM_REJECT_REPLAYS") == "1",
    )
    if os.environ.get("IDEM_CLIENT_TOKEN"):
        app.config["BAILING_CLIENT_TOKENS"] = [os.environ["IDEM_CLIENT_TOKEN"]]
    app.config.update(config)
    bailing = Bailing(app)
    bailing.authorizer(lambda call: call.subject is not None)

    if app.config.get("IDEM_CATCH_ALL"):
        @app.errorhandler(Exception)
        def everything_is_fine(error):  # the pattern that hid failures from the hub
            return jsonify(ok=True, note="handled"), 200

    if app.config.get("BAILING_CLIENT_TOKENS"):
        @bailing.job_finished
        def job_done(job):
            with _db(app.config["IDEM_DATABASE"]) as conn:
                conn.execute("CREATE TABLE IF NOT EXISTS callbacks (job TEXT)")
                conn.execute("INSERT INTO callbacks (job) VALUES (?)", (job.job_id,))

    def insert(body):
        with _db(app.config["IDEM_DATABASE"]) as conn:
            cursor = conn.execute("INSERT INTO refunds (order_id, amount, job) VALUES (?, ?, ?)",
                                  (body["order_id"], body["amount"], current_call.job_id))
            return cursor.lastrowid

    @app.post("/api/refunds")
    @tool(scope="refund.write", body=RefundBody)
    def refund_create():
        """Create a refund (the side effect is one row)."""
        body = current_call.args
        if body.get("die_at") == "before_effect":
            os.kill(os.getpid(), signal.SIGKILL)
        if body.get("refuse"):
            abort(body["refuse"])
        if body.get("fail"):
            return jsonify(ok=False), body["fail"]
        refund_id = insert(body)
        if body.get("crash"):
            raise RuntimeError("the payment gateway timed out")
        if body.get("die"):
            os.kill(os.getpid(), signal.SIGKILL)
        if app.config["IDEM_DELAY"]:
            time.sleep(app.config["IDEM_DELAY"])
        response = jsonify(ok=True, refund_id=refund_id)
        if body.get("die_at") == "after_answer":
            # once the last byte is out: a deferred completion may not be written yet
            response.call_on_close(lambda: os.kill(os.getpid(), signal.SIGKILL))
        return response, 201

    @app.get("/api/refunds/count")
    @tool(scope="refund.read")
    def refund_count():
        """How many refunds exist (read-only)."""
        return jsonify(count=side_effects(app.config["IDEM_DATABASE"]))

    @app.post("/api/refunds/by-order")
    @tool(scope="refund.write", body=RefundBody,
          idempotency_key=lambda call: (call.args["order_id"], call.args["amount"]))
    def refund_by_order():
        """Idempotent on the business key (order id + amount), whatever the job."""
        body = current_call.args
        with _db(app.config["IDEM_DATABASE"]) as conn:
            cursor = conn.execute("INSERT INTO refunds (order_id, amount, job) VALUES (?, ?, ?)",
                                  (body["order_id"], body["amount"], current_call.job_id))
        return jsonify(ok=True, refund_id=cursor.lastrowid), 201

    return app

