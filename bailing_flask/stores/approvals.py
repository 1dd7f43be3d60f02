"""Approval requests this app received, and the decisions it sent, as the stores keep them.

A business that approves tool calls itself (the hub POSTs it the approval
request; it answers with a decision) records both here, so that a tool
declared with ``business_approval=True`` can later check that *this app*
approved *this call* (see :mod:`bailing_flask.approvals`). Every store
keeps them next to its idempotency entries, with the same clock rules: a
record is live while ``clock() < expires_at``.

The life of one record, keyed by the hub's ``approval_id``:

``add_approval`` -> ``pending`` -> ``record_decision`` -> ``approved`` or
``denied`` (final: a later, different decision leaves it as it is, exactly
as the hub answers it with a conflict) -> ``claim_approved`` spends an
``approved`` record on exactly one call (``used_by`` names the call's store
key; never undone, see :meth:`~bailing_flask.stores.IdempotencyStore.claim_approved`).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from bailing_flask.stores._entries import Reservation

__all__ = ["ApprovalClaim", "ApprovalRecord", "ApprovalStatus", "DECIDED"]

ApprovalStatus = Literal["pending", "approved", "denied"]
#: The statuses a decision may set.
DECIDED = ("approved", "denied")


@dataclass(frozen=True)
class ApprovalRecord:
    """One approval request as received, and this app's decision on it.

    :param args: the arguments the hub asked about: an object, or (when
        they were longer than the hub sends) their JSON text cut at 1,000
        characters; ``args_hash`` always covers all of them.
    :param details: what a person deciding wants to see (route, scope,
        risk, policy, reason, summary, method, path); never used to decide.
    """

    approval_id: int
    job_id: str
    request_id: str
    tool: str
    args_hash: str
    subject: str | None = None
    args: dict[str, Any] | str = field(default_factory=dict)
    variant: str = "tool_approval_request"
    details: dict[str, Any] = field(default_factory=dict)
    status: ApprovalStatus = "pending"
    decision_id: str | None = None
    approver: str | None = None
    #: Unix seconds by the store's clock (set by the store).
    received_at: float = 0.0
    decided_at: float | None = None
    expires_at: float = 0.0
    #: The store key of the one call this approval admitted (set by the store when
    #: ``claim_approved`` spends it), and when; ``None`` while it is unspent.
    used_by: str | None = None
    used_at: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.approval_id, bool) or not isinstance(self.approval_id, int) or (
            self.approval_id < 1
        ):
            raise ValueError("approval_id must be a positive integer.")
        for name in ("job_id", "request_id", "tool", "args_hash"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ValueError(f"{name} must be a non-empty string.")
        if self.status not in ("pending", *DECIDED):
            raise ValueError("status must be 'pending', 'approved' or 'denied'.")

    @property
    def args_truncated(self) -> bool:
        """True when the hub sent the arguments cut, as text."""
        return isinstance(self.args, str)

    def is_live(self, now: float) -> bool:
        return now < self.expires_at

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (for listings, the CLI and pages)."""
        return {
            "approval_id": self.approval_id,
            "job_id": self.job_id,
            "request_id": self.request_id,
            "tool": self.tool,
            "subject": self.subject,
            "args": self.args,
            "args_truncated": self.args_truncated,
            "args_hash": self.args_hash,
            "variant": self.variant,
            "details": dict(self.details),
            "status": self.status,
            "decision_id": self.decision_id,
            "approver": self.approver,
            "received_at": self.received_at,
            "decided_at": self.decided_at,
            "expires_at": self.expires_at,
            "used_by": self.used_by,
            "used_at": self.used_at,
        }


@dataclass(frozen=True)
class ApprovalClaim:
    """What :meth:`~bailing_flask.stores.IdempotencyStore.claim_approved` answers.

    ``outcome`` is one of:

    * ``"reserved"``: the call now owns its key, and ``approval_id`` is the
      approval spent on it (``None`` only when the same token claimed again
      and none of the given approvals names this key);
    * ``"held"``: the key has a live entry (``reservation``: completed,
      in progress or uncertain); no approval was spent;
    * ``"used"``: every live approved record among those given was spent
      already (by another call, or by this key's earlier, released attempt);
    * ``"missing"``: none of them is a live approved record.
    """

    outcome: Literal["reserved", "held", "used", "missing"]
    approval_id: int | None = None
    reservation: Reservation | None = None


def encode_request(record: ApprovalRecord) -> str:
    """The parts of a record that never change after it was received, as JSON."""
    return json.dumps(
        {
            "request_id": record.request_id,
            "subject": record.subject,
            "args": record.args,
            "args_hash": record.args_hash,
            "variant": record.variant,
            "details": record.details,
        },
        ensure_ascii=True,
        separators=(",", ":"),
    )


def decode_record(
    approval_id: int,
    job_id: str,
    tool: str,
    request: str | bytes,
    *,
    status: str,
    received_at: float,
    expires_at: float,
    decision_id: str | None,
    approver: str | None,
    decided_at: float | None,
    used_by: str | None = None,
    used_at: float | None = None,
) -> ApprovalRecord:
    data = json.loads(request)
    return ApprovalRecord(
        approval_id=int(approval_id),
        job_id=job_id,
        request_id=data["request_id"],
        tool=tool,
        args_hash=data["args_hash"],
        subject=data.get("subject"),
        args=data.get("args", {}),
        variant=data.get("variant", "tool_approval_request"),
        details=data.get("details") or {},
        status=status,  # type: ignore[arg-type]
        decision_id=decision_id,
        approver=approver,
        received_at=float(received_at),
        decided_at=None if decided_at is None else float(decided_at),
        expires_at=float(expires_at),
        used_by=used_by,
        used_at=None if used_at is None else float(used_at),
    )


def check_approval_id(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError("approval_id must be a positive integer.")
    return value


def check_decision(status: str, decision_id: str, approver: str) -> None:
    if status not in DECIDED:
        raise ValueError("status must be 'approved' or 'denied'.")
    if not isinstance(decision_id, str) or not decision_id:
        raise ValueError("decision_id must be a non-empty string.")
    if not isinstance(approver, str) or not approver:
        raise ValueError("approver must be a non-empty string.")


def check_approval_ids(value: Sequence[int]) -> tuple[int, ...]:
    """A non-empty sequence of approval ids (not a string), as a tuple."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value:
        raise ValueError("approval_ids must be a non-empty sequence of approval ids.")
    return tuple(check_approval_id(approval_id) for approval_id in value)


def retention(value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or (
        value <= 0
    ):
        raise ValueError("retention_seconds must be positive and finite.")
    return float(value)


# --- the rules of a record's life, for the stores that compute it in Python ------------


def received(record: ApprovalRecord, now: float, retention_seconds: float) -> ApprovalRecord:
    """``record`` as kept when it arrives: pending, undecided, live ``retention_seconds``."""
    return dataclasses.replace(
        record, status="pending", decision_id=None, approver=None, decided_at=None,
        received_at=now, expires_at=now + retention_seconds,
    )


def decide(record: ApprovalRecord, status: ApprovalStatus, decision_id: str, approver: str,
           now: float, retention_seconds: float) -> ApprovalRecord:
    """A pending ``record`` decided now, kept at least ``retention_seconds`` from now."""
    return dataclasses.replace(
        record, status=status, decision_id=decision_id, approver=approver, decided_at=now,
        expires_at=max(record.expires_at, now + retention_seconds),
    )


def spendable(record: ApprovalRecord | None, now: float) -> bool:
    """Whether ``record`` is a live, approved record no call has spent yet."""
    return (record is not None and record.is_live(now) and record.status == "approved"
            and record.used_by is None)


def spent_by(record: ApprovalRecord, key: str, now: float) -> ApprovalRecord:
    """``record`` spent now on the call whose store key is ``key``."""
    return dataclasses.replace(record, used_by=key, used_at=now)


def refusal(records: Iterable[ApprovalRecord | None], now: float) -> ApprovalClaim:
    """The answer when none of ``records`` can be spent: ``used`` or ``missing``."""
    used = any(r is not None and r.is_live(now) and r.status == "approved" for r in records)
    return ApprovalClaim("used" if used else "missing")


def oldest_first(records: Iterable[ApprovalRecord]) -> list[ApprovalRecord]:
    """How every store lists records: by arrival, then by id."""
    return sorted(records, key=lambda r: (r.received_at, r.approval_id))
