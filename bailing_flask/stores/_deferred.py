"""Completions written after they were asked for, and the background thread that writes them.

What :meth:`~bailing_flask.stores.IdempotencyStore.complete_deferred` queues
(:class:`_Completion`), the queue of one store in one process
(:class:`_Pending`), and the daemon thread that writes what no request took
along (:class:`_Later`). Safe across ``fork()``: a child starts empty.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, NamedTuple, TypeVar

from bailing_flask.stores._entries import StoredResponse

logger = logging.getLogger("bailing_flask")


_S = TypeVar("_S")


class _PerProcess(Generic[_S]):
    """One ``_S`` per process: every thread of a process gets the same one (:meth:`get`).

    A forked child gets a fresh one, also when the fork was not announced to
    Python (uWSGI): the process id is checked, and ``dict.setdefault`` hands
    every thread that noticed at once the same new one, so none throws away
    what another already put in it, and none uses a lock the parent held at
    the fork.
    """

    __slots__ = ("_make", "_current", "_by_pid")

    def __init__(self, make: Callable[[], _S]) -> None:
        self._make = make
        pid, made = os.getpid(), make()
        self._current = (pid, made)
        self._by_pid: dict[int, _S] = {pid: made}

    def get(self) -> _S:
        pid, here = self._current
        if pid != os.getpid():
            pid = os.getpid()
            here = self._by_pid.setdefault(pid, self._make())
            self._current = (pid, here)
        return here


class _LaterHere:
    """A :class:`_Later`'s state in one process: its own flag, event, lock and thread."""

    __slots__ = ("due", "wake", "lock", "thread")

    def __init__(self) -> None:
        self.due = False
        self.wake = threading.Event()
        #: against a thread that is just leaving because it was idle
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None


class _Later:
    """Run ``action`` about ``delay`` seconds after :meth:`soon`, in a daemon thread.

    Calls of :meth:`soon` while a run is due share that run, and the run
    covers everything done before it starts (the flag is cleared first). One
    thread per object and process, started on first use; a forked child
    starts its own (the parent's thread does not survive the fork), and at
    interpreter exit a due run runs at once. ``action`` must not raise.

    What belongs to a process is one :class:`_LaterHere` (:class:`_PerProcess`).
    """

    def __init__(self, action: Callable[[], None], delay: float, name: str) -> None:
        self._action = action
        self._delay = delay
        self._name = name
        self._here = _PerProcess(_LaterHere)
        _LATERS.add(self)

    def soon(self) -> None:
        here = self._here.get()
        if here.due:
            return
        here.due = True
        here.wake.set()
        with here.lock:
            if here.thread is None or not here.thread.is_alive():
                here.thread = threading.Thread(target=self._loop, args=(here,), name=self._name, daemon=True)
                here.thread.start()

    def cancel(self) -> None:
        """Forget a due run (the store is closing and has done what it needed)."""
        self._here.get().due = False

    def run_now(self) -> None:
        """Run ``action`` now if a run is due (at exit, or from ``flush``)."""
        here = self._here.get()
        if here.due:
            here.due = False
            try:
                self._action()
            except Exception:  # pragma: no cover - actions log their own failures
                logger.exception("bailing: %s failed", self._name)

    def _loop(self, here: _LaterHere) -> None:
        while True:
            if not here.wake.wait(timeout=_IDLE_EXIT):
                with here.lock:
                    if not here.wake.is_set():
                        here.thread = None  # idle: let the store be collected
                        return
            here.wake.clear()
            time.sleep(self._delay)
            self.run_now()


class _Completion(NamedTuple):
    """A completion :meth:`IdempotencyStore.complete_deferred` has not written yet."""

    key: str
    token: str
    #: the time it was asked for, by the store's clock: retention counts from here
    now: float
    retention: float
    response: StoredResponse
    attempts: int = 0


class _PendingHere:
    """A :class:`_Pending`'s queue in one process."""

    __slots__ = ("items", "in_flight", "cond")

    def __init__(self) -> None:
        self.items: list[_Completion] = []
        #: key -> how many takers are writing a completion of it right now
        self.in_flight: dict[str, int] = {}
        self.cond = threading.Condition(threading.Lock())


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
    to Python: the queue is one :class:`_PendingHere` per process
    (:class:`_PerProcess`).
    """

    def __init__(self, write: Callable[[list[_Completion]], list[_Completion]], delay: float,
                 name: str, where: str) -> None:
        self._write = write
        self._where = where
        self._here = _PerProcess(_PendingHere)
        self._later = _Later(self._flush, delay, name)
        _PENDINGS.add(self)

    def __bool__(self) -> bool:
        return bool(self._here.get().items)

    def add(self, item: _Completion) -> None:
        here = self._here.get()
        with here.cond:
            here.items.append(item)
        self._later.soon()

    def take(self) -> list[_Completion]:
        """Everything waiting, now *in flight* until :meth:`landed` is called for it."""
        here = self._here.get()
        with here.cond:
            items, here.items = here.items, []
            in_flight = here.in_flight
            for item in items:
                in_flight[item.key] = in_flight.get(item.key, 0) + 1
        return items

    def landed(self, items: list[_Completion]) -> None:
        """The write that took ``items`` is over (whatever became of them)."""
        if not items:
            return
        here = self._here.get()
        with here.cond:
            in_flight = here.in_flight
            for item in items:
                left = in_flight.get(item.key, 1) - 1
                if left > 0:
                    in_flight[item.key] = left
                else:
                    in_flight.pop(item.key, None)
            here.cond.notify_all()

    @contextmanager
    def carried(self) -> Iterator[list[_Completion]]:
        """:meth:`take` for a write on the request path, and :meth:`landed` after it.

        If the write fails, what it took is put back first (tried again
        later, or given up); a write that settles only some of them puts the
        rest back itself, inside the block.
        """
        taken = self.take() if self._here.get().items else []
        try:
            yield taken
        except BaseException:
            self.put_back(taken)
            self.landed(taken)
            raise
        self.landed(taken)

    def holds(self, key: str) -> bool:
        """Whether a completion of ``key`` is waiting here or carried by a write right now."""
        here = self._here.get()
        with here.cond:
            return key in here.in_flight or any(item.key == key for item in here.items)

    def wait_landed(self, key: str, timeout: float) -> None:
        """Wait while another thread's write carries a completion of ``key``.

        So that a repeat in this process, sent on another connection, can never
        overtake the completion of the call it repeats.
        """
        here = self._here.get()
        if here.in_flight and key in here.in_flight:
            with here.cond:
                here.cond.wait_for(lambda: key not in here.in_flight, timeout)

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
            here = self._here.get()
            with here.cond:
                here.items[:0] = kept
            self._later.soon()

    def flush(self) -> None:
        """Write everything now (``IdempotencyStore.flush``).

        Also waits (up to :data:`_FLUSH_WAIT` seconds) for the writes other
        threads have taken completions into (the background thread, a claim):
        when it returns, every completion deferred before it is written or
        given up.
        """
        self._later.run_now()
        self._flush()
        here = self._here.get()
        if here.in_flight:
            with here.cond:
                here.cond.wait_for(lambda: not here.in_flight, _FLUSH_WAIT)

    def _flush(self) -> None:
        items = self.take()
        if items:
            try:
                self.put_back(self._write(items))
            finally:
                self.landed(items)


def _log_refused(items: list[_Completion]) -> None:
    """Deferred completions the backend refused: someone else owns the entry now."""
    for item in items:
        logger.error("bailing: call %s was resolved or taken over while it ran; its deferred "
                     "completion was not recorded", item.key)


_MAX_ATTEMPTS = 3
#: seconds :meth:`_Pending.flush` waits for other threads' writes (beyond a busy timeout)
_FLUSH_WAIT = 10.0
_PENDINGS: weakref.WeakSet[_Pending] = weakref.WeakSet()
_IDLE_EXIT = 30.0
_LATERS: weakref.WeakSet[_Later] = weakref.WeakSet()


def _run_due_laters() -> None:
    for later in list(_LATERS):
        later.run_now()


def _reset_in_child() -> None:
    """In a child forked with Python's hooks: every queue and thread of the parent left behind."""
    for later in list(_LATERS):
        later._here.get()
    for pending in list(_PENDINGS):
        pending._here.get()


atexit.register(_run_due_laters)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_in_child)
