"""Every idempotency store keeps the same promises, against real backends.

One suite runs on the memory store, a real SQLite file and a real
``redis-server`` (``tests/_redis.py``); time is moved with the stores'
injected clock. Further tests race real processes for one key, reopen the
SQLite file, fork with a live store, and stop, restart and freeze Redis.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bailing_flask.errors import BailingError, ConfigurationError
from bailing_flask.stores import (
    ApprovalClaim,
    ApprovalRecord,
    Entry,
    EntryMeta,
    IdempotencyStore,
    MemoryStore,
    RedisStore,
    Reservation,
    SQLiteStore,
    SQLStore,
    StoredResponse,
    StoreUnavailable,
    store_from_url,
)

from ._redis import RedisServer
from .helpers import SQL_BACKENDS, sql_store, sql_url

T0 = 1_718_000_000.0
LEASE = 30.0
RETENTION = 600.0
META = EntryMeta(
    tool="refund_order", job_id="job-test-001", subject="179:1", unsigned_key="ab" * 32
)
OK = StoredResponse(200, (("Content-Type", "application/json"),), b'{"refunded":true}')
#: Every byte value, and header values WSGI can carry (latin-1) and beyond.
BINARY = StoredResponse(
    201,
    (
        ("Content-Type", "application/octet-stream"),
        ("X-Note", "café"),
        ("X-Wide", "退款 ✓ \u2028"),
        ("Set-Cookie", "a=1"),
        ("Set-Cookie", "b=2"),
        ("X-Empty", ""),
    ),
    bytes(range(256)) * 3,
)


class Clock:
    """The stores' injected clock, moved by hand."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


def _prefix() -> str:
    return f"test-{uuid.uuid4().hex}:"


@pytest.fixture(params=["memory", "sqlite", "redis", "postgresql", "mariadb", "mysql"])
def store(
    request: pytest.FixtureRequest, clock: Clock, tmp_path: Path
) -> Iterator[IdempotencyStore]:
    """The store under test, one per backend, empty.

    ``mysql`` is the SQL store on MariaDB as it runs on MySQL: without ``INSERT ... RETURNING``.
    """
    if request.param == "memory":
        backend: IdempotencyStore = MemoryStore(clock=clock)
    elif request.param == "sqlite":
        # A directory that does not exist yet: created on first use.
        backend = SQLiteStore(tmp_path / "var" / "idempotency.db", clock=clock)
    elif request.param in SQL_BACKENDS:
        backend = sql_store(request, request.param, clock)
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        backend = RedisStore(server.url, clock=clock, prefix=_prefix())
    yield backend
    backend.close()


def reserve(
    store: IdempotencyStore,
    key: str,
    token: str,
    *,
    lease: float = LEASE,
    retention: float = RETENTION,
    meta: EntryMeta = META,
) -> Reservation:
    return store.reserve(
        key, token=token, lease_seconds=lease, retention_seconds=retention, meta=meta
    )


def complete(
    store: IdempotencyStore,
    key: str,
    token: str,
    response: StoredResponse = OK,
    retention: float = RETENTION,
) -> bool:
    return store.complete(key, token=token, response=response, retention_seconds=retention)


# --- reserve, complete, replay -------------------------------------------------


def test_first_arrival_reserves_an_in_progress_entry(store: IdempotencyStore) -> None:
    reservation = reserve(store, "k1", "token-a")
    assert reservation.outcome == "reserved"
    entry = reservation.entry
    assert (entry.key, entry.state, entry.token) == ("k1", "in_progress", "token-a")
    assert entry.created_at == T0
    assert entry.lease_expires_at == T0 + LEASE
    assert entry.expires_at == T0 + RETENTION
    assert entry.meta == META
    assert entry.response is None and entry.note is None
    assert store.get("k1") == entry


def test_completed_response_is_replayed_byte_for_byte(
    store: IdempotencyStore, clock: Clock
) -> None:
    reserve(store, "k1", "token-a")
    clock.advance(2)
    assert complete(store, "k1", "token-a", BINARY, retention=100)
    clock.advance(1)
    repeat = reserve(store, "k1", "token-b")
    assert repeat.outcome == "completed"
    entry = repeat.entry
    assert entry.state == "completed"
    assert entry.response == BINARY
    assert entry.response.body == bytes(range(256)) * 3
    assert entry.response.headers[2] == ("X-Wide", "退款 ✓ \u2028")
    assert entry.meta == META
    assert entry.created_at == T0
    assert entry.expires_at == T0 + 2 + 100  # retention restarts at completion
    assert store.get("k1") == entry


@pytest.mark.parametrize(
    "meta",
    [
        EntryMeta(),
        EntryMeta(tool="t", job_id="", subject=None, unsigned_key=None),
        EntryMeta(tool="开票", job_id="j.1", subject="wecom:张三", unsigned_key="k\u00e9y"),
    ],
    ids=["defaults", "anonymous", "non-ascii"],
)
def test_meta_round_trips(store: IdempotencyStore, meta: EntryMeta) -> None:
    reserve(store, "k1", "token-a", meta=meta)
    assert store.get("k1").meta == meta  # type: ignore[union-attr]
    complete(store, "k1", "token-a", StoredResponse(204))
    entry = store.get("k1")
    assert entry is not None and entry.meta == meta
    assert entry.response == StoredResponse(204, (), b"")


def test_keys_are_opaque_strings(store: IdempotencyStore) -> None:
    keys = ["callback:job-1", "a*b[1]?\\", "ключ-🔑", "f" * 64]
    for index, key in enumerate(keys):
        assert reserve(store, key, f"t{index}").outcome == "reserved"
    assert store.get("callback:job-*") is None
    assert store.get("a*b[1]?\\") is not None
    assert sorted(entry.key for entry in store.list()) == sorted(keys)


# --- leases: in progress, uncertain, take-over -------------------------------------


def test_in_progress_until_the_lease_runs_out_then_uncertain(
    store: IdempotencyStore, clock: Clock
) -> None:
    first = reserve(store, "k1", "token-a").entry
    clock.advance(LEASE - 0.5)
    busy = reserve(store, "k1", "token-b")
    assert busy.outcome == "in_progress"
    assert busy.entry.token == "token-a"
    assert not busy.entry.is_uncertain(clock())
    clock.now = first.lease_expires_at
    late = reserve(store, "k1", "token-c")
    assert late.outcome == "uncertain"
    assert late.entry.is_uncertain(clock())
    assert late.entry == first  # nothing was changed by looking


def test_reserving_again_with_the_owning_token_is_reserved(store: IdempotencyStore) -> None:
    # A reserve whose answer was lost on the way back may be repeated.
    first = reserve(store, "k1", "token-a")
    again = reserve(store, "k1", "token-a")
    assert again.outcome == "reserved"
    assert again.entry == first.entry


def test_an_in_progress_entry_is_kept_at_least_for_its_lease(
    store: IdempotencyStore, clock: Clock
) -> None:
    entry = reserve(store, "k1", "token-a", lease=100, retention=10).entry
    assert entry.expires_at == T0 + 100
    clock.advance(50)
    assert reserve(store, "k1", "token-b").outcome == "in_progress"


def test_a_slow_worker_may_still_complete_an_uncertain_entry(
    store: IdempotencyStore, clock: Clock
) -> None:
    reserve(store, "k1", "token-a")
    clock.advance(LEASE + 5)
    assert reserve(store, "k1", "token-b").outcome == "uncertain"
    assert complete(store, "k1", "token-a")
    assert reserve(store, "k1", "token-c").outcome == "completed"


def test_take_over_is_a_compare_and_set(store: IdempotencyStore, clock: Clock) -> None:
    reserve(store, "k1", "token-a")
    clock.advance(LEASE + 1)
    seen = reserve(store, "k1", "token-b")
    assert seen.outcome == "uncertain"
    assert not store.take_over("k1", old_token="wrong", new_token="token-b", lease_seconds=60)
    assert store.take_over("k1", old_token=seen.entry.token, new_token="token-b", lease_seconds=60)
    # A second arrival that saw the same uncertain entry loses ...
    assert not store.take_over("k1", old_token="token-a", new_token="token-c", lease_seconds=60)
    # ... and the new owner may repeat its own take-over.
    assert store.take_over("k1", old_token="token-a", new_token="token-b", lease_seconds=60)
    entry = store.get("k1")
    assert entry is not None
    assert (entry.state, entry.token) == ("in_progress", "token-b")
    assert entry.lease_expires_at == clock() + 60
    assert entry.created_at == T0
    assert reserve(store, "k1", "token-d").outcome == "in_progress"
    assert not complete(store, "k1", "token-a")  # the presumed-dead worker
    assert not store.release("k1", token="token-a")
    assert complete(store, "k1", "token-b")
    assert not store.take_over("k1", old_token="token-b", new_token="token-e", lease_seconds=60)
    assert not store.take_over("nope", old_token="x", new_token="y", lease_seconds=60)


def test_take_over_extends_retention_to_cover_the_new_lease(
    store: IdempotencyStore, clock: Clock
) -> None:
    reserve(store, "k1", "token-a", lease=10, retention=20)
    clock.advance(15)
    assert store.take_over("k1", old_token="token-a", new_token="token-b", lease_seconds=100)
    entry = store.get("k1")
    assert entry is not None and entry.expires_at == T0 + 15 + 100
    clock.advance(50)
    assert reserve(store, "k1", "token-c").outcome == "in_progress"


# --- compare-and-set refusals ------------------------------------------------------


def test_complete_refuses_a_wrong_token(store: IdempotencyStore) -> None:
    reserve(store, "k1", "token-a")
    assert not complete(store, "k1", "token-b")
    assert store.get("k1").state == "in_progress"  # type: ignore[union-attr]
    assert not complete(store, "unknown", "token-a")


def test_complete_is_idempotent_for_its_token(store: IdempotencyStore) -> None:
    reserve(store, "k1", "token-a")
    assert complete(store, "k1", "token-a", OK)
    assert complete(store, "k1", "token-a", BINARY)
    assert store.get("k1").response == OK  # type: ignore[union-attr]
    assert not complete(store, "k1", "token-b", BINARY)


def test_release_deletes_only_the_owners_in_progress_entry(store: IdempotencyStore) -> None:
    reserve(store, "k1", "token-a")
    assert not store.release("k1", token="token-b")
    assert store.get("k1") is not None
    assert store.release("k1", token="token-a")
    assert store.get("k1") is None
    assert not store.release("k1", token="token-a")
    assert not complete(store, "k1", "token-a")  # released means gone
    assert reserve(store, "k1", "token-c").outcome == "reserved"
    complete(store, "k1", "token-c")
    assert not store.release("k1", token="token-c")  # a completed entry stays
    assert store.get("k1").state == "completed"  # type: ignore[union-attr]


def test_mark_uncertain_makes_the_owners_entry_uncertain_at_once(
    store: IdempotencyStore, clock: Clock
) -> None:
    first = reserve(store, "k1", "token-a").entry
    assert not store.mark_uncertain("k1", token="token-b", note="not the owner")
    assert reserve(store, "k1", "token-b").outcome == "in_progress"
    assert store.mark_uncertain("k1", token="token-a", note="the view raised KeyError")
    assert store.mark_uncertain("k1", token="token-a", note="the view raised KeyError")
    seen = reserve(store, "k1", "token-c")
    assert seen.outcome == "uncertain"
    assert seen.entry.note == "the view raised KeyError"
    assert seen.entry.token == "token-a"
    assert seen.entry.expires_at == first.expires_at  # kept for operators as long as before
    assert [entry.key for entry in store.list(state="uncertain")] == ["k1"]
    # still the owner's: an operator's resolve or an opt-in take-over settles it
    assert store.take_over("k1", old_token="token-a", new_token="token-d", lease_seconds=5)
    assert reserve(store, "k1", "token-e").outcome == "in_progress"


def test_mark_uncertain_leaves_completed_released_and_dead_entries_alone(
    store: IdempotencyStore, clock: Clock
) -> None:
    assert not store.mark_uncertain("k0", token="token-a", note="never reserved")
    reserve(store, "k1", "token-a")
    complete(store, "k1", "token-a")
    assert not store.mark_uncertain("k1", token="token-a", note="too late")
    assert reserve(store, "k1", "token-b").outcome == "completed"
    reserve(store, "k2", "token-a")
    store.release("k2", token="token-a")
    assert not store.mark_uncertain("k2", token="token-a", note="released")
    reserve(store, "k3", "token-a", lease=10, retention=20)
    clock.advance(20)
    assert not store.mark_uncertain("k3", token="token-a", note="expired")
    assert store.get("k3") is None


# --- retention -----------------------------------------------------------------------


def test_a_completed_entry_is_forgotten_after_retention(
    store: IdempotencyStore, clock: Clock
) -> None:
    reserve(store, "k1", "token-a")
    complete(store, "k1", "token-a", retention=100)
    clock.advance(100 - 0.001)
    assert store.get("k1") is not None
    clock.advance(0.001)
    assert store.get("k1") is None
    assert store.list() == []
    assert not complete(store, "k1", "token-a")
    assert not store.release("k1", token="token-a")
    assert reserve(store, "k1", "token-b").outcome == "reserved"


def test_an_uncertain_entry_is_forgotten_after_retention(
    store: IdempotencyStore, clock: Clock
) -> None:
    reserve(store, "k1", "token-a", lease=10, retention=100)
    clock.advance(100)
    assert store.get("k1") is None
    assert not store.take_over("k1", old_token="token-a", new_token="b", lease_seconds=5)
    assert not complete(store, "k1", "token-a")
    assert reserve(store, "k1", "token-b").outcome == "reserved"


# --- operator resolution -------------------------------------------------------------


def test_resolve_with_a_response_completes_the_entry(
    store: IdempotencyStore, clock: Clock
) -> None:
    reserve(store, "k1", "token-a")
    clock.advance(LEASE + 1)
    assert store.list(state="uncertain")[0].key == "k1"
    answer = StoredResponse(200, (("X-Resolved", "yes"),), b'{"refunded":true,"by":"ops"}')
    assert store.resolve("k1", response=answer, note="refund seen in ledger", retention_seconds=50)
    entry = store.get("k1")
    assert entry is not None
    assert entry.state == "completed" and entry.response == answer
    assert entry.note == "refund seen in ledger"
    assert entry.expires_at == clock() + 50
    assert reserve(store, "k1", "token-b").entry.response == answer
    assert not complete(store, "k1", "token-a")  # the old worker cannot overwrite it
    assert store.list(state="uncertain") == []


def test_resolve_without_a_response_lets_the_next_arrival_run(
    store: IdempotencyStore, clock: Clock
) -> None:
    reserve(store, "k1", "token-a")
    clock.advance(LEASE + 1)
    assert store.resolve("k1", response=None, note="not in ledger", retention_seconds=50)
    assert store.get("k1") is None
    assert not complete(store, "k1", "token-a")
    assert reserve(store, "k1", "token-b").outcome == "reserved"


def test_resolve_reports_missing_entries(store: IdempotencyStore, clock: Clock) -> None:
    assert not store.resolve("nope", response=OK, note="", retention_seconds=50)
    assert not store.resolve("nope", response=None, note="", retention_seconds=50)
    reserve(store, "k1", "token-a", retention=40)
    clock.advance(40)
    assert not store.resolve("k1", response=OK, note="", retention_seconds=50)


def test_resolve_as_seen_keeps_the_answer_of_a_worker_that_finished_meanwhile(
    store: IdempotencyStore, clock: Clock
) -> None:
    """The operator decides on the entry they read; the store compares it in the same atomic
    step as the write. A slow worker that completed the call in between keeps its answer: a
    ``--rerun`` decided on the uncertain entry would otherwise let the call run twice."""
    reserve(store, "k1", "token-a")
    clock.advance(LEASE + 1)
    seen = store.get("k1")
    assert seen is not None and seen.is_uncertain(clock())
    assert complete(store, "k1", "token-a")  # the worker was slow, not dead
    answer = StoredResponse(200, (), b'{"by":"ops"}')
    assert not store.resolve("k1", response=None, note="looked lost", retention_seconds=50, seen=seen)
    assert not store.resolve("k1", response=answer, note="looked lost", retention_seconds=50,
                             seen=seen)
    entry = store.get("k1")
    assert entry is not None and entry.state == "completed" and entry.response == OK
    # decided on as it is now, it is settled; an operator still holding the older read is not
    now_seen = store.get("k1")
    assert store.resolve("k1", response=answer, note="ledger", retention_seconds=50, seen=now_seen)
    assert not store.resolve("k1", response=None, note="other operator", retention_seconds=50,
                             seen=now_seen)
    entry = store.get("k1")
    assert entry is not None and entry.response == answer and entry.note == "ledger"


def test_two_decisions_on_one_read_of_a_resolved_entry_apply_once(
    store: IdempotencyStore, clock: Clock
) -> None:
    """Two operators read the same already-resolved entry and each decide on it: the first
    decision applies, the second is refused (not silently overwritten). Each decision gives
    the entry a token of its own, so the read the second operator holds no longer matches."""
    reserve(store, "k1", "token-a")
    clock.advance(LEASE + 1)
    assert store.resolve("k1", response=OK, note="first look", retention_seconds=50,
                         seen=store.get("k1"))
    settled = store.get("k1")  # both operators read it now, resolved
    assert settled is not None and settled.state == "completed"
    answer = StoredResponse(200, (), b'{"by":"ops"}')
    assert store.resolve("k1", response=answer, note="operator one", retention_seconds=50,
                         seen=settled)
    assert not store.resolve("k1", response=None, note="operator two", retention_seconds=50,
                             seen=settled)
    assert not store.resolve("k1", response=OK, note="operator two", retention_seconds=50,
                             seen=settled)
    entry = store.get("k1")
    assert entry is not None and entry.response == answer and entry.note == "operator one"
    assert entry.token not in (settled.token, "token-a")


def test_resolve_as_seen_never_touches_a_new_call_on_an_expired_key(
    store: IdempotencyStore, clock: Clock
) -> None:
    reserve(store, "k1", "token-a", retention=40)
    clock.advance(LEASE + 1)
    seen = store.get("k1")  # uncertain
    clock.advance(10)  # then its retention ends, and the same call arrives again and runs
    assert reserve(store, "k1", "token-b").outcome == "reserved"
    assert not store.resolve("k1", response=None, note="", retention_seconds=50, seen=seen)
    assert not store.resolve("k1", response=OK, note="", retention_seconds=50, seen=seen)
    entry = store.get("k1")
    assert entry is not None and (entry.state, entry.token) == ("in_progress", "token-b")


def test_resolve_as_seen_settles_an_entry_that_stayed_as_read(
    store: IdempotencyStore, clock: Clock
) -> None:
    reserve(store, "k1", "token-a")
    reserve(store, "k2", "token-b")
    clock.advance(LEASE + 1)
    seen_1, seen_2 = store.get("k1"), store.get("k2")
    # the worker noting its failure late changes neither the state nor the token
    assert store.mark_uncertain("k1", token="token-a", note="the view raised")
    assert store.resolve("k1", response=None, note="not in ledger", retention_seconds=50, seen=seen_1)
    assert store.get("k1") is None
    assert store.resolve("k2", response=OK, note="in ledger", retention_seconds=50, seen=seen_2)
    entry = store.get("k2")
    assert entry is not None and entry.state == "completed" and entry.response == OK


def test_a_store_whose_resolve_predates_seen_still_resolves(clock: Clock) -> None:
    """A store written before ``expected`` existed: without ``seen`` nothing changes for it, and
    with ``seen`` the entry is compared on a read just before its ``_resolve`` (not atomically)."""

    class Older(MemoryStore):
        def _resolve(self, key: str, *, response: StoredResponse | None, note: str,  # type: ignore[override]
                     retention_seconds: float) -> bool:
            return super()._resolve(key, response=response, note=note,
                                    retention_seconds=retention_seconds)

    store = Older(clock=clock)
    reserve(store, "k1", "token-a")
    reserve(store, "k2", "token-b")
    clock.advance(LEASE + 1)
    seen_1, seen_2 = store.get("k1"), store.get("k2")
    assert complete(store, "k1", "token-a")
    assert not store.resolve("k1", response=None, note="", retention_seconds=50, seen=seen_1)
    entry = store.get("k1")
    assert entry is not None and entry.state == "completed"
    assert store.resolve("k2", response=None, note="", retention_seconds=50, seen=seen_2)
    assert store.get("k2") is None
    assert store.resolve("k1", response=None, note="", retention_seconds=50)  # no seen: as before
    assert store.get("k1") is None


# --- listing and cleanup -----------------------------------------------------------


def test_list_filters_by_effective_state_oldest_first(
    store: IdempotencyStore, clock: Clock
) -> None:
    reserve(store, "old", "t1", lease=10)
    clock.advance(1)
    reserve(store, "done", "t2", lease=100)
    complete(store, "done", "t2")
    clock.advance(1)
    reserve(store, "busy", "t3", lease=100)
    clock.advance(1)
    reserve(store, "gone", "t4", lease=1, retention=5)
    clock.now = T0 + 20

    def keys(**kwargs: Any) -> list[str]:
        return [entry.key for entry in store.list(**kwargs)]

    assert keys() == ["old", "done", "busy"]
    assert keys(state="uncertain") == ["old"]
    assert keys(state="in_progress") == ["busy"]
    assert keys(state="completed") == ["done"]
    assert keys(limit=2) == ["old", "done"]
    assert keys(limit=0) == []
    assert store.list(state="completed")[0].response == OK


def test_cleanup_removes_dead_records_in_bounded_batches(
    store: IdempotencyStore, clock: Clock
) -> None:
    for index in range(5):
        reserve(store, f"dead-{index}", "t", lease=5, retention=10)
    complete(store, "dead-0", "t", retention=10)
    reserve(store, "alive", "t", retention=1000)
    assert store.remember_signature("sig-dead-1", ttl_seconds=10)
    assert store.remember_signature("sig-dead-2", ttl_seconds=10)
    assert store.remember_signature("sig-alive", ttl_seconds=1000)
    assert store.cleanup() == 0
    clock.advance(11)
    batches = []
    for _ in range(50):  # Redis resumes its SCAN across calls
        batches.append(store.cleanup(limit=3))
        if sum(batches) >= 7:
            break
    assert all(batch <= 3 for batch in batches)
    assert sum(batches) == 7
    assert store.cleanup() == 0
    assert [entry.key for entry in store.list()] == ["alive"]
    assert not store.remember_signature("sig-alive", ttl_seconds=1000)
    assert store.cleanup(limit=0) == 0


# --- replay memory -----------------------------------------------------------------


def test_remember_signature_accepts_each_signature_once_per_ttl(
    store: IdempotencyStore, clock: Clock
) -> None:
    signature = "sha256=" + "ab" * 32
    assert store.remember_signature(signature, ttl_seconds=300)
    assert not store.remember_signature(signature, ttl_seconds=300)
    assert store.remember_signature("sha256=" + "cd" * 32, ttl_seconds=300)
    clock.advance(299.5)
    assert not store.remember_signature(signature, ttl_seconds=300)
    clock.advance(0.5)
    assert store.remember_signature(signature, ttl_seconds=300)
    assert not store.remember_signature(signature, ttl_seconds=300)


# --- business approvals ------------------------------------------------------------------

APPROVAL_HASH = "17b4db064e17f4878e391177e6ca623b798911f34014bc9e78920993d7dd27ad"


def approval(approval_id: int = 123, job_id: str = "job-test-001", tool: str = "refund_execute",
             **fields: Any) -> ApprovalRecord:
    values: dict[str, Any] = {
        "subject": "t1:u1", "args": {"request_id": 7, "note": "退款 ✓"},
        "details": {"route": "门店运营", "policy": "risk_high"}, **fields,
    }
    return ApprovalRecord(approval_id=approval_id, job_id=job_id, request_id="req-1", tool=tool,
                          args_hash=APPROVAL_HASH, **values)


def test_a_received_approval_is_kept_pending_once(store: IdempotencyStore, clock: Clock) -> None:
    stored = store.add_approval(approval(), retention_seconds=RETENTION)
    assert (stored.status, stored.received_at, stored.expires_at) == ("pending", T0, T0 + RETENTION)
    assert stored.args == {"request_id": 7, "note": "退款 ✓"} and not stored.args_truncated
    assert stored.details == {"route": "门店运营", "policy": "risk_high"}
    assert store.get_approval(123) == stored
    clock.advance(5)
    # a retried delivery (same body, or even a different one) keeps the first record
    again = store.add_approval(approval(args="{\"x\":1"), retention_seconds=RETENTION)
    assert again == stored


def test_the_first_decision_is_final(store: IdempotencyStore, clock: Clock) -> None:
    assert store.record_decision(123, status="approved", decision_id="biz-1", approver="u1",
                                 retention_seconds=RETENTION) is None  # never received
    store.add_approval(approval(), retention_seconds=RETENTION)
    clock.advance(10)
    decided = store.record_decision(123, status="approved", decision_id="biz-1", approver="u1",
                                    retention_seconds=RETENTION)
    assert decided is not None
    assert (decided.status, decided.decision_id, decided.approver) == ("approved", "biz-1", "u1")
    assert decided.decided_at == T0 + 10 and decided.expires_at == T0 + 10 + RETENTION
    again = store.record_decision(123, status="denied", decision_id="biz-2", approver="u2",
                                  retention_seconds=RETENTION)
    assert again == decided
    store.add_approval(approval(), retention_seconds=RETENTION)  # a late retry of the request
    assert store.get_approval(123) == decided


def test_approvals_are_found_by_job_and_tool_and_listed(
    store: IdempotencyStore, clock: Clock
) -> None:
    store.add_approval(approval(1), retention_seconds=RETENTION)
    clock.advance(1)
    store.add_approval(approval(2, tool="other_tool"), retention_seconds=RETENTION)
    clock.advance(1)
    store.add_approval(approval(3, args="{\"long\":\"" + "x" * 990), retention_seconds=RETENTION)
    store.add_approval(approval(4, job_id="job-2"), retention_seconds=RETENTION)
    assert [r.approval_id for r in store.find_approvals(job_id="job-test-001",
                                                        tool="refund_execute")] == [1, 3]
    assert store.find_approvals(job_id="job-test-001", tool="refund_execute")[1].args_truncated
    assert store.find_approvals(job_id="nope", tool="refund_execute") == []
    store.record_decision(1, status="denied", decision_id="d1", approver="u1",
                          retention_seconds=RETENTION)
    assert [r.approval_id for r in store.list_approvals()] == [1, 2, 3, 4]
    assert [r.approval_id for r in store.list_approvals(status="pending")] == [2, 3, 4]
    assert [r.approval_id for r in store.list_approvals(status="pending", limit=1)] == [2]
    assert [r.approval_id for r in store.list_approvals(status="denied")] == [1]


def test_approval_records_expire(store: IdempotencyStore, clock: Clock) -> None:
    store.add_approval(approval(), retention_seconds=60)
    clock.advance(60)
    assert store.get_approval(123) is None
    assert store.find_approvals(job_id="job-test-001", tool="refund_execute") == []
    assert store.list_approvals() == []
    assert store.record_decision(123, status="approved", decision_id="d", approver="u",
                                 retention_seconds=60) is None
    fresh = store.add_approval(approval(), retention_seconds=60)  # a new record after expiry
    assert fresh.received_at == T0 + 60 and fresh.status == "pending"


def test_approval_arguments_are_validated(store: IdempotencyStore) -> None:
    with pytest.raises(ValueError):
        approval(0)
    with pytest.raises(ValueError):
        approval(job_id="")
    store.add_approval(approval(), retention_seconds=RETENTION)
    with pytest.raises(ValueError):
        store.record_decision(123, status="pending", decision_id="d", approver="u",  # type: ignore[arg-type]
                              retention_seconds=RETENTION)
    with pytest.raises(ValueError):
        store.record_decision(123, status="approved", decision_id="", approver="u",
                              retention_seconds=RETENTION)
    with pytest.raises(ValueError):
        store.add_approval(approval(), retention_seconds=0)
    with pytest.raises(ValueError):
        store.get_approval(True)  # type: ignore[arg-type]
    assert store.get_approval(123).status == "pending"  # type: ignore[union-attr]


def test_a_store_without_approval_support_says_so() -> None:
    class Legacy(MemoryStore):
        pass

    for name in ("_add_approval", "_record_decision", "_get_approval", "find_approvals",
                 "_list_approvals", "_claim_approved"):
        assert getattr(IdempotencyStore, name) is not getattr(MemoryStore, name)
    with pytest.raises(NotImplementedError):
        IdempotencyStore._get_approval(Legacy(), 1)


def test_sqlite_approvals_survive_reopening_the_file(tmp_path: Path, clock: Clock) -> None:
    path = tmp_path / "approvals.db"
    with SQLiteStore(path, clock=clock) as first:
        first.add_approval(approval(), retention_seconds=RETENTION)
        first.record_decision(123, status="approved", decision_id="biz-1", approver="u1",
                              retention_seconds=RETENTION)
    with SQLiteStore(path, clock=clock) as second:
        record = second.get_approval(123)
    assert record is not None and record.status == "approved" and record.subject == "t1:u1"


# --- spending an approval: one approval, one call --------------------------------------


def approved(store: IdempotencyStore, approval_id: int = 123, **fields: Any) -> ApprovalRecord:
    """A received and approved record of ``approval_id``."""
    store.add_approval(approval(approval_id, **fields), retention_seconds=RETENTION)
    record = store.record_decision(approval_id, status="approved", decision_id=f"biz-{approval_id}",
                                   approver="finance-1", retention_seconds=RETENTION)
    assert record is not None and record.status == "approved"
    return record


def spend(store: IdempotencyStore, key: str, token: str, ids: tuple[int, ...] = (123,), *,
          reserve: bool = True) -> ApprovalClaim:
    return store.claim_approved(key, approval_ids=ids, token=token, lease_seconds=LEASE,
                                retention_seconds=RETENTION, meta=META, reserve=reserve)


def test_an_approval_is_spent_by_the_call_that_claims_it(
    store: IdempotencyStore, clock: Clock
) -> None:
    record = approved(store)
    assert record.used_by is None and record.used_at is None
    clock.advance(2)
    assert spend(store, "idem:first", "token-a") == ApprovalClaim("reserved", approval_id=123)
    entry = store.get("idem:first")
    assert entry is not None and (entry.state, entry.token) == ("in_progress", "token-a")
    assert (entry.lease_expires_at, entry.expires_at, entry.meta) == (
        T0 + 2 + LEASE, T0 + 2 + RETENTION, META)
    spent = store.get_approval(123)
    assert spent is not None and (spent.used_by, spent.used_at) == ("idem:first", T0 + 2)
    assert spent.status == "approved"  # still the decision the hub accepted
    assert spent.to_dict()["used_by"] == "idem:first"
    assert store.find_approvals(job_id="job-test-001", tool="refund_execute") == [spent]
    assert store.list_approvals(status="approved") == [spent]


def test_a_spent_approval_refuses_every_other_call(store: IdempotencyStore) -> None:
    approved(store)
    assert spend(store, "idem:first", "token-a").outcome == "reserved"
    assert spend(store, "idem:second", "token-b") == ApprovalClaim("used")
    assert store.get("idem:second") is None  # refused: nothing reserved
    assert complete(store, "idem:first", "token-a")
    assert spend(store, "idem:third", "token-c") == ApprovalClaim("used")
    assert store.get_approval(123).used_by == "idem:first"  # type: ignore[union-attr]


def test_the_call_that_spent_it_is_answered_from_its_entry(
    store: IdempotencyStore, clock: Clock
) -> None:
    approved(store)
    assert spend(store, "idem:first", "token-a").outcome == "reserved"
    running = spend(store, "idem:first", "token-b")
    assert running.outcome == "held" and running.reservation is not None
    assert running.reservation.outcome == "in_progress"
    assert running.reservation.entry.token == "token-a"
    clock.advance(LEASE)
    assert spend(store, "idem:first", "token-b").reservation.outcome == "uncertain"  # type: ignore[union-attr]
    assert complete(store, "idem:first", "token-a")
    replay = spend(store, "idem:first", "token-c")
    assert replay.outcome == "held" and replay.reservation is not None
    assert replay.reservation.outcome == "completed" and replay.reservation.entry.response == OK


def test_a_released_call_does_not_get_its_approval_back(store: IdempotencyStore) -> None:
    approved(store)
    assert spend(store, "idem:first", "token-a").outcome == "reserved"
    assert store.release("idem:first", token="token-a")
    assert spend(store, "idem:first", "token-b") == ApprovalClaim("used")
    assert store.get("idem:first") is None
    assert store.resolve("idem:first", response=None, note="n", retention_seconds=60) is False


def test_a_call_with_a_live_entry_spends_no_approval(store: IdempotencyStore) -> None:
    approved(store)
    assert claim(store, "idem:earlier", "token-a") is None
    assert complete(store, "idem:earlier", "token-a")
    held = spend(store, "idem:earlier", "token-b")
    assert held.outcome == "held" and held.reservation.outcome == "completed"  # type: ignore[union-attr]
    assert store.get_approval(123).used_by is None  # type: ignore[union-attr]


def test_only_live_approved_records_can_be_spent(store: IdempotencyStore, clock: Clock) -> None:
    assert spend(store, "idem:k", "t", (999,)) == ApprovalClaim("missing")  # never received
    store.add_approval(approval(1), retention_seconds=RETENTION)
    assert spend(store, "idem:k", "t", (1,)) == ApprovalClaim("missing")  # pending
    store.add_approval(approval(2), retention_seconds=RETENTION)
    store.record_decision(2, status="denied", decision_id="biz-2", approver="u",
                          retention_seconds=RETENTION)
    assert spend(store, "idem:k", "t", (1, 2)) == ApprovalClaim("missing")  # denied
    approved(store, 3)
    clock.advance(RETENTION)
    assert spend(store, "idem:k", "t", (3,)) == ApprovalClaim("missing")  # expired
    assert store.get("idem:k") is None


def test_the_first_unspent_approval_is_the_one_spent(store: IdempotencyStore) -> None:
    approved(store, 1)
    approved(store, 2)
    store.add_approval(approval(3), retention_seconds=RETENTION)  # pending: skipped
    assert spend(store, "idem:a", "t-a", (3, 1, 2)) == ApprovalClaim("reserved", approval_id=1)
    assert spend(store, "idem:b", "t-b", (1, 3, 2)) == ApprovalClaim("reserved", approval_id=2)
    assert spend(store, "idem:c", "t-c", (1, 2, 3)) == ApprovalClaim("used")
    assert [(r.approval_id, r.used_by) for r in store.list_approvals()] == [
        (1, "idem:a"), (2, "idem:b"), (3, None)]


def test_claiming_again_with_the_owning_token_is_reserved(store: IdempotencyStore) -> None:
    approved(store, 1)
    approved(store, 2)
    assert spend(store, "idem:a", "t-a", (1, 2)).approval_id == 1
    # the same command again (its reply was lost): the key is still this token's
    assert spend(store, "idem:a", "t-a", (2, 1)) == ApprovalClaim("reserved", approval_id=1)
    assert store.get_approval(2).used_by is None  # type: ignore[union-attr]


def test_an_approval_spent_without_a_reservation(store: IdempotencyStore, clock: Clock) -> None:
    approved(store)
    assert spend(store, "idem:read", "t-a", reserve=False) == ApprovalClaim(
        "reserved", approval_id=123)
    assert store.get("idem:read") is None  # nothing reserved
    assert store.get_approval(123).used_by == "idem:read"  # type: ignore[union-attr]
    # once: the same call again, or any other, finds it spent
    assert spend(store, "idem:read", "t-b", reserve=False) == ApprovalClaim("used")
    assert spend(store, "idem:other", "t-c") == ApprovalClaim("used")


def test_claim_approved_validates_its_arguments(store: IdempotencyStore) -> None:
    approved(store)
    for ids in ((), [0], (True,), ("123",), "123", 123):
        with pytest.raises(ValueError, match="approval"):
            spend(store, "idem:k", "t", ids)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reserve"):
        spend(store, "idem:k", "t", reserve=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="token"):
        spend(store, "idem:k", "")
    with pytest.raises(ValueError, match="lease"):
        store.claim_approved("idem:k", approval_ids=[123], token="t", lease_seconds=0,
                             retention_seconds=RETENTION, meta=META)
    assert store.get_approval(123).used_by is None  # type: ignore[union-attr]
    assert spend(store, "idem:k", "t", [123]).approval_id == 123  # type: ignore[arg-type]


def test_threads_racing_for_one_approval_spend_it_once(store: IdempotencyStore) -> None:
    approved(store)
    threads_count = 12
    barrier = threading.Barrier(threads_count)
    answers: list[ApprovalClaim] = []
    errors: list[BaseException] = []

    def attempt(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            # half of them are the same call (one key), the others equivalent calls of their own
            key = "idem:same" if index % 2 else f"idem:other-{index}"
            answers.append(spend(store, key, f"thread-{index}"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    reserved = [answer for answer in answers if answer.outcome == "reserved"]
    assert len(reserved) == 1 and reserved[0].approval_id == 123
    winner = store.get_approval(123).used_by  # type: ignore[union-attr]
    assert winner is not None and store.get(winner) is not None
    held = [a for a in answers if a.outcome == "held"]
    assert all(a.reservation.outcome == "in_progress" for a in held)  # type: ignore[union-attr]
    # only the winner's own key can be held; every other key was refused
    assert len(held) == (threads_count // 2 - 1 if winner == "idem:same" else 0)
    assert len([a for a in answers if a.outcome == "used"]) == threads_count - 1 - len(held)


def test_a_store_without_claim_approved_says_so(clock: Clock) -> None:
    class Earlier(MemoryStore):
        """A store written before approvals could be spent."""

        _claim_approved = IdempotencyStore._claim_approved
    store = Earlier(clock=clock)
    approved(store)
    with pytest.raises(NotImplementedError, match="_claim_approved"):
        spend(store, "idem:k", "t")


def test_sqlite_files_of_an_earlier_version_gain_the_spent_columns(
    tmp_path: Path, clock: Clock
) -> None:
    path = tmp_path / "earlier.db"
    with SQLiteStore(path, clock=clock) as first:
        first.ping()  # the file and its idempotency tables, as every version writes them
    conn = sqlite3.connect(path)
    conn.executescript(  # the approvals table as the version before this one created it
        "CREATE TABLE bailing_approvals (approval_id INTEGER PRIMARY KEY, job_id TEXT NOT NULL, "
        "tool TEXT NOT NULL, status TEXT NOT NULL, received_at REAL NOT NULL, expires_at REAL "
        "NOT NULL, request TEXT NOT NULL, decision_id TEXT, approver TEXT, decided_at REAL);"
        "INSERT INTO bailing_approvals VALUES (123, 'job-test-001', 'refund_execute', "
        "'approved', 1718000000.0, 1718000600.0, '{\"request_id\": \"req-1\", "
        "\"args_hash\": \"ab\"}', 'biz-1', 'u1', 1718000000.0);")
    conn.close()
    with SQLiteStore(path, clock=clock) as second:
        before = second.get_approval(123)
        assert before is not None and before.used_by is None
        assert spend(second, "idem:first", "t").approval_id == 123
    with SQLiteStore(path, clock=clock) as third:
        assert third.get_approval(123).used_by == "idem:first"  # type: ignore[union-attr]


# --- concurrency within one process ---------------------------------------------------


def test_threads_racing_for_one_key_get_one_reservation(store: IdempotencyStore) -> None:
    threads_count = 16
    barrier = threading.Barrier(threads_count)
    outcomes: list[str] = []
    errors: list[BaseException] = []

    def attempt(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            outcomes.append(reserve(store, "race", f"thread-{index}").outcome)
            outcomes.append(
                "sig" if store.remember_signature("sig-race", ttl_seconds=60) else "seen"
            )
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert outcomes.count("reserved") == 1
    assert outcomes.count("in_progress") == threads_count - 1
    assert outcomes.count("sig") == 1


# --- the request path: claim and complete_deferred ------------------------------------------


def claim(store: IdempotencyStore, key: str, token: str, *, lease: float = LEASE,
          retention: float = RETENTION, meta: EntryMeta = META) -> Reservation | None:
    return store.claim(key, token=token, lease_seconds=lease, retention_seconds=retention,
                       meta=meta)


def test_claim_is_reserve_that_answers_none_to_the_owner(
    store: IdempotencyStore, clock: Clock
) -> None:
    assert claim(store, "k1", "token-a") is None
    entry = store.get("k1")
    assert entry is not None
    assert (entry.state, entry.token, entry.created_at) == ("in_progress", "token-a", T0)
    assert (entry.lease_expires_at, entry.expires_at, entry.meta) == (T0 + LEASE, T0 + RETENTION,
                                                                      META)
    assert claim(store, "k1", "token-a") is None  # the owner again
    held = claim(store, "k1", "token-b")
    assert held is not None and held.outcome == "in_progress" and held.entry == entry
    assert complete(store, "k1", "token-a", BINARY)
    done = claim(store, "k1", "token-b")
    assert done is not None and done.outcome == "completed"
    assert done.entry.response == BINARY
    assert claim(store, "k2", "token-c", lease=5) is None
    clock.advance(5)
    late = claim(store, "k2", "token-d")
    assert late is not None and late.outcome == "uncertain" and late.entry.token == "token-c"
    clock.advance(RETENTION)
    assert claim(store, "k2", "token-e") is None  # a dead entry is as good as absent
    assert store.get("k2").token == "token-e"  # type: ignore[union-attr]


def test_claim_validates_like_reserve(store: IdempotencyStore) -> None:
    for bad in ({"key": ""}, {"token": ""}, {"lease": 0.0}, {"lease": True}, {"lease": 5},
                {"retention": float("nan")}, {"retention": -1.0}):
        arguments: dict[str, Any] = {"key": "k1", "token": "token-a", **bad}
        key, token = arguments.pop("key"), arguments.pop("token")
        if bad == {"lease": 5}:  # an int is a number of seconds too
            assert claim(store, key, token, **arguments) is None
            continue
        with pytest.raises(ValueError):
            claim(store, key, token, **arguments)


def test_complete_deferred_records_the_response(store: IdempotencyStore) -> None:
    assert claim(store, "k1", "token-a") is None
    assert store.complete_deferred("k1", token="token-a", response=BINARY,
                                   retention_seconds=RETENTION) in (True, None)
    store.flush()
    entry = store.get("k1")
    assert entry is not None and entry.state == "completed" and entry.response == BINARY
    assert store.complete_deferred("k1", token="token-b", response=OK,
                                   retention_seconds=RETENTION) in (False, None)
    store.flush()
    assert store.get("k1").response == BINARY  # type: ignore[union-attr]
    held = claim(store, "k1", "token-c")
    assert held is not None and held.outcome == "completed"


class _OutsideStore(IdempotencyStore):
    """A store written outside the package, the documented way, over a MemoryStore.

    Only the methods a store must implement: the protected ones, ``ping`` and ``close``.
    """

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock=clock)
        self.inner = MemoryStore(clock=clock)

    def _reserve(self, key: str, **kw: Any) -> Reservation:
        return self.inner.reserve(key, **kw)

    def _take_over(self, key: str, **kw: Any) -> bool:
        return self.inner.take_over(key, **kw)

    def _complete(self, key: str, **kw: Any) -> bool:
        return self.inner.complete(key, **kw)

    def _mark_uncertain(self, key: str, **kw: Any) -> bool:
        return self.inner.mark_uncertain(key, **kw)

    def _release(self, key: str, **kw: Any) -> bool:
        return self.inner.release(key, **kw)

    def _get(self, key: str) -> Entry | None:
        return self.inner.get(key)

    def _list(self, **kw: Any) -> list[Entry]:
        return self.inner.list(**kw)

    def _resolve(self, key: str, **kw: Any) -> bool:
        return self.inner.resolve(key, **kw)

    def _cleanup(self, **kw: Any) -> int:
        return self.inner.cleanup(**kw)

    def _remember_signature(self, signature: str, **kw: Any) -> bool:
        return self.inner.remember_signature(signature, **kw)

    def ping(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_store_from_outside_the_package_gets_the_request_path_methods(clock: Clock) -> None:
    outside = _OutsideStore(clock)
    assert claim(outside, "k1", "token-a") is None
    held = claim(outside, "k1", "token-b")
    assert held is not None and held.outcome == "in_progress"
    assert outside.complete_deferred("k1", token="token-a", response=OK,
                                     retention_seconds=RETENTION) is True
    outside.flush()
    done = claim(outside, "k1", "token-b")
    assert done is not None and done.outcome == "completed" and done.entry.response == OK


class _Recording(_OutsideStore):
    """A store that checks nothing itself and notes what its methods received."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock)
        self.received: list[tuple[str, Any]] = []

    def _reserve(self, key: str, **kw: Any) -> Reservation:
        self.received.append(("reserve", kw))
        return super()._reserve(key, **kw)

    def _cleanup(self, **kw: Any) -> int:
        self.received.append(("cleanup", kw))
        return super()._cleanup(**kw)


def test_the_base_class_checks_the_arguments_of_every_store(clock: Clock) -> None:
    store = _Recording(clock)
    for bad in ({"key": ""}, {"token": ""}, {"lease": 0.0}, {"lease": True},
                {"retention": float("inf")}):
        arguments: dict[str, Any] = {"key": "k1", "token": "token-a", **bad}
        with pytest.raises(ValueError):
            reserve(store, arguments.pop("key"), arguments.pop("token"), **arguments)
        with pytest.raises(ValueError):
            claim(store, "k1" if "key" not in bad else "", "token-a" if "token" not in bad else "",
                  lease=bad.get("lease", LEASE), retention=bad.get("retention", RETENTION))
    for call in (lambda: store.cleanup(limit=-1), lambda: store.get(""),
                 lambda: store.take_over("k1", old_token="a", new_token="", lease_seconds=5),
                 lambda: store.complete("k1", token="", response=OK, retention_seconds=5),
                 lambda: store.complete_deferred("k1", token="t", response=OK,
                                                 retention_seconds=0),
                 lambda: store.remember_signature("", ttl_seconds=5),
                 lambda: store.list(state="done")):  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            call()
    assert store.received == []  # refused before the store's own code ran
    reserve(store, "k1", "token-a", lease=5, retention=600)  # ints are seconds too
    assert store.received == [("reserve", {"token": "token-a", "lease_seconds": 5.0,
                                           "retention_seconds": 600.0, "meta": META})]
    assert isinstance(store.received[0][1]["lease_seconds"], float)
    assert store.cleanup() == 0 and store.received[-1] == ("cleanup", {"limit": 1000})


def test_the_checks_run_once_in_the_base_class_and_the_backend_keeps_its_name() -> None:
    assert MemoryStore.claim is IdempotencyStore.claim  # checked here, then ``_claim`` runs
    assert MemoryStore._claim.__qualname__ == "MemoryStore._claim"
    assert SQLiteStore.complete_deferred is IdempotencyStore.complete_deferred


def test_the_unchecked_constructors_build_equal_records() -> None:
    from bailing_flask.stores._entries import _trusted_meta, _trusted_response

    assert _trusted_meta("t", "j", None, "k") == EntryMeta("t", "j", None, "k")
    assert _trusted_meta("t", "j", "s", None) == EntryMeta(tool="t", job_id="j", subject="s")
    fast = _trusted_response(201, (("A", "1"),), b"x")
    assert fast == StoredResponse(201, (("A", "1"),), b"x")
    assert hash(fast) == hash(StoredResponse(201, (("A", "1"),), b"x"))
    with pytest.raises(AttributeError):
        fast.status = 200  # type: ignore[misc]


# --- deferred completions: what they promise, and what a lost one leaves ----------------------


@pytest.fixture(params=["sqlite", "redis"])
def deferring(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """(kind, target, prefix) of a store that defers completions, for other processes."""
    if request.param == "sqlite":
        yield "sqlite", str(tmp_path / "idem.db"), ""
    else:
        yield "redis", request.getfixturevalue("redis_server").url, _prefix()


def _open(kind: str, target: str, prefix: str, clock: Clock | None = None) -> IdempotencyStore:
    kwargs: dict[str, Any] = {} if clock is None else {"clock": clock}
    if kind == "sqlite":
        return SQLiteStore(target, **kwargs)
    return RedisStore(target, prefix=prefix, check_persistence=False, **kwargs)


_CHILD = """
import os, sys
sys.path.insert(0, {root!r})
from bailing_flask.stores import EntryMeta, RedisStore, SQLiteStore, StoredResponse
kind, target, prefix, key, ending = sys.argv[1:]
store = SQLiteStore(target) if kind == "sqlite" else RedisStore(target, prefix=prefix,
                                                                check_persistence=False)
assert store.claim(key, token="child", lease_seconds=30.0, retention_seconds=600.0,
                   meta=EntryMeta(tool="refund_order")) is None
store.complete_deferred(key, token="child", response=StoredResponse(201, (), b"done"),
                        retention_seconds=600.0)
if ending == "killed":
    os.kill(os.getpid(), 9)  # SIGKILL: no atexit, no flush, as when a worker is killed
sys.exit(0)  # a normal exit: the deferred completion is written on the way out
"""


def _child(kind: str, target: str, prefix: str, key: str, ending: str) -> int:
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parent.parent)
    done = subprocess.run([sys.executable, "-c", _CHILD.format(root=root), kind, target, prefix,
                           key, ending], capture_output=True, text=True, timeout=60)
    assert done.returncode in (0, -9), done.stderr
    return done.returncode


def test_a_deferred_completion_is_written_when_the_process_exits(
    deferring: tuple[str, str, str]
) -> None:
    kind, target, prefix = deferring
    assert _child(kind, target, prefix, "k-exit", "normally") == 0
    store = _open(kind, target, prefix)
    entry = store.get("k-exit")
    assert entry is not None and entry.state == "completed"
    assert entry.response == StoredResponse(201, (), b"done")
    store.close()


def test_a_deferred_completion_lost_with_its_process_leaves_the_call_uncertain(
    deferring: tuple[str, str, str]
) -> None:
    kind, target, prefix = deferring
    assert _child(kind, target, prefix, "k-killed", "killed") == -9
    later = Clock(time.time() + 31)  # past the 30 s lease
    store = _open(kind, target, prefix, later)
    entry = store.get("k-killed")
    assert entry is not None and entry.state == "in_progress" and entry.response is None
    # never released, never completed: the repeat is refused as uncertain, and not run
    held = claim(store, "k-killed", "repeat")
    assert held is not None and held.outcome == "uncertain" and held.entry.token == "child"
    store.close()


def test_deferred_completions_travel_with_the_next_claim(store: IdempotencyStore) -> None:
    for number in range(5):
        assert claim(store, f"k{number}", "token-a") is None
        store.complete_deferred(f"k{number}", token="token-a", response=OK,
                                retention_seconds=RETENTION)
    # the next claim (or a repeat) sees them all completed, in this process at once
    held = claim(store, "k4", "token-b")
    assert held is not None and held.outcome == "completed" and held.entry.response == OK
    for number in range(4):
        entry = store.get(f"k{number}")
        assert entry is not None and entry.state == "completed"


def test_sqlite_deferred_completions_share_the_next_claims_transaction(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "idem.db")
    conn = store._connection()
    writes: list[str] = []

    def traced(sql: str) -> None:
        head = sql.split(None, 1)[0].upper()
        if head in ("COMMIT", "INSERT", "UPDATE") and not (head != "COMMIT" and conn.in_transaction):
            writes.append(head)

    conn.set_trace_callback(traced)
    for number in range(20):
        assert claim(store, f"k{number}", "token-a") is None
        store.complete_deferred(f"k{number}", token="token-a", response=OK,
                                retention_seconds=RETENTION)
    assert len(writes) == 20  # one transaction per call: its claim and the previous completion
    writes.clear()
    for number in range(20, 30):
        assert claim(store, f"k{number}", "token-a") is None
        assert complete(store, f"k{number}", "token-a")
    # without deferring: two per call (the last deferred completion rode with the first claim)
    assert len(writes) == 2 * 10
    store.close()


def _background_write_in_flight(tmp_path: Path) -> tuple[SQLiteStore, sqlite3.Connection]:
    """A store whose background thread has taken k1's deferred completion and waits for the
    write lock, which another connection holds (released by the caller)."""
    store = SQLiteStore(tmp_path / "idem.db", busy_timeout=5.0)
    assert claim(store, "k1", "token-a") is None
    holder = sqlite3.connect(tmp_path / "idem.db", isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    store._pending._later._delay = 0.0
    store.complete_deferred("k1", token="token-a", response=OK, retention_seconds=RETENTION)
    deadline = time.monotonic() + 5
    while "k1" not in store._pending._here.get().in_flight:  # taken by the background thread
        assert time.monotonic() < deadline
        time.sleep(0.005)
    return store, holder


def test_sqlite_flush_waits_for_a_background_write_in_flight(tmp_path: Path) -> None:
    store, holder = _background_write_in_flight(tmp_path)
    threading.Timer(0.2, holder.execute, ("ROLLBACK",)).start()
    store.flush()  # nothing left to take, but one write still carries a completion
    entry = store.get("k1")
    assert entry is not None and entry.state == "completed"
    holder.close()
    store.close()


def test_sqlite_repeat_in_this_process_waits_for_its_completion_in_flight(tmp_path: Path) -> None:
    store, holder = _background_write_in_flight(tmp_path)
    threading.Timer(0.2, holder.execute, ("ROLLBACK",)).start()
    held = claim(store, "k1", "token-b")  # must not overtake the background write
    assert held is not None and held.outcome == "completed" and held.entry.response == OK
    holder.close()
    store.close()


_CLOSE_WHILE_CHECKPOINTING = """
import sys, time
import bailing_flask.stores.sqlite as sqlite_store
from bailing_flask.stores import SQLiteStore

sqlite_store._CHECKPOINT_EVERY = 1  # a background checkpoint after every write
store = SQLiteStore(sys.argv[1])
deadline = time.monotonic() + 1.5
count = 0
while time.monotonic() < deadline:
    count += 1
    store.remember_signature(f"s{count}", ttl_seconds=60.0)
    if count % 3 == 0:
        store.close()
print("closed", count // 3, "times")
"""


def test_sqlite_close_never_closes_a_connection_a_background_checkpoint_uses(
    tmp_path: Path,
) -> None:
    # close() used to close the checkpoint thread's connection under its running statement:
    # a segmentation fault within about a second. In a child process, so a crash fails only
    # this test.
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", _CLOSE_WHILE_CHECKPOINTING,
                           str(tmp_path / "idem.db")], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("closed")


def test_sqlite_checkpoints_run_in_the_background_not_in_a_request(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "idem.db")
    ran_on: list[str] = []
    real = store._checkpoint

    def checkpoint() -> None:
        ran_on.append(threading.current_thread().name)
        real()

    store._checkpoint_later._action = checkpoint
    for number in range(250):
        assert claim(store, f"k{number}", "token-a") is None
        assert complete(store, f"k{number}", "token-a")
    deadline = time.monotonic() + 10
    while not ran_on and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ran_on and set(ran_on) == {"bailing-sqlite-checkpoint"}
    # SQLite's own checkpoint, inside a commit, is only the safety net far behind
    assert store._connection().execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 10000
    store.close()


def test_a_repeat_waits_for_a_completion_another_thread_is_sending(
    redis_server: RedisServer, clock: Clock
) -> None:
    store = RedisStore(redis_server.url, clock=clock, prefix=_prefix(), check_persistence=False)
    assert claim(store, "k1", "token-a") is None
    # the background writer would send the completion alone after a few milliseconds, before the
    # other thread's claim on a busy machine: keep it waiting, so that claim is what carries it
    store._pending._later._delay = 60.0
    store.complete_deferred("k1", token="token-a", response=OK, retention_seconds=RETENTION)
    sending = threading.Event()
    release = threading.Event()
    real_send = store._send

    def slow_send(commands: list[Any]) -> list[Any]:
        if any(b"bailing" in part or b"test-" in part for part in commands[0]) and len(commands) > 1:
            sending.set()
            release.wait(60)
        return real_send(commands)

    waiting = threading.Event()
    real_wait_landed = store._pending.wait_landed

    def wait_landed(key: str, timeout: float) -> None:
        if key == "k1" and store._pending.holds(key):
            waiting.set()
        real_wait_landed(key, timeout)

    store._send = slow_send  # type: ignore[method-assign]
    store._pending.wait_landed = wait_landed  # type: ignore[method-assign]
    other = threading.Thread(target=lambda: claim(store, "k-other", "token-x"))
    other.start()  # takes the completion of k1 along with its own claim, and is held up
    assert sending.wait(60)
    seen: list[Reservation | None] = []
    repeat = threading.Thread(target=lambda: seen.append(claim(store, "k1", "token-b")))
    repeat.start()
    assert waiting.wait(60)  # the repeat reached the store while the completion is on its way
    time.sleep(0.2)
    assert seen == []  # waiting: the completion it repeats is on its way
    release.set()
    other.join(60)
    repeat.join(60)
    assert seen and seen[0] is not None and seen[0].outcome == "completed"
    store.close()


@pytest.mark.parametrize("claims", ["claim", "claim_approved"])
def test_a_repeat_overtaken_by_the_background_writer_looks_again_once_its_completion_landed(
    redis_server: RedisServer, clock: Clock, claims: str
) -> None:
    """The background writer takes a call's deferred completion just after a repeat of that
    call waited for writes in flight and before the repeat's batch is sent: the repeat's claim
    reaches Redis first and finds the call in progress. It looks again once the completion
    landed, and gets the recorded answer, as the SQLite store's claim does."""
    store = RedisStore(redis_server.url, clock=clock, prefix=_prefix(), check_persistence=False)
    if claims == "claim":
        assert claim(store, "k1", "token-a") is None
    else:
        approved(store)
        assert spend(store, "k1", "token-a") == ApprovalClaim("reserved", approval_id=123)
    store._pending._later._delay = 60.0  # no background write but the one this test starts
    store.complete_deferred("k1", token="token-a", response=OK, retention_seconds=RETENTION)
    release = threading.Event()
    writer = threading.Thread(target=store._pending._flush, name="writer")
    real_send = store._send

    def send(commands: list[Any]) -> list[Any]:
        if threading.current_thread() is writer:
            release.wait(60)  # the completion is on its way, and slower than the repeat
        return real_send(commands)

    real_wait_landed = store._pending.wait_landed
    overtaken: list[bool] = []

    def wait_landed(key: str, timeout: float) -> None:
        real_wait_landed(key, timeout)
        if key == "k1" and not overtaken:  # the writer takes it right after the repeat looked
            overtaken.append(True)
            writer.start()
            deadline = time.monotonic() + 10
            while "k1" not in store._pending._here.get().in_flight:
                assert time.monotonic() < deadline
                time.sleep(0.001)
            threading.Timer(0.2, release.set).start()

    store._send = send  # type: ignore[method-assign]
    store._pending.wait_landed = wait_landed  # type: ignore[method-assign]
    if claims == "claim":
        held = claim(store, "k1", "token-b")
    else:
        answer = spend(store, "k1", "token-b")
        assert answer.outcome == "held"
        held = answer.reservation
    writer.join(60)
    assert overtaken
    assert held is not None and held.outcome == "completed" and held.entry.response == OK
    store.close()


def test_a_forked_child_never_writes_its_parents_deferred_completions(tmp_path: Path) -> None:
    if not hasattr(os, "fork"):
        pytest.skip("needs fork()")
    store = SQLiteStore(tmp_path / "idem.db")
    assert claim(store, "k1", "token-a") is None
    store._pending._later._delay = 60.0  # keep it waiting in the parent
    store.complete_deferred("k1", token="token-a", response=OK, retention_seconds=RETENTION)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(write, b"empty" if not store._pending else b"inherited")
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 20)
    os.close(read)
    os.waitpid(pid, 0)
    assert answer == b"empty"
    assert store._pending  # still the parent's to write
    store.flush()
    assert store.get("k1").state == "completed"  # type: ignore[union-attr]
    store.close()


def test_threads_of_a_child_forked_without_pythons_hooks_keep_every_deferred_completion(
        tmp_path: Path) -> None:
    """uWSGI forks its workers without Python's at-fork hooks: the child's threads find out
    from the process id, several at once. None of them may throw away what another queued."""
    if not hasattr(os, "fork"):
        pytest.skip("needs fork()")
    workers, threads = 30, 8
    done = subprocess.run(
        [sys.executable, "-m", "tests.apps.raw_fork_deferred", str(tmp_path / "idem.db"),
         str(workers), str(threads)],
        capture_output=True, text=True, timeout=240, cwd=Path(__file__).parent.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["silent_workers"] == 0
    assert result["queued"] == [threads] * workers
    assert result["not_completed"] == 0


def test_redis_a_connection_is_never_given_back_while_a_live_thread_uses_it(
    redis_server_factory: Callable[[], RedisServer],
) -> None:
    """A thread per request (Werkzeug's threaded server): the pool hands a dead thread's
    connection, the same object, to a new thread, while another thread is still giving back
    the connections of ended threads. The new thread's connection must stay its own."""
    server = redis_server_factory()
    store = RedisStore(server.url, prefix=_prefix(), check_persistence=False)
    pool = store._client.connection_pool
    handed_to: dict[int, threading.Thread] = {}
    given_back_in_use: list[str] = []
    errors: list[str] = []
    get_connection, release = pool.get_connection, pool.release

    def watched_get(*args: Any, **kwargs: Any) -> Any:
        conn = get_connection(*args, **kwargs)
        handed_to[id(conn)] = threading.current_thread()
        return conn

    def watched_release(conn: Any) -> None:
        holder = handed_to.get(id(conn))
        if holder is not None and holder.is_alive() and holder is not threading.current_thread():
            given_back_in_use.append(holder.name)
        release(conn)

    pool.get_connection, pool.release = watched_get, watched_release  # type: ignore[method-assign]

    def request(key: str) -> None:
        try:
            assert claim(store, key, "token-a") is None
        except Exception as exc:  # noqa: BLE001 - every failure is the finding
            errors.append(type(exc).__name__)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for round_ in range(150):
            running = [threading.Thread(target=request, args=(f"r{round_}-{i}",), daemon=True)
                       for i in range(8)]
            for thread in running:
                thread.start()
            for thread in running:
                thread.join(30)
            # two threads on one connection can wait for a reply the other one read: forever
            assert not any(thread.is_alive() for thread in running), "a request never got its reply"
    finally:
        sys.setswitchinterval(interval)
    store.close()
    assert (given_back_in_use, errors) == ([], [])


def test_a_deferred_completion_that_cannot_be_written_is_given_up_and_logged(
    redis_server_factory: Callable[[], RedisServer], clock: Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = redis_server_factory()
    store = RedisStore(server.url, clock=clock, prefix=_prefix(), check_persistence=False)
    assert claim(store, "k1", "token-a") is None
    store._pending._later._delay = 60.0  # only the flushes below write
    store.complete_deferred("k1", token="token-a", response=OK, retention_seconds=RETENTION)
    server.stop()
    with caplog.at_level("ERROR", logger="bailing_flask"):
        for _ in range(3):
            store.flush()
    assert "could not record the outcome of call k1" in caplog.text
    assert not store._pending
    store.close()


# --- the rest of the API ---------------------------------------------------------------


def test_ping_and_close(store: IdempotencyStore) -> None:
    store.ping()
    reserve(store, "k1", "token-a")
    store.close()
    store.close()
    # A closed store reconnects when used again.
    assert store.get("k1") is not None
    with store as same:
        assert same is store


def test_arguments_are_validated(store: IdempotencyStore) -> None:
    with pytest.raises(ValueError):
        reserve(store, "", "token-a")
    with pytest.raises(ValueError):
        reserve(store, "k1", "")
    with pytest.raises(ValueError):
        reserve(store, "k1", "token-a", lease=0)
    with pytest.raises(ValueError):
        reserve(store, "k1", "token-a", retention=float("inf"))
    with pytest.raises(ValueError):
        store.remember_signature("s", ttl_seconds=True)
    with pytest.raises(ValueError):
        store.list(state="done")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        store.list(limit=-1)
    assert store.get("k1") is None


# --- value objects ---------------------------------------------------------------------


def test_stored_response_is_frozen_and_checked() -> None:
    response = StoredResponse(200, [("A", "1")], bytearray(b"x"))  # type: ignore[arg-type]
    assert response.headers == (("A", "1"),) and response.body == b"x"
    with pytest.raises(ValueError):
        StoredResponse(True)
    with pytest.raises(ValueError):
        StoredResponse(42)


def test_entry_to_dict_for_listings() -> None:
    entry = Entry(
        key="k1",
        state="in_progress",
        token="secret-ish",
        created_at=T0,
        lease_expires_at=T0 + 10,
        expires_at=T0 + 100,
        meta=META,
    )
    assert entry.to_dict()["state"] == "in_progress"
    assert entry.to_dict(now=T0 + 10)["state"] == "uncertain"
    assert "secret-ish" not in repr(entry.to_dict())
    done = Entry(**{**entry.__dict__, "state": "completed", "response": OK, "note": "n"})
    data = done.to_dict(now=T0 + 50)
    assert data["state"] == "completed"
    assert data["response"] == {
        "status": 200,
        "headers": [["Content-Type", "application/json"]],
        "body": '{"refunded":true}',
    }
    assert data["job_id"] == "job-test-001" and data["note"] == "n"
    binary = Entry(**{**entry.__dict__, "state": "completed", "response": BINARY})
    assert "body" not in binary.to_dict()["response"]
    assert binary.to_dict()["response"]["body_base64"].startswith("AAECAwQF")


def test_store_unavailable_is_a_bailing_error() -> None:
    assert issubclass(StoreUnavailable, BailingError)
    assert StoreUnavailable.reason == "store_unavailable"


# --- store_from_url ----------------------------------------------------------------------


def test_store_from_url_builds_each_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: Clock
) -> None:
    memory = store_from_url("memory://", clock=clock)
    assert isinstance(memory, MemoryStore) and memory.clock is clock

    monkeypatch.chdir(tmp_path)
    relative = store_from_url("sqlite:///data/idem.db", clock=clock)
    assert isinstance(relative, SQLiteStore)
    assert relative.path == str(tmp_path / "data" / "idem.db")
    assert not (tmp_path / "data").exists()  # nothing touched before first use
    reserve(relative, "k1", "t")
    assert (tmp_path / "data" / "idem.db").exists()
    relative.close()

    absolute = store_from_url(f"sqlite:///{tmp_path}/abs%20dir/idem.db")
    assert isinstance(absolute, SQLiteStore)
    assert absolute.path == str(tmp_path / "abs dir" / "idem.db")

    redis_store = store_from_url("redis://:hunter2@127.0.0.1:6390/3", clock=clock)
    assert isinstance(redis_store, RedisStore) and redis_store.clock is clock
    assert "hunter2" not in repr(redis_store)
    assert isinstance(store_from_url("rediss://cache.internal:6380/0"), RedisStore)


@pytest.mark.parametrize(
    "url",
    [
        "postgres://admin:hunter2@db/app",
        "hunter2",
        "sqlite://host/hunter2.db",
        "sqlite:///",
        "sqlite:///:memory:",
        "sqlite:///x.db?mode=ro",
        "memory://hunter2",
        "redis://:hunter2@host:notaport/0",
        "",
    ],
)
def test_store_from_url_refuses_clearly_without_echoing_secrets(url: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        store_from_url(url)
    assert "hunter2" not in str(info.value)
    assert "memory://" in str(info.value) or "sqlite" in str(info.value) or "Redis" in str(
        info.value
    )


# --- SQLite: files, processes, faults -----------------------------------------------------


def test_sqlite_data_survives_reopening_the_file(tmp_path: Path, clock: Clock) -> None:
    path = tmp_path / "idem.db"
    first = SQLiteStore(path, clock=clock)
    reserve(first, "done", "t1")
    complete(first, "done", "t1", BINARY)
    reserve(first, "running", "t2")
    first.remember_signature("sig", ttl_seconds=60)
    first.close()

    second = SQLiteStore(str(path), clock=clock)
    assert second.get("done").response == BINARY  # type: ignore[union-attr]
    assert reserve(second, "done", "t3").outcome == "completed"
    assert reserve(second, "running", "t3").outcome == "in_progress"
    assert not second.remember_signature("sig", ttl_seconds=60)
    second.close()
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_sqlite_store_refuses_in_memory_databases() -> None:
    with pytest.raises(ConfigurationError):
        SQLiteStore(":memory:")


def _all_calls(store: IdempotencyStore) -> dict[str, Callable[[], object]]:
    """One call of every store method, for the fault tests."""
    return {
        "reserve": lambda: reserve(store, "k-new", "t"),
        "claim": lambda: claim(store, "k-new", "t"),
        "take_over": lambda: store.take_over(
            "k-new", old_token="t", new_token="u", lease_seconds=5
        ),
        "complete": lambda: complete(store, "k-new", "t"),
        "release": lambda: store.release("k-new", token="t"),
        "mark_uncertain": lambda: store.mark_uncertain("k-new", token="t", note="n"),
        "get": lambda: store.get("k-new"),
        "list": lambda: store.list(),
        "resolve": lambda: store.resolve("k-new", response=None, note="", retention_seconds=5),
        "cleanup": lambda: store.cleanup(),
        "remember_signature": lambda: store.remember_signature("s", ttl_seconds=5),
        "claim_approved": lambda: spend(store, "k-new", "t"),
        "ping": store.ping,
    }


@pytest.mark.parametrize("damage", ["parent-is-a-file", "not-a-database"])
def test_sqlite_failures_raise_store_unavailable_from_every_method(
    tmp_path: Path, damage: str
) -> None:
    if damage == "parent-is-a-file":
        (tmp_path / "blocker").write_text("x")
        path = tmp_path / "blocker" / "idem.db"
    else:
        path = tmp_path / "idem.db"
        path.write_bytes(b"this is not a database" * 100)
    store = SQLiteStore(path)
    for name, call in _all_calls(store).items():
        with pytest.raises(StoreUnavailable) as info:
            call()
        assert str(path) in str(info.value), name


def test_sqlite_busy_timeout_turns_a_held_lock_into_store_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "idem.db"
    store = SQLiteStore(path, busy_timeout=0.2)
    store.ping()  # creates the schema
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreUnavailable, match="locked"):
            reserve(store, "k1", "t")
        assert store.get("k1") is None  # WAL: readers are not blocked
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert reserve(store, "k1", "t").outcome == "reserved"
    store.close()


def test_sqlite_connections_of_finished_threads_are_closed(tmp_path: Path) -> None:
    # Threaded servers may run every request in a new thread.
    store = SQLiteStore(tmp_path / "idem.db")
    for index in range(20):
        thread = threading.Thread(target=reserve, args=(store, f"k{index}", "t"))
        thread.start()
        thread.join()
    store.get("k0")
    assert len(store._connections) <= 2
    assert len(store.list()) == 20
    store.close()


def _use_inherited_store(store: SQLiteStore, results: Any) -> None:
    try:
        results.put(reserve(store, "child", "t-child").outcome)
    except BaseException as exc:  # pragma: no cover - reported by the parent
        results.put(repr(exc))


@pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="needs fork()"
)
def test_sqlite_store_created_before_fork_works_in_the_child(tmp_path: Path) -> None:
    # Pre-fork servers build the app (and the store) once, then fork workers.
    store = SQLiteStore(tmp_path / "idem.db")
    assert reserve(store, "parent", "t-parent").outcome == "reserved"
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    child = context.Process(target=_use_inherited_store, args=(store, results))
    child.start()
    try:
        assert results.get(timeout=30) == "reserved"
    finally:
        child.join(timeout=30)
    assert child.exitcode == 0
    assert store.get("child").state == "in_progress"  # type: ignore[union-attr]
    assert reserve(store, "parent", "t-other").outcome == "in_progress"
    store.close()


# --- several processes, one key ------------------------------------------------------------


#: seconds for the spawned processes to start: each imports the package and the tests afresh,
#: which takes long on a busy machine; the race itself then has its own deadline
_SPAWN_START = 300


def _reserve_in_child(
    kind: str, target: str, prefix: str, key: str, barrier: Any, results: Any
) -> None:
    """Runs in a spawned process: open a store of its own and race for ``key``."""
    try:
        backend: IdempotencyStore = (
            SQLiteStore(target) if kind == "sqlite" else SQLStore(target) if kind in SQL_BACKENDS
            else RedisStore(target, prefix=prefix)
        )
        barrier.wait(timeout=_SPAWN_START)
        outcome = reserve(backend, key, f"worker-{os.getpid()}").outcome
        remembered = backend.remember_signature("sig-shared", ttl_seconds=60)
        backend.close()
        results.put((outcome, remembered))
    except BaseException as exc:  # pragma: no cover - reported by the parent
        results.put((repr(exc), None))


@pytest.mark.parametrize("kind", ["sqlite", "redis", "postgresql", "mariadb"])
def test_processes_racing_for_one_key_get_one_reservation(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    workers = 8
    if kind == "sqlite":
        # A fresh file: the workers also race to create the schema.
        target = str(tmp_path / "shared" / "idem.db")
    elif kind in SQL_BACKENDS:
        target = sql_url(request, kind)
        sql_store(request, kind, url=target).close()  # its tables, in a database of its own
    else:
        target = request.getfixturevalue("redis_server").url
    prefix = _prefix()
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(workers)
    results = context.Queue()
    processes = [
        context.Process(
            target=_reserve_in_child, args=(kind, target, prefix, "refund:42", barrier, results)
        )
        for _ in range(workers)
    ]
    for process in processes:
        process.start()
    try:
        # the first answer comes once every process has started and reached the barrier
        answers = [results.get(timeout=_SPAWN_START if not i else 60) for i in range(workers)]
    finally:
        for process in processes:
            process.join(timeout=30)
    outcomes = sorted(outcome for outcome, _ in answers)
    assert outcomes == ["in_progress"] * (workers - 1) + ["reserved"], answers
    assert sorted(remembered for _, remembered in answers) == [False] * (workers - 1) + [True]
    check = (SQLiteStore(target) if kind == "sqlite" else SQLStore(target)
             if kind in SQL_BACKENDS else RedisStore(target, prefix=prefix))
    entry = check.get("refund:42")
    assert entry is not None and entry.token.startswith("worker-")
    check.close()


def _spend_in_child(
    kind: str, target: str, prefix: str, barrier: Any, results: Any
) -> None:
    """Runs in a spawned process: open a store of its own and race for approval 123."""
    try:
        backend: IdempotencyStore = (
            SQLiteStore(target) if kind == "sqlite" else SQLStore(target) if kind in SQL_BACKENDS
            else RedisStore(target, prefix=prefix)
        )
        barrier.wait(timeout=60)
        key = f"idem:call-of-{os.getpid()}"  # each process an equivalent call of its own
        outcome = spend(backend, key, f"worker-{os.getpid()}").outcome
        backend.close()
        results.put((outcome, key))
    except BaseException as exc:  # pragma: no cover - reported by the parent
        results.put((repr(exc), None))


@pytest.mark.parametrize("kind", ["sqlite", "redis", "postgresql", "mariadb"])
def test_processes_racing_for_one_approval_spend_it_once(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    workers = 6
    if kind == "sqlite":
        target = str(tmp_path / "shared" / "idem.db")
    elif kind in SQL_BACKENDS:
        target = sql_url(request, kind)
    else:
        target = request.getfixturevalue("redis_server").url
    prefix = _prefix()
    check = (SQLiteStore(target) if kind == "sqlite" else sql_store(request, kind, url=target)
             if kind in SQL_BACKENDS else RedisStore(target, prefix=prefix))
    approved(check)
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(workers)
    results = context.Queue()
    processes = [context.Process(target=_spend_in_child, args=(kind, target, prefix, barrier,
                                                               results)) for _ in range(workers)]
    for process in processes:
        process.start()
    try:
        answers = [results.get(timeout=60) for _ in processes]
    finally:
        for process in processes:
            process.join(timeout=30)
    assert sorted(outcome for outcome, _ in answers) == ["reserved"] + ["used"] * (workers - 1), (
        answers)
    (winner,) = [key for outcome, key in answers if outcome == "reserved"]
    assert check.get_approval(123).used_by == winner  # type: ignore[union-attr]
    assert [key for _, key in answers if check.get(key) is not None] == [winner]
    check.close()


# --- Redis: TTLs, clients and faults ---------------------------------------------------------


def test_redis_ttl_reclaims_records_by_itself(redis_server: RedisServer) -> None:
    import redis

    prefix = _prefix()
    store = RedisStore(redis_server.url, prefix=prefix)  # the real clock
    raw = redis.Redis.from_url(redis_server.url)
    try:
        reserve(store, "k1", "t", lease=0.1, retention=0.2)
        assert complete(store, "k1", "t", retention=0.2)
        assert store.remember_signature("sig", ttl_seconds=0.2)
        assert 0 < raw.pttl(f"{prefix}idem:k1") <= 200
        time.sleep(0.4)
        assert raw.exists(f"{prefix}idem:k1", f"{prefix}sig:sig") == 0
        assert store.get("k1") is None
        assert store.remember_signature("sig", ttl_seconds=0.2)
    finally:
        raw.close()
        store.close()


def test_redis_prefixes_keep_stores_apart(redis_server: RedisServer, clock: Clock) -> None:
    one = RedisStore(redis_server.url, clock=clock, prefix="app[1]:")
    two = RedisStore(redis_server.url, clock=clock, prefix="app[1]:x")
    try:
        reserve(one, "k", "t")
        assert two.get("k") is None and two.list() == []
        assert [entry.key for entry in one.list()] == ["k"]
        assert one.release("k", token="t")
    finally:
        one.close()
        two.close()


def test_redis_store_accepts_a_client_but_not_a_decoding_one(
    redis_server: RedisServer, clock: Clock
) -> None:
    import redis

    client = redis.Redis.from_url(redis_server.url)
    store = RedisStore(client, clock=clock, prefix=_prefix())
    reserve(store, "k", "t")
    store.close()
    assert client.ping()  # the caller's client is left open
    client.close()
    decoding = redis.Redis.from_url(redis_server.url, decode_responses=True)
    with pytest.raises(ConfigurationError, match="decode_responses"):
        RedisStore(decoding)
    decoding.close()


def test_redis_unreachable_raises_store_unavailable_without_the_password() -> None:
    with socket_port_closed() as port:
        store = RedisStore(f"redis://:hunter2@127.0.0.1:{port}/0", prefix=_prefix())
        for name, call in _all_calls(store).items():
            with pytest.raises(StoreUnavailable) as info:
                call()
            message = str(info.value)
            assert "hunter2" not in message and f"127.0.0.1:{port}" in message, name


def test_redis_password_in_the_url(
    redis_server_factory: Callable[[], RedisServer], clock: Clock
) -> None:
    import redis

    server = redis_server_factory()
    admin = redis.Redis.from_url(server.url)
    admin.config_set("requirepass", "correct-horse")
    admin.close()
    wrong = RedisStore(server.url.replace("redis://", "redis://:hunter2@"), prefix=_prefix())
    with pytest.raises(StoreUnavailable) as info:
        wrong.ping()
    assert "hunter2" not in str(info.value)
    assert "hunter2" not in repr(info.value.__cause__)
    right = RedisStore(server.url.replace("redis://", "redis://:correct-horse@"), clock=clock)
    assert reserve(right, "k1", "t").outcome == "reserved"
    assert "correct-horse" not in repr(right)
    right.close()


def test_redis_outage_fails_fast_and_the_same_store_recovers(
    redis_server_factory: Callable[[], RedisServer], clock: Clock
) -> None:
    server = redis_server_factory()
    store = RedisStore(server.url, clock=clock, prefix=_prefix())
    assert reserve(store, "k1", "token-a").outcome == "reserved"

    server.stop()
    for name, call in _all_calls(store).items():
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):
            call()
        # Not a benchmark: a generous bound that only catches a hang.
        assert time.monotonic() - started < 5, name
    with pytest.raises(StoreUnavailable):
        complete(store, "k1", "token-a")

    server.start()  # same port, empty: nothing was persisted
    store.ping()
    assert store.get("k1") is None
    assert reserve(store, "k1", "token-b").outcome == "reserved"
    assert complete(store, "k1", "token-b")

    # A restart between two calls is invisible: the pool reconnects.
    server.restart()
    assert reserve(store, "k2", "token-c").outcome == "reserved"
    store.close()


def test_redis_spends_an_approval_after_the_server_lost_its_scripts(
    redis_server: RedisServer, clock: Clock
) -> None:
    import redis

    store = RedisStore(redis_server.url, clock=clock, prefix=_prefix())
    raw = redis.Redis.from_url(redis_server.url)
    try:
        approved(store)
        raw.script_flush()  # as after a restart of a server that keeps its data
        assert spend(store, "idem:first", "t") == ApprovalClaim("reserved", approval_id=123)
        raw.script_flush()
        assert spend(store, "idem:second", "u") == ApprovalClaim("used")
    finally:
        raw.close()
        store.close()


def test_redis_frozen_server_times_out_instead_of_hanging(
    redis_server_factory: Callable[[], RedisServer], clock: Clock
) -> None:
    server = redis_server_factory()
    store = RedisStore(server.url, clock=clock, prefix=_prefix())
    reserve(store, "k1", "token-a")
    server.pause()
    try:
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match="Timeout"):
            store.get("k1")
        assert time.monotonic() - started < 5  # the 2 s socket timeout, not a hang
    finally:
        server.resume()
    # The timed-out connection was dropped, so no late answer is misread.
    entry = store.get("k1")
    assert entry is not None and entry.token == "token-a"
    assert reserve(store, "k1", "token-b").outcome == "in_progress"
    assert store.remember_signature("s", ttl_seconds=5)
    store.close()


class socket_port_closed:
    """A loopback port nothing listens on, for the duration of the block."""

    def __enter__(self) -> int:
        import socket

        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))  # bound but not listening: refuses connections
        return int(self._sock.getsockname()[1])

    def __exit__(self, *exc_info: object) -> None:
        self._sock.close()
