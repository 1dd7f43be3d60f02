"""The audit record as one JSON line, and the sink that writes such lines off the request path.

:func:`audit_line` is the one place a record becomes text: the
``bailing_flask.audit`` logger's message and each line of a
:class:`JsonLinesSink` are the same string. Both are re-exported by
:mod:`bailing_flask.audit`, where they are documented.
"""

from __future__ import annotations

import atexit
import datetime as _dt
import json
import logging
import os
import re
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from bailing_flask.errors import ConfigurationError

__all__ = ["JsonLinesSink", "audit_line", "configured_sink"]

logger = logging.getLogger("bailing_flask")

#: Characters ``json.dumps(ensure_ascii=False)`` leaves raw that a line-based reader
#: (Python's ``str.splitlines``, JavaScript, many log shippers) may take for a line break,
#: with the rest of the C1 controls (terminals act on some of them).
_RAW_BREAKS = re.compile("[\x7f-\x9f\u2028\u2029]")


def _json_default(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def _escape_break(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


#: ``json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=_json_default)``,
#: the encoder made once
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_json_default).encode
#: the same without the look for circular references on every container (a third of the
#: encoding's cost), for records the package built and bounded only (:func:`_built_line`): a
#: circular value would recurse to the interpreter's limit instead of failing at once, which
#: overflows a small thread stack on Python 3.12 and later
_encode_built = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_json_default,
                                 check_circular=False).encode


def audit_line(record: Mapping[str, Any]) -> str:
    """The record as one line of JSON (without the line break): the logger's message, the sink's line.

    Readable non-ASCII text, but no character a reader splits lines on.

    The escaped characters can only occur inside JSON strings, where
    ``\\uXXXX`` means the same character, so the line still parses to the
    same record.
    """
    text = _encode(record)
    if not text.isascii():
        text = _RAW_BREAKS.sub(_escape_break, text)
    return text


def _built_line(record: Mapping[str, Any]) -> str:
    """:func:`audit_line` of a record the package built and bounded, which holds no cycle.

    Its dicts and lists are new copies (argument values copied from JSON,
    the rest copied by the bounding), so the look for a cycle is left out.
    """
    text = _encode_built(record)
    if not text.isascii():
        text = _RAW_BREAKS.sub(_escape_break, text)
    return text


#: The most bytes of lines the sink hands the operating system in one ``write``.
_BATCH_BYTES = 256 * 1024
#: Seconds the sink's thread sleeps when idle before it looks again (a safety net only).
_IDLE_WAIT = 5.0
#: Seconds the thread lets records gather once woken: one wake-up per batch, not per record
#: (waking a thread costs the request more than queueing the record does).
_GATHER = 0.05


def configured_sink(value: Any) -> JsonLinesSink | None:
    """The sink ``BAILING_AUDIT_SINK`` names: a :class:`JsonLinesSink`, or a path made into one."""
    if value is None or value == "":
        return None
    if isinstance(value, JsonLinesSink):
        return value
    if isinstance(value, (str, os.PathLike)):
        return JsonLinesSink(value)
    raise ConfigurationError(
        "BAILING_AUDIT_SINK must be a bailing_flask.audit.JsonLinesSink or the path of a file to "
        f"append the audit records to, not a {type(value).__name__}"
    )


#: what the sink's queue holds: a record, or how to build one (:meth:`JsonLinesSink._emit_later`)
_Queued: TypeAlias = "dict[str, Any] | tuple[Callable[..., Mapping[str, Any]], tuple[Any, ...]]"


class JsonLinesSink:
    """Audit records as JSON lines, written off the request path by a background thread.

    Set it as ``BAILING_AUDIT_SINK`` before ``Bailing(app)`` (a path there
    is made into one). Each record becomes exactly the line the
    ``bailing_flask.audit`` logger would log (:func:`audit_line`): the same
    fields in the same order, the same bounds and escapes.

    :param target: where the lines go:

        * a path (``str`` or ``os.PathLike``): the file is opened for
          appending (created with mode ``0o640`` less the umask) by each
          process at its first record, so each worker of a pre-forking
          server opens its own; if the file is renamed or removed (log
          rotation), the next batch goes to a new file at the path;
        * a stream (an object with ``write``, text or binary): each batch is
          written, then the stream is flushed; the sink never closes it;
        * a callable: called with each line (a ``str`` without the line
          break), in the sink's thread.

    :param max_queued: how many records may wait for the thread; when that
        many wait, a new record is dropped and counted (:attr:`dropped`),
        and the request goes on: the request thread never waits for the
        sink.
    :param report_every: seconds between two errors about dropped records
        on the ``bailing_flask`` logger: the first drop is reported at once,
        later ones at most once per interval, and whatever is left at
        :meth:`close` or at exit.

    The request thread only appends the record to the queue (and wakes the
    thread if it sleeps), or, when the sink is the record's only reader,
    what the record holds; the thread lets records
    gather for a few milliseconds, builds those, turns them into lines and
    writes them. In one process the
    lines keep the order of the records. Several processes appending to one file: each
    batch of whole lines is one ``write`` on a file opened with
    ``O_APPEND``, which a local file system on Linux appends whole, so the
    lines of different workers never interleave; on a network file system,
    a pipe or a FIFO only writes up to ``PIPE_BUF`` (4096 bytes) are whole:
    give each process its own file there. :meth:`flush` waits until every
    record queued before it is written; :meth:`close` flushes and stops the
    thread; at interpreter exit every sink is flushed.
    """

    def __init__(self, target: str | os.PathLike[str] | Any | Callable[[str], Any], *,
                 max_queued: int = 10_000, report_every: float = 60.0) -> None:
        if isinstance(target, (str, os.PathLike)):
            self._path: str | None = os.fspath(target)
            if not self._path:
                raise ConfigurationError("JsonLinesSink needs a file path, not an empty string")
            self._kind = "path"
        elif callable(getattr(target, "write", None)):
            self._path, self._kind = None, "stream"
        elif callable(target):
            self._path, self._kind = None, "callable"
        else:
            raise ConfigurationError(
                f"JsonLinesSink writes to a file path, a stream or a callable, not a {type(target).__name__}")
        if isinstance(max_queued, bool) or not isinstance(max_queued, int) or max_queued < 1:
            raise ConfigurationError("JsonLinesSink(max_queued=...) must be a positive number of records")
        if isinstance(report_every, bool) or not isinstance(report_every, (int, float)) or report_every < 0:
            raise ConfigurationError("JsonLinesSink(report_every=...) must be a number of seconds >= 0")
        self._target: Any = target
        #: the most records that wait for the thread
        self.max_queued = max_queued
        self.report_every = float(report_every)
        self._closed = False
        self._pid: int | None = None  # no process has started yet: the first record starts one
        self._fresh()
        _SINKS.add(self)

    def __repr__(self) -> str:
        return f"JsonLinesSink({self.target})"

    @property
    def target(self) -> str:
        """Where the lines go, for people: the path, or what the stream or callable is."""
        if self._path is not None:
            return self._path
        name = getattr(self._target, "name", None)
        if isinstance(name, str) and self._kind == "stream":
            return f"stream {name}"
        return f"{self._kind} {getattr(self._target, '__qualname__', type(self._target).__name__)}"

    @property
    def queued(self) -> int:
        """How many records wait for the thread in this process."""
        return len(self._queue) if self._pid == os.getpid() else 0

    # -- the request thread ------------------------------------------------------------

    def emit(self, record: Mapping[str, Any]) -> None:
        """Queue one (bounded) record; never blocks, never raises."""
        # a copy: a receiver of the signal, which gets the record next, may change it
        self._queue_item(dict(record))

    def _emit_later(self, build: Callable[..., Mapping[str, Any]], values: tuple[Any, ...]) -> None:
        """Queue the record ``build(*values)`` returns, to be built by the sink's thread.

        For the request path when nobody but the sink reads the record:
        ``values`` are what the record holds, read from the request already
        (immutable, or copies), and ``build`` makes the bounded record of them.
        """
        self._queue_item((build, values))

    def _queue_item(self, item: _Queued) -> None:
        try:
            if self._pid != os.getpid():
                self._start()
            queue = self._queue
            if self._closed or len(queue) >= self.max_queued:
                self._drop(1, "the sink is closed" if self._closed else "its queue is full")
                return
            queue.append(item)
            if self._idle:
                self._wake.set()
        except Exception as exc:  # e.g. no thread could be started: the request goes on
            self._drop(1, f"queueing failed: {type(exc).__name__}")

    def _fresh(self) -> None:
        """This process's own queue, thread, file and counts (a forked child starts empty)."""
        #: records dropped in this process (a full queue, a failed write, a closed sink)
        self.dropped = 0
        #: lines written in this process
        self.written = 0
        self._queue: deque[_Queued] = deque()
        self._wake = threading.Event()
        self._idle = False
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # the counts
        self._write_lock = threading.Lock()  # one writer at a time: the thread, flush, close
        self._fd: int | None = None
        self._file_id: tuple[int, int] | None = None
        self._reported = 0
        self._reported_at = -float("inf")

    def _start(self) -> None:
        """First record in this process: start the thread (after a fork, from scratch)."""
        with _START_LOCK:
            pid = os.getpid()
            if self._pid == pid:
                return
            if self._pid is not None:  # forked: the parent's queue and file are the parent's
                self._close_fd()
                self._fresh()
            self._pid = pid
            if not self._closed:
                self._thread = threading.Thread(target=self._run, name="bailing-audit-sink", daemon=True)
                self._thread.start()

    def _drop(self, count: int, why: str) -> None:
        with self._lock:
            self.dropped += count
        self._report(why)

    def _report(self, why: str = "", *, final: bool = False) -> None:
        """Log the drops not yet reported, at most once per ``report_every`` seconds (``final``: now)."""
        with self._lock:
            now = time.monotonic()
            new = self.dropped - self._reported
            if not new or (not final and now - self._reported_at < self.report_every):
                return
            self._reported, self._reported_at = self.dropped, now
            total = self.dropped
        logger.error("bailing: the audit sink %s dropped %d record(s)%s; %d in this process so far",
                     self.target, new, f" ({why})" if why else "", total)

    # -- the sink's thread ---------------------------------------------------------------

    def _run(self) -> None:
        queue, wake = self._queue, self._wake
        while not self._closed:
            self._idle = True
            if not queue:  # a record queued after this look sees _idle and wakes us
                wake.wait(1.0 if self.dropped != self._reported else _IDLE_WAIT)
            self._idle = False
            wake.clear()
            if queue and not self._closed:
                time.sleep(_GATHER)  # records queued meanwhile do not wake us: we are not idle
            try:
                self._write_queued()
                if self.dropped != self._reported:
                    self._report()
            except Exception:  # pragma: no cover - _write counts its own failures; the thread stays
                logger.exception("bailing: the audit sink %s failed", self.target)

    def _write_queued(self) -> None:
        """Write every record queued so far, batch by batch (any thread; one at a time)."""
        with self._write_lock:
            queue = self._queue
            while queue:
                lines: list[str] = []
                size = 0
                while queue and size < _BATCH_BYTES:
                    item = queue.popleft()
                    if isinstance(item, tuple):  # _emit_later: the record is built here
                        try:
                            line = _built_line(item[0](*item[1]))
                        except Exception as exc:
                            self._drop(1, f"building a record failed: {type(exc).__name__}")
                            continue
                    else:
                        try:  # a record handed to emit() may be anything
                            line = audit_line(item)
                        except (TypeError, ValueError, RecursionError):  # e.g. a circular value
                            self._drop(1, "a record is not JSON")
                            continue
                    lines.append(line)
                    size += len(line) + 1
                if lines:
                    self._write(lines)

    def _write(self, lines: list[str]) -> None:
        """Hand ``lines`` to the target; what it refuses is counted as dropped."""
        if self._kind == "callable":
            for line in lines:
                try:
                    self._target(line)
                except Exception as exc:
                    self._drop(1, f"the callable raised {type(exc).__name__}")
                else:
                    self.written += 1
            return
        text = "\n".join(lines) + "\n"
        try:
            if self._kind == "stream":
                try:
                    self._target.write(text)
                except TypeError:  # a binary stream
                    self._target.write(text.encode("utf-8"))
                flush = getattr(self._target, "flush", None)
                if callable(flush):
                    flush()
            else:
                self._append(text.encode("utf-8"))
        except Exception as exc:
            self._close_fd()  # opened again for the next batch
            reason = getattr(exc, "strerror", None)
            self._drop(len(lines), f"writing failed: {type(exc).__name__}" + (f": {reason}" if reason else ""))
            return
        self.written += len(lines)

    def _append(self, data: bytes) -> None:
        """One ``write`` of whole lines at the end of the file (more only if the OS takes part)."""
        assert self._path is not None
        if self._fd is not None:
            try:  # rotated away (renamed or removed)? the next lines go to the path's new file
                info = os.stat(self._path)
                moved = (info.st_dev, info.st_ino) != self._file_id
            except OSError:
                moved = True
            if moved:
                self._close_fd()
        if self._fd is None:
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
            self._fd = os.open(self._path, flags, 0o640)
            info = os.fstat(self._fd)
            self._file_id = (info.st_dev, info.st_ino)
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]

    def _close_fd(self) -> None:
        fd, self._fd, self._file_id = self._fd, None, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    # -- the application ---------------------------------------------------------------------

    def flush(self) -> None:
        """Write every record queued in this process before the call; return when it is written."""
        if self._pid != os.getpid():
            return  # nothing was queued in this process
        self._write_queued()
        self._report()

    def _final_flush(self) -> None:
        """Flush, and report every drop not reported yet (at close and at exit)."""
        self.flush()
        if self._pid == os.getpid():
            self._report(final=True)

    def close(self) -> None:
        """Flush, stop the thread and close the file; records that still arrive are dropped (counted)."""
        self._closed = True
        if self._pid != os.getpid():
            return
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)
        self._final_flush()
        with self._write_lock:
            self._close_fd()


JsonLinesSink.__module__ = "bailing_flask.audit"  # where it is documented and imported from
_SINKS: weakref.WeakSet[JsonLinesSink] = weakref.WeakSet()
_START_LOCK = threading.Lock()


def _flush_sinks() -> None:
    """At interpreter exit: what the sinks of this process still hold is written."""
    for sink in list(_SINKS):
        try:
            sink._final_flush()
        except Exception:  # pragma: no cover - flush reports its own failures
            logger.exception("bailing: flushing the audit sink %s at exit failed", sink.target)


def _reset_in_child() -> None:
    global _START_LOCK
    _START_LOCK = threading.Lock()  # a parent's thread may have held it at the fork


atexit.register(_flush_sinks)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_in_child)
