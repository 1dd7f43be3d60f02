"""An idempotency store in the SQL database the app already runs: PostgreSQL or MySQL/MariaDB.

For apps on several hosts without Redis. How it keeps the promises of
:mod:`bailing_flask.stores.base`:

* every reservation is one insert-if-absent statement whose conflict the
  database itself decides on the primary key (never read-then-write), so of
  any number of hosts claiming one key exactly one writes it; every other
  mutation is one compare-and-set ``UPDATE``/``DELETE`` on the token (the
  statements, and why each is atomic: :mod:`._sql_statements`);
* a new call costs one round trip to claim and one to complete, each its
  own autocommit transaction, like the Redis store; nothing is held locked
  between them;
* the store's clock decides leases and retention, as in the other backends
  (hosts run NTP, as they must for signatures anyway);
* the tables (``bailing_store_*``) are created by ``flask bailing store
  init``, or from the DDL it prints with ``--sql``; the store checks their
  version before its first statement in each process and refuses, naming
  the command, while they are missing or older;
* dead rows are invisible at once and deleted by :meth:`SQLStore.cleanup`
  in batches of :data:`CLEANUP_BATCH` rows, each batch its own short
  transaction (the package runs it in a background thread now and then,
  never in a request).

``SQLAlchemy`` and a driver are optional dependencies (``pip install
bailing_flask[postgresql]`` or ``[mysql]``), imported when a store is built.
"""

from __future__ import annotations

import builtins
import secrets
import threading
import time
from collections.abc import Sequence
from typing import Any

from bailing_flask.stores._entries import (
    Clock,
    Entry,
    EntryMeta,
    EntryState,
    ListState,
    Reservation,
    StoredResponse,
    StoreUnavailable,
    _decode_headers,
    _decode_meta,
    _encode_headers,
    _encode_meta,
    _new_entry,
    _outcome,
    resolved_token,
)
from bailing_flask.stores._sql_engine import Database
from bailing_flask.stores._sql_schema import MAX_KEY_BYTES, Dialect, create_schema, schema_sql
from bailing_flask.stores._sql_statements import Statements, statements_for
from bailing_flask.stores.approvals import (
    ApprovalClaim,
    ApprovalRecord,
    ApprovalStatus,
    decode_record,
    encode_request,
)
from bailing_flask.stores.base import IdempotencyStore

__all__ = ["SQLStore", "CLEANUP_BATCH"]

#: rows one cleanup statement deletes at most (each batch is its own short transaction)
CLEANUP_BATCH = 200
#: attempts at a claim whose entry changes under it (released or resolved between statements)
_ATTEMPTS = 10


def _text(value: Any) -> Any:
    """A text column as read: MySQL's binary columns come back as bytes."""
    if value.__class__ is bytes:
        return value.decode("utf-8")
    return value


def _check_length(value: str, name: str) -> None:
    if len(value) > MAX_KEY_BYTES // 4 and len(value.encode("utf-8")) > MAX_KEY_BYTES:
        raise ValueError(f"{name} must be at most {MAX_KEY_BYTES} bytes of UTF-8 for the SQL store.")


class SQLStore(IdempotencyStore):
    """Keep entries in PostgreSQL or MySQL/MariaDB, shared by every host of the app.

    :param database: a SQLAlchemy URL (``postgresql+psycopg://user:pw@host/db``,
        ``mysql+pymysql://user:pw@host/db``; a password in it is never shown),
        the app's ``Engine`` (``SQLStore(db.engine)``: its pool is shared), or
        a Flask-SQLAlchemy ``db`` (its engine is looked up on first use).
    :param clock: returns the current Unix time (injectable for tests).

    Nothing is connected when the store is built. The tables must exist:
    ``flask bailing store init`` (or :meth:`create_schema`).
    """

    def __init__(self, database: Any, *, clock: Clock = time.time) -> None:
        super().__init__(clock=clock)
        self._db = Database(database)
        self._statements: Statements | None = None
        self._statements_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SQLStore({self.display!r})"

    @property
    def display(self) -> str:
        """Where the store is, for messages: ``driver://host:port/database``, no credentials."""
        where = self._db.where
        return where[len("SQL store at "):] if where.startswith("SQL store at ") else "(app engine)"

    @property
    def dialect(self) -> Dialect:
        """``"postgresql"`` or ``"mysql"`` (MariaDB included)."""
        return self._db.dialect

    # --- the schema ------------------------------------------------------------------------

    def schema_sql(self) -> str:
        """The DDL of the store's tables for this database (what ``store init --sql`` prints)."""
        return schema_sql(self.dialect)

    def create_schema(self) -> None:
        """Create or upgrade the store's tables (``flask bailing store init``); idempotent."""
        self._db.admin(lambda conn: create_schema(conn, self.dialect))
        self._db.forget_schema_check()

    def _sql(self) -> Statements:
        """The statements for this database, chosen once its server is known."""
        statements = self._statements
        if statements is None:
            with self._statements_lock:
                if self._statements is None:
                    self._statements = statements_for(self.dialect, self._returning())
                statements = self._statements
        return statements

    def _returning(self) -> bool:
        """Whether the server is a MariaDB with ``INSERT ... RETURNING`` (10.5 and later)."""
        if self.dialect != "mysql":
            return False

        def version(cursor: Any) -> str:
            cursor.execute("SELECT VERSION()")
            return str(_text(cursor.fetchone()[0]))

        text = self._db.run(version)
        if "mariadb" not in text.lower():
            return False
        try:
            major, minor = (int(part) for part in text.split("-")[0].split(".")[:2])
        except ValueError:
            return False
        return (major, minor) >= (10, 5)

    # --- encoding ----------------------------------------------------------------------------

    def _bin(self, value: str) -> Any:
        """A text value for a binary column of MySQL (UTF-8), as is for PostgreSQL."""
        return value.encode("utf-8") if self._db.dialect == "mysql" else value

    def _entry(self, key: str, row: Any) -> Entry:
        state, token, created_at, lease_expires_at, expires_at, meta, status, headers, body, note = row
        response = None
        if status is not None:
            response = StoredResponse(int(status), _decode_headers(headers), bytes(body or b""))
        return Entry(key=key, state=_text(state), token=_text(token), created_at=float(created_at),
                     lease_expires_at=float(lease_expires_at), expires_at=float(expires_at),
                     meta=_decode_meta(meta), response=response, note=_text(note))

    # --- the request path ----------------------------------------------------------------------

    def _claim_row(self, key: str, token: str, lease_seconds: float, retention_seconds: float,
               meta: EntryMeta) -> tuple[float, Any]:
        """Claim ``key`` for ``token`` in one statement: ``(now, None)`` if it is ours now,
        else ``(now, row)`` of the live entry that stopped it (the arguments were checked)."""
        _check_length(key, "key")
        _check_length(token, "token")
        statements = self._sql()
        lease = lease_seconds
        keep = lease if lease > retention_seconds else retention_seconds
        mysql = statements.dialect == "mysql"
        params: dict[str, Any] = {"key": key.encode("utf-8") if mysql else key,
                                  "token": token.encode("utf-8") if mysql else token,
                                  "meta": _encode_meta(meta)}

        def work(cursor: Any) -> tuple[float, Any]:
            for _attempt in range(_ATTEMPTS):
                now = self.clock()
                params["now"], params["lease"], params["expires"] = now, now + lease, now + keep
                found, row = _claim_once(cursor, statements, params)
                if found != "changed":
                    return now, row  # None when the key is the token's
            raise StoreUnavailable(f"{self._db.where} is unavailable: the entry {key!r} kept "
                                   "changing while it was being claimed")

        return self._db.run(work)

    def _claim(
        self,
        key: str,
        *,
        token: str,
        lease_seconds: float,
        retention_seconds: float,
        meta: EntryMeta,
    ) -> Reservation | None:
        """One statement, one round trip (MySQL without ``RETURNING``: two for a duplicate)."""
        now, row = self._claim_row(key, token, lease_seconds, retention_seconds, meta)
        if row is None:
            return None
        entry = self._entry(key, row)
        return Reservation(_outcome(entry, now), entry)

    def _reserve(
        self,
        key: str,
        *,
        token: str,
        lease_seconds: float,
        retention_seconds: float,
        meta: EntryMeta,
    ) -> Reservation:
        now, row = self._claim_row(key, token, lease_seconds, retention_seconds, meta)
        if row is not None:
            entry = self._entry(key, row)
            return Reservation(_outcome(entry, now), entry)
        held = self._get(key)
        if held is not None and held.token == token and held.state == "in_progress":
            return Reservation("reserved", held)
        return Reservation("reserved", _new_entry(key, token, now, lease_seconds,
                                                  retention_seconds, meta))

    def _complete(
        self, key: str, *, token: str, response: StoredResponse, retention_seconds: float
    ) -> bool:
        statements = self._sql()
        params = {"key": self._bin(key), "token": self._bin(token), "status": response.status,
                  "headers": _encode_headers(response.headers), "body": response.body}

        def work(cursor: Any) -> bool:
            now = self.clock()
            params["now"], params["expires"] = now, now + retention_seconds
            cursor.execute(statements.complete, params)
            if cursor.rowcount == 1:
                return True
            # completed by this token already (a repeat whose first answer was lost), or not ours
            return self._state_of(cursor, statements, key, now) == ("completed", token)

        return self._db.run(work)

    def _state_of(self, cursor: Any, statements: Statements, key: str, now: float
                  ) -> tuple[str, str] | None:
        cursor.execute(statements.token_of, {"key": self._bin(key), "now": now})
        row = cursor.fetchone()
        return None if row is None else (_text(row[0]), _text(row[1]))

    def _take_over(
        self, key: str, *, old_token: str, new_token: str, lease_seconds: float
    ) -> bool:
        statements = self._sql()

        def work(cursor: Any) -> bool:
            now = self.clock()
            cursor.execute(statements.take_over, {
                "key": self._bin(key), "old_token": self._bin(old_token),
                "new_token": self._bin(new_token), "lease": now + lease_seconds, "now": now})
            if cursor.rowcount == 1:
                return True
            return self._state_of(cursor, statements, key, now) == ("in_progress", new_token)

        return self._db.run(work)

    def _count(self, statement: str, params: dict[str, Any]) -> int:
        def work(cursor: Any) -> int:
            params["now"] = self.clock()
            cursor.execute(statement, params)
            return int(cursor.rowcount)

        return self._db.run(work)

    def _mark_uncertain(self, key: str, *, token: str, note: str) -> bool:
        return self._count(self._sql().mark_uncertain, {
            "key": self._bin(key), "token": self._bin(token), "note": self._bin(note)}) == 1

    def _release(self, key: str, *, token: str) -> bool:
        return self._count(self._sql().release,
                           {"key": self._bin(key), "token": self._bin(token)}) == 1

    def _get(self, key: str) -> Entry | None:
        statements = self._sql()

        def work(cursor: Any) -> Any:
            cursor.execute(statements.get, {"key": self._bin(key), "now": self.clock()})
            return cursor.fetchone()

        row = self._db.run(work)
        return None if row is None else self._entry(key, row)

    def _list(self, *, state: ListState | None = None, limit: int = 100) -> builtins.list[Entry]:
        statement = self._sql().list[state]

        def work(cursor: Any) -> Any:
            cursor.execute(statement, {"now": self.clock(), "limit": limit})
            return cursor.fetchall()

        return [self._entry(_text(row[0]), row[1:]) for row in self._db.run(work)]

    def _resolve(
        self,
        key: str,
        *,
        response: StoredResponse | None,
        note: str,
        retention_seconds: float,
        expected: tuple[EntryState, str] | None = None,
    ) -> bool:
        statements = self._sql()
        seen: dict[str, Any] = {"key": self._bin(key)}
        unchanged = ""  # the entry as the operator saw it, compared in the same statement
        if expected is not None:
            unchanged = " AND state = %(seen_state)s AND token = %(seen_token)s"
            seen.update(seen_state=expected[0], seen_token=self._bin(expected[1]))
        if response is None:
            return self._count(statements.resolve_delete + unchanged, seen) == 1

        def work(cursor: Any) -> int:
            now = self.clock()
            cursor.execute(statements.resolve_complete + unchanged, {
                **seen, "token": self._bin(resolved_token()),
                "status": response.status, "headers": _encode_headers(response.headers),
                "body": response.body, "note": self._bin(note), "now": now,
                "expires": now + retention_seconds})
            return int(cursor.rowcount)

        return self._db.run(work) == 1

    def _cleanup(self, *, limit: int = 1000) -> int:
        """Delete up to ``limit`` dead rows, :data:`CLEANUP_BATCH` at a time.

        Each batch is one short statement of its own (its own transaction),
        found through the ``expires_at`` index; on PostgreSQL it skips rows
        another transaction holds (``FOR UPDATE SKIP LOCKED``), so it never
        waits for, nor blocks, a claim. Dead rows are already invisible: this
        only reclaims space.
        """
        statements = self._sql()
        removed = 0
        for statement in statements.cleanup:
            while removed < limit:
                batch = min(CLEANUP_BATCH, limit - removed)
                count = max(self._count(statement, {"limit": batch}), 0)
                removed += count
                if count < batch:
                    break
        return removed

    def _remember_signature(self, signature: str, *, ttl_seconds: float) -> bool:
        _check_length(signature, "signature")
        statements = self._sql()
        nonce = secrets.token_hex(16)
        params = {"signature": self._bin(signature), "nonce": self._bin(nonce)}

        def work(cursor: Any) -> bool:
            now = self.clock()
            params["now"], params["expires"] = now, now + ttl_seconds
            cursor.execute(statements.remember_signature, params)
            if statements.dialect == "postgresql":
                return int(cursor.rowcount) == 1
            if statements.claim_answers:
                row = cursor.fetchone()
            elif cursor.rowcount == 1:
                return True
            else:
                cursor.execute(statements.nonce_of, {"signature": params["signature"],
                                                     "now": now})
                row = cursor.fetchone()
            return row is not None and _text(row[0]) == nonce

        return self._db.run(work)

    def ping(self) -> None:
        """Raise :class:`StoreUnavailable` unless the database answers and the tables are ready."""
        def work(cursor: Any) -> None:
            cursor.execute("SELECT 1")
            cursor.fetchall()

        self._db.forget_schema_check()
        self._db.run(work)

    def close(self) -> None:
        """Give back this process's connections (and close the engine the store made).

        An engine passed in belongs to the app and is left as it is. The store
        reconnects if it is used again.
        """
        self._db.close()

    # --- business approvals --------------------------------------------------------------------

    def _approval(self, row: Any) -> ApprovalRecord:
        (approval_id, job_id, tool, status, received_at, expires_at, request, decision_id,
         approver, decided_at, used_by, used_at) = row
        return decode_record(
            int(approval_id), _text(job_id), _text(tool), _text(request), status=_text(status),
            received_at=float(received_at), expires_at=float(expires_at),
            decision_id=_text(decision_id), approver=_text(approver),
            decided_at=None if decided_at is None else float(decided_at),
            used_by=_text(used_by), used_at=None if used_at is None else float(used_at),
        )

    def _live_approval(self, cursor: Any, approval_id: int, now: float) -> ApprovalRecord | None:
        cursor.execute(self._sql().get_approval, {"approval_id": approval_id, "now": now})
        row = cursor.fetchone()
        return None if row is None else self._approval(row)

    def _add_approval(self, record: ApprovalRecord, *, retention_seconds: float) -> ApprovalRecord:
        statements = self._sql()

        def work(cursor: Any) -> ApprovalRecord:
            now = self.clock()
            cursor.execute(statements.add_approval, {
                "approval_id": record.approval_id, "job_id": self._bin(record.job_id),
                "tool": self._bin(record.tool), "now": now, "expires": now + retention_seconds,
                "request": encode_request(record)})
            stored = self._live_approval(cursor, record.approval_id, now)
            if stored is None:  # pragma: no cover - a live row was just written or found
                raise StoreUnavailable(f"{self._db.where}: approval {record.approval_id} vanished")
            return stored

        return self._db.run(work)

    def _record_decision(
        self,
        approval_id: int,
        *,
        status: ApprovalStatus,
        decision_id: str,
        approver: str,
        retention_seconds: float,
    ) -> ApprovalRecord | None:
        statements = self._sql()

        def work(cursor: Any) -> ApprovalRecord | None:
            now = self.clock()
            cursor.execute(statements.record_decision, {
                "approval_id": approval_id, "status": status,
                "decision_id": self._bin(decision_id), "approver": self._bin(approver),
                "now": now, "expires": now + retention_seconds})
            return self._live_approval(cursor, approval_id, now)

        return self._db.run(work)

    def _get_approval(self, approval_id: int) -> ApprovalRecord | None:
        return self._db.run(lambda cursor: self._live_approval(cursor, approval_id, self.clock()))

    def find_approvals(self, *, job_id: str, tool: str) -> builtins.list[ApprovalRecord]:
        statement = self._sql().find_approvals

        def work(cursor: Any) -> Any:
            cursor.execute(statement, {"job_id": self._bin(job_id), "tool": self._bin(tool),
                                       "now": self.clock()})
            return cursor.fetchall()

        return [self._approval(row) for row in self._db.run(work)]

    def _list_approvals(
        self, *, status: ApprovalStatus | None = None, limit: int = 100
    ) -> builtins.list[ApprovalRecord]:
        statement = self._sql().list_approvals[status is not None]

        def work(cursor: Any) -> Any:
            cursor.execute(statement, {"status": status, "limit": limit, "now": self.clock()})
            return cursor.fetchall()

        return [self._approval(row) for row in self._db.run(work)]

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
        """One transaction: the approvals' rows locked, the call's claim, the conditional ``UPDATE``.

        The claim's row (inserted, or the entry that stopped it) is locked by
        the transaction, so a concurrent call of the same key waits for it and
        then finds it; ``UPDATE ... WHERE used_by IS NULL`` spends an approval
        for exactly one of several calls (the others wait for its row and find
        it spent). A call that finds no approval to spend rolls back its claim.
        """
        statements = self._sql()
        _check_length(key, "key")
        _check_length(token, "token")
        lease = lease_seconds
        keep = lease if lease > retention_seconds else retention_seconds
        params: dict[str, Any] = {"key": self._bin(key), "token": self._bin(token),
                                  "meta": _encode_meta(meta)}

        def spent_on_key(cursor: Any, now: float) -> int | None:
            for approval_id in approval_ids:
                cursor.execute(statements.approvals_used_by,
                               {"approval_id": approval_id, "now": now})
                row = cursor.fetchone()
                if row is not None and _text(row[1]) == key:
                    return int(row[0])
            return None

        # the approvals' rows first, always in id order: callers of one approval (or one key
        # and its approvals) take turns instead of meeting in the entries' index (InnoDB's
        # duplicate-key locks deadlock there)
        lock = statements.lock_approvals.format(
            ids=", ".join(str(int(approval_id)) for approval_id in sorted(set(approval_ids))))

        def work(cursor: Any) -> ApprovalClaim:
            cursor.execute(lock)
            cursor.fetchall()
            now = self.clock()
            if reserve:
                params["now"], params["lease"], params["expires"] = now, now + lease, now + keep
                found, row = _claim_once(cursor, statements, params)
                if found == "changed":
                    raise _Answer(None)  # released meanwhile: the whole step again
                if found == "held":
                    entry = self._entry(key, row)
                    return ApprovalClaim("held", reservation=Reservation(_outcome(entry, now),
                                                                         entry))
                if found == "ours":  # a repeat whose answer was lost: spent by it already
                    return ApprovalClaim("reserved", approval_id=spent_on_key(cursor, now))
            for approval_id in approval_ids:
                cursor.execute(statements.spend_approval,
                               {"key": params["key"], "now": now, "approval_id": approval_id})
                if cursor.rowcount == 1:
                    return ApprovalClaim("reserved", approval_id=approval_id)
            for approval_id in approval_ids:
                cursor.execute(statements.approvals_used_by,
                               {"approval_id": approval_id, "now": now})
                if cursor.fetchone() is not None:
                    raise _Answer(ApprovalClaim("used"))  # rolls the claim back
            raise _Answer(ApprovalClaim("missing"))

        for _attempt in range(_ATTEMPTS):
            try:
                return self._db.transaction(work)
            except _Answer as answer:
                if answer.claim is not None:
                    return answer.claim
        raise StoreUnavailable(f"{self._db.where} is unavailable: the entry {key!r} kept "
                               "changing while it was being claimed")


class _Answer(Exception):
    """The answer of a step whose transaction must be rolled back (``None``: try again)."""

    def __init__(self, claim: ApprovalClaim | None) -> None:
        super().__init__()
        self.claim = claim


def _claim_once(cursor: Any, statements: Statements, params: dict[str, Any]) -> tuple[str, Any]:
    """One claim statement (``params`` complete, ``now`` included): what it found.

    ``("claimed", None)``: the key is the token's now; ``("ours", None)``: the token
    held it already (a repeat whose answer was lost); ``("held", row)``: the live entry
    of another call; ``("changed", None)``: it went away between two statements
    (released, resolved): claim again.
    """
    cursor.execute(statements.claim, params)
    row = None
    if statements.claim_answers:
        row = cursor.fetchone()
        if row is not None and (row[0] == "claimed" or row[10] == 0):
            return "claimed", None  # PostgreSQL says so; MariaDB: claims 0, written now
    elif cursor.rowcount == 1:
        return "claimed", None  # a new row (a duplicate counts 2)
    if row is None:
        # MySQL's duplicate, or PostgreSQL's row committed after this statement's snapshot
        # was taken: read it with a statement of its own
        cursor.execute(statements.claimed, {"key": params["key"], "now": params["now"]})
        row = cursor.fetchone()
        if row is None:
            return "changed", None
        if row[10] == 0:
            return "claimed", None  # MySQL: a dead row this statement took over
    if row[0] == "in_progress" and row[1] == params["token"]:
        return "ours", None  # this token held it already (a repeat whose answer was lost)
    return "held", row[:10]
