"""A deadline for reading a request body, and a bounded linger after a refusal.

A client that sends its body a byte at a time (slow-loris) holds whatever
reads it: a gunicorn ``gthread`` thread or a Werkzeug thread for as long as
it likes, a gunicorn ``sync`` worker until the arbiter kills it (30 s, and
the worker with it). The middleware reads signed bodies and hub callbacks
itself, so it bounds that read: when the body has not arrived
``BAILING_BODY_TIMEOUT`` seconds after the read began, the *read* side of the
connection is shut down. The blocked read returns at once, the request is
refused with ``408 body_timeout``, and the answer still goes out on the
write side.

The same is done, after a short linger, for a request refused on Werkzeug's
server before its body was read (``413 body_too_large``, a bad header): it
otherwise keeps reading the unread body after the answer, for as long as the
client keeps sending. On other servers the middleware drains that body
itself, within this deadline (:mod:`bailing_flask.wire.drain`). Either ends
when the server closes the response, so a connection the server keeps alive
(gunicorn ``gthread``) is never cut under the next request.

Only servers that put the connection's socket in the WSGI environ can be
helped this way (gunicorn: ``gunicorn.socket``, Werkzeug: ``werkzeug.socket``).
Others bound slow clients themselves: waitress reads the whole body before
it calls the application, uWSGI has ``--socket-timeout`` and ``harakiri``.

One daemon thread per process watches every armed deadline; arming and
disarming cost a dictionary insert and removal on the request's thread.
"""

from __future__ import annotations

import math
import os
import socket
import threading
import time
from typing import Any

__all__ = ["Armed", "connection_socket", "arm", "armed_count", "disarm", "linger"]

#: environ keys under which servers hand out the connection's socket
_SOCKET_KEYS = ("gunicorn.socket", "werkzeug.socket")
#: seconds the read side stays open after a refusal that left the body unread
LINGER_SECONDS = 1.0
#: the longest the watchdog sleeps between two looks (armed deadlines or not)
_IDLE = 1.0


def connection_socket(environ: dict[str, Any]) -> socket.socket | None:
    """The client connection's socket, when the server hands it out."""
    for key in _SOCKET_KEYS:
        sock = environ.get(key)
        if sock is not None and hasattr(sock, "shutdown"):
            return sock  # type: ignore[no-any-return]
    return None


class Armed:
    """One armed deadline (made by :func:`arm`); :attr:`fired` tells whether the read side was shut."""

    __slots__ = ("deadline", "sock", "fired")

    deadline: float  # monotonic
    sock: socket.socket
    fired: bool


_new_armed = object.__new__


class _Watchdog:
    """The process's one watcher thread, started on first use (again in a forked child).

    It sleeps until the earliest armed deadline, or :data:`_IDLE` seconds
    at most, and is woken only by a deadline earlier than its next look: a
    request arms a deadline seconds ahead, so arming is a dictionary insert
    and a comparison, never a thread woken per request (which cost a sync
    gunicorn worker about 100 µs of CPU per call).

    A child forked without Python's fork hooks (uWSGI's default) is not told;
    that is harmless, because uWSGI forks its workers at start-up or from its
    master, and neither has served a request, so neither has started the thread
    (on uWSGI a deadline is only armed for the drain after a refusal).
    """

    def __init__(self) -> None:
        self.armed: dict[int, Armed] = {}
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        #: when the thread looks next (monotonic); infinite while it is looking (or not
        #: started), so that a deadline armed meanwhile makes it look again at once
        self._next_look = math.inf

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._loop, name="bailing-body-deadline",
                                            daemon=True)
            self._thread.start()

    def after_fork(self) -> None:
        """In a forked child: the parent's thread did not come along, its sockets are its own."""
        self.armed = {}
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._thread = None
        self._next_look = math.inf

    def _loop(self) -> None:
        while True:
            self._next_look = math.inf  # looking: whatever is armed from here on wakes the wait below
            self._wake.clear()
            now = time.monotonic()
            earliest = now + _IDLE
            for key, entry in list(self.armed.items()):
                if entry.deadline <= now:
                    # whoever pops the entry owns it: this thread, or disarm() just before
                    if self.armed.pop(key, None) is not None:
                        _shut_read(entry)
                elif entry.deadline < earliest:
                    earliest = entry.deadline
            self._next_look = earliest
            self._wake.wait(max(0.0, earliest - time.monotonic()))


def _shut_read(entry: Armed) -> None:
    try:
        entry.sock.shutdown(socket.SHUT_RD)
    except OSError:  # already closed by the server: nothing left to bound
        pass
    finally:
        entry.fired = True  # after the call: whoever waits for it may close the socket


_WATCHDOG = _Watchdog()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_WATCHDOG.after_fork)


def arm(sock: socket.socket, seconds: float) -> Armed:
    """Shut the read side of ``sock`` in ``seconds`` unless :func:`disarm` comes first."""
    # one Python call on every signed request with a body: the entry is made and handed to
    # the watchdog here, without an __init__ or a method call of their own
    entry = _new_armed(Armed)
    entry.deadline = deadline = time.monotonic() + seconds
    entry.sock = sock
    entry.fired = False
    watchdog = _WATCHDOG
    if watchdog._thread is None:
        watchdog._start()
    watchdog.armed[id(entry)] = entry
    if deadline < watchdog._next_look:
        watchdog._wake.set()
    return entry


def disarm(entry: Armed) -> bool:
    """Cancel ``entry``; ``True`` if its deadline came first (the read side is shut)."""
    return _WATCHDOG.armed.pop(id(entry), None) is None


def armed_count() -> int:
    """How many deadlines of this process are armed now (diagnostics, tests)."""
    return len(_WATCHDOG.armed)


def linger(environ: dict[str, Any], seconds: float = LINGER_SECONDS) -> Armed | None:
    """After a refusal that left a body unread: stop reading it in ``seconds``.

    The answer goes out at once; the server may drain what the client still
    sends for that long, then reads end (the connection closes). The caller
    disarms it when the server closes the response: Werkzeug's server drains
    before that (and always closes the connection).
    """
    sock = connection_socket(environ)
    return arm(sock, seconds) if sock is not None else None
