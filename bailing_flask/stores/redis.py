"""An idempotency store in Redis, for apps that run on several hosts.

How it keeps the promises of :mod:`bailing_flask.stores.base`:

* every mutation is one Lua script, so the check of state and token and the
  write happen atomically on the server, whatever the number of hosts;
* the store's clock decides leases and retention, exactly as in the other
  backends (hosts must run NTP, as they must for signatures anyway); every
  key also gets a Redis TTL at the end of its retention, so Redis reclaims
  the memory by itself and :meth:`RedisStore.cleanup` is rarely needed;
* each entry is a hash, so response bodies are kept binary-safe;
* the client has short socket timeouts and no automatic retries: a retried
  write whose first attempt reached the server could report the wrong
  outcome, and a request should fail fast with 503 rather than hang. After
  a Redis restart the connection pool reconnects on the next command and
  scripts are reloaded on ``NOSCRIPT``, so the same store object keeps
  working.

``redis`` (redis-py) is an optional dependency: ``pip install
bailing_flask[redis]``. Redis Cluster is not supported (the scripts that
clean up touch keys of several slots).

At-most-once needs a Redis that keeps what it was told: on first use the
store reads the server's persistence and eviction settings and logs a
warning, naming the setting to change, when completed records would not
survive a restart (no ``appendonly yes``) or could be evicted (a
``maxmemory-policy`` other than ``noeviction``): a forgotten record lets a
replayed call run its side effect again.
"""

from __future__ import annotations

import builtins
import itertools
import logging
import math
import os
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from heapq import nsmallest
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from bailing_flask.errors import ConfigurationError
from bailing_flask.stores._deferred import _Completion, _log_refused, _Pending
from bailing_flask.stores._entries import (
    Clock,
    Entry,
    EntryMeta,
    EntryState,
    ListState,
    Reservation,
    StoredResponse,
    StoreUnavailable,
    _encode_headers,
    _encode_meta,
    _matches,
    _new_entry,
    _outcome,
    resolved_token,
)
from bailing_flask.stores._redis_codec import (
    _approval_from_hash,
    _entry_from_hash,
    _glob_escape,
    _millis,
    _num,
    _pack,
    _pairs,
)
from bailing_flask.stores._redis_lua import (
    _ADD_APPROVAL,
    _CLAIM,
    _CLAIM_APPROVED,
    _CLEANUP,
    _COMPLETE,
    _MARK_UNCERTAIN,
    _RECORD_DECISION,
    _RELEASE,
    _REMEMBER_SIGNATURE,
    _RESERVE,
    _RESOLVE,
    _TAKE_OVER,
)
from bailing_flask.stores._redis_persistence import read_settings, settings_warnings
from bailing_flask.stores.approvals import (
    ApprovalClaim,
    ApprovalRecord,
    ApprovalStatus,
    encode_request,
    oldest_first,
)
from bailing_flask.stores.base import IdempotencyStore

if TYPE_CHECKING:  # pragma: no cover
    import redis as redis_module

__all__ = ["RedisStore"]

logger = logging.getLogger("bailing_flask")

#: Seconds to wait for a connection or an answer before StoreUnavailable.
SOCKET_TIMEOUT = 2.0
#: seconds a deferred completion waits for a command to travel with
_DEFER_DELAY = 0.005
_SCAN_COUNT = 500
#: how many times a claim looks again at an entry that kept changing (or whose completion
#: this process's background writer was sending) before it answers with what it saw
_LOOKS = 10


def _import_redis() -> Any:
    try:
        import redis
        import redis.backoff
        import redis.retry
    except ImportError:  # pragma: no cover - exercised only without redis-py
        raise ConfigurationError(
            "The Redis idempotency store needs redis-py: pip install 'bailing_flask[redis]'."
        ) from None
    return redis


def _redacted(url: str) -> str:
    """``scheme://host:port/db``, with any user name and password left out."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or "localhost"
        port = parts.port or 6379
    except ValueError:
        return "<invalid Redis URL>"
    return f"{parts.scheme}://{host}:{port}{parts.path or '/0'}"


def _describe_client(client: Any) -> str:
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {})
    return f"redis://{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"


class RedisStore(IdempotencyStore):
    """Keep entries in Redis, shared by every host of the app.

    :param url_or_client: a ``redis://`` / ``rediss://`` URL (a password in it
        is fine and never shown), or a ready ``redis.Redis`` client created
        with ``decode_responses=False`` (its own timeouts and retries apply).
    :param clock: returns the current Unix time (injectable for tests).
    :param prefix: put in front of every key, so several apps can share a
        Redis database.
    :param check_persistence: on first use, read the server's persistence
        and eviction settings and log a warning if completed records could
        be lost (:meth:`persistence_warnings`). ``False`` only for a Redis
        that is deliberately disposable (tests).
    """

    _pending: _Pending

    def __init__(
        self,
        url_or_client: str | redis_module.Redis,
        *,
        clock: Clock = time.time,
        prefix: str = "bailing:",
        check_persistence: bool = True,
    ) -> None:
        super().__init__(clock=clock)
        self._persistence_pending = bool(check_persistence)
        self._persistence_lock = threading.Lock()
        redis = _import_redis()
        self._errors_caught: tuple[type[BaseException], ...] = (redis.exceptions.RedisError,)
        if isinstance(url_or_client, str):
            self.display = _redacted(url_or_client)
            try:
                client = redis.Redis.from_url(
                    url_or_client,
                    socket_timeout=SOCKET_TIMEOUT,
                    socket_connect_timeout=SOCKET_TIMEOUT,
                    retry=redis.retry.Retry(redis.backoff.NoBackoff(), 0),
                )
            except ValueError:
                raise ConfigurationError(
                    f"Invalid Redis URL for the idempotency store ({self.display}); expected "
                    "redis://[:password@]host[:port][/db] or rediss://..."
                ) from None
            self._owns_client = True
        else:
            client = url_or_client
            self.display = _describe_client(client)
            self._owns_client = False
        kwargs = getattr(client.connection_pool, "connection_kwargs", {})
        if kwargs.get("decode_responses"):
            raise ConfigurationError(
                "RedisStore needs a client created with decode_responses=False: "
                "stored response bodies are bytes."
            )
        if not isinstance(prefix, str):
            raise ConfigurationError("RedisStore prefix must be a string.")
        self.prefix = prefix
        self._client = client
        self._entry_ns = f"{prefix}idem:"
        self._signature_ns = f"{prefix}sig:"
        self._cleanup_cursor = 0
        self._response_error: type[BaseException] = redis.exceptions.ResponseError
        self._no_script: type[BaseException] = redis.exceptions.NoScriptError
        self._connection_error: type[BaseException] = redis.exceptions.ConnectionError
        self._local = threading.local()
        #: connections this store holds, one per thread: checkout number -> (pid, thread,
        #: connection). Never keyed by the connection: the pool hands an ended thread's
        #: connection, the same object, to the next thread, whose entry a stale look at the
        #: ended one must not take for its own.
        self._held: dict[int, tuple[int, threading.Thread, Any]] = {}
        self._checkouts = itertools.count()
        self._generation = 0
        self._defer_completions(self._write_pending, _DEFER_DELAY, "bailing-redis-completions",
                                self.display)
        encoder = client.connection_pool.get_encoder()
        #: how the client turns str arguments into bytes (the request path packs its own)
        self._encoding: tuple[str, str] = (encoder.encoding, encoder.encoding_errors)
        self._entry_ns_bytes = self._entry_ns.encode(*self._encoding)
        self._claim_script = client.register_script(_CLAIM)
        self._reserve_script = client.register_script(_RESERVE)
        self._take_over_script = client.register_script(_TAKE_OVER)
        self._complete_script = client.register_script(_COMPLETE)
        self._release_script = client.register_script(_RELEASE)
        self._mark_uncertain_script = client.register_script(_MARK_UNCERTAIN)
        self._resolve_script = client.register_script(_RESOLVE)
        self._remember = client.register_script(_REMEMBER_SIGNATURE)
        self._cleanup_script = client.register_script(_CLEANUP)
        self._approval_ns = f"{prefix}appr:"
        self._approval_job_ns = f"{prefix}apprjob:"
        self._add_approval_script = client.register_script(_ADD_APPROVAL)
        self._record_decision_script = client.register_script(_RECORD_DECISION)
        self._claim_approved_script = client.register_script(_CLAIM_APPROVED)

    def __repr__(self) -> str:
        return f"RedisStore({self.display!r}, prefix={self.prefix!r})"

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn every redis-py failure into :class:`StoreUnavailable`.

        redis-py's messages name the host and the cause, never the password;
        the URL itself is only shown redacted.
        """
        if self._persistence_pending:
            self._check_persistence_once()
        with self._unchecked_errors():
            yield

    # -- does the server keep what it is told? ----------------------------------------

    def persistence_warnings(self) -> list[str]:
        """Why completed records could disappear, read from the server; ``[]`` if nothing.

        Reads ``appendonly``, ``save`` and the ``maxmemory`` settings with
        ``CONFIG GET``, or, where ``CONFIG`` is disabled (managed Redis), what
        ``INFO`` says. Each message names the setting to change.

        :raises StoreUnavailable: if the server cannot be reached at all.
        """
        with self._unchecked_errors():
            settings = read_settings(self._client, self._errors_caught)
        return settings_warnings(settings, f"The Redis idempotency store at {self.display}")

    @contextmanager
    def _unchecked_errors(self) -> Iterator[None]:
        try:
            yield
        except self._errors_caught as exc:
            raise self._unavailable(exc) from exc

    def _check_persistence_once(self) -> None:
        """Log :meth:`persistence_warnings` once per store, never failing the caller."""
        with self._persistence_lock:
            if not self._persistence_pending:
                return
            self._persistence_pending = False
        try:
            problems = self.persistence_warnings()
        except StoreUnavailable:
            self._persistence_pending = True  # unreachable now: look again on the next use
            return
        except Exception:  # a check must never break a side effect
            logger.warning("bailing: could not check the persistence of the Redis idempotency "
                           "store at %s", self.display, exc_info=True)
            return
        for problem in problems:
            logger.warning("bailing: %s", problem)

    def _key(self, key: str) -> str:
        return self._entry_ns + key

    def _scan(self, pattern: str, cursor: int = 0) -> Iterator[tuple[int, list[bytes]]]:
        """SCAN batches matching ``pattern`` (the prefix is escaped for globbing)."""
        while True:
            cursor, keys = self._client.scan(cursor=cursor, match=pattern, count=_SCAN_COUNT)
            yield cursor, keys
            if cursor == 0:
                return

    # -- the request path: one connection per thread, one round trip per call -------

    def _conn(self) -> Any:
        """This thread's connection, checked out of the client's pool and kept.

        The pool's own checkout (a lock, a poll of the socket, bookkeeping) costs
        more than the command it prepares; a connection per thread needs none
        of it. Dropped on fork (never used in a child), given back by
        :meth:`close` and when its thread has ended.
        """
        local = self._local
        pid = os.getpid()
        conn = getattr(local, "conn", None)
        if conn is not None and local.pid == pid and local.generation == self._generation:
            return conn
        self._release_dead_threads(pid)
        pool = self._client.connection_pool
        try:
            conn = pool.get_connection()
        except TypeError:  # pragma: no cover - redis-py before 5.3 wants a command name
            conn = pool.get_connection("EVALSHA")
        self._held[next(self._checkouts)] = (pid, threading.current_thread(), conn)
        local.conn, local.pid, local.generation = conn, pid, self._generation
        return conn

    def _release_dead_threads(self, pid: int) -> None:
        pool = self._client.connection_pool
        for ident, (owner, thread, conn) in list(self._held.items()):
            if owner == pid and not thread.is_alive() and self._held.pop(ident, None) is not None:
                pool.release(conn)

    def _run(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """Send ``commands`` together and read every reply: one round trip.

        An error reply is returned in its place (the connection stays in step);
        the client's retry policy applies to connection failures, as for any
        command of that client; scripts the server lost (a restart) are loaded
        and the whole batch sent again, which is safe: every script repeats
        harmlessly for the token that already ran it.
        """
        if self._persistence_pending:
            self._check_persistence_once()
        for _attempt in range(2):
            replies = self._send(commands)
            if not any(isinstance(reply, self._no_script) for reply in replies):
                return replies
            for script in self._scripts_of(commands):
                script.sha = self._client.script_load(script.script)
        return replies

    def _send(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        conn = self._conn()
        packed = _pack(commands)
        count = len(commands)
        response_error = self._response_error
        connection_error = self._connection_error

        def attempt() -> list[Any]:
            try:
                stale = conn.can_read()
            except connection_error:  # closed by the server: a restart
                stale = True
            if stale:
                # readable while idle: nothing of ours was sent on it since, so reconnecting
                # first is safe (the pool does the same before it hands a connection out)
                conn.disconnect()
            conn.send_packed_command([packed], check_health=False)
            replies = []
            for _ in range(count):
                try:
                    replies.append(conn.read_response())
                except response_error as exc:
                    replies.append(exc)
            return replies

        try:
            replies: list[Any] = conn.retry.call_with_retry(
                attempt, lambda _error: conn.disconnect())
            return replies
        except BaseException:
            conn.disconnect()  # never leave replies unread on a kept connection
            raise

    def _scripts_of(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        shas = {command[1] for command in commands}
        return [script for script in (self._claim_script, self._complete_script, self._claim_approved_script)
                if script.sha.encode("ascii") in shas]

    def _unavailable(self, exc: BaseException) -> StoreUnavailable:
        return StoreUnavailable(
            f"Redis store at {self.display} is unavailable: {type(exc).__name__}: {exc}"
        )

    def _claim_command(
        self, key: str, token: str, lease_seconds: float, retention_seconds: float,
        meta: EntryMeta,
    ) -> tuple[float, tuple[bytes, ...]]:
        """The claim script's EVALSHA, packed (the arguments were checked by the caller)."""
        lease, retention = lease_seconds, retention_seconds
        now = self.clock()
        keep = lease if lease > retention else retention
        encoding, errors = self._encoding
        return now, (
            b"EVALSHA", self._claim_script.sha.encode("ascii"), b"1",
            self._entry_ns_bytes + key.encode(encoding, errors), repr(now).encode(),
            token.encode(encoding, errors), repr(now + lease).encode(),
            repr(now + keep).encode(), b"%d" % _millis(keep), _encode_meta(meta).encode(),
        )

    def _complete_command(self, item: _Completion) -> tuple[bytes, ...]:
        response = item.response
        encoding, errors = self._encoding
        return (
            b"EVALSHA", self._complete_script.sha.encode("ascii"), b"1",
            self._entry_ns_bytes + item.key.encode(encoding, errors), repr(item.now).encode(),
            item.token.encode(encoding, errors), repr(item.now + item.retention).encode(),
            b"%d" % _millis(item.retention), b"%d" % response.status,
            _encode_headers(response.headers).encode(), response.body,
        )

    def _with_pending(self, key: str, command: tuple[Any, ...]) -> Any:
        """Send ``command`` with the deferred completions waiting; its reply.

        A completion of ``key`` taken by another thread is waited for first, so
        it always reaches the server before this command does.
        """
        pending = self._pending
        pending.wait_landed(key, 2 * SOCKET_TIMEOUT)
        with pending.carried() as taken:
            try:
                replies = self._run([self._complete_command(item) for item in taken] + [command])
            except self._errors_caught as exc:
                raise self._unavailable(exc) from exc
            if taken:
                pending.put_back(self._settle(taken, replies))
        reply = replies[-1]
        if isinstance(reply, BaseException):
            raise self._unavailable(reply) from reply
        return reply

    def _overtook(self, key: str, entry: Entry) -> bool:
        """Whether a claim found ``key`` in progress while this process holds its completion.

        The background writer can take a deferred completion between the
        claim's wait for writes in flight and the batch it sends, which then
        reaches the server first: the claim looks again once it has landed,
        so a repeat in this process gets the answer, not ``in_progress``.
        """
        return entry.state == "in_progress" and self._pending.holds(key)

    def _settle(self, items: list[_Completion], replies: list[Any]) -> list[_Completion]:
        """Log the completions the server refused; those that failed, to try again."""
        failed = [item for item, reply in zip(items, replies) if isinstance(reply, BaseException)]
        _log_refused([item for item, reply in zip(items, replies)
                      if not reply and not isinstance(reply, BaseException)])
        return failed

    def _write_pending(self, items: list[_Completion]) -> list[_Completion]:
        """The background write of completions no command took along; those to try again."""
        try:
            replies = self._run([self._complete_command(item) for item in items])
        except self._errors_caught as exc:
            logger.warning("bailing: deferred completions not written yet: %s", exc)
            return items
        return self._settle(items, replies)

    def _claim(
        self,
        key: str,
        *,
        token: str,
        lease_seconds: float,
        retention_seconds: float,
        meta: EntryMeta,
    ) -> Reservation | None:
        """One script, one round trip (with any deferred completions in the same batch)."""
        for _attempt in range(_LOOKS):
            now, command = self._claim_command(key, token, lease_seconds, retention_seconds, meta)
            reply = self._with_pending(key, command)
            if not isinstance(reply, list):  # 1: claimed now, 2: this token held it already
                return None
            entry = _entry_from_hash(key, _pairs(reply))
            if not self._overtook(key, entry):
                break
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
        for _attempt in range(_LOOKS):
            now, command = self._claim_command(key, token, lease_seconds, retention_seconds, meta)
            reply = self._with_pending(key, command)
            if isinstance(reply, list):
                entry = _entry_from_hash(key, _pairs(reply))
                if self._overtook(key, entry) and _attempt < _LOOKS - 1:
                    continue
                return Reservation(_outcome(entry, now), entry)
            if reply == 1:
                return Reservation("reserved", _new_entry(key, token, now, lease_seconds,
                                                          retention_seconds, meta))
            held = self._get(key)  # this token held it already: report the entry as it is
            if held is not None:
                return Reservation("reserved", held)
        raise StoreUnavailable(f"Redis store at {self.display} is unavailable: the entry "
                               f"{key!r} kept changing while it was being reserved")

    def _take_over(
        self, key: str, *, old_token: str, new_token: str, lease_seconds: float
    ) -> bool:
        lease = lease_seconds
        now = self.clock()
        with self._errors():
            return bool(
                self._take_over_script(
                    keys=[self._key(key)],
                    args=[_num(now), old_token, new_token, _num(now + lease), _millis(lease)],
                )
            )

    def _complete(
        self, key: str, *, token: str, response: StoredResponse, retention_seconds: float
    ) -> bool:
        item = _Completion(key, token, self.clock(), retention_seconds, response)
        return bool(self._with_pending(key, self._complete_command(item)))

    def _mark_uncertain(self, key: str, *, token: str, note: str) -> bool:
        with self._errors():
            return bool(self._mark_uncertain_script(keys=[self._key(key)],
                                             args=[_num(self.clock()), token, note]))

    def _release(self, key: str, *, token: str) -> bool:
        with self._errors():
            return bool(self._release_script(keys=[self._key(key)], args=[_num(self.clock()), token]))

    def _get(self, key: str) -> Entry | None:
        with self._errors():
            fields = self._client.hgetall(self._key(key))
        if not fields:
            return None
        entry = _entry_from_hash(key, fields)
        return entry if entry.expires_at > self.clock() else None

    def _list(self, *, state: ListState | None = None, limit: int = 100) -> list[Entry]:
        """Live entries, oldest first; scans every key under the prefix.

        Meant for operators, not for requests: the cost grows with the number
        of stored entries (memory stays bounded by ``limit``).
        """
        now = self.clock()
        found: dict[str, Entry] = {}  # SCAN may return a key twice
        with self._errors():
            for _cursor, keys in self._scan(_glob_escape(self._entry_ns) + "*"):
                if not keys:
                    continue
                pipe = self._client.pipeline(transaction=False)
                for redis_key in keys:
                    pipe.hgetall(redis_key)
                for redis_key, fields in zip(keys, pipe.execute()):
                    if not fields:
                        continue  # expired or deleted since SCAN saw it
                    key = redis_key.decode("utf-8")[len(self._entry_ns) :]
                    entry = _entry_from_hash(key, fields)
                    if entry.expires_at > now and _matches(entry, state, now):
                        found[key] = entry
                # Keep memory bounded: only the oldest `limit` can be returned.
                if len(found) > 4 * limit + _SCAN_COUNT:
                    found = {e.key: e for e in _oldest(found.values(), limit)}
        return _oldest(found.values(), limit)

    def _resolve(
        self,
        key: str,
        *,
        response: StoredResponse | None,
        note: str,
        retention_seconds: float,
        expected: tuple[EntryState, str] | None = None,
    ) -> bool:
        retention = retention_seconds
        now = self.clock()
        state, token = expected if expected is not None else ("", "")
        if response is None:
            args: list[Any] = [_num(now), "delete", state, token]
        else:
            args = [
                _num(now),
                "complete",
                state,
                token,
                resolved_token(),
                _num(now + retention),
                _millis(retention),
                response.status,
                _encode_headers(response.headers),
                response.body,
                note,
            ]
        with self._errors():
            return bool(self._resolve_script(keys=[self._key(key)], args=args))

    def _cleanup(self, *, limit: int = 1000) -> int:
        """Remove up to ``limit`` records that are dead by the store's clock.

        Redis already deletes records at the end of their TTL, so this only
        matters when the clock runs ahead of Redis's. Each call visits a
        bounded number of keys and resumes the scan where the previous call
        stopped, so repeated calls eventually cover every key.
        """
        if limit == 0:
            return 0
        now = self.clock()
        removed = 0
        rounds = max(1, math.ceil(10 * limit / _SCAN_COUNT))
        with self._errors():
            for cursor, keys in self._scan(_glob_escape(self.prefix) + "*", self._cleanup_cursor):
                self._cleanup_cursor = cursor
                ours = [
                    k
                    for k in keys
                    if k.startswith(self._entry_ns.encode())
                    or k.startswith(self._signature_ns.encode())
                ]
                if ours:
                    removed += int(self._cleanup_script(keys=ours, args=[_num(now), limit - removed]))
                rounds -= 1
                if removed >= limit or rounds == 0:
                    break
        return removed

    def _remember_signature(self, signature: str, *, ttl_seconds: float) -> bool:
        ttl = ttl_seconds
        now = self.clock()
        with self._errors():
            return bool(
                self._remember(
                    keys=[self._signature_ns + signature],
                    args=[_num(now), _num(now + ttl), _millis(ttl)],
                )
            )

    def ping(self) -> None:
        with self._errors():
            self._client.ping()

    def close(self) -> None:
        """Disconnect the pool if this store created the client.

        A client passed in belongs to the caller and is left open.
        """
        try:
            self._pending.flush()
        except Exception:  # pragma: no cover - flush logs its own failures
            logger.warning("bailing: deferred completions not written at close", exc_info=True)
        pid = os.getpid()
        self._generation += 1
        pool = self._client.connection_pool
        for ident, (owner, _thread, conn) in list(self._held.items()):
            if owner == pid and self._held.pop(ident, None) is not None:
                pool.release(conn)
        if self._owns_client:
            with self._unchecked_errors():
                self._client.close()


    # --- business approvals -----------------------------------------------------

    def _approval_key(self, approval_id: int) -> str:
        return f"{self._approval_ns}{approval_id}"

    def _live_approvals(self, ids: Iterable[int]) -> builtins.list[ApprovalRecord]:
        ids = list(ids)
        if not ids:
            return []
        pipe = self._client.pipeline(transaction=False)
        for approval_id in ids:
            pipe.hgetall(self._approval_key(approval_id))
        now = self.clock()
        records = []
        for approval_id, fields in zip(ids, pipe.execute()):
            if fields and b"request" in fields:
                record = _approval_from_hash(approval_id, fields)
                if record.is_live(now):
                    records.append(record)
        return oldest_first(records)

    def _add_approval(self, record: ApprovalRecord, *, retention_seconds: float) -> ApprovalRecord:
        keep = retention_seconds
        now = self.clock()
        with self._errors():
            flat = self._add_approval_script(
                keys=[self._approval_key(record.approval_id),
                      self._approval_job_ns + record.job_id],
                args=[_num(now), _num(now + keep), _millis(keep), record.job_id, record.tool,
                      encode_request(record), record.approval_id],
            )
        return _approval_from_hash(record.approval_id, _pairs(flat))

    def _record_decision(
        self,
        approval_id: int,
        *,
        status: ApprovalStatus,
        decision_id: str,
        approver: str,
        retention_seconds: float,
    ) -> ApprovalRecord | None:
        keep = retention_seconds
        now = self.clock()
        with self._errors():
            flat = self._record_decision_script(
                keys=[self._approval_key(approval_id)],
                args=[_num(now), status, decision_id, approver, _num(now + keep), _millis(keep),
                      self._approval_job_ns],
            )
        return _approval_from_hash(approval_id, _pairs(flat)) if flat else None

    def _get_approval(self, approval_id: int) -> ApprovalRecord | None:
        with self._errors():
            found = self._live_approvals([approval_id])
        return found[0] if found else None

    def find_approvals(self, *, job_id: str, tool: str) -> builtins.list[ApprovalRecord]:
        with self._errors():
            members = self._client.smembers(self._approval_job_ns + job_id)
            records = self._live_approvals(sorted(int(m) for m in members))
        return [r for r in records if r.tool == tool]

    def _list_approvals(
        self, *, status: ApprovalStatus | None = None, limit: int = 100
    ) -> builtins.list[ApprovalRecord]:
        """Live records, oldest first; scans the approval keys (for operators and pages)."""
        found: dict[int, ApprovalRecord] = {}
        with self._errors():
            for _cursor, keys in self._scan(_glob_escape(self._approval_ns) + "*"):
                ids = []
                for key in keys:
                    tail = key.decode("utf-8")[len(self._approval_ns):]
                    if tail.isdigit():
                        ids.append(int(tail))
                for record in self._live_approvals(ids):
                    if status is None or record.status == status:
                        found[record.approval_id] = record
        return oldest_first(found.values())[:limit]

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
        """One script over the entry and the approval records (deferred completions first)."""
        now = self.clock()
        keep = max(lease_seconds, retention_seconds)
        encoding, errors = self._encoding
        approvals = [self._approval_key(approval_id).encode(encoding, errors)
                     for approval_id in approval_ids]
        command = (
            b"EVALSHA", self._claim_approved_script.sha.encode("ascii"), b"%d" % (1 + len(approvals)),
            self._entry_ns_bytes + key.encode(encoding, errors), *approvals,
            repr(now).encode(), token.encode(encoding, errors), repr(now + lease_seconds).encode(),
            repr(now + keep).encode(), b"%d" % _millis(keep), _encode_meta(meta).encode(),
            key.encode(encoding, errors), b"1" if reserve else b"0",
        )
        for _attempt in range(_LOOKS):  # held: nothing was written or spent, so it may look again
            reply = self._with_pending(key, command)
            if reply[0] != 0:
                break
            entry = _entry_from_hash(key, _pairs(reply[1]))
            if not self._overtook(key, entry):
                return ApprovalClaim("held", reservation=Reservation(_outcome(entry, now), entry))
        else:
            return ApprovalClaim("held", reservation=Reservation(_outcome(entry, now), entry))
        if reply[0] == 1:
            index = int(reply[1])
            return ApprovalClaim("reserved", approval_id=approval_ids[index - 1] if index else None)
        return ApprovalClaim("used" if reply[0] == 2 else "missing")


def _oldest(entries: Iterable[Entry], limit: int) -> list[Entry]:
    return nsmallest(limit, entries, key=lambda entry: (entry.created_at, entry.key))
