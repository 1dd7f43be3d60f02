"""A store written outside the package gets every argument check of the base class.

``IdempotencyStore``'s public methods check their arguments and call the
protected methods a store implements (``reserve`` calls ``_reserve``, ...).
These tests write stores the documented way and the wrong way: the checks
run before any of the store's own code, whatever the store does, and a store
that defines a checked public method itself is refused when its class is
created, naming the method to implement instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bailing_flask.stores import (
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
)

META = EntryMeta(tool="refund_order", job_id="job-1", subject="179:1", unsigned_key="ab" * 32)
OK = StoredResponse(200, (("Content-Type", "application/json"),), b"{}")
#: every public method the base class checks, as a subclass would (wrongly) define it
CHECKED = ("reserve", "claim", "take_over", "complete", "complete_deferred", "mark_uncertain",
           "release", "get", "list", "resolve", "cleanup", "remember_signature", "add_approval",
           "record_decision", "get_approval", "list_approvals", "claim_approved")


class Noting(IdempotencyStore):
    """A store that checks nothing itself: it notes every call of its own code and answers."""

    def __init__(self) -> None:
        super().__init__(clock=lambda: 1_718_000_000.0)
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def _note(self, name: str, *args: Any, **kwargs: Any) -> Any:
        self.calls.append((name, args, kwargs))
        return None

    def _reserve(self, key: str, **kw: Any) -> Reservation:
        self._note("_reserve", key, **kw)
        return Reservation("reserved", Entry(key=key, state="in_progress", token=kw["token"],
                                             created_at=0.0, lease_expires_at=1.0,
                                             expires_at=1.0, meta=META))

    def _take_over(self, key: str, **kw: Any) -> bool:
        return self._note("_take_over", key, **kw)  # type: ignore[no-any-return]

    def _complete(self, key: str, **kw: Any) -> bool:
        return self._note("_complete", key, **kw)  # type: ignore[no-any-return]

    def _mark_uncertain(self, key: str, **kw: Any) -> bool:
        return self._note("_mark_uncertain", key, **kw)  # type: ignore[no-any-return]

    def _release(self, key: str, **kw: Any) -> bool:
        return self._note("_release", key, **kw)  # type: ignore[no-any-return]

    def _get(self, key: str) -> Entry | None:
        return self._note("_get", key)  # type: ignore[no-any-return]

    def _list(self, **kw: Any) -> list[Entry]:
        return self._note("_list", **kw)  # type: ignore[no-any-return]

    def _resolve(self, key: str, **kw: Any) -> bool:
        return self._note("_resolve", key, **kw)  # type: ignore[no-any-return]

    def _cleanup(self, **kw: Any) -> int:
        return self._note("_cleanup", **kw)  # type: ignore[no-any-return]

    def _remember_signature(self, signature: str, **kw: Any) -> bool:
        return self._note("_remember_signature", signature, **kw)  # type: ignore[no-any-return]

    def _add_approval(self, record: ApprovalRecord, **kw: Any) -> ApprovalRecord:
        return self._note("_add_approval", record, **kw)  # type: ignore[no-any-return]

    def _record_decision(self, approval_id: int, **kw: Any) -> ApprovalRecord | None:
        return self._note("_record_decision", approval_id, **kw)  # type: ignore[no-any-return]

    def _get_approval(self, approval_id: int) -> ApprovalRecord | None:
        return self._note("_get_approval", approval_id)  # type: ignore[no-any-return]

    def _list_approvals(self, **kw: Any) -> list[ApprovalRecord]:
        return self._note("_list_approvals", **kw)  # type: ignore[no-any-return]

    def _claim_approved(self, key: str, **kw: Any) -> Any:
        return self._note("_claim_approved", key, **kw)

    def ping(self) -> None:
        pass

    def close(self) -> None:
        pass


def _reservation(**bad: Any) -> dict[str, Any]:
    return {"token": "token-a", "lease_seconds": 30.0, "retention_seconds": 600.0, "meta": META,
            **bad}


def _bad_calls(store: IdempotencyStore) -> dict[str, list[Callable[[], object]]]:
    """For every checked method, calls with one bad argument each."""
    s = store
    return {
        "reserve": [lambda: s.reserve("", **_reservation()),
                    lambda: s.reserve("k", **_reservation(token="")),
                    lambda: s.reserve("k", **_reservation(lease_seconds=True)),
                    lambda: s.reserve("k", **_reservation(lease_seconds=0.0)),
                    lambda: s.reserve("k", **_reservation(retention_seconds=float("inf"))),
                    lambda: s.reserve(b"k", **_reservation())],  # type: ignore[arg-type]
        "claim": [lambda: s.claim("", **_reservation()),
                  lambda: s.claim("k", **_reservation(token=7)),
                  lambda: s.claim("k", **_reservation(lease_seconds=float("nan"))),
                  lambda: s.claim("k", **_reservation(retention_seconds=-1))],
        "take_over": [lambda: s.take_over("", old_token="a", new_token="b", lease_seconds=5),
                      lambda: s.take_over("k", old_token="a", new_token="", lease_seconds=5),
                      lambda: s.take_over("k", old_token="a", new_token="b", lease_seconds=0)],
        "complete": [lambda: s.complete("", token="t", response=OK, retention_seconds=5),
                     lambda: s.complete("k", token="", response=OK, retention_seconds=5),
                     lambda: s.complete("k", token="t", response=OK, retention_seconds=0)],
        "complete_deferred": [
            lambda: s.complete_deferred("", token="t", response=OK, retention_seconds=5),
            lambda: s.complete_deferred("k", token="t", response=OK, retention_seconds=True)],
        "mark_uncertain": [lambda: s.mark_uncertain("", token="t", note="n")],
        "release": [lambda: s.release("", token="t")],
        "get": [lambda: s.get(""), lambda: s.get(None)],  # type: ignore[arg-type]
        "list": [lambda: s.list(state="done"),  # type: ignore[arg-type]
                 lambda: s.list(limit=-1), lambda: s.list(limit=True)],
        "resolve": [lambda: s.resolve("", response=None, note="", retention_seconds=5),
                    lambda: s.resolve("k", response=None, note="", retention_seconds=0),
                    lambda: s.resolve("k", response=None, note="", retention_seconds=5,
                                      seen="k"),  # type: ignore[arg-type]
                    lambda: s.resolve("k", response=None, note="", retention_seconds=5,
                                      seen=_entry("other"))],
        "cleanup": [lambda: s.cleanup(limit=-1), lambda: s.cleanup(limit=1.5)],  # type: ignore[arg-type]
        "remember_signature": [lambda: s.remember_signature("", ttl_seconds=5),
                               lambda: s.remember_signature("s", ttl_seconds=True),
                               lambda: s.remember_signature("s", ttl_seconds=float("inf"))],
        "add_approval": [lambda: s.add_approval(_approval(), retention_seconds=0)],
        "record_decision": [
            lambda: s.record_decision(0, status="approved", decision_id="d", approver="u",
                                      retention_seconds=60),
            lambda: s.record_decision(1, status="pending", decision_id="d",  # type: ignore[arg-type]
                                      approver="u", retention_seconds=60),
            lambda: s.record_decision(1, status="approved", decision_id="", approver="u",
                                      retention_seconds=60)],
        "get_approval": [lambda: s.get_approval(True), lambda: s.get_approval(0)],  # type: ignore[arg-type]
        "list_approvals": [lambda: s.list_approvals(limit=-1)],
        "claim_approved": [
            lambda: s.claim_approved("", approval_ids=[1], **_reservation()),
            lambda: s.claim_approved("k", approval_ids=[0], **_reservation()),
            lambda: s.claim_approved("k", approval_ids=[1], **_reservation(lease_seconds=0)),
            lambda: s.claim_approved("k", approval_ids=[1], reserve=1,  # type: ignore[arg-type]
                                     **_reservation())],
    }


def _entry(key: str) -> Entry:
    return Entry(key=key, state="in_progress", token="t", created_at=0.0, lease_expires_at=1.0,
                 expires_at=2.0, meta=META)


def _approval() -> ApprovalRecord:
    return ApprovalRecord(approval_id=123, job_id="job-1", tool="refund_execute",
                          request_id="req-1", args_hash="ab" * 32)


def test_a_store_written_the_documented_way_refuses_bad_arguments_before_its_code_runs() -> None:
    store = Noting()
    calls = _bad_calls(store)
    assert sorted(calls) == sorted(CHECKED)
    for name, bad in calls.items():
        for call in bad:
            with pytest.raises(ValueError):
                call()
            assert store.calls == [], name


def test_a_store_written_the_documented_way_receives_its_arguments_normalised() -> None:
    store = Noting()
    store.claim("k", token="t", lease_seconds=5, retention_seconds=600, meta=META)
    store.complete_deferred("k", token="t", response=OK, retention_seconds=60)
    store.remember_signature("s", ttl_seconds=300)
    store.claim_approved("k", approval_ids=[7, 8], token="t", lease_seconds=5,
                         retention_seconds=60, meta=META)
    assert store.calls == [
        # the inherited _claim is built on the store's _reserve
        ("_reserve", ("k",), {"token": "t", "lease_seconds": 5.0, "retention_seconds": 600.0,
                              "meta": META}),
        # a store that defers nothing completes at once
        ("_complete", ("k",), {"token": "t", "response": OK, "retention_seconds": 60.0}),
        ("_remember_signature", ("s",), {"ttl_seconds": 300.0}),
        ("_claim_approved", ("k",), {"approval_ids": (7, 8), "token": "t", "lease_seconds": 5.0,
                                     "retention_seconds": 60.0, "meta": META, "reserve": True}),
    ]
    assert all(type(value) is float for _name, _args, kwargs in store.calls
               for key, value in kwargs.items() if key.endswith("_seconds"))


@pytest.mark.parametrize("name", CHECKED)
@pytest.mark.parametrize("base", [IdempotencyStore, MemoryStore, SQLiteStore, RedisStore,
                                  SQLStore], ids=lambda base: base.__name__)
def test_a_store_that_defines_a_checked_method_itself_is_refused_at_class_creation(
    base: type[IdempotencyStore], name: str
) -> None:
    def unchecked(self: IdempotencyStore, *args: Any, **kwargs: Any) -> Any:
        return "ran without the checks"

    with pytest.raises(TypeError) as info:
        type("Skipping", (base,), {name: unchecked})
    message = str(info.value)
    assert f"defines {name}()" in message and f"implement _{name}() instead" in message \
        or name == "complete_deferred" and "implement _complete()" in message


def test_a_wrapping_store_overrides_the_protected_method_and_keeps_the_checks() -> None:
    seen: list[str] = []

    class Counting(MemoryStore):
        """Counts the claims that reach the store, as a metrics wrapper would."""

        def _claim(self, key: str, **kw: Any) -> Reservation | None:
            seen.append(key)
            return super()._claim(key, **kw)

    store = Counting()
    with pytest.raises(ValueError):
        store.claim("", **_reservation())
    assert seen == []
    assert store.claim("k", **_reservation()) is None
    assert seen == ["k"] and store.get("k") is not None


def test_the_built_in_stores_define_no_checked_public_method() -> None:
    for store in (MemoryStore, SQLiteStore, RedisStore, SQLStore):
        assert not set(CHECKED) & set(vars(store)), store.__name__
        for name in CHECKED:
            assert getattr(store, name) is getattr(IdempotencyStore, name)
