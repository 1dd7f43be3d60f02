"""The embedded default: one SQLite file shared by the worker processes of a host.

Why SQLite and how it is used:

* it survives restarts and needs no server, which is what "remember that
  this refund already ran" needs on a single host;
* WAL mode lets readers (replays answered from the store) proceed while a
  writer commits, and the busy timeout makes concurrent writers queue
  instead of failing;
* every reservation is one ``INSERT ... ON CONFLICT DO UPDATE ... WHERE``
  statement (the entry there is dead): a write statement takes the write
  lock before it looks at the key, so of any number of processes reserving
  the same key exactly one writes it; a completion is one ``UPDATE``
  guarded by the token. One statement each, so a call is two short
  transactions (one, when completions are deferred: see below);
* connections are per thread and per process. A connection must never cross
  ``fork()`` (SQLite's own rule), so a store created before a pre-fork
  server forks opens fresh connections in each worker; the inherited ones
  are left untouched, because closing them in the child could disturb the
  parent's file locks;
* synchronous writes stay at SQLite's default (``FULL``): a reservation is
  on the disk before the side effect runs. That is the write at-most-once
  rests on: a reservation lost to a power cut would let a retry run the call
  again. A lost *completion* cannot do that (the reservation remains, and
  turns uncertain), so with ``BAILING_IDEMPOTENCY_DEFER_COMPLETION`` the
  completion is not committed on its own but with the process's next
  reservation, in the same transaction and the same flush (or by a
  background thread a few milliseconds later): one flush per call.

The file's parent directory and the schema are created on first use, not
when the store object is built, so configuring an app touches no disk.
"""

from __future__ import annotations

import builtins
import errno
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from bailing_flask.errors import ConfigurationError
from bailing_flask.stores._sqlite_file import FileGuard
from bailing_flask.stores._deferred import _Completion, _Later, _log_refused, _Pending
from bailing_flask.stores._entries import (
    Clock,
    Entry,
    EntryMeta,
    EntryState,
    ListState,
    Reservation,
    StoredResponse,
    StoreBusy,
    StoreUnavailable,
    _decode_headers,
    _decode_meta,
    _encode_headers,
    _encode_meta,
    _new_entry,
    _outcome,
    resolved_token,
)
from bailing_flask.stores._sqlite_sql import (
    _ADD_APPROVAL,
    _APPROVAL_COLUMNS,
    _APPROVALS_SCHEMA,
    _CLAIM,
    _CLEANUP,
    _COLUMNS,
    _COMPLETE,
    _LIST_FILTERS,
    _MARK_UNCERTAIN,
    _PRUNE_APPROVALS,
    _RECORD_DECISION,
    _RELEASE,
    _REMEMBER_SIGNATURE,
    _RESOLVE,
    _SCHEMA,
    _SCHEMA_VERSION,
    _TAKE_OVER,
)
from bailing_flask.stores._sqlite_approvals import (
    add_use_columns,
    approval_from_row,
    claim_approved,
)
from bailing_flask.stores.approvals import ApprovalClaim, ApprovalRecord, ApprovalStatus, encode_request
from bailing_flask.stores.base import IdempotencyStore, _check_seconds

__all__ = ["SQLiteStore"]

logger = logging.getLogger("bailing_flask")

#: seconds a deferred completion waits for a claim to take it along
_DEFER_DELAY = 0.005
#: commits of this process between two background checkpoints (a call writes 4-7 pages)
_CHECKPOINT_EVERY = 200
#: SQLite's own checkpoint, inside a commit, only if the background ones fall this far behind
_AUTOCHECKPOINT_PAGES = 10000
#: bytes the -wal file is cut back to after a checkpoint (it never shrinks otherwise)
_WAL_SIZE_LIMIT = 4 * 1024 * 1024
#: SQLITE_FULL, SQLITE_IOERR (a write the disk refused)
_DISK_FULL_CODES = (13, 10)
#: below this much free space on its file system the log is checkpointed and cut back often
_LOW_DISK_BYTES = 64 * 1024 * 1024
#: commits between two checkpoints on a nearly full disk
_LOW_DISK_CHECKPOINT_EVERY = 10

def _entry_from_row(row: tuple[Any, ...]) -> Entry:
    key, state, token, created_at, lease_expires_at, expires_at, meta = row[:7]
    status, headers, body, note = row[7:]
    response = None
    if status is not None:
        response = StoredResponse(int(status), _decode_headers(headers), bytes(body or b""))
    return Entry(
        key=key,
        state=state,
        token=token,
        created_at=created_at,
        lease_expires_at=lease_expires_at,
        expires_at=expires_at,
        meta=_decode_meta(meta),
        response=response,
        note=note,
    )


class SQLiteStore(IdempotencyStore):
    """Keep entries in a SQLite file, safe across threads and processes of one host.

    :param path: the database file; relative paths are resolved against the
        working directory when the store is created.
    :param clock: returns the current Unix time (injectable for tests).
    :param busy_timeout: seconds to wait for another process's write lock
        before giving up with :class:`StoreUnavailable`.
    """

    _pending: _Pending

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Clock = time.time,
        busy_timeout: float = 5.0,
    ) -> None:
        super().__init__(clock=clock)
        raw = os.fspath(path)
        if not raw or raw == ":memory:" or raw.startswith("file:"):
            raise ConfigurationError(
                "SQLiteStore needs a file path; a private in-memory database would not "
                "be shared between threads or workers (use MemoryStore / memory:// for tests)."
            )
        self.path = os.path.abspath(raw)
        try:
            self.busy_timeout = _check_seconds(busy_timeout, "busy_timeout")
        except ValueError as exc:
            raise ConfigurationError(f"SQLiteStore {exc}") from None
        self._local = threading.local()
        #: Every connection opened: id -> (pid, thread, connection). Strong
        #: references on purpose: connections inherited through fork() must
        #: never be closed (or garbage-collected) in the child. Plain dict
        #: operations are atomic, so no lock is needed (a lock held by another
        #: thread at fork time would deadlock the child).
        self._connections: dict[int, tuple[int, threading.Thread, sqlite3.Connection]] = {}
        #: Incremented by ``close`` so that threads drop their closed connections.
        self._generation = 0
        self._schema_ready = False
        #: deleted, replaced or read-only files are refused (see _sqlite_file)
        self._guard = FileGuard(self.path)
        self._writes = 0
        #: commits between two background checkpoints (fewer on a nearly full disk)
        self._checkpoint_every = _CHECKPOINT_EVERY
        #: held while the store's own threads use their connection, and by close(), which
        #: must never close a connection a statement is running on (SQLite would crash)
        self._background_lock = threading.Lock()
        self._background_pid = os.getpid()
        self._checkpoint_later = _Later(self._checkpoint, 0.0, "bailing-sqlite-checkpoint")
        #: completions deferred by complete_deferred(), written with the next claim
        self._defer_completions(self._write_pending, _DEFER_DELAY, "bailing-sqlite-completions",
                                self.path)

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

    # --- connections ----------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        """This thread's connection in this process, opened on demand."""
        local = self._local
        pid = os.getpid()
        conn: sqlite3.Connection | None = getattr(local, "conn", None)
        if conn is not None and local.pid == pid and local.generation == self._generation:
            if self._guard.unchanged():
                return conn
            self._guard.check()  # raises: the file is gone or another one
        local.conn = None
        conn = self._open()
        local.conn, local.pid, local.generation = conn, pid, self._generation
        return conn

    def _open(self) -> sqlite3.Connection:
        self._forget_dead_threads()
        self._guard.check()
        self._guard.check_writable()
        if not self._schema_ready:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
        conn = sqlite3.connect(
            self.path,
            timeout=self.busy_timeout,
            isolation_level=None,  # BEGIN/COMMIT are issued explicitly
            check_same_thread=False,  # only so that close() may close it
        )
        try:
            if not self._schema_ready:
                self._create_schema(conn)
                self._schema_ready = True
            # checkpoints run in the background (see _wrote); this is only the safety net
            conn.execute(f"PRAGMA wal_autocheckpoint = {_AUTOCHECKPOINT_PAGES}")
            conn.execute(f"PRAGMA journal_size_limit = {_WAL_SIZE_LIMIT}")
            self._watch_disk()
        except BaseException:
            conn.close()
            raise
        self._guard.opened(conn)
        self._connections[id(conn)] = (os.getpid(), threading.current_thread(), conn)
        return conn

    def _wrote(self) -> None:
        """Count a commit; every few hundred, checkpoint the log in the background.

        SQLite's own automatic checkpoint runs inside the commit that crosses
        its threshold: one request in a few hundred would copy the log back
        and wait for the disk twice more. A background thread does it instead
        (PASSIVE: it never waits for, nor blocks, a reader or a writer).
        """
        self._writes += 1
        if self._writes >= self._checkpoint_every:
            self._writes = 0
            self._checkpoint_later.soon()

    @contextmanager
    def _background(self) -> Iterator[None]:
        """What the store's background threads hold while they use the database."""
        pid = os.getpid()
        if self._background_pid != pid:  # forked: a parent's thread may have held it
            self._background_lock, self._background_pid = threading.Lock(), pid
        with self._background_lock:
            yield

    def _watch_disk(self) -> bool:
        """Whether the store's file system is nearly full; then checkpoint (and cut the log back
        to nothing) every few commits, so the log never takes the last free space."""
        try:
            info = os.statvfs(os.path.dirname(self.path))
            low = info.f_bavail * info.f_frsize < _LOW_DISK_BYTES
        except (OSError, AttributeError):  # no statvfs (Windows): the usual schedule
            low = False
        self._checkpoint_every = _LOW_DISK_CHECKPOINT_EVERY if low else _CHECKPOINT_EVERY
        return low

    def _checkpoint(self) -> None:
        mode = "TRUNCATE" if self._watch_disk() else "PASSIVE"
        try:
            with self._background():
                self._connection().execute(f"PRAGMA wal_checkpoint({mode})").fetchall()
        except (sqlite3.Error, OSError) as exc:
            logger.warning("bailing: background checkpoint of the SQLite idempotency store at %s "
                           "failed (%s: %s); SQLite checkpoints by itself later", self.path,
                           type(exc).__name__, exc)

    def _forget_dead_threads(self) -> None:
        """Close the connections of this process's finished threads.

        Threaded servers may start a thread per request; without this every
        one of them would leave an open connection behind.
        """
        pid = os.getpid()
        for ident, (owner, thread, _conn) in list(self._connections.items()):
            if owner == pid and not thread.is_alive():
                item = self._connections.pop(ident, None)
                if item is not None:
                    _close_quietly(item[2])

    def _create_schema(self, conn: sqlite3.Connection) -> None:
        """Switch the file to WAL and create the tables, retrying while it is busy.

        Changing the journal mode needs an exclusive lock and SQLite does not
        wait for it through the busy handler; when several workers start at
        once, all but one get "database is locked". Every step is idempotent,
        so the losers retry until the busy timeout has passed.
        """
        deadline = time.monotonic() + self.busy_timeout
        while True:
            try:
                self._create_schema_once(conn)
                return
            except sqlite3.OperationalError as exc:
                _rollback_quietly(conn)
                # A journal mode that did not change is retried too: SQLite may
                # report a lost race for the lock that way instead of an error.
                transient = any(word in str(exc) for word in ("locked", "busy", "WAL"))
                if not transient or time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)

    def _create_schema_once(self, conn: sqlite3.Connection) -> None:
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        if mode.lower() != "wal":
            # Persistent in the file: only the first process ever switches.
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise sqlite3.OperationalError(
                    f"could not switch to WAL journal mode (still {mode!r}); "
                    "is the file on a network or read-only file system?"
                )
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > _SCHEMA_VERSION:
            raise sqlite3.DatabaseError(
                f"schema version {version} was written by a newer bailing_flask"
            )
        if version == _SCHEMA_VERSION:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            _rollback_quietly(conn)
            raise

    def _unavailable(self, exc: BaseException) -> StoreUnavailable:
        if _is_disk_full(exc):
            self._checkpoint_every = _LOW_DISK_CHECKPOINT_EVERY
            self._give_back_wal()
        if isinstance(exc, sqlite3.OperationalError) and _is_locked(exc):
            return StoreBusy(f"SQLite store at {self.path} is busy: another process held its lock "
                             f"for more than {self.busy_timeout:g} s ({exc})")
        return StoreUnavailable(
            f"SQLite store at {self.path} is unavailable: {type(exc).__name__}: {exc}"
        )

    def _give_back_wal(self) -> None:
        """The disk is full: copy the log into the database and cut the ``-wal`` file to zero,
        so the space it held is free again and the store recovers by itself (no successful
        commit would ever trigger the background checkpoint otherwise)."""
        try:
            with self._background():
                self._connection().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except (sqlite3.Error, OSError) as exc:
            logger.warning("bailing: could not give back the log of the SQLite idempotency store "
                           "at %s on a full disk (%s)", self.path, exc)

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn every SQLite or file-system failure into :class:`StoreUnavailable`."""
        try:
            yield
        except (sqlite3.Error, OSError) as exc:
            raise self._unavailable(exc) from exc

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """A transaction that holds the write lock from its first statement on."""
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            # Also after a failed COMMIT: a transaction left open would make
            # every later BEGIN on this connection fail.
            _rollback_quietly(conn)
            raise

    @staticmethod
    def _select(conn: sqlite3.Connection, key: str, now: float) -> Entry | None:
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM bailing_idempotency WHERE key = ? AND expires_at > ?",
            (key, now),
        ).fetchone()
        return None if row is None else _entry_from_row(row)

    # --- the store API --------------------------------------------------------

    def _claim_row(
        self, key: str, token: str, lease_seconds: float, retention_seconds: float,
        meta: EntryMeta,
    ) -> tuple[float, Entry | None]:
        """Insert ``key`` for ``token`` (or take over a dead entry) in one statement.

        Answers ``(now, None)`` when the row was written, else ``(now, entry)``
        with the live entry that stopped it. The statement is its own
        transaction, and it takes the write lock before it looks at the key,
        so of any number of processes claiming the same key exactly one
        writes it (the same guarantee ``BEGIN IMMEDIATE`` gave, in one round
        trip through SQLite instead of four). The arguments were checked by
        the public method that called it.
        """
        lease = lease_seconds
        keep = lease if lease > retention_seconds else retention_seconds
        meta_json = _encode_meta(meta)
        pending = self._pending
        try:
            conn = self._connection()
            for _attempt in range(10):
                # a completion of this key that another thread's write carries lands first, so
                # a repeat in this process never overtakes the completion of the call it repeats
                pending.wait_landed(key, self.busy_timeout)
                if pending:
                    now, entry = self._claim_with_pending(conn, key, token, lease, keep, meta_json)
                    if entry is not None and entry.state == "in_progress" and pending.holds(key):
                        continue  # the background writer took it meanwhile: wait for it, look again
                    return now, entry
                now = self.clock()
                cursor = conn.execute(_CLAIM, (key, token, now, now + lease, now + keep,
                                               meta_json))
                if cursor.rowcount == 1:
                    self._wrote()
                    return now, None
                entry = self._select(conn, key, now)
                if entry is not None and entry.state == "in_progress" and pending.holds(key):
                    continue  # its completion was taken by the background writer: wait, look again
                if entry is not None:
                    return now, entry
                # deleted between the two statements (released, resolved): claim again
        except (sqlite3.Error, OSError) as exc:
            raise self._unavailable(exc) from exc
        raise StoreUnavailable(f"SQLite store at {self.path} is unavailable: the entry {key!r} "
                               "kept changing while it was being claimed")

    def _claim_with_pending(
        self, conn: sqlite3.Connection, key: str, token: str, lease: float, keep: float,
        meta_json: str,
    ) -> tuple[float, Entry | None]:
        """One transaction: the deferred completions of this process, then the claim.

        The completions are taken only once the write lock is held, so none of
        them is ever in flight unseen: a repeat of one of these calls, from any
        thread, either finds it still waiting here (and writes it first, in its
        own claim) or waits for this commit.
        """
        conn.execute("BEGIN IMMEDIATE")
        with self._pending.carried() as taken:
            try:
                refused = self._apply(conn, taken)
                now = self.clock()
                cursor = conn.execute(_CLAIM, (key, token, now, now + lease, now + keep,
                                               meta_json))
                entry = None if cursor.rowcount == 1 else self._select(conn, key, now)
                conn.execute("COMMIT")
            except BaseException:
                _rollback_quietly(conn)
                raise
        self._wrote()
        _log_refused(refused)
        if entry is None and cursor.rowcount != 1:  # pragma: no cover - the lock was held
            raise StoreUnavailable(f"SQLite store at {self.path}: entry {key!r} vanished")
        return now, entry

    @staticmethod
    def _apply(conn: sqlite3.Connection, items: list[_Completion]) -> list[_Completion]:
        """Write deferred completions inside the caller's transaction; those refused."""
        refused = []
        for item in items:
            response = item.response
            cursor = conn.execute(_COMPLETE, (
                item.now + item.retention, response.status, _encode_headers(response.headers),
                response.body, item.key, item.token, item.now,
            ))
            if cursor.rowcount != 1:
                refused.append(item)
        return refused

    def _write_pending(self, items: list[_Completion]) -> list[_Completion]:
        """The background write of completions no claim took along; those to try again."""
        try:
            with self._background(), self._errors(), self._write() as conn:
                refused = self._apply(conn, items)
        except StoreUnavailable as exc:
            logger.warning("bailing: deferred completions not written yet: %s", exc)
            return items
        self._wrote()
        _log_refused(refused)
        return []

    def _reserve(
        self,
        key: str,
        *,
        token: str,
        lease_seconds: float,
        retention_seconds: float,
        meta: EntryMeta,
    ) -> Reservation:
        now, entry = self._claim_row(key, token, lease_seconds, retention_seconds, meta)
        if entry is None:
            return Reservation("reserved", _new_entry(key, token, now, lease_seconds,
                                                      retention_seconds, meta))
        if entry.state == "in_progress" and entry.token == token:
            return Reservation("reserved", entry)
        return Reservation(_outcome(entry, now), entry)

    def _claim(
        self,
        key: str,
        *,
        token: str,
        lease_seconds: float,
        retention_seconds: float,
        meta: EntryMeta,
    ) -> Reservation | None:
        now, entry = self._claim_row(key, token, lease_seconds, retention_seconds, meta)
        if entry is None or (entry.state == "in_progress" and entry.token == token):
            return None
        return Reservation(_outcome(entry, now), entry)

    def _take_over(
        self, key: str, *, old_token: str, new_token: str, lease_seconds: float
    ) -> bool:
        with self._errors(), self._write() as conn:
            now = self.clock()
            entry = self._select(conn, key, now)
            if entry is None or entry.state != "in_progress":
                return False
            if entry.token == new_token:
                return True
            if entry.token != old_token:
                return False
            lease_end = now + lease_seconds
            conn.execute(_TAKE_OVER, (new_token, lease_end, lease_end, key))
            return True

    def _complete_in(
        self, conn: sqlite3.Connection, key: str, token: str, response: StoredResponse,
        retention_seconds: float,
    ) -> bool:
        now = self.clock()
        cursor = conn.execute(
            _COMPLETE,
            (now + retention_seconds, response.status, _encode_headers(response.headers), response.body,
             key, token, now),
        )
        if cursor.rowcount == 1:
            self._wrote()
            return True
        # not an in-progress entry of this token: completed by it already (a repeated
        # completion whose first answer was lost), or gone, or someone else's
        entry = self._select(conn, key, now)
        return entry is not None and entry.token == token and entry.state == "completed"

    def _complete(
        self, key: str, *, token: str, response: StoredResponse, retention_seconds: float
    ) -> bool:
        try:
            return self._complete_in(self._connection(), key, token, response, retention_seconds)
        except (sqlite3.Error, OSError) as exc:
            raise self._unavailable(exc) from exc

    def _mark_uncertain(self, key: str, *, token: str, note: str) -> bool:
        with self._errors():
            now = self.clock()
            cursor = self._connection().execute(_MARK_UNCERTAIN, (now, note, key, token, now))
            return cursor.rowcount == 1

    def _release(self, key: str, *, token: str) -> bool:
        with self._errors():
            cursor = self._connection().execute(_RELEASE, (key, token, self.clock()))
            return cursor.rowcount == 1

    def _get(self, key: str) -> Entry | None:
        with self._errors():
            return self._select(self._connection(), key, self.clock())

    def _list(self, *, state: ListState | None = None, limit: int = 100) -> list[Entry]:
        with self._errors():
            rows = self._connection().execute(
                f"SELECT {_COLUMNS} FROM bailing_idempotency WHERE expires_at > :now"
                f"{_LIST_FILTERS[state]} ORDER BY created_at, key LIMIT :limit",
                {"now": self.clock(), "limit": limit},
            ).fetchall()
        return [_entry_from_row(row) for row in rows]

    def _resolve(
        self,
        key: str,
        *,
        response: StoredResponse | None,
        note: str,
        retention_seconds: float,
        expected: tuple[EntryState, str] | None = None,
    ) -> bool:
        with self._errors(), self._write() as conn:  # one write transaction: read and write
            now = self.clock()
            entry = self._select(conn, key, now)
            if entry is None or (expected is not None and (entry.state, entry.token) != expected):
                return False
            if response is None:
                conn.execute("DELETE FROM bailing_idempotency WHERE key = ?", (key,))
            else:
                conn.execute(_RESOLVE, (
                    resolved_token(), now + retention_seconds, response.status,
                    _encode_headers(response.headers), response.body, note, key,
                ))
            return True

    def _cleanup(self, *, limit: int = 1000) -> int:
        removed = 0
        with self._errors():
            conn = self._connection()
            now = self.clock()
            # Each DELETE is its own short transaction over at most `limit`
            # rows found through the expires_at index: the write lock is
            # never held for long, however many rows have expired.
            for table in ("bailing_idempotency", "bailing_signatures"):
                if removed >= limit:
                    break
                cursor = conn.execute(_CLEANUP.format(table=table), (now, limit - removed))
                removed += max(cursor.rowcount, 0)
        return removed

    def _remember_signature(self, signature: str, *, ttl_seconds: float) -> bool:
        with self._errors():
            now = self.clock()
            cursor = self._connection().execute(_REMEMBER_SIGNATURE,
                                                (signature, now + ttl_seconds, now))
            self._wrote()
            return cursor.rowcount == 1

    def ping(self) -> None:
        with self._errors():
            self._connection().execute("SELECT 1 FROM bailing_idempotency LIMIT 1").fetchall()

    def close(self) -> None:
        """Close the connections this process opened, in every thread.

        Connections inherited through ``fork()`` are left alone. Using the
        store afterwards opens new connections.
        """
        self._pending.flush()
        self._checkpoint_later.cancel()  # SQLite checkpoints when the last connection closes
        pid = os.getpid()
        with self._background():  # not while a checkpoint or a deferred write runs
            self._generation += 1
            # none of this process's connections is left: the next one may use whatever file
            # is at the path now (a new one after a deletion), schema included
            self._guard.reset()
            self._schema_ready = False
            for ident, (owner, _thread, _conn) in list(self._connections.items()):
                if owner == pid:
                    item = self._connections.pop(ident, None)
                    if item is not None:
                        _close_quietly(item[2])


    # --- business approvals -----------------------------------------------------

    def _approvals_connection(self) -> sqlite3.Connection:
        conn = self._connection()
        if not getattr(self, "_approvals_ready", False):
            with self._write() as writer:
                for statement in _APPROVALS_SCHEMA.split(";"):
                    if statement.strip():
                        writer.execute(statement)
                add_use_columns(writer)  # a file written before approvals could be spent
            self._approvals_ready = True
        return conn

    _approval_from_row = staticmethod(approval_from_row)

    def _select_approval(self, conn: sqlite3.Connection, approval_id: int, now: float
                         ) -> ApprovalRecord | None:
        row = conn.execute(
            f"SELECT {_APPROVAL_COLUMNS} FROM bailing_approvals "
            "WHERE approval_id = ? AND expires_at > ?",
            (approval_id, now),
        ).fetchone()
        return None if row is None else self._approval_from_row(row)

    def _add_approval(self, record: ApprovalRecord, *, retention_seconds: float) -> ApprovalRecord:
        with self._errors():
            self._approvals_connection()
            with self._write() as conn:
                now = self.clock()
                existing = self._select_approval(conn, record.approval_id, now)
                if existing is not None:
                    return existing
                conn.execute(_PRUNE_APPROVALS, (now,))
                conn.execute(_ADD_APPROVAL, (record.approval_id, record.job_id, record.tool, now,
                                             now + retention_seconds, encode_request(record)))
                stored = self._select_approval(conn, record.approval_id, now)
                assert stored is not None
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
        with self._errors():
            self._approvals_connection()
            with self._write() as conn:
                now = self.clock()
                record = self._select_approval(conn, approval_id, now)
                if record is None or record.status != "pending":
                    return record
                conn.execute(_RECORD_DECISION, (status, decision_id, approver, now,
                                                now + retention_seconds, approval_id))
                return self._select_approval(conn, approval_id, now)

    def _get_approval(self, approval_id: int) -> ApprovalRecord | None:
        with self._errors():
            return self._select_approval(self._approvals_connection(), approval_id, self.clock())

    def find_approvals(self, *, job_id: str, tool: str) -> builtins.list[ApprovalRecord]:
        with self._errors():
            rows = self._approvals_connection().execute(
                f"SELECT {_APPROVAL_COLUMNS} FROM bailing_approvals WHERE job_id = ? AND tool = ? "
                "AND expires_at > ? ORDER BY received_at, approval_id",
                (job_id, tool, self.clock()),
            ).fetchall()
        return [self._approval_from_row(row) for row in rows]

    def _list_approvals(
        self, *, status: ApprovalStatus | None = None, limit: int = 100
    ) -> builtins.list[ApprovalRecord]:
        where = "" if status is None else " AND status = :status"
        with self._errors():
            rows = self._approvals_connection().execute(
                f"SELECT {_APPROVAL_COLUMNS} FROM bailing_approvals WHERE expires_at > :now"
                f"{where} ORDER BY received_at, approval_id LIMIT :limit",
                {"now": self.clock(), "status": status, "limit": limit},
            ).fetchall()
        return [self._approval_from_row(row) for row in rows]

    def _claim_approved(
        self, key: str, *, approval_ids: Sequence[int], token: str, lease_seconds: float,
        retention_seconds: float, meta: EntryMeta, reserve: bool = True,
    ) -> ApprovalClaim:
        """One ``BEGIN IMMEDIATE`` transaction (see ``_sqlite_approvals.claim_approved``)."""
        with self._errors():
            return claim_approved(self, self._approvals_connection(), key, approval_ids, token,
                                  lease_seconds, retention_seconds, meta, reserve)


def _rollback_quietly(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # the original error is the one worth reporting


def _close_quietly(conn: sqlite3.Connection) -> None:
    try:
        conn.close()
    except sqlite3.Error:
        pass


def _is_locked(exc: sqlite3.OperationalError) -> bool:
    """SQLITE_BUSY / SQLITE_LOCKED: another connection holds the lock (not a broken file)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return int(code) & 0xFF in (5, 6)
    text = str(exc)
    return "locked" in text or "busy" in text


def _is_disk_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError):
        return exc.errno == errno.ENOSPC
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(exc, sqlite3.Error) and code is not None:
        return int(code) & 0xFF in _DISK_FULL_CODES
    return isinstance(exc, sqlite3.Error) and ("full" in str(exc) or "disk I/O" in str(exc))
