"""The transaction mode when the database cuts the call's connection while the view runs.

A failover, a proxy restart or ``pg_terminate_backend`` ends the connection:
the server rolls the call's transaction back, so nothing of it happened. That
is not a view that ended the transaction itself: the call must not be left
uncertain (nor its answer say "the changes may have happened"), and the same
call sent again runs.
"""

from __future__ import annotations

import threading
import time

import pytest

from bailing_flask.responses import REPLAY_HEADER
from bailing_flask.testing import HubSimulator

from .apps.txn_app import count, create_app, query
from .helpers import STRONG_SECRET
from .test_transactional import backend_config


def _cut_the_calls_connection(conninfo: str) -> int:
    import psycopg

    with psycopg.connect(conninfo, autocommit=True) as conn:
        return len(conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
            "current_database() AND pid <> pg_backend_pid() AND state = 'idle in transaction' "
            "AND state_change < now() - interval '0.4 seconds'"
        ).fetchall())


@pytest.mark.parametrize("kind", ["sqlalchemy-postgresql", "psycopg"])
def test_a_connection_cut_during_the_view_rolls_back_and_the_same_call_runs_again(
        kind, request, tmp_path):
    database = request.getfixturevalue("postgres_database")
    config = backend_config(kind, request, tmp_path)
    app = create_app(BAILING_SECRETS=[STRONG_SECRET], TXN_DELAY=1.5, **config)
    hub = HubSimulator(app, STRONG_SECRET)
    app.config["TXN_DELAY"] = 0
    assert hub.call("refund_count", subject="t1:u1").status == 200
    assert hub.call("refund_create", {"order_id": 9, "amount": 1}, subject="t1:u1").status == 201
    app.config["TXN_DELAY"] = 1.5  # the tables exist: the one transaction left open is the call's
    call = hub.build_call("refund_create", {"order_id": 1, "amount": 10}, subject="t1:u1")
    answers = []
    sender = threading.Thread(target=lambda: answers.append(hub.replay(call)))
    sender.start()
    deadline = time.monotonic() + 10
    while not _cut_the_calls_connection(database.conninfo):  # once the view sleeps after its insert
        assert time.monotonic() < deadline, "the call never held a transaction open"
        time.sleep(0.05)
    sender.join(30)
    (first,) = answers
    assert count(config) == 1  # the server rolled the call back: only the first call's row
    assert (first.status, first.json()["reason"]) == (503, "transaction_failed"), first.text
    assert query(config, "SELECT state FROM bailing_idempotency") == [("completed",)]  # no running row
    again = hub.replay(call)
    assert (again.status, again.headers.get(REPLAY_HEADER)) == (201, None), again.text
    assert count(config) == 2
    assert hub.replay(call).headers.get(REPLAY_HEADER) == "true"
