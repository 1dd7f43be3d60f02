"""How :class:`~bailing_flask.stores.SQLiteStore` reads approval rows and spends one.

Kept apart from the store so that the one step that spends an approval and
reserves the call (see :meth:`~bailing_flask.stores.IdempotencyStore.claim_approved`)
reads in one place; the store runs it inside a ``BEGIN IMMEDIATE``
transaction, so the write lock is held from the first statement to the
commit and of any number of processes exactly one spends each approval.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any, Protocol

from bailing_flask.stores._deferred import _log_refused
from bailing_flask.stores._entries import (
    Entry,
    EntryMeta,
    Reservation,
    StoreUnavailable,
    _encode_meta,
    _outcome,
)
from bailing_flask.stores._sqlite_sql import (
    _APPROVAL_COLUMNS,
    _APPROVAL_USE_COLUMNS,
    _CLAIM,
    _SPEND_APPROVAL,
)
from bailing_flask.stores.approvals import (
    ApprovalClaim,
    ApprovalRecord,
    decode_record,
    refusal,
    spendable,
)


class SQLiteStore(Protocol):
    """What spending an approval uses of :class:`~bailing_flask.stores.SQLiteStore` (which imports this)."""

    @property
    def _pending(self) -> Any: ...
    @property
    def busy_timeout(self) -> float: ...
    @property
    def path(self) -> Any: ...
    @property
    def clock(self) -> Any: ...
    @property
    def _apply(self) -> Any: ...
    @property
    def _select(self) -> Any: ...
    @property
    def _wrote(self) -> Any: ...


def add_use_columns(conn: sqlite3.Connection) -> None:
    """Give a file written before approvals could be spent their ``used_by`` and ``used_at``.

    Runs in the write transaction that creates the tables, so of several
    workers opening the file together exactly one adds them.
    """
    have = {row[1] for row in conn.execute("PRAGMA table_info(bailing_approvals)")}
    for column, kind in _APPROVAL_USE_COLUMNS:
        if column not in have:
            conn.execute(f"ALTER TABLE bailing_approvals ADD COLUMN {column} {kind}")


def claim_approved(
    store: SQLiteStore, conn: sqlite3.Connection, key: str, approval_ids: Sequence[int],
    token: str, lease_seconds: float, retention_seconds: float, meta: EntryMeta, reserve: bool,
) -> ApprovalClaim:
    """:meth:`SQLiteStore.claim_approved <bailing_flask.stores.IdempotencyStore.claim_approved>`.

    One ``BEGIN IMMEDIATE`` transaction: the deferred completions of this
    process first (as in ``claim``, so a repeat is never answered "in
    progress" by a completion that only waits to be written), then the
    entry, the approvals, the spend and the reservation.
    """
    keep = max(lease_seconds, retention_seconds)
    pending = store._pending
    for _attempt in range(10):
        pending.wait_landed(key, store.busy_timeout)
        conn.execute("BEGIN IMMEDIATE")
        with pending.carried() as taken:
            try:
                refused = store._apply(conn, taken)
                now = store.clock()
                entry = store._select(conn, key, now) if reserve else None
                claim = spend_approval(conn, now, key, entry, approval_ids, token, (
                    now + lease_seconds, now + keep, _encode_meta(meta)) if reserve else None)
                conn.execute("COMMIT")
            except BaseException:
                _rollback_quietly(conn)
                raise
        store._wrote()
        _log_refused(refused)
        held = claim.reservation
        if held is None or held.entry.state != "in_progress" or not pending.holds(key):
            return claim
        # its completion was taken by the background writer: wait for it, look again
    raise StoreUnavailable(f"SQLite store at {store.path} is unavailable: the entry {key!r} "
                           "kept changing while it was being claimed")


def approval_from_row(row: tuple[Any, ...]) -> ApprovalRecord:
    """A ``bailing_approvals`` row (its columns in ``_APPROVAL_COLUMNS`` order) as a record."""
    approval_id, job_id, tool, status, received_at, expires_at, request = row[:7]
    decision_id, approver, decided_at, used_by, used_at = row[7:]
    return decode_record(
        approval_id, job_id, tool, request, status=status, received_at=received_at,
        expires_at=expires_at, decision_id=decision_id, approver=approver, decided_at=decided_at,
        used_by=used_by, used_at=used_at,
    )


def spend_approval(
    conn: sqlite3.Connection, now: float, key: str, entry: Entry | None,
    approval_ids: Sequence[int], token: str, reservation: tuple[float, float, str] | None,
) -> ApprovalClaim:
    """``claim_approved`` inside the caller's write transaction.

    ``entry`` is the live entry of ``key`` (``None``: there is none, or no
    reservation is wanted); ``reservation`` is ``(lease end, expires_at, meta
    JSON)`` of the entry to create, or ``None`` to spend the approval alone.
    """
    marks = ", ".join("?" * len(approval_ids))
    found = {row[0]: approval_from_row(tuple(row)) for row in conn.execute(
        f"SELECT {_APPROVAL_COLUMNS} FROM bailing_approvals WHERE approval_id IN ({marks})",
        tuple(approval_ids))}
    records = [found.get(approval_id) for approval_id in approval_ids]
    if entry is not None:
        if entry.state == "in_progress" and entry.token == token:
            mine = [r.approval_id for r in records if r is not None and r.used_by == key]
            return ApprovalClaim("reserved", approval_id=mine[0] if mine else None)
        return ApprovalClaim("held", reservation=Reservation(_outcome(entry, now), entry))
    for record in records:
        if record is not None and spendable(record, now):
            conn.execute(_SPEND_APPROVAL, (key, now, record.approval_id, now))
            if reservation is not None:
                lease_end, expires_at, meta_json = reservation
                conn.execute(_CLAIM, (key, token, now, lease_end, expires_at, meta_json))
            return ApprovalClaim("reserved", approval_id=record.approval_id)
    return refusal(records, now)


def _rollback_quietly(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # the original error is the one worth reporting
