"""The app the fault runs load: a refund whose side effect is a row in a SQLite file.

Configured from the environment, so every gunicorn worker builds the same
app: ``FAULTS_SECRET``, ``BAILING_STORE``, ``FAULTS_DB`` (the business
table), ``FAULTS_DELAY`` (seconds the refund takes), ``FAULTS_BODY_TIMEOUT``
(``BAILING_BODY_TIMEOUT``).
"""

from __future__ import annotations

import os
import sqlite3
import time

from flask import Flask, jsonify
from pydantic import BaseModel, Field

from bailing_flask import Bailing, current_call, tool


class RefundBody(BaseModel):
    order_id: int = Field(description="Order.", ge=1, le=10**9)
    amount: float = Field(description="Amount.", gt=0, le=10**6)


def business(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE IF NOT EXISTS refunds (order_id INT, job TEXT)")
    return conn


def runs_by_order(path: str) -> dict[int, int]:
    """How many times each order's refund ran."""
    with business(path) as conn:
        return dict(conn.execute("SELECT order_id, COUNT(*) FROM refunds GROUP BY order_id"))


def create_app() -> Flask:
    app = Flask("faults_app")
    app.config.update(
        BAILING_SECRETS=[os.environ["FAULTS_SECRET"]],
        BAILING_STORE=os.environ.get("BAILING_STORE", "memory://"),
        BAILING_BODY_TIMEOUT=float(os.environ.get("FAULTS_BODY_TIMEOUT", "10")),
    )
    delay = float(os.environ.get("FAULTS_DELAY", "0"))
    database = os.environ["FAULTS_DB"]
    bailing = Bailing(app)
    bailing.authorizer(lambda call: call.subject is not None)

    @app.post("/refunds")
    @tool(scope="refund.write", body=RefundBody)
    def refund_create():
        """Refund an order (one row per run)."""
        with business(database) as conn:
            conn.execute("INSERT INTO refunds VALUES (?, ?)",
                         (current_call.args["order_id"], current_call.job_id))
        if delay:
            time.sleep(delay)
        return jsonify(ok=True), 201

    @app.post("/upload")
    @tool(scope="upload.write", repeats="safe")
    def upload():
        """Accept a body (the slow-client runs send one a byte at a time)."""
        return jsonify(ok=True)

    return app
