"""A gunicorn worker SIGKILLed in the middle of a call, in the store mode.

The transaction mode has its own kill test; here the record lives in the
idempotency store (SQLite, Redis with deferred completions, and the SQL store on
PostgreSQL and MariaDB). Whatever
the moment of the kill -- after the reservation and before the side effect,
after the side effect and before the answer, after the answer and before a
deferred completion was written -- the same call sent again is answered from
its record or refused as in progress (the lease runs) or uncertain (it ran
out). It never runs twice, and nothing the worker did is left unrecorded.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from bailing_flask.stores import SQLStore
from bailing_flask.testing import HubSimulator

from .helpers import SQL_BACKENDS, STRONG_SECRET, sql_url
from .apps.idem_app import rows_by_order

pytestmark = pytest.mark.slow

LEASE = 0.5
#: (moment, order id, runs of the side effect the kill leaves behind)
MOMENTS = [("before_effect", 11, 0), ("after_effect", 12, 1), ("after_answer", 13, 1)]


def kill_and_repeat(hub: HubSimulator, moment: str, order: int) -> tuple[str, list[object]]:
    """Send the call that kills its worker, then repeat it while the lease runs and after."""
    args = {"order_id": order, "amount": 1}
    if moment == "after_effect":
        args["die"] = True
    else:
        args["die_at"] = moment
    request = hub.build_call("refund_create", args, subject="t1:u1")
    try:
        first = f"answered {hub.replay(request).status}"
    except OSError:  # the worker died with the connection open
        first = "cut"
    during = hub.replay(request)
    time.sleep(LEASE + 0.3)
    after = [hub.replay(request) for _ in range(3)]
    return first, [during, *after]


@pytest.mark.parametrize("store", ["sqlite", pytest.param("redis-deferred", marks=pytest.mark.redis),
                                   pytest.param("postgresql", marks=pytest.mark.postgres),
                                   pytest.param("mariadb", marks=pytest.mark.mariadb)])
def test_a_killed_worker_leaves_a_call_answered_from_its_record_or_refused_never_run_twice(
    store, gunicorn, tmp_path, request
):
    env = {"BAILING_TEST_SECRET": STRONG_SECRET, "IDEM_LEASE": str(LEASE),
           "IDEM_DATABASE": str(tmp_path / "business.sqlite3")}
    if store == "sqlite":
        env["BAILING_STORE"] = f"sqlite:///{tmp_path / 'idem.sqlite3'}"
    elif store in SQL_BACKENDS:  # the SQL store: its database outlives the worker, as Redis does
        env["BAILING_STORE"] = sql_url(request, store)
        SQLStore(env["BAILING_STORE"]).create_schema()
    else:
        env["BAILING_STORE"] = request.getfixturevalue("redis_server").url
        env["IDEM_DEFER"] = "1"
    # with deferred completions only the last moment differs: the answer has left, its
    # record may not have been written
    moments = MOMENTS[2:] if store == "redis-deferred" else MOMENTS
    hub = HubSimulator(gunicorn("tests.apps.idem_app:create_app()", workers=2, env=env),
                       STRONG_SECRET)
    with ThreadPoolExecutor(max_workers=len(moments)) as pool:
        outcomes = dict(zip(moments, pool.map(lambda m: kill_and_repeat(hub, m[0], m[1]),
                                              moments)))
    runs = rows_by_order(env["IDEM_DATABASE"])
    for (moment, order, effects), (first, repeats) in outcomes.items():
        assert runs.get(order, 0) == effects, (moment, runs)  # never run again
        if moment == "after_answer":
            assert first == "answered 201", (moment, first)
        else:
            assert first == "cut", (moment, first)
        for response in repeats:
            body = response.json()  # type: ignore[attr-defined]
            status = response.status  # type: ignore[attr-defined]
            if status == 201:  # answered from the record: the answer the worker sent
                assert moment == "after_answer" and body["ok"] is True, (moment, body)
                assert response.headers.get("Idempotent-Replayed") == "true"  # type: ignore[attr-defined]
            else:
                assert status == 409, (moment, status, body)
                assert body["reason"] in ("idempotency_in_progress", "idempotency_uncertain")
        # once the lease has run out a call never finished is uncertain, not in progress
        last = repeats[-1]
        if last.status == 409:  # type: ignore[attr-defined]
            assert last.json()["reason"] == "idempotency_uncertain", moment  # type: ignore[attr-defined]
    # the sqlite and SQL stores write the completion before the answer leaves: never lost
    if store != "redis-deferred":
        assert outcomes[MOMENTS[2]][1][-1].status == 201  # type: ignore[attr-defined]
