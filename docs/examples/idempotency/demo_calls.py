"""docs/concepts/idempotency.rst: the example application's refund request, sent twice by the same job.

Builds ``example_app`` on a fresh SQLite database in a temporary folder
(its own migration creates ``bailing_idempotency``), sends
``refund_request_create`` twice with the same job as the hub would, and
prints the two answers and what the table holds.
"""

import os
import sqlite3
import tempfile

from bailing_flask.testing import HubSimulator
from example_app import create_app

SECRET = os.environ["BAILING_SECRET"]
ARGS = {"order_id": 1001, "amount": 20, "reason": "Late"}
JOB = "0f8e3c2a-6b1d-4c55-9a57-2d4f8b9e1c03"

with tempfile.TemporaryDirectory() as folder:
    database = os.path.join(folder, "example_app.sqlite3")
    app = create_app({"BAILING_SECRETS": [SECRET], "DATABASE": database, "BAILING_STORE": "memory://",
                      "SECRET_KEY": "docs", "BAILING_CLIENT_TOKENS": ["docs-client-token-0123456789abcdef"]},
                     instance_path=folder)
    hub = HubSimulator(app, SECRET)
    for _ in range(2):
        answer = hub.call("refund_request_create", ARGS, subject="t1:u1", job_id=JOB)
        print(f"HTTP {answer.status}  Idempotent-Replayed: {answer.headers.get('Idempotent-Replayed', '-')}"
              f"  {answer.json()['message']}")
    with sqlite3.connect(database) as conn:
        print("bailing_idempotency:", conn.execute("SELECT tool, state, status FROM bailing_idempotency").fetchall())
        print("refund requests of order 1001:",
              conn.execute("SELECT count(*) FROM refund_requests WHERE order_id = 1001").fetchone()[0])
