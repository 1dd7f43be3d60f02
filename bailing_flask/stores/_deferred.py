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
from typing import NamedTuple

from bailing_flask.stores._entries import StoredResponse

logger = logging.getLogger("bailing_flask")


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

    @contextmanager
    def carried(self) -> Iterator[list[_Completion]]:
        """:meth:`take` for a write on the request path, and :meth:`landed` after it.

        If the write fails, what it took is put back first (tried again
        later, or given up); a write that settles only some of them puts the
        rest back itself, inside the block.
        """
        taken = self.take() if self._items else []
        try:
            yield taken
        except BaseException:
            self.put_back(taken)
            self.landed(taken)
            raise
        self.landed(taken)

    def holds(self, key: str) -> bool:
        """Whether a completion of ``key`` is waiting here or carried by a write right now."""
        with self._cond:
            return key in self._in_flight or any(item.key == key for item in self._items)

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
        """Write everything now (``IdempotencyStore.flush``).

        Also waits (up to :data:`_FLUSH_WAIT` seconds) for the writes other
        threads have taken completions into (the background thread, a claim):
        when it returns, every completion deferred before it is written or
        given up.
        """
        self._later.run_now()
        self._flush()
        if self._in_flight:
            with self._cond:
                self._cond.wait_for(lambda: not self._in_flight, _FLUSH_WAIT)

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
