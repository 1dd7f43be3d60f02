"""After a refusal that left the body unread: read the rest and drop it, within bounds.

A server that closes a connection while request data is still unread makes
the kernel answer the client with a TCP reset. A client still sending its
body (node's ``fetch``, the hub's client) may then report the reset instead
of the answer that was already on its way: the hub sees ``fetch failed``
where a ``413 body_too_large`` was sent, and records a side-effecting call
as uncertain. wsgiref and uWSGI close at once, gunicorn after reading at
most 64 KiB more.

So the refusal is answered first, and when the server closes the response
the rest of the body is read and thrown away, bounded in bytes and in time:

* bytes: a body whose ``Content-Length`` is at most :data:`FACTOR` times the
  body limit (and at least :data:`FLOOR`) is drained, no further than that
  length; a chunked body (on servers that end the stream) until its end or
  that many bytes. A larger declared body is left to the server, which
  closes at once (the client may see a reset: it sent far more than allowed).
* time: the body deadline (``BAILING_BODY_TIMEOUT``), counted from the start
  of the drain. Past it the connection's read side is shut (by the watchdog
  of :mod:`bailing_flask.wire.deadline`), the blocked read returns, and the
  server closes. A client that trickles its body holds the worker no longer
  than one that trickles a body within the limit.

The time can only be bounded where the connection is at hand: gunicorn puts
it in the environ; wsgiref's and uWSGI's ``wsgi.input`` read straight from
the connection's socket, and a duplicate of that descriptor is shut (the
shutdown acts on the connection, not on the descriptor). Elsewhere nothing
is drained. Werkzeug's server drains by itself before it closes the
response; for it the read side is shut after a short linger instead, as
before. waitress reads every body before it calls the application.

Nothing here runs unless a request was refused before its body was read.
"""

from __future__ import annotations

import logging
import os
import socket
import stat
import time
from collections.abc import Callable
from typing import IO, Any

from bailing_flask.wire import deadline as _deadline

__all__ = ["FACTOR", "FLOOR", "after_refusal", "budget", "drain"]

logger = logging.getLogger("bailing_flask")

#: a declared body up to this many times the body limit is drained after a refusal
FACTOR = 4
#: ... and one up to this many bytes, however small the limit
FLOOR = 1024 * 1024
#: bytes read and dropped at a time
_PIECE = 256 * 1024


def after_refusal(environ: dict[str, Any], limit: int, seconds: float) -> Callable[[], None] | None:
    """What to do when the server closes the answer to a refusal that left the body unread.

    ``limit`` is the body limit that applies, ``seconds`` the body deadline.
    Returns ``None`` when there is nothing to do. Werkzeug's linger is armed
    at once (its server drains before it closes the response).
    """
    if environ.get("werkzeug.socket") is not None:
        armed = _deadline.linger(environ, min(_deadline.LINGER_SECONDS, seconds))
        if armed is None:
            return None
        return lambda: _end_linger(armed)
    allowed = budget(environ, limit)
    source = environ.get("wsgi.input")
    if allowed is None or source is None:
        return None
    return lambda: drain(environ, source, allowed, seconds)


def _end_linger(armed: _deadline.Armed) -> None:
    """The server closed the answer: the linger has done its job."""
    _deadline.disarm(armed)


def budget(environ: dict[str, Any], limit: int) -> tuple[int, bool] | None:
    """How much of the unread body to drain: ``(bytes, exact)``, or ``None`` for nothing.

    ``exact`` means a declared length: exactly that many bytes follow, and
    no more may be read (wsgiref's stream would wait for the next request).
    Otherwise the server ends the stream itself (a chunked upload it
    decodes), and at most ``bytes`` are read before giving up.
    """
    cap = max(FACTOR * limit, FLOOR)
    raw = environ.get("CONTENT_LENGTH")
    if raw:
        raw = raw.strip()
        if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
            return None  # no length to trust: leave it to the server
        length = int(raw)
        return (length, True) if 0 < length <= cap else None
    if environ.get("wsgi.input_terminated"):
        # wsgiref passes a chunked upload on undecoded and never ends it: not drained
        return cap, False
    return None


def drain(environ: dict[str, Any], source: IO[bytes], allowed: tuple[int, bool],
          seconds: float) -> None:
    """Read and drop the rest of the body, within ``allowed`` and ``seconds``; never raises."""
    sock, owned = _connection(environ, source)
    if sock is None:
        return  # the time cannot be bounded: leave the body to the server
    try:
        armed = _deadline.arm(sock, seconds)
        try:
            _discard(source, *allowed)
        finally:
            if _deadline.disarm(armed) and owned:
                _wait_shut(armed)  # the watchdog may still be shutting the duplicate
    finally:
        if owned:
            sock.close()


def _discard(source: IO[bytes], left: int, exact: bool) -> None:
    try:
        while left > 0:
            chunk = source.read(min(_PIECE, left))
            if not chunk:
                return  # the end, or the read side was shut at the deadline
            left -= len(chunk)
    except Exception as exc:  # client gone, server-side stream error: stop draining
        logger.debug("bailing: stopped draining a refused body: %r", exc)
        return
    if not exact:
        logger.debug("bailing: a refused chunked body went on past the drain's bound")


def _wait_shut(armed: _deadline.Armed) -> None:
    """Until the watchdog that fired ``armed`` is done with the socket (microseconds)."""
    until = time.monotonic() + 5.0
    while not armed.fired and time.monotonic() < until:
        time.sleep(0.001)


def _connection(environ: dict[str, Any], source: Any) -> tuple[socket.socket | None, bool]:
    """The connection's socket, and whether it is a duplicate to be closed after use."""
    sock = _deadline.connection_socket(environ)
    if sock is not None:
        return sock, False
    try:
        fd = source.fileno()  # wsgiref: the socket's file; uWSGI: the connection's descriptor
        if not isinstance(fd, int) or not stat.S_ISSOCK(os.fstat(fd).st_mode):
            return None, False
        copy = os.dup(fd)
    except (AttributeError, OSError, ValueError):  # no descriptor: a buffer, a wrapper
        return None, False
    try:
        return socket.socket(fileno=copy), True
    except OSError:
        os.close(copy)
        return None, False
