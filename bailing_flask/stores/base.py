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

import builtins
import functools
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

from bailing_flask.stores._deferred import _Completion, _Pending
from bailing_flask.stores._entries import (
    Clock,
    Entry,
    EntryMeta,
    EntryState,
    ListState,
    Outcome,
    Reservation,
    StoreBusy,
    StoredResponse,
    StoreUnavailable,
)
from bailing_flask.stores.approvals import (
    ApprovalClaim,
    ApprovalRecord,
    ApprovalStatus,
    check_approval_id,
    check_approval_ids,
    check_decision,
    retention,
)

__all__ = [
    "Clock",
    "EntryState",
    "ListState",
    "Outcome",
    "StoreBusy",
    "StoreUnavailable",
    "StoredResponse",
    "EntryMeta",
    "Entry",
    "Reservation",
    "IdempotencyStore",
]


class IdempotencyStore(ABC):
    """Atomic reservations of idempotency keys, plus a replay memory.

    Every method is thread-safe; the SQLite and Redis stores are also safe
    across processes (and, for Redis, hosts). Every method raises
    :class:`StoreUnavailable` when the backend is unreachable, and
    :class:`ValueError` for a bad argument, before the backend is touched.

    :param clock: returns the current Unix time; every lease and retention
        decision uses it, so tests can move time.

    **Writing a store.** Subclass this class and implement, with the same
    arguments as the public method of the same name without the underscore,
    the protected methods ``_reserve``, ``_take_over``, ``_complete``,
    ``_mark_uncertain``, ``_release``, ``_get``, ``_list``, ``_resolve``
    (given ``seen``, it gets ``expected``: the ``(state, token)`` to compare
    in the same atomic step as the write), ``_cleanup``,
    ``_remember_signature``, and the public ``ping`` and ``close``; for
    approval records also ``_add_approval``, ``_record_decision``,
    ``_get_approval``, ``find_approvals``, ``_list_approvals`` and
    ``_claim_approved``. Each public method of this
    class checks its arguments, refusing bad ones with :class:`ValueError`,
    and then calls its protected twin with them normalised (keys and tokens
    non-empty ``str``, durations positive finite ``float``, ``limit`` a
    non-negative ``int``, ``state`` one of the :data:`ListState` values or
    ``None``): do not check them again. A subclass that defines one of the
    checked public methods itself (``reserve`` instead of ``_reserve``) is
    refused with :class:`TypeError` when the class is created, since its
    callers would skip the checks; to wrap a store, override the protected
    method and call ``super()``. Then:

    * use :attr:`clock` for every time, and apply the rules of the module
      docstring (live while ``clock() < expires_at``, uncertain once
      ``clock() >= lease_expires_at``, compare-and-set on the token);
    * raise :class:`StoreUnavailable` (never the backend's own exception) when
      the backend fails;
    * ``_claim`` is optional: the inherited one is built on ``_reserve``. A
      store that can write completions later calls :meth:`_defer_completions`
      in ``__init__``, with a function that writes a batch of
      :class:`_Completion` and returns the ones to try again;
      :meth:`complete_deferred` and :meth:`flush` then queue into it and
      write it out, and the store's own writes on the request path may take
      the queue along (``self._pending.carried()``);
    * run the store through the contract tests in ``tests/test_stores.py``
      (add it to the ``store`` fixture).
    """

    #: the completions ``complete_deferred`` queues; ``None``: it completes at once
    _pending: _Pending | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in _CHECKED:
            if name in cls.__dict__:
                raise TypeError(
                    f"{cls.__qualname__} defines {name}(), which IdempotencyStore implements "
                    f"to check its arguments: implement {_CHECKED[name]} instead.")

    def _defer_completions(
        self, write: Callable[[builtins.list[_Completion]], builtins.list[_Completion]],
        delay: float, name: str, where: str,
    ) -> _Pending:
        """Let :meth:`complete_deferred` queue completions for ``write``, ``delay`` seconds later.

        ``name`` names the background thread, ``where`` the store in log messages.
        Returns the queue (also kept as ``self._pending``).
        """
        self._pending = pending = _Pending(write, delay, name, where)
        return pending

    clock: Clock

    def __init__(self, *, clock: Clock = time.time) -> None:
        self.clock = clock

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
        if not (key.__class__ is str and key and token.__class__ is str and token
                and lease_seconds.__class__ is float and 0.0 < lease_seconds < _INF
                and retention_seconds.__class__ is float and 0.0 < retention_seconds < _INF):
            key, token, lease_seconds, retention_seconds = _checked_reservation(
                key, token, lease_seconds, retention_seconds)
        return self._reserve(key, token=token, lease_seconds=lease_seconds,
                             retention_seconds=retention_seconds, meta=meta)

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
        a ``_claim`` built on its ``_reserve``.
        """
        if not (key.__class__ is str and key and token.__class__ is str and token
                and lease_seconds.__class__ is float and 0.0 < lease_seconds < _INF
                and retention_seconds.__class__ is float and 0.0 < retention_seconds < _INF):
            key, token, lease_seconds, retention_seconds = _checked_reservation(
                key, token, lease_seconds, retention_seconds)
        return self._claim(key, token=token, lease_seconds=lease_seconds,
                           retention_seconds=retention_seconds, meta=meta)

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
        is not known yet (the store then logs a failure itself). A store that
        defers nothing (:meth:`_defer_completions` never called) simply
        completes: this calls ``_complete``.

        The built-in stores queue the completion and write it with the
        process's next command (SQLite: in the next claim's transaction;
        Redis: in the same batch, ahead of it). Until it is written, a repeat
        from another process gets ``409 idempotency_in_progress``; if the
        process is killed first, the completion is lost and the call turns
        uncertain when its lease runs out -- never run twice.
        """
        if not (key.__class__ is str and key and token.__class__ is str and token
                and retention_seconds.__class__ is float and 0.0 < retention_seconds < _INF):
            retention_seconds = _checked_completion(key, token, retention_seconds)
        pending = self._pending
        if pending is None:
            return self._complete(key, token=token, response=response,
                                  retention_seconds=retention_seconds)
        pending.add(_Completion(key, token, self.clock(), retention_seconds, response))
        return None

    def flush(self) -> None:
        """Write out every completion :meth:`complete_deferred` still holds, now.

        Runs by itself at interpreter exit; a no-op for stores that defer
        nothing.
        """
        if self._pending is not None:
            self._pending.flush()

    def take_over(
        self, key: str, *, old_token: str, new_token: str, lease_seconds: float
    ) -> bool:
        """Hand an in-progress entry from ``old_token`` to ``new_token`` with a new lease.

        For the opt-in mode that re-runs uncertain calls: of several
        arrivals that saw the same uncertain entry, exactly one wins.
        """
        _check_key(key)
        _check_key(new_token, "new_token")
        return self._take_over(key, old_token=old_token, new_token=new_token,
                               lease_seconds=_check_seconds(lease_seconds, "lease_seconds"))

    def complete(
        self, key: str, *, token: str, response: StoredResponse, retention_seconds: float
    ) -> bool:
        """Record the response of an in-progress entry still owned by ``token``.

        Also accepted after the lease ran out, as long as nobody took over or
        resolved the entry: the worker was slow, not dead, and its answer
        settles the uncertainty. Retention restarts from now.
        """
        if not (key.__class__ is str and key and token.__class__ is str and token
                and retention_seconds.__class__ is float and 0.0 < retention_seconds < _INF):
            retention_seconds = _checked_completion(key, token, retention_seconds)
        return self._complete(key, token=token, response=response,
                              retention_seconds=retention_seconds)

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
        return self._mark_uncertain(_check_key(key), token=token, note=note)

    def release(self, key: str, *, token: str) -> bool:
        """Delete an in-progress entry owned by ``token`` so a retry may run."""
        return self._release(_check_key(key), token=token)

    def get(self, key: str) -> Entry | None:
        """The live entry for ``key``, or ``None``."""
        if not (key.__class__ is str and key):
            _check_key(key)
        return self._get(key)

    def list(self, *, state: ListState | None = None, limit: int = 100) -> builtins.list[Entry]:
        """Live entries, oldest first, optionally only those in ``state``."""
        return self._list(state=_check_state(state), limit=_check_limit(limit))

    def resolve(
        self,
        key: str,
        *,
        response: StoredResponse | None,
        note: str,
        retention_seconds: float,
        seen: Entry | None = None,
    ) -> bool:
        """Settle an entry by operator decision; ``False`` if there is no live entry.

        With a ``response`` the entry becomes completed (repeats receive that
        response, the note is kept, no worker can overwrite it any more).
        With ``None`` the entry is deleted and the next arrival runs the call
        again; the note is then only as durable as the caller's own log.

        ``seen`` is the entry as the operator read it (:meth:`get`,
        :meth:`list`): the decision then applies only if the entry is still
        in that state under that token, checked in the same atomic step as
        the write. A worker that completed the call meanwhile, a new call
        that reserved the key after it expired, or another operator's
        decision leave it untouched (``False``): a decision about an
        uncertain call never deletes the answer of a call that ran.
        """
        _check_key(key)
        retention = _check_seconds(retention_seconds, "retention_seconds")
        if seen is None:
            return self._resolve(key, response=response, note=note, retention_seconds=retention)
        if not isinstance(seen, Entry) or seen.key != key:
            raise ValueError("seen must be the Entry of this key, as get() or list() read it")
        expected = (seen.state, seen.token)
        if _takes_keyword(type(self)._resolve, "expected"):
            return self._resolve(key, response=response, note=note, retention_seconds=retention,
                                 expected=expected)
        # a store written before ``expected``: compared on a read just before, not atomically
        current = self._get(key)
        if current is None or (current.state, current.token) != expected:
            return False
        return self._resolve(key, response=response, note=note, retention_seconds=retention)

    def cleanup(self, *, limit: int = 1000) -> int:
        """Remove up to ``limit`` dead entries and signature records; returns how many.

        Dead records are already invisible; this only reclaims space. Each
        call does a bounded amount of work so it can run from a request.
        """
        return self._cleanup(limit=_check_limit(limit))

    def remember_signature(self, signature: str, *, ttl_seconds: float) -> bool:
        """``True`` the first time ``signature`` is seen within ``ttl_seconds``.

        Atomic, so of two concurrent replays of one request exactly one is
        accepted.
        """
        if not (signature.__class__ is str and signature
                and ttl_seconds.__class__ is float and 0.0 < ttl_seconds < _INF):
            _check_key(signature, "signature")
            ttl_seconds = _check_seconds(ttl_seconds, "ttl_seconds")
        return self._remember_signature(signature, ttl_seconds=ttl_seconds)

    @abstractmethod
    def ping(self) -> None:
        """Raise :class:`StoreUnavailable` unless the backend answers."""

    @abstractmethod
    def close(self) -> None:
        """Release connections; the store reconnects if it is used again."""

    # --- what a store implements: the arguments are checked already ------------------

    @abstractmethod
    def _reserve(self, key: str, *, token: str, lease_seconds: float, retention_seconds: float,
                 meta: EntryMeta) -> Reservation:
        """:meth:`reserve`, its arguments checked."""

    def _claim(self, key: str, *, token: str, lease_seconds: float, retention_seconds: float,
               meta: EntryMeta) -> Reservation | None:
        """:meth:`claim`, its arguments checked; this one is built on ``_reserve``."""
        reservation = self._reserve(
            key, token=token, lease_seconds=lease_seconds, retention_seconds=retention_seconds,
            meta=meta,
        )
        return None if reservation.outcome == "reserved" else reservation

    @abstractmethod
    def _take_over(self, key: str, *, old_token: str, new_token: str,
                   lease_seconds: float) -> bool:
        """:meth:`take_over`, its arguments checked."""

    @abstractmethod
    def _complete(self, key: str, *, token: str, response: StoredResponse,
                  retention_seconds: float) -> bool:
        """:meth:`complete`, its arguments checked."""

    @abstractmethod
    def _mark_uncertain(self, key: str, *, token: str, note: str) -> bool:
        """:meth:`mark_uncertain`, its arguments checked."""

    @abstractmethod
    def _release(self, key: str, *, token: str) -> bool:
        """:meth:`release`, its arguments checked."""

    @abstractmethod
    def _get(self, key: str) -> Entry | None:
        """:meth:`get`, its argument checked."""

    @abstractmethod
    def _list(self, *, state: ListState | None, limit: int) -> builtins.list[Entry]:
        """:meth:`list`, its arguments checked."""

    @abstractmethod
    def _resolve(self, key: str, *, response: StoredResponse | None, note: str,
                 retention_seconds: float, expected: tuple[EntryState, str] | None = None) -> bool:
        """:meth:`resolve`, its arguments checked; ``expected``: ``(state, token)`` the live
        entry must still have (from ``seen``), or ``None``. A store whose ``_resolve`` takes
        no ``expected`` gets the comparison from a read just before, which is not atomic."""

    @abstractmethod
    def _cleanup(self, *, limit: int) -> int:
        """:meth:`cleanup`, its argument checked."""

    @abstractmethod
    def _remember_signature(self, signature: str, *, ttl_seconds: float) -> bool:
        """:meth:`remember_signature`, its arguments checked."""

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
        return self._add_approval(record, retention_seconds=retention(retention_seconds))

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
        check_approval_id(approval_id)
        check_decision(status, decision_id, approver)
        return self._record_decision(approval_id, status=status, decision_id=decision_id,
                                     approver=approver,
                                     retention_seconds=retention(retention_seconds))

    def get_approval(self, approval_id: int) -> ApprovalRecord | None:
        """The live record of ``approval_id``, or ``None``."""
        return self._get_approval(check_approval_id(approval_id))

    def find_approvals(self, *, job_id: str, tool: str) -> builtins.list[ApprovalRecord]:
        """Live records of one job and tool, oldest first."""
        raise NotImplementedError(f"{type(self).__name__} does not keep approval records")

    def list_approvals(
        self, *, status: ApprovalStatus | None = None, limit: int = 100
    ) -> builtins.list[ApprovalRecord]:
        """Live records, oldest first, optionally only those in ``status``."""
        return self._list_approvals(status=status, limit=_check_limit(limit))

    def claim_approved(
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
        """Spend one approval on the call ``key`` and reserve ``key`` for ``token``, atomically.

        One step, as :meth:`claim` is one step:

        1. with ``reserve``, a live entry of ``key`` answers ``"held"`` with its
           :class:`Reservation` (``"completed"``, ``"in_progress"``,
           ``"uncertain"``) and spends nothing: a repeat of a call is answered
           from its entry. An in-progress entry of ``token`` itself (a repeated
           command whose reply was lost) answers ``"reserved"`` with the
           approval that names ``key``;
        2. otherwise the first of ``approval_ids``, in their order, that is a
           live ``approved`` record not yet spent gets ``used_by = key`` and
           ``used_at = now``, and (with ``reserve``) ``key`` is reserved for
           ``token`` exactly as :meth:`claim` reserves it: ``"reserved"``
           with that ``approval_id``;
        3. otherwise ``"used"`` when one of them is a live approved record
           spent already (by any key: a released or resolved entry does not
           get its approval back), else ``"missing"``; nothing changes.

        ``reserve=False`` (a tool without de-duplication) skips step 1 and
        reserves nothing: the approval alone is spent, once.

        The approval check of the gate calls it for ``business_approval``
        tools, with the approved records whose arguments match the call;
        a store that does not implement ``_claim_approved`` makes those tools
        refuse every call (``503 idempotency_store_unavailable``).
        """
        key, token, lease_seconds, retention_seconds = _checked_reservation(
            key, token, lease_seconds, retention_seconds)
        if not isinstance(reserve, bool):
            raise ValueError("reserve must be True or False.")
        return self._claim_approved(
            key, approval_ids=check_approval_ids(approval_ids), token=token,
            lease_seconds=lease_seconds, retention_seconds=retention_seconds, meta=meta,
            reserve=reserve)

    def _add_approval(self, record: ApprovalRecord, *, retention_seconds: float
                      ) -> ApprovalRecord:
        """:meth:`add_approval`, its arguments checked."""
        raise NotImplementedError(f"{type(self).__name__} does not keep approval records")

    def _record_decision(self, approval_id: int, *, status: ApprovalStatus, decision_id: str,
                         approver: str, retention_seconds: float) -> ApprovalRecord | None:
        """:meth:`record_decision`, its arguments checked."""
        raise NotImplementedError(f"{type(self).__name__} does not keep approval records")

    def _get_approval(self, approval_id: int) -> ApprovalRecord | None:
        """:meth:`get_approval`, its argument checked."""
        raise NotImplementedError(f"{type(self).__name__} does not keep approval records")

    def _list_approvals(self, *, status: ApprovalStatus | None, limit: int
                        ) -> builtins.list[ApprovalRecord]:
        """:meth:`list_approvals`, its arguments checked."""
        raise NotImplementedError(f"{type(self).__name__} does not keep approval records")

    def _claim_approved(self, key: str, *, approval_ids: tuple[int, ...], token: str,
                        lease_seconds: float, retention_seconds: float, meta: EntryMeta,
                        reserve: bool) -> ApprovalClaim:
        """:meth:`claim_approved`, its arguments checked (``approval_ids`` a tuple)."""
        raise NotImplementedError(
            f"{type(self).__name__} does not implement _claim_approved, so it cannot spend an "
            "approval on exactly one call")

    def __enter__(self) -> IdempotencyStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


#: the public methods that check their arguments -> what a subclass implements instead
_CHECKED: dict[str, str] = {
    name: f"_{name}()" for name in (
        "reserve", "claim", "take_over", "complete", "mark_uncertain", "release", "get", "list",
        "resolve", "cleanup", "remember_signature", "add_approval", "record_decision",
        "get_approval", "list_approvals", "claim_approved")
}
_CHECKED["complete_deferred"] = (
    "_complete() (and call _defer_completions() in __init__ to write completions later)")


# --- argument checks ------------------------------------------------------------


@functools.cache
def _takes_keyword(function: Callable[..., Any], name: str) -> bool:
    """Whether ``function`` accepts the keyword argument ``name`` (a method written before the
    argument existed does not)."""
    import inspect

    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is p.VAR_KEYWORD for p in parameters)


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


def _checked_reservation(key: str, token: str, lease: float, keep: float
                         ) -> tuple[str, str, float, float]:
    """A reservation's key, token, lease and retention, checked (the slow path)."""
    _check_key(key)
    _check_key(token, "token")
    return key, token, _check_seconds(lease, "lease_seconds"), _check_seconds(
        keep, "retention_seconds")


def _checked_completion(key: str, token: str, retention_seconds: float) -> float:
    """A completion's key and token checked; its retention, normalised (the slow path)."""
    _check_key(key)
    _check_key(token, "token")
    return _check_seconds(retention_seconds, "retention_seconds")
