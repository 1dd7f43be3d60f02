"""Redis stopped and started again under load, with and without persistence.

A real redis-server (first without persistence, then with ``appendonly
yes`` on the same port), a real gunicorn with two workers and a view that takes
0.05 s, so that calls are in flight when Redis goes away. While Redis is down
every side effect is refused with ``503 idempotency_store_unavailable``
(never a 500, never a traceback, nothing run); once it is back the same
workers serve again. What Redis remembers decides what a repeat finds:

* with ``appendonly yes`` every record survives the restart, in-flight
  reservations included, so no call ever runs twice;
* without persistence Redis restarts empty: a completed call repeated after
  the restart runs again (the store warns about such a Redis at first use).

Bounds on durations only catch a hang, never a speed.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pytest

from bailing_flask.stores import EntryMeta, RedisStore, StoredResponse
from bailing_flask.testing import HubSimulator

from ._redis import RedisServer
from ._servers import gunicorn_serving
from .helpers import STRONG_SECRET
from .apps.idem_app import callbacks_handled, create_app, rows_by_order, side_effects

pytestmark = [pytest.mark.redis, pytest.mark.slow]

CLIENT_TOKEN = "client-token-for-faults-0123456789abcdef"
RECOVERY_BOUND = 10.0
#: distinct refunds sent in one run (the rest of the load repeats them)
MAX_ORDERS = 40


@dataclass
class Answer:
    order: int
    status: int
    reason: str | None
    traceback: bool
    replayed: bool
    at: float


@dataclass
class Load:
    """Distinct refunds and repeats of one completed refund, from several threads."""

    hub: HubSimulator
    #: the refund completed before the load, and its order id
    first: object
    first_order: int
    #: where the order ids of the load start
    start: int
    answers: list[Answer] = field(default_factory=list)
    requests: dict[int, object] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.orders = itertools.count(self.start)

    def send(self, order: int, request: object) -> Answer:
        try:
            response = self.hub.replay(request)  # type: ignore[arg-type]
        except OSError:  # pragma: no cover - the server itself is not the fault here
            return Answer(order, 0, "connection", False, False, time.monotonic())
        text = response.body.decode("utf-8", "replace")
        try:
            reason = json.loads(text).get("reason")
        except ValueError:
            reason = None
        return Answer(order, response.status, reason, "Traceback" in text,
                      response.headers.get("Idempotent-Replayed") == "true", time.monotonic())

    def worker(self) -> None:
        for round_ in itertools.count():
            if self.stop.is_set():
                return
            time.sleep(0.02)
            if round_ % 3 == 2 or len(self.requests) >= MAX_ORDERS:
                # a repeat: of the refund completed before the load, or of one sent in it
                sent = list(self.requests)
                order = self.first_order if round_ % 2 or not sent else sent[round_ % len(sent)]
                self.answers.append(self.send(order, self.requests.get(order, self.first)))
                continue
            order = next(self.orders)
            request = self.hub.build_call("refund_create", {"order_id": order, "amount": 1},
                                          subject="t1:u1")
            self.requests[order] = request
            self.answers.append(self.send(order, request))


def outage_under_load(server: RedisServer, base: str, *, down_for: float,
                      first_order: int) -> tuple[Load, float]:
    """Load for 0.3 s, Redis down for ``down_for`` s, load until it serves again plus 0.3 s.

    Returns the load and the seconds from Redis' return to the first call the
    store answered again.
    """
    hub = HubSimulator(base, STRONG_SECRET)
    first = hub.build_call("refund_create", {"order_id": first_order, "amount": 1},
                           subject="t1:u1")
    load = Load(hub, first, first_order, start=first_order * 100)
    # an attempt like the others: on a busy machine every repeat of it may fall in the outage,
    # and it must not then pass for a call that was refused at every attempt
    load.answers.append(load.send(first_order, first))
    assert load.answers[0].status == 201
    with ThreadPoolExecutor(max_workers=4) as pool:
        for _ in range(4):
            pool.submit(load.worker)
        time.sleep(0.3)
        server.stop()
        time.sleep(down_for)
        server.start()
        back = time.monotonic()
        recovered = None
        while time.monotonic() - back < RECOVERY_BOUND:
            # the store answers again: a call runs, is answered from its record, or is held
            served = [a for a in list(load.answers) if a.at > back and a.status != 503]
            if served:
                recovered = min(a.at for a in served) - back
                break
            time.sleep(0.05)
        time.sleep(0.3)
        load.stop.set()
    assert recovered is not None, "no call was served after Redis came back"
    return load, recovered


def check_refusals(answers: list[Answer]) -> None:
    statuses = {a.status for a in answers}
    assert statuses <= {201, 409, 503}, statuses
    assert not any(a.traceback for a in answers)
    for answer in answers:
        if answer.status == 503:
            assert answer.reason == "idempotency_store_unavailable", answer
        if answer.status == 409:
            assert answer.reason in ("idempotency_in_progress", "idempotency_uncertain"), answer


def outage_phase(server: RedisServer, base: str, business: str, first_order: int
                 ) -> tuple[Load, dict[int, Answer], Answer, dict[int, int], set[int]]:
    """One outage under load, then every call once more; what a test checks."""
    load, recovered = outage_under_load(server, base, down_for=0.6, first_order=first_order)
    assert recovered < RECOVERY_BOUND
    check_refusals(load.answers)
    assert any(a.status == 503 for a in load.answers), "the outage was not seen"
    statuses: dict[int, set[int]] = {}
    for answer in load.answers:
        statuses.setdefault(answer.order, set()).add(answer.status)
    refused = {order for order, seen in statuses.items() if seen == {503}}
    assert refused, "no call was refused at every attempt"
    ran = rows_by_order(business)
    # a call refused at every attempt ran nothing: it is not in the business table
    assert not refused & set(ran), refused & set(ran)
    # every call once more, now that Redis is back
    with ThreadPoolExecutor(max_workers=4) as pool:
        again = dict(zip(load.requests, pool.map(lambda item: load.send(*item),
                                                 load.requests.items())))
    check_refusals(list(again.values()))
    repeat_of_first = load.send(first_order, load.first)
    mine = {first_order, *load.requests}
    runs = {order: count for order, count in rows_by_order(business).items() if order in mine}
    return load, again, repeat_of_first, runs, refused


def test_redis_restart_under_load_refuses_cleanly_and_recovers_without_a_worker_restart(
    redis_server_factory: Callable[..., RedisServer], tmp_path
):
    server = redis_server_factory()  # no persistence first; then the same port with AOF
    business = str(tmp_path / "business.sqlite3")
    env = {"BAILING_TEST_SECRET": STRONG_SECRET, "BAILING_STORE": server.url,
           "IDEM_DATABASE": business, "IDEM_DELAY": "0.05"}
    with gunicorn_serving("tests.apps.idem_app:create_app()", env=env, workers=2) as base:
        _, _, repeat_of_first, runs, _ = outage_phase(server, base, business, first_order=1)
        # Redis restarted empty: the first repeat of the refund completed before the restart
        # ran it again (once: that run was recorded, and later repeats are answered from it)
        assert runs[1] == 2
        assert repeat_of_first.status == 201 and repeat_of_first.replayed

        server.args = ("--appendonly", "yes")
        server.restart()
        _, again, repeat_of_first, runs, refused = outage_phase(server, base, business,
                                                                first_order=2)
    # Redis kept every reservation and answer: nothing ran twice
    assert max(runs.values()) == 1, {k: v for k, v in runs.items() if v > 1}
    assert repeat_of_first.status == 201 and repeat_of_first.replayed
    ran_afterwards = 0
    for order in refused:  # refused during the outage: nothing ran then
        answer = again[order]
        if answer.status == 201:  # run once afterwards
            assert runs[order] == 1
            ran_afterwards += 1
        else:
            # its reservation reached Redis as Redis went down, and the answer to it was lost:
            # the call is held (in progress, then uncertain), and it still never ran
            assert (answer.status, answer.reason) == (409, "idempotency_in_progress")
            assert runs.get(order, 0) == 0
    assert ran_afterwards, "no call refused during the outage was served afterwards"


@pytest.mark.parametrize("persistence", ["aof", "none"])
def test_replay_protection_and_callbacks_across_a_redis_restart(
    redis_server_factory: Callable[..., RedisServer], tmp_path, monkeypatch, caplog, persistence
):
    server = redis_server_factory(*(("--appendonly", "yes") if persistence == "aof" else ()))
    monkeypatch.setenv("IDEM_CLIENT_TOKEN", CLIENT_TOKEN)
    app = create_app(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE=server.url,
                     BAILING_REJECT_REPLAYS=True, IDEM_DATABASE=str(tmp_path / "b.sqlite3"))
    hub = HubSimulator(app, STRONG_SECRET, client_token=CLIENT_TOKEN)
    read = hub.build_call("refund_count", subject="t1:u1")
    assert hub.replay(read).status == 200
    assert hub.replay(read).json()["reason"] == "replayed"
    # one event each: the same job id, status and update time is the same delivery
    job = {"job_id": "job-faults-1", "request_id": "req-faults-1",
           "updated_at": "2026-01-02T03:04:05.000Z"}
    second = {"job_id": "job-faults-2", "request_id": "req-faults-2",
              "updated_at": "2026-01-02T03:04:06.000Z"}
    assert hub.send_job_finished(**job).status == 200

    server.stop()
    caplog.set_level(logging.INFO, logger="bailing_flask")
    write = hub.build_call("refund_create", {"order_id": 5, "amount": 4321.5}, subject="t1:u1")
    refused = hub.replay(write)
    assert refused.status == 503 and refused.json()["reason"] == "idempotency_store_unavailable"
    # a read tool is answered without the replay check (logged), a callback is refused so the
    # hub delivers it again later
    assert hub.call("refund_count", subject="t1:u1").status == 200
    down = hub.send_job_finished(**second)
    assert down.status == 503 and down.json()["reason"] == "idempotency_store_unavailable"
    assert side_effects(app.config["IDEM_DATABASE"]) == 0
    assert callbacks_handled(app.config["IDEM_DATABASE"]) == 1
    # the outage is logged with the store and the cause, never a secret or an argument value
    assert "is unavailable: ConnectionError" in caplog.text
    for secret in (STRONG_SECRET, CLIENT_TOKEN, "4321.5", "Traceback"):
        assert secret not in caplog.text

    server.start()
    assert hub.replay(write).status == 201  # the same signed call, refused before: runs now
    assert hub.send_job_finished(**second).status == 200
    again = hub.send_job_finished(**job)  # the hub delivers the first event once more
    seen_again = hub.replay(read)
    if persistence == "aof":
        assert again.json() == {"ok": True, "duplicate": True}
        assert seen_again.json()["reason"] == "replayed"
        assert callbacks_handled(app.config["IDEM_DATABASE"]) == 2
    else:  # Redis forgot the callback it had handled and the signature it had seen
        assert again.json() == {"ok": True}
        assert seen_again.status == 200
        assert callbacks_handled(app.config["IDEM_DATABASE"]) == 3


@pytest.mark.parametrize("stop, kept", [("stop", True), ("kill", False)])
def test_rdb_snapshots_keep_records_over_a_clean_restart_not_a_crash(
    redis_server_factory: Callable[..., RedisServer], stop, kept
):
    server = redis_server_factory("--save", "3600 1")
    store = RedisStore(server.url)
    assert store.claim("k", token="t", lease_seconds=60.0, retention_seconds=60.0,
                       meta=EntryMeta()) is None
    assert store.complete("k", token="t", response=StoredResponse(201, (), b"{}"),
                          retention_seconds=60.0)
    getattr(server, stop)()  # SIGTERM saves a last snapshot; SIGKILL leaves the last one
    server.start()
    assert (store.get("k") is not None) == kept
    store.close()
