"""What every idempotency store promises, whatever it keeps its records in.

A side-effecting tool call can reach the business twice: the hub retries
after a timeout, or someone replays a captured request within the signature
window. The web layer therefore reserves the call's
identity key *before* running the view, and the store decides atomically who
runs it. The life of one key:

``reserve`` -> ``in_progress`` (this token owns it until ``lease_expires_at``)
  -> ``complete`` (the response is kept until ``expires_at``; repeats get it)
  -> or ``mark_uncertain`` (the side effect failed part-way: uncertain at once)
  -> or ``release`` (the failure is known to be atomic: the entry is deleted
  so a retry may run again).

A lease that runs out without ``complete`` or ``release`` means the worker
died somewhere inside the side effect. Nobody can tell whether it happened,
so the entry is reported as *uncertain* and left for an operator to
``resolve`` (the hub does the same and never auto-replays). A worker that
is alive but saw its side effect fail says the same thing at once with
``mark_uncertain``: a failure is not proof that nothing happened. Every check
uses the store's injectable ``clock``, so tests can move time and all
backends agree on the same rules:

* an entry is *live* while ``clock() < expires_at``; a dead entry is as
  good as absent, whether or not a cleanup has removed it yet;
* an in-progress entry is *uncertain* once ``clock() >= lease_expires_at``.

Mutations are compare-and-set on the reservation ``token``, so a slow worker
whose lease was taken over, or whose entry an operator resolved, can never
overwrite what happened since. Completing, reserving and taking over are
idempotent for the token that already did it, so a command that reached the
backend but whose answer was lost can be repeated safely.
"""

from __future__ import annotations

import atexit
import base64
import builtins
import json
import logging
import math
import os
import threading
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from bailing_flask.errors import BailingError
from bailing_flask.stores.approvals import ApprovalRecord, ApprovalStatus

logger = logging.getLogger("bailing_flask")

__all__ = [
    "Clock",
    "EntryState",
    "ListState",
    "Outcome",
    "StoreUnavailable",
    "StoredResponse",
    "EntryMeta",
    "Entry",
    "Reservation",
    "IdempotencyStore",
]

#: A source of the current Unix time in seconds (``time.time`` by default).
Clock = Callable[[], float]
EntryState = Literal["in_progress", "completed"]
#: ``list()`` filter: ``"in_progress"`` means the lease has not run out yet.
ListState = Literal["uncertain", "in_progress", "completed"]
Outcome = Literal["reserved", "in_progress", "completed", "uncertain"]

#: ``Entry.token`` of entries an operator resolved: no worker owns them any more.
RESOLVED_TOKEN = ""


class StoreUnavailable(BailingError):
    """The store's backend cannot be reached or is broken.

    Raised by every store method instead of the backend's own exception, so
    the web layer can answer 503 without knowing which backend is in use.
    The message names the backend and the cause, never a password.
    """

    #: Stable reason code, like those of :class:`~bailing_flask.errors.SignatureError`.
    reason = "store_unavailable"


@dataclass(frozen=True)
class StoredResponse:
    """The response to hand to repeats of a completed call, byte for byte.

    ``headers`` are ``(name, value)`` string pairs as WSGI carries them
    (values may hold characters up to U+00FF, or beyond if an app sets
    them); any iterable of pairs is accepted and frozen into a tuple.
    """

    status: int
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""

    def __post_init__(self) -> None:
        if isinstance(self.status, bool) or not isinstance(self.status, int) or not (
            100 <= self.status <= 999
        ):
            raise ValueError("StoredResponse.status must be an HTTP status code (100-999).")
        headers = tuple((str(name), str(value)) for name, value in self.headers)
        object.__setattr__(self, "headers", headers)
        if not isinstance(self.body, bytes):
            object.__setattr__(self, "body", bytes(self.body))


def _trusted_response(
    status: int, headers: tuple[tuple[str, str], ...], body: bytes
) -> StoredResponse:
    """A :class:`StoredResponse` of values known to be right (Flask's own), unchecked.

    For the request path: the checks of ``__post_init__`` are for values from
    elsewhere (an operator, a script). Equal to ``StoredResponse(status,
    headers, body)`` (a test says so).
    """
    response = object.__new__(StoredResponse)
    fields = response.__dict__
    fields["status"] = status
    fields["headers"] = headers
    fields["body"] = body
    return response


@dataclass(frozen=True)
class EntryMeta:
    """What the entry is about, kept for operators reconciling uncertain calls.

    :param tool: the tool name.
    :param job_id: the signed hub job id.
    :param subject: the signed acting subject (``None`` when anonymous).
    :param unsigned_key: the ``X-Bailing-Idempotency-Key`` header as first
        seen. It is not signed, so it is recorded, never trusted.
    """

    tool: str = ""
    job_id: str = ""
    subject: str | None = None
    unsigned_key: str | None = None


def _trusted_meta(
    tool: str, job_id: str, subject: str | None, unsigned_key: str | None
) -> EntryMeta:
    """``EntryMeta(tool, job_id, subject, unsigned_key)``, built without the frozen
    dataclass's per-field ``object.__setattr__`` (the request path builds one per call)."""
    meta = object.__new__(EntryMeta)
    fields = meta.__dict__
    fields["tool"] = tool
    fields["job_id"] = job_id
    fields["subject"] = subject
    fields["unsigned_key"] = unsigned_key
    return meta


@dataclass(frozen=True)
class Entry:
    """One reserved key, as the store holds it at the time it was read.

    Times are Unix seconds by the store's clock. ``expires_at`` is the end of
    retention: after it the entry no longer exists for any method.
    """

    key: str
    state: EntryState
    token: str
    created_at: float
    lease_expires_at: float
    expires_at: float
    meta: EntryMeta
    response: StoredResponse | None = None
    note: str | None = None

    def is_uncertain(self, now: float) -> bool:
        """Whether the worker that reserved this entry is presumed dead.

        The side effect may or may not have happened, so the call must be
        neither answered nor re-run without a decision.
        """
        return self.state == "in_progress" and now >= self.lease_expires_at

    def to_dict(self, *, now: float | None = None) -> dict[str, Any]:
        """A JSON-ready view for listings (the token is left out).

        With ``now``, ``state`` reads ``"uncertain"`` for an in-progress entry
        whose lease ran out. The body is given as ``body`` text when it is
        valid UTF-8, else as ``body_base64``.
        """
        state: str = self.state
        if now is not None and self.is_uncertain(now):
            state = "uncertain"
        data: dict[str, Any] = {
            "key": self.key,
            "state": state,
            "created_at": self.created_at,
            "lease_expires_at": self.lease_expires_at,
            "expires_at": self.expires_at,
            "tool": self.meta.tool,
            "job_id": self.meta.job_id,
            "subject": self.meta.subject,
            "unsigned_key": self.meta.unsigned_key,
            "note": self.note,
            "response": None,
        }
        if self.response is not None:
            response: dict[str, Any] = {
                "status": self.response.status,
                "headers": [list(pair) for pair in self.response.headers],
            }
            try:
                response["body"] = self.response.body.decode("utf-8")
            except UnicodeDecodeError:
                response["body_base64"] = base64.b64encode(self.response.body).decode("ascii")
            data["response"] = response
        return data


@dataclass(frozen=True)
class Reservation:
    """The answer to :meth:`IdempotencyStore.reserve`.

    ``"reserved"``: the caller owns the key and must ``complete`` or
    ``release`` it. Otherwise ``entry`` is the existing record: answer its
    response (``"completed"``), or refuse with 409 (``"in_progress"``,
    ``"uncertain"``).
    """

    outcome: Outcome
    entry: Entry


class IdempotencyStore(ABC):
    """Atomic reservations of idempotency keys, plus a replay memory.

    Every method is thread-safe; the SQLite and Redis stores are also safe
    across processes (and, for Redis, hosts). Every method raises
    :class:`StoreUnavailable` when the backend is unreachable.

    :param clock: returns the current Unix time; every lease and retention
        decision uses it, so tests can move time.
    """

    clock: Clock

    def __init__(self, *, clock: Clock = time.time) -> None:
        self.clock = clock

    @abstractmethod
    def reserve(
        self,
        key: str,
        *,
        token: str,
        lease_seconds: float,
        retention_seconds: float,
        meta: EntryMeta,
    ) -> Reservation:
        """Atomically claim ``key`` for ``token``, or report who holds it.

        Without a live entry, a new in-progress entry owned by ``token`` is
        created (``"reserved"``); it is kept at least ``retention_seconds``
        (and at least as long as its lease) so an uncertain entry stays
        visible to operators. Otherwise the existing entry is reported as
        ``"completed"``, ``"in_progress"`` or ``"uncertain"``. Reserving again
        with the token that already holds the entry answers ``"reserved"``.
        """

    def claim(
        self,
        key: str,
        *,
        token: str,
        lease_seconds: float,
        retention_seconds: float,
        meta: EntryMeta,
    ) -> Reservation | None:
        """:meth:`reserve`, as the request path uses it: ``None`` when ``token`` now owns ``key``.

        Otherwise the same :class:`Reservation` as :meth:`reserve` (``"completed"``,
        ``"in_progress"`` or ``"uncertain"``, with the existing entry). One
        round trip to the backend, like :meth:`reserve`; the built-in stores
        answer the common case -- a new call -- without building an
        :class:`Entry` for it. A store written outside the package inherits
        this version, built on its :meth:`reserve`.
        """
        reservation = self.reserve(
            key, token=token, lease_seconds=lease_seconds, retention_seconds=retention_seconds,
            meta=meta,
        )
        return None if reservation.outcome == "reserved" else reservation

    def complete_deferred(
        self, key: str, *, token: str, response: StoredResponse, retention_seconds: float
    ) -> bool | None:
        """:meth:`complete`, allowed to finish after it returns.

        Used when ``BAILING_IDEMPOTENCY_DEFER_COMPLETION`` is on.

        The response has already been produced and the side effect has
        happened; what may be deferred is only when the record of it is
        written: the built-in SQLite and Redis stores queue it and write it
        with the process's next claim (one transaction, one round trip), or
        from a background thread a few milliseconds later, and at exit. A
        completion that never arrives leaves the entry in progress, and it
        turns *uncertain* when its lease runs out: a repeat is refused, never
        run again. Answers like :meth:`complete`, or ``None`` when the outcome
        is not known yet (the store then logs a failure itself). This version
        simply calls :meth:`complete`.
        """
        return self.complete(key, token=token, response=response,
                             retention_seconds=retention_seconds)

    def flush(self) -> None:
        """Write out every completion :meth:`complete_deferred` still holds, now.

        Runs by itself at interpreter exit; a no-op for stores that defer
        nothing.
        """

    @abstractmethod
    def take_over(
        self, key: str, *, old_token: str, new_token: str, lease_seconds: float
    ) -> bool:
        """Hand an in-progress entry from ``old_token`` to ``new_token`` with a new lease.

        For the opt-in mode that re-runs uncertain calls: of several
        arrivals that saw the same uncertain entry, exactly one wins.
        """

    @abstractmethod
    def complete(
        self, key: str, *, token: str, response: StoredResponse, retention_seconds: float
    ) -> bool:
        """Record the response of an in-progress entry still owned by ``token``.

        Also accepted after the lease ran out, as long as nobody took over or
        resolved the entry: the worker was slow, not dead, and its answer
        settles the uncertainty. Retention restarts from now.
        """

    @abstractmethod
    def mark_uncertain(self, key: str, *, token: str, note: str) -> bool:
        """Make an in-progress entry owned by ``token`` uncertain now, keeping ``note``.

        For a worker whose side effect failed (the view raised or answered
        5xx): part of it may have happened, so repeats are refused as
        uncertain until an operator resolves the entry, exactly as if the
        worker had died. The lease ends now; the token, the retention and
        the meta are kept, so the same token may still ``complete`` it and a
        ``take_over`` still needs it. ``False`` if there is no such live
        in-progress entry; repeating the call for the same token is harmless.
        """

    @abstractmethod
    def release(self, key: str, *, token: str) -> bool:
        """Delete an in-progress entry owned by ``token`` so a retry may run."""

    @abstractmethod
    def get(self, key: str) -> Entry | None:
        """The live entry for ``key``, or ``None``."""

    @abstractmethod
    def list(self, *, state: ListState | None = None, limit: int = 100) -> list[Entry]:
        """Live entries, oldest first, optionally only those in ``state``."""

    @abstractmethod
    def resolve(
        self,
        key: str,
        *,
        response: StoredResponse | None,
        note: str,
        retention_seconds: float,
    ) -> bool:
        """Settle an entry by operator decision; ``False`` if there is no live entry.

        With a ``response`` the entry becomes completed (repeats receive that
        response, the note is kept, no worker can overwrite it any more).
        With ``None`` the entry is deleted and the next arrival runs the call
        again; the note is then only as durable as the caller's own log.
        """

    @abstractmethod
    def cleanup(self, *, limit: int = 1000) -> int:
        """Remove up to ``limit`` dead entries and signature records; returns how many.

        Dead records are already invisible; this only reclaims space. Each
        call does a bounded amount of work so it can run from a request.
        """

    @abstractmethod
    def remember_signature(self, signature: str, *, ttl_seconds: float) -> bool:
        """``True`` the first time ``signature`` is seen within ``ttl_seconds``.

        Atomic, so of two concurrent replays of one request exactly one is
        accepted.
        """

    @abstractmethod
    def ping(self) -> None:
        """Raise :class:`StoreUnavailable` unless the backend answers."""

    @abstractmethod
    def close(self) -> None:
        """Release connections; the store reconnects if it is used again."""

    # --- business approvals (see stores/approvals.py) ------------------------------
    #
    # Not abstract, so a store written for an earlier version keeps working
    # for everything else; the built-in stores implement all of them and the
    # approval check fails closed on a store that does not.

    def add_approval(self, record: ApprovalRecord, *, retention_seconds: float) -> ApprovalRecord:
        """Keep a received approval request, unless a live record with its id exists.

        Returns the live record: the new one (``received_at`` is now, status
        ``pending``), or the existing one unchanged (a retried or repeated
        delivery of the same request never resets a decision).
        """
        raise NotImplementedError(f"{type(self).__name__} does not keep approval records")

    def record_decision(
        self,
        approval_id: int,
        *,
        status: ApprovalStatus,
        decision_id: str,
        approver: str,
        retention_seconds: float,
    ) -> ApprovalRecord | None:
        """Record the decision the hub accepted on a live record; ``None`` if there is none.

        A pending record becomes ``status`` (``approved`` or ``denied``) and
        is kept at least ``retention_seconds`` from now. A record already
        decided is returned unchanged, whatever this call asks: the first
        decision is final, as it is at the hub.
        """
        raise NotImplementedError(f"{type(self).__name__} does not keep approval records")

    def get_approval(self, approval_id: int) -> ApprovalRecord | None:
        """The live record of ``approval_id``, or ``None``."""
        raise NotImplementedError(f"{type(self).__name__} does not keep approval records")

    def find_approvals(self, *, job_id: str, tool: str) -> builtins.list[ApprovalRecord]:
        """Live records of one job and tool, oldest first."""
        raise NotImplementedError(f"{type(self).__name__} does not keep approval records")

    def list_approvals(
        self, *, status: ApprovalStatus | None = None, limit: int = 100
    ) -> builtins.list[ApprovalRecord]:
        """Live records, oldest first, optionally only those in ``status``."""
        raise NotImplementedError(f"{type(self).__name__} does not keep approval records")

    def __enter__(self) -> IdempotencyStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# --- helpers shared by the backends -------------------------------------------


class _Later:
    """Run ``action`` about ``delay`` seconds after :meth:`soon`, in a daemon thread.

    Calls of :meth:`soon` while a run is due share that run, and the run
    covers everything done before it starts (the flag is cleared first). One
    thread per object and process, started on first use; a forked child
    starts its own (the parent's thread does not survive the fork), and at
    interpreter exit a due run runs at once. ``action`` must not raise.
    """

    def __init__(self, action: Callable[[], None], delay: float, name: str) -> None:
        self._action = action
        self._delay = delay
        self._name = name
        self._due = False
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        _LATERS.add(self)

    def soon(self) -> None:
        if self._pid != os.getpid():  # forked without Python's at-fork hooks (uWSGI)
            self._after_fork()
        if self._due:
            return
        self._due = True
        self._wake.set()
        with _LATERS_LOCK:  # against a thread that is just leaving because it was idle
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()

    def cancel(self) -> None:
        """Forget a due run (the store is closing and has done what it needed)."""
        self._due = False

    def run_now(self) -> None:
        """Run ``action`` now if a run is due (at exit, or from ``flush``)."""
        if self._due:
            self._due = False
            try:
                self._action()
            except Exception:  # pragma: no cover - actions log their own failures
                logger.exception("bailing: %s failed", self._name)

    def _loop(self) -> None:
        while True:
            if not self._wake.wait(timeout=_IDLE_EXIT):
                with _LATERS_LOCK:
                    if not self._wake.is_set():
                        self._thread = None  # idle: let the store be collected
                        return
            self._wake.clear()
            time.sleep(self._delay)
            self.run_now()

    def _after_fork(self) -> None:
        self._due = False
        self._wake = threading.Event()
        self._thread = None
        self._pid = os.getpid()


class _Completion(NamedTuple):
    """A completion :meth:`IdempotencyStore.complete_deferred` has not written yet."""

    key: str
    token: str
    #: the time it was asked for, by the store's clock: retention counts from here
    now: float
    retention: float
    response: StoredResponse
    attempts: int = 0


class _Pending:
    """Deferred completions of one store in this process, and who writes them when.

    A store takes them (:meth:`take`) into its next write on the request path,
    so they cost no round trip of their own; whatever nobody took is written by
    ``write`` in a background thread ``delay`` seconds after it was added, and
    at interpreter exit. ``write`` returns what could not be written, which is
    tried again up to :data:`_MAX_ATTEMPTS` times and then given up (logged:
    the call shows as uncertain when its lease runs out, as a completion that
    never arrived always does). A forked child starts empty -- what the parent
    deferred is the parent's to write -- also when the fork was not announced
    to Python (the process id is checked).
    """

    def __init__(self, write: Callable[[list[_Completion]], list[_Completion]], delay: float,
                 name: str, where: str) -> None:
        self._write = write
        self._where = where
        self._items: list[_Completion] = []
        #: key -> how many takers are writing a completion of it right now
        self._in_flight: dict[str, int] = {}
        self._cond = threading.Condition(threading.Lock())
        self._later = _Later(self._flush, delay, name)
        self._pid = os.getpid()
        _PENDINGS.add(self)

    def __bool__(self) -> bool:
        return bool(self._items)

    def _check_fork(self) -> None:
        """Drop what a parent left: forked without Python's at-fork hooks (uWSGI)."""
        if self._pid != os.getpid():
            self._after_fork()

    def add(self, item: _Completion) -> None:
        self._check_fork()
        with self._cond:
            self._items.append(item)
        self._later.soon()

    def take(self) -> list[_Completion]:
        """Everything waiting, now *in flight* until :meth:`landed` is called for it."""
        self._check_fork()
        with self._cond:
            items, self._items = self._items, []
            in_flight = self._in_flight
            for item in items:
                in_flight[item.key] = in_flight.get(item.key, 0) + 1
        return items

    def landed(self, items: list[_Completion]) -> None:
        """The write that took ``items`` is over (whatever became of them)."""
        if not items:
            return
        with self._cond:
            in_flight = self._in_flight
            for item in items:
                left = in_flight.get(item.key, 1) - 1
                if left > 0:
                    in_flight[item.key] = left
                else:
                    in_flight.pop(item.key, None)
            self._cond.notify_all()

    def wait_landed(self, key: str, timeout: float) -> None:
        """Wait while another thread's write carries a completion of ``key``.

        So that a repeat in this process, sent on another connection, can never
        overtake the completion of the call it repeats.
        """
        if self._in_flight and key in self._in_flight:
            with self._cond:
                self._cond.wait_for(lambda: key not in self._in_flight, timeout)

    def put_back(self, items: list[_Completion]) -> None:
        """Items a write could not settle: tried again later, or given up."""
        kept = []
        for item in items:
            if item.attempts + 1 >= _MAX_ATTEMPTS:
                logger.error("bailing: could not record the outcome of call %s in the "
                             "idempotency store at %s; it will show as uncertain",
                             item.key, self._where)
            else:
                kept.append(item._replace(attempts=item.attempts + 1))
        if kept:
            with self._cond:
                self._items[:0] = kept
            self._later.soon()

    def flush(self) -> None:
        """Write everything now (``IdempotencyStore.flush``)."""
        self._later.run_now()
        self._flush()

    def _flush(self) -> None:
        items = self.take()
        if items:
            try:
                self.put_back(self._write(items))
            finally:
                self.landed(items)

    def _after_fork(self) -> None:
        self._items = []
        self._in_flight = {}
        self._cond = threading.Condition(threading.Lock())
        self._pid = os.getpid()
        self._later._after_fork()


_MAX_ATTEMPTS = 3
_PENDINGS: weakref.WeakSet[_Pending] = weakref.WeakSet()
_IDLE_EXIT = 30.0
_LATERS: weakref.WeakSet[_Later] = weakref.WeakSet()
_LATERS_LOCK = threading.Lock()


def _run_due_laters() -> None:
    for later in list(_LATERS):
        later.run_now()


def _reset_laters_in_child() -> None:
    global _LATERS_LOCK
    _LATERS_LOCK = threading.Lock()
    for later in list(_LATERS):
        later._after_fork()
    for pending in list(_PENDINGS):
        pending._after_fork()


atexit.register(_run_due_laters)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_laters_in_child)


def _check_key(value: str, name: str = "key") -> str:
    if value.__class__ is str and value:
        return value
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty string.")
    return value


_INF = math.inf


def _check_seconds(value: float, name: str) -> float:
    """A positive, finite duration; ``bool`` is refused although it is an ``int``."""
    if value.__class__ is float and 0.0 < value < _INF:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number of seconds.")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be positive and finite.")
    return float(value)


def _check_limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError("limit must be a non-negative integer.")
    return limit


def _check_state(state: ListState | None) -> ListState | None:
    if state not in (None, "uncertain", "in_progress", "completed"):
        raise ValueError("state must be 'uncertain', 'in_progress', 'completed' or None.")
    return state


def _outcome(entry: Entry, now: float) -> Outcome:
    """How :meth:`IdempotencyStore.reserve` reports an existing live entry."""
    if entry.state == "completed":
        return "completed"
    return "uncertain" if entry.is_uncertain(now) else "in_progress"


def _matches(entry: Entry, state: ListState | None, now: float) -> bool:
    return state is None or _outcome(entry, now) == state


#: ``json.dumps`` of one string (``ensure_ascii``), the C function ``json`` itself uses
_json_str: Callable[[str], str] = json.encoder.encode_basestring_ascii


def _encode_meta(meta: EntryMeta) -> str:
    """The meta as compact JSON; exactly ``json.dumps`` of its four fields, built directly."""
    tool, job_id, subject, unsigned_key = meta.tool, meta.job_id, meta.subject, meta.unsigned_key
    if (tool.__class__ is str and job_id.__class__ is str
            and (subject is None or subject.__class__ is str)
            and (unsigned_key is None or unsigned_key.__class__ is str)):
        return '{"tool":%s,"job_id":%s,"subject":%s,"unsigned_key":%s}' % (
            _json_str(tool), _json_str(job_id),
            "null" if subject is None else _json_str(subject),
            "null" if unsigned_key is None else _json_str(unsigned_key),
        )
    return json.dumps(
        {
            "tool": meta.tool,
            "job_id": meta.job_id,
            "subject": meta.subject,
            "unsigned_key": meta.unsigned_key,
        },
        separators=(",", ":"),
    )


def _decode_meta(text: str | bytes) -> EntryMeta:
    data = json.loads(text)
    return EntryMeta(
        tool=data.get("tool", ""),
        job_id=data.get("job_id", ""),
        subject=data.get("subject"),
        unsigned_key=data.get("unsigned_key"),
    )


def _encode_headers(headers: Iterable[tuple[str, str]]) -> str:
    # JSON escapes every non-ASCII character, so any header value round-trips.
    try:
        return "[" + ",".join(
            ["[" + _json_str(name) + "," + _json_str(value) + "]" for name, value in headers]
        ) + "]"
    except TypeError:  # not str (a store used directly with other values): let json say
        return json.dumps([[name, value] for name, value in headers], separators=(",", ":"))


def _decode_headers(text: str | bytes) -> tuple[tuple[str, str], ...]:
    return tuple((str(name), str(value)) for name, value in json.loads(text))
