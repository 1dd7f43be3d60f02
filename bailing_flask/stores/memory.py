"""An idempotency store in a dict, for tests and single-process development.

It forgets everything on restart and is invisible to other worker
processes, so a pre-fork server with several workers would run a repeated
side effect once per worker: use :class:`~bailing_flask.stores.SQLiteStore`
there. One lock guards everything; every operation is a few dict lookups.
"""

from __future__ import annotations

import builtins
import dataclasses
import threading
import time
from itertools import islice

from .approvals import ApprovalRecord, ApprovalStatus, check_approval_id, check_decision, retention
from .base import (
    RESOLVED_TOKEN,
    Clock,
    Entry,
    EntryMeta,
    IdempotencyStore,
    ListState,
    Reservation,
    StoredResponse,
    _check_key,
    _check_limit,
    _check_seconds,
    _check_state,
    _matches,
    _outcome,
)

__all__ = ["MemoryStore"]


class MemoryStore(IdempotencyStore):
    """Keep entries and seen signatures in process memory.

    :param clock: returns the current Unix time (injectable for tests).
    """

    def __init__(self, *, clock: Clock = time.time) -> None:
        super().__init__(clock=clock)
        self._entries: dict[str, Entry] = {}
        self._signatures: dict[str, float] = {}
        self._approvals: dict[int, ApprovalRecord] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return "MemoryStore()"

    def _live(self, key: str, now: float) -> Entry | None:
        """The live entry for ``key``; the caller holds the lock."""
        entry = self._entries.get(key)
        if entry is None or entry.expires_at <= now:
            return None
        return entry

    def reserve(
        self,
        key: str,
        *,
        token: str,
        lease_seconds: float,
        retention_seconds: float,
        meta: EntryMeta,
    ) -> Reservation:
        _check_key(key)
        _check_key(token, "token")
        lease = _check_seconds(lease_seconds, "lease_seconds")
        retention = _check_seconds(retention_seconds, "retention_seconds")
        with self._lock:
            now = self.clock()
            entry = self._live(key, now)
            if entry is not None:
                if entry.state == "in_progress" and entry.token == token:
                    return Reservation("reserved", entry)
                return Reservation(_outcome(entry, now), entry)
            entry = Entry(
                key=key,
                state="in_progress",
                token=token,
                created_at=now,
                lease_expires_at=now + lease,
                expires_at=now + max(lease, retention),
                meta=meta,
            )
            self._entries[key] = entry
            return Reservation("reserved", entry)

    def take_over(
        self, key: str, *, old_token: str, new_token: str, lease_seconds: float
    ) -> bool:
        _check_key(key)
        _check_key(new_token, "new_token")
        lease = _check_seconds(lease_seconds, "lease_seconds")
        with self._lock:
            now = self.clock()
            entry = self._live(key, now)
            if entry is None or entry.state != "in_progress":
                return False
            if entry.token == new_token:
                return True
            if entry.token != old_token:
                return False
            self._entries[key] = dataclasses.replace(
                entry,
                token=new_token,
                lease_expires_at=now + lease,
                expires_at=max(entry.expires_at, now + lease),
            )
            return True

    def complete(
        self, key: str, *, token: str, response: StoredResponse, retention_seconds: float
    ) -> bool:
        _check_key(key)
        _check_key(token, "token")
        retention = _check_seconds(retention_seconds, "retention_seconds")
        with self._lock:
            now = self.clock()
            entry = self._live(key, now)
            if entry is None or entry.token != token:
                return False
            if entry.state == "completed":
                return True
            # built directly: dataclasses.replace introspects the fields on every call
            self._entries[key] = Entry(
                entry.key, "completed", entry.token, entry.created_at, entry.lease_expires_at,
                now + retention, entry.meta, response, entry.note,
            )
            return True

    def mark_uncertain(self, key: str, *, token: str, note: str) -> bool:
        _check_key(key)
        with self._lock:
            now = self.clock()
            entry = self._live(key, now)
            if entry is None or entry.state != "in_progress" or entry.token != token:
                return False
            self._entries[key] = dataclasses.replace(
                entry, lease_expires_at=min(entry.lease_expires_at, now), note=note
            )
            return True

    def release(self, key: str, *, token: str) -> bool:
        _check_key(key)
        with self._lock:
            entry = self._live(key, self.clock())
            if entry is None or entry.state != "in_progress" or entry.token != token:
                return False
            del self._entries[key]
            return True

    def get(self, key: str) -> Entry | None:
        _check_key(key)
        with self._lock:
            return self._live(key, self.clock())

    def list(self, *, state: ListState | None = None, limit: int = 100) -> list[Entry]:
        _check_state(state)
        _check_limit(limit)
        with self._lock:
            now = self.clock()
            entries = [
                entry
                for entry in self._entries.values()
                if entry.expires_at > now and _matches(entry, state, now)
            ]
        entries.sort(key=lambda entry: (entry.created_at, entry.key))
        return entries[:limit]

    def resolve(
        self,
        key: str,
        *,
        response: StoredResponse | None,
        note: str,
        retention_seconds: float,
    ) -> bool:
        _check_key(key)
        retention = _check_seconds(retention_seconds, "retention_seconds")
        with self._lock:
            now = self.clock()
            entry = self._live(key, now)
            if entry is None:
                return False
            if response is None:
                del self._entries[key]
            else:
                self._entries[key] = dataclasses.replace(
                    entry,
                    state="completed",
                    token=RESOLVED_TOKEN,
                    response=response,
                    note=note,
                    expires_at=now + retention,
                )
            return True

    def cleanup(self, *, limit: int = 1000) -> int:
        _check_limit(limit)
        with self._lock:
            now = self.clock()
            dead_entries = list(
                islice((k for k, e in self._entries.items() if e.expires_at <= now), limit)
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

    def remember_signature(self, signature: str, *, ttl_seconds: float) -> bool:
        _check_key(signature, "signature")
        ttl = _check_seconds(ttl_seconds, "ttl_seconds")
        with self._lock:
            now = self.clock()
            expires_at = self._signatures.get(signature)
            if expires_at is not None and expires_at > now:
                return False
            self._signatures[signature] = now + ttl
            return True

    def ping(self) -> None:
        """Always answers: the dict is right here."""

    def close(self) -> None:
        """Nothing to release; the entries stay until the object is dropped."""

    # --- business approvals -------------------------------------------------------

    def _live_approval(self, approval_id: int, now: float) -> ApprovalRecord | None:
        record = self._approvals.get(approval_id)
        return record if record is not None and record.is_live(now) else None

    def add_approval(self, record: ApprovalRecord, *, retention_seconds: float) -> ApprovalRecord:
        keep = retention(retention_seconds)
        with self._lock:
            now = self.clock()
            existing = self._live_approval(record.approval_id, now)
            if existing is not None:
                return existing
            for dead in [k for k, r in self._approvals.items() if not r.is_live(now)][:100]:
                del self._approvals[dead]
            stored = dataclasses.replace(
                record, status="pending", decision_id=None, approver=None, decided_at=None,
                received_at=now, expires_at=now + keep,
            )
            self._approvals[record.approval_id] = stored
            return stored

    def record_decision(
        self,
        approval_id: int,
        *,
        status: ApprovalStatus,
        decision_id: str,
        approver: str,
        retention_seconds: float,
    ) -> ApprovalRecord | None:
        check_approval_id(approval_id)
        check_decision(status, decision_id, approver)
        keep = retention(retention_seconds)
        with self._lock:
            now = self.clock()
            record = self._live_approval(approval_id, now)
            if record is None or record.status != "pending":
                return record
            decided = dataclasses.replace(
                record, status=status, decision_id=decision_id, approver=approver, decided_at=now,
                expires_at=max(record.expires_at, now + keep),
            )
            self._approvals[approval_id] = decided
            return decided

    def get_approval(self, approval_id: int) -> ApprovalRecord | None:
        check_approval_id(approval_id)
        with self._lock:
            return self._live_approval(approval_id, self.clock())

    def find_approvals(self, *, job_id: str, tool: str) -> builtins.list[ApprovalRecord]:
        with self._lock:
            now = self.clock()
            found = [r for r in self._approvals.values()
                     if r.job_id == job_id and r.tool == tool and r.is_live(now)]
        return sorted(found, key=lambda r: (r.received_at, r.approval_id))

    def list_approvals(
        self, *, status: ApprovalStatus | None = None, limit: int = 100
    ) -> builtins.list[ApprovalRecord]:
        _check_limit(limit)
        with self._lock:
            now = self.clock()
            found = [r for r in self._approvals.values()
                     if r.is_live(now) and (status is None or r.status == status)]
        return sorted(found, key=lambda r: (r.received_at, r.approval_id))[:limit]
