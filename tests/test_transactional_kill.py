"""The transaction mode when a real worker process dies at the worst moments.

A gunicorn worker is SIGKILLed (``tests/apps/txn_app.py``, ``TXN_KILL_FILE``)
inside the view after its insert, after the answer was written into the
record but before the COMMIT, after the COMMIT before anything was sent,
and halfway through sending the answer. Whatever the moment, the same call
sent again either gets the stored answer and runs nothing (the transaction
had committed) or runs (it had rolled back, so nothing had happened); no
record is ever left uncertain. Duplicates sent at once to two servers
("hosts") sharing the database run once.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from bailing_flask.responses import REPLAY_HEADER
from bailing_flask.testing import HubSimulator

from .helpers import STRONG_SECRET
from .test_transactional import backend_config
from .apps.txn_app import count, query

#: the moment the worker dies -> whether the call's transaction had committed by then
MOMENTS = {"in_view": False, "before_commit": False, "after_commit": True, "during_response": True}


@pytest.mark.parametrize("kind", ["sqlalchemy-postgresql", "sqlite3", "psycopg"])
def test_a_worker_killed_at_the_worst_moments_leaves_nothing_uncertain(kind, gunicorn, request,
                                                                       tmp_path):
    config = backend_config(kind, request, tmp_path)
    kill_file = tmp_path / "kill"
    env = {"BAILING_TEST_SECRET": STRONG_SECRET, "TXN_KILL_FILE": str(kill_file), **config}
    hub = HubSimulator(gunicorn("tests.apps.txn_app:create_app()", workers=2, env=env), STRONG_SECRET)
    expected = 0
    for number, (moment, committed) in enumerate(MOMENTS.items(), start=1):
        call = hub.build_call("refund_create", {"order_id": number, "amount": 10}, subject="t1:u1")
        job = call.headers["X-Bailing-Job-Id"]
        kill_file.write_text(moment)
        with pytest.raises(Exception):  # noqa: B017 - the connection is cut, however the client says it
            hub.replay(call)
        assert not kill_file.exists(), f"the worker did not reach {moment}"
        expected += committed
        assert count(config) == expected, moment
        try:
            again = hub.replay(call)
        except OSError as exc:
            raise AssertionError(f"after {moment}: {exc!r}") from exc
        assert again.status == 201, (moment, again.text)
        if committed:  # answered from the record: the view did not run again
            assert again.headers.get(REPLAY_HEADER) == "true", moment
            assert [again.json()["refund_id"]] == [
                row[0] for row in query(config, "SELECT id FROM refunds WHERE job = ?", (job,))]
        else:  # rolled back: nothing had happened, so it runs now
            assert REPLAY_HEADER not in again.headers, moment
            expected += 1
        assert count(config) == expected, moment
        assert hub.replay(call).headers.get(REPLAY_HEADER) == "true"
    states = query(config, "SELECT state, COUNT(*) FROM bailing_idempotency GROUP BY state")
    assert states == [("completed", len(MOMENTS))]  # never running (uncertain), never missing


@pytest.mark.parametrize("kind", ["sqlalchemy-sqlite", "psycopg"])
def test_duplicates_sent_at_once_to_two_servers_sharing_the_database_run_once(kind, gunicorn,
                                                                             request, tmp_path):
    config = backend_config(kind, request, tmp_path)
    env = {"BAILING_TEST_SECRET": STRONG_SECRET, "TXN_DELAY": "0.3", **config}
    first = HubSimulator(gunicorn("tests.apps.txn_app:create_app()", workers=2, env=env), STRONG_SECRET)
    second = HubSimulator(gunicorn("tests.apps.txn_app:create_app()", workers=2, env=env), STRONG_SECRET)
    call = first.build_call("refund_create", {"order_id": 1, "amount": 10}, subject="t1:u1")
    with ThreadPoolExecutor(max_workers=12) as pool:
        answers = list(pool.map(lambda i: (first if i % 2 else second).replay(call), range(12)))
    assert count(config) == 1
    assert {a.status for a in answers} <= {201, 409}, [a.text for a in answers]
    fresh = [a for a in answers if a.status == 201 and REPLAY_HEADER not in a.headers]
    assert len(fresh) == 1
    assert all(a.body == fresh[0].body for a in answers if a.status == 201)
    assert query(config, "SELECT state FROM bailing_idempotency") == [("completed",)]


@pytest.mark.parametrize("kind", ["sqlalchemy-postgresql", "sqlalchemy-sqlite", "psycopg"])
def test_a_worker_killed_right_after_the_views_own_commit_leaves_the_call_uncertain(
        kind, gunicorn, request, tmp_path):
    """A view that sends COMMIT itself makes its first row durable with the running record; the
    worker dies before the answer. The same call is then never run again nor answered from a
    guess: it is uncertain (409) until an operator settles it."""
    config = backend_config(kind, request, tmp_path)
    kill_file = tmp_path / "kill"
    env = {"BAILING_TEST_SECRET": STRONG_SECRET, "TXN_KILL_FILE": str(kill_file), **config}
    hub = HubSimulator(gunicorn("tests.apps.txn_app:create_app()", workers=1, env=env), STRONG_SECRET)
    call = hub.build_call("refund_create", {"order_id": 1, "amount": 10, "misuse": "raw_commit"},
                          subject="t1:u1")
    kill_file.write_text("after_raw_commit")
    with pytest.raises(Exception):  # noqa: B017 - the connection is cut, however the client says it
        hub.replay(call)
    assert not kill_file.exists(), "the worker did not reach its own COMMIT"
    assert count(config) == 1  # the row before the view's COMMIT; the second was never written
    assert query(config, "SELECT state, status FROM bailing_idempotency") == [("running", None)]
    for _ in range(2):
        again = hub.replay(call)
        assert (again.status, again.json()["reason"]) == (409, "idempotency_uncertain")
    assert count(config) == 1
