"""An idempotency store in a dict, for tests and single-process development.

It forgets everything on restart and is invisible to other worker
processes, so a pre-fork server with several workers would run a repeated
side effect once per worker: use :class:`~bailing_flask.stores.SQLiteStore`
there. One lock guards everything; every operation is a few dict lookups.
Entries are kept as small mutable lists and handed out as frozen
:class:`~bailing_flask.stores.Entry` snapshots only when someone asks to
read one, so the request path (a claim and a completion) builds no records.
"""

from __future__ import annotations

import builtins
import threading
import time
from collections.abc import Sequence
from itertools import islice
from typing import Any

from bailing_flask.stores._entries import (
    Clock,
    Entry,
    EntryMeta,
    EntryState,
    ListState,
    Outcome,
    Reservation,
    StoredResponse,
    _trusted_meta,
    _trusted_response,
    resolved_token,
)
from bailing_flask.stores.approvals import (
    ApprovalClaim,
    ApprovalRecord,
    ApprovalStatus,
    decide,
    oldest_first,
    received,
    refusal,
    spendable,
    spent_by,
)
from bailing_flask.stores.base import IdempotencyStore

__all__ = ["MemoryStore"]


# One entry is one flat tuple of strings, numbers and None (the headers a tuple of pairs):
# (state, token, created_at, lease_expires_at, expires_at,
#  tool, job_id, subject, unsigned_key, status, headers, body, note)
# Nothing in it is a container the garbage collector must follow, so CPython stops tracking
# each record after its first collection (frozen dataclasses with their __dict__ would be
# scanned by every full collection for as long as the store keeps them), and a record is
# about half the memory of an Entry with its EntryMeta and StoredResponse.
(_STATE, _TOKEN, _CREATED, _LEASE, _EXPIRES, _TOOL, _JOB, _SUBJECT, _UNSIGNED, _STATUS,
 _HEADERS, _BODY, _NOTE) = range(13)
Record = tuple[Any, ...]


def _snapshot(key: str, r: Record) -> Entry:
    status = r[_STATUS]
    return Entry(key, r[_STATE], r[_TOKEN], r[_CREATED], r[_LEASE], r[_EXPIRES],
                 _trusted_meta(r[_TOOL], r[_JOB], r[_SUBJECT], r[_UNSIGNED]),
                 None if status is None else _trusted_response(status, r[_HEADERS], r[_BODY]),
                 r[_NOTE])


def _record_outcome(record: Record, now: float) -> Outcome:
    if record[_STATE] == "completed":
        return "completed"
    return "uncertain" if now >= record[_LEASE] else "in_progress"


def _changed(r: Record, **fields: Any) -> Record:
    """``r`` with some fields replaced (the rare paths; the request path builds tuples itself)."""
    values = list(r)
    for name, value in fields.items():
        values[_FIELD[name]] = value
    return tuple(values)


_FIELD = {"state": _STATE, "token": _TOKEN, "lease_expires_at": _LEASE, "expires_at": _EXPIRES,
          "status": _STATUS, "headers": _HEADERS, "body": _BODY, "note": _NOTE}


class MemoryStore(IdempotencyStore):
    """Keep entries and seen signatures in process memory.

    :param clock: returns the current Unix time (injectable for tests).
    """

    def __init__(self, *, clock: Clock = time.time) -> None:
        super().__init__(clock=clock)
        self._entries: dict[str, Record] = {}
        self._signatures: dict[str, float] = {}
        self._approvals: dict[int, ApprovalRecord] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return "MemoryStore()"

    def _live(self, key: str, now: float) -> Record | None:
        """The live record for ``key``; the caller holds the lock."""
        record = self._entries.get(key)
        if record is None or record[_EXPIRES] <= now:
            return None
        return record

    def _reserve(
        self,
        key: str,
        *,
        token: str,
        lease_seconds: float,
        retention_seconds: float,
        meta: EntryMeta,
    ) -> Reservation:
        with self._lock:
            now = self.clock()
            record = self._live(key, now)
            if record is not None:
                if record[_STATE] == "in_progress" and record[_TOKEN] == token:
                    return Reservation("reserved", _snapshot(key, record))
                return Reservation(_record_outcome(record, now), _snapshot(key, record))
            record = ("in_progress", token, now, now + lease_seconds,
                      now + max(lease_seconds, retention_seconds),
                      meta.tool, meta.job_id, meta.subject, meta.unsigned_key, None, None, None,
                      None)
            self._entries[key] = record
            return Reservation("reserved", _snapshot(key, record))

    def _claim(
        self,
        key: str,
        *,
        token: str,
        lease_seconds: float,
        retention_seconds: float,
        meta: EntryMeta,
    ) -> Reservation | None:
        with self._lock:
            now = self.clock()
            record = self._entries.get(key)
            if record is not None and record[_EXPIRES] > now:
                if record[_STATE] == "in_progress" and record[_TOKEN] == token:
                    return None
                return Reservation(_record_outcome(record, now), _snapshot(key, record))
            self._entries[key] = (
                "in_progress", token, now, now + lease_seconds,
                now + (lease_seconds if lease_seconds > retention_seconds else retention_seconds),
                meta.tool, meta.job_id, meta.subject, meta.unsigned_key, None, None, None, None,
            )
            return None

    def _take_over(
        self, key: str, *, old_token: str, new_token: str, lease_seconds: float
    ) -> bool:
        with self._lock:
            now = self.clock()
            record = self._live(key, now)
            if record is None or record[_STATE] != "in_progress":
                return False
            if record[_TOKEN] == new_token:
                return True
            if record[_TOKEN] != old_token:
                return False
            lease_end = now + lease_seconds
            self._entries[key] = _changed(record, token=new_token, lease_expires_at=lease_end,
                                          expires_at=max(record[_EXPIRES], lease_end))
            return True

    def _complete(
        self, key: str, *, token: str, response: StoredResponse, retention_seconds: float
    ) -> bool:
        with self._lock:
            now = self.clock()
            record = self._entries.get(key)
            if record is None or record[_EXPIRES] <= now or record[_TOKEN] != token:
                return False
            if record[_STATE] == "completed":
                return True
            self._entries[key] = (
                "completed", token, record[_CREATED], record[_LEASE], now + retention_seconds,
                record[_TOOL], record[_JOB], record[_SUBJECT], record[_UNSIGNED],
                response.status, response.headers, response.body, record[_NOTE],
            )
            return True

    def _mark_uncertain(self, key: str, *, token: str, note: str) -> bool:
        with self._lock:
            now = self.clock()
            record = self._live(key, now)
            if record is None or record[_STATE] != "in_progress" or record[_TOKEN] != token:
                return False
            self._entries[key] = _changed(record, lease_expires_at=min(record[_LEASE], now),
                                          note=note)
            return True

    def _release(self, key: str, *, token: str) -> bool:
        with self._lock:
            record = self._live(key, self.clock())
            if record is None or record[_STATE] != "in_progress" or record[_TOKEN] != token:
                return False
            del self._entries[key]
            return True

    def _get(self, key: str) -> Entry | None:
        with self._lock:
            record = self._live(key, self.clock())
            return None if record is None else _snapshot(key, record)

    def _list(self, *, state: ListState | None = None, limit: int = 100) -> list[Entry]:
        with self._lock:
            now = self.clock()
            entries = [
                _snapshot(key, record)
                for key, record in self._entries.items()
                if record[_EXPIRES] > now
                and (state is None or _record_outcome(record, now) == state)
            ]
        entries.sort(key=lambda entry: (entry.created_at, entry.key))
        return entries[:limit]

    def _resolve(
        self,
        key: str,
        *,
        response: StoredResponse | None,
        note: str,
        retention_seconds: float,
        expected: tuple[EntryState, str] | None = None,
    ) -> bool:
        with self._lock:
            now = self.clock()
            record = self._live(key, now)
            if record is None:
                return False
            if expected is not None and (record[_STATE], record[_TOKEN]) != expected:
                return False
            if response is None:
                del self._entries[key]
            else:
                self._entries[key] = _changed(
                    record, state="completed", token=resolved_token(), expires_at=now + retention_seconds,
                    status=response.status, headers=response.headers, body=response.body, note=note,
                )
            return True

    def _cleanup(self, *, limit: int = 1000) -> int:
        with self._lock:
            now = self.clock()
            dead_entries = list(
                islice((k for k, r in self._entries.items() if r[_EXPIRES] <= now), limit)
            )
            for key in dead_entries:
                del self._entries[key]
            dead_signatures = list(
                islice(
                    (s for s, exp in self._signatures.items() if exp <= now),
                    limit - len(dead_entries),
                )
            )
            for signature in dead_signatures:
                del self._signatures[signature]
        return len(dead_entries) + len(dead_signatures)

    def _remember_signature(self, signature: str, *, ttl_seconds: float) -> bool:
        with self._lock:
            now = self.clock()
            expires_at = self._signatures.get(signature)
            if expires_at is not None and expires_at > now:
                return False
            self._signatures[signature] = now + ttl_seconds
            return True

    def ping(self) -> None:
        """Always answers: the dict is right here."""

    def close(self) -> None:
        """Nothing to release; the entries stay until the object is dropped."""

    # --- business approvals -------------------------------------------------------

    def _live_approval(self, approval_id: int, now: float) -> ApprovalRecord | None:
        record = self._approvals.get(approval_id)
        return record if record is not None and record.is_live(now) else None

    def _add_approval(self, record: ApprovalRecord, *, retention_seconds: float) -> ApprovalRecord:
        with self._lock:
            now = self.clock()
            existing = self._live_approval(record.approval_id, now)
            if existing is not None:
                return existing
            for dead in [k for k, r in self._approvals.items() if not r.is_live(now)][:100]:
                del self._approvals[dead]
            stored = received(record, now, retention_seconds)
            self._approvals[record.approval_id] = stored
            return stored

    def _record_decision(
        self,
        approval_id: int,
        *,
        status: ApprovalStatus,
        decision_id: str,
        approver: str,
        retention_seconds: float,
    ) -> ApprovalRecord | None:
        with self._lock:
            now = self.clock()
            record = self._live_approval(approval_id, now)
            if record is None or record.status != "pending":
                return record
            decided = decide(record, status, decision_id, approver, now, retention_seconds)
            self._approvals[approval_id] = decided
            return decided

    def _get_approval(self, approval_id: int) -> ApprovalRecord | None:
        with self._lock:
            return self._live_approval(approval_id, self.clock())

    def find_approvals(self, *, job_id: str, tool: str) -> builtins.list[ApprovalRecord]:
        with self._lock:
            now = self.clock()
            found = [r for r in self._approvals.values()
                     if r.job_id == job_id and r.tool == tool and r.is_live(now)]
        return oldest_first(found)

    def _list_approvals(
        self, *, status: ApprovalStatus | None = None, limit: int = 100
    ) -> builtins.list[ApprovalRecord]:
        with self._lock:
            now = self.clock()
            found = [r for r in self._approvals.values()
                     if r.is_live(now) and (status is None or r.status == status)]
        return oldest_first(found)[:limit]

    def _claim_approved(
        self,
        key: str,
        *,
        approval_ids: Sequence[int],
        token: str,
        lease_seconds: float,
        retention_seconds: float,
        meta: EntryMeta,
        reserve: bool = True,
    ) -> ApprovalClaim:
        with self._lock:
            now = self.clock()
            records = [self._approvals.get(approval_id) for approval_id in approval_ids]
            record = self._live(key, now) if reserve else None
            if record is not None:
                if record[_STATE] == "in_progress" and record[_TOKEN] == token:
                    mine = [r.approval_id for r in records if r is not None and r.used_by == key]
                    return ApprovalClaim("reserved", approval_id=mine[0] if mine else None)
                return ApprovalClaim("held", reservation=Reservation(
                    _record_outcome(record, now), _snapshot(key, record)))
            for approval in records:
                if approval is not None and spendable(approval, now):
                    self._approvals[approval.approval_id] = spent_by(approval, key, now)
                    if reserve:
                        self._entries[key] = (
                            "in_progress", token, now, now + lease_seconds,
                            now + max(lease_seconds, retention_seconds),
                            meta.tool, meta.job_id, meta.subject, meta.unsigned_key,
                            None, None, None, None,
                        )
                    return ApprovalClaim("reserved", approval_id=approval.approval_id)
            return refusal(records, now)
