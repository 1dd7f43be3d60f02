"""Read a WSGI request body once: hash it while streaming, hand it back intact.

The signature covers the raw body bytes, so the verifier must see them
before the app does, and the app must still get every byte afterwards
(``request.get_data()``, ``request.json``, ``request.form``). Bodies stay in
memory up to a threshold and spill to an anonymous temporary file beyond
it; anything over the configured maximum is refused without reading it all.
"""

from __future__ import annotations

import hashlib
import io
import queue
import tempfile
import threading
from typing import IO, Any, cast

from bailing_flask.errors import SignatureError
from bailing_flask.wire.digest import sha256_hex

__all__ = ["BodyParts", "ReadBody", "read_body", "read_body_parts"]

_CHUNK = 64 * 1024
#: read size once a body is spooled to a file (fewer, larger writes)
_SPILL_CHUNK = 1024 * 1024
_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


class ReadBody:
    """The outcome of :func:`read_body`: digest, length and a rewound stream."""

    __slots__ = ("sha256", "length", "stream", "spilled")

    def __init__(self, sha256: str, length: int, stream: IO[bytes], spilled: bool) -> None:
        self.sha256 = sha256
        self.length = length
        self.stream = stream
        self.spilled = spilled


#: whether a stream class is a raw stream (:func:`_read`), by class
_RAW_STREAM: dict[type, bool] = {}


def _read(source: IO[bytes], size: int) -> bytes | bytearray:
    """``source.read(size)``, never more than ``size`` bytes, never bytes nobody sent.

    A raw stream's ``read`` is ``readinto`` on a fresh buffer, and CPython
    trusts the count ``readinto`` returns. Werkzeug's development server
    decodes chunked uploads with such a stream, and when a chunk ends early
    (the client closed) it shrinks the buffer yet reports the full count:
    ``read`` then returns uninitialised memory, or the process crashes. So a
    raw stream reads into a fixed-size view here, which refuses to shrink
    (the stream raises, and the body is malformed), and the count is checked.
    """
    raw = _RAW_STREAM.get(source.__class__)
    if raw is None:  # once per stream class: an ABC check is a Python call on every read
        raw = _RAW_STREAM[source.__class__] = isinstance(source, io.RawIOBase)
    if not raw:
        return source.read(size)
    stream = cast(io.RawIOBase, source)  # a raw stream, by the check above
    buffer = bytearray(size)
    with memoryview(buffer) as view:
        count = stream.readinto(view)
    if count is None or not 0 <= count <= size:
        raise ValueError(f"readinto returned {count!r} for {size} bytes")
    del buffer[count:]
    return buffer


def _declared_length(raw: str) -> int:
    raw = raw.strip()
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        raise SignatureError("malformed_body", status=400)
    return int(raw)


def _is_terminated(environ: dict[str, Any]) -> bool:
    """True when the server promises an EOF-terminated stream (chunked uploads)."""
    if environ.get("wsgi.input_terminated"):
        return True
    return "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()


def read_body(environ: dict[str, Any], max_size: int, spool_threshold: int) -> ReadBody:
    """Consume ``environ['wsgi.input']`` and return what the app will read instead.

    Raises ``body_too_large`` (413) as soon as the declared or the streamed
    size exceeds ``max_size``, and ``malformed_body`` (400) for an invalid
    ``Content-Length`` or a body that ends early.
    """
    return ReadBody(*read_body_parts(environ, max_size, spool_threshold))


#: what :func:`read_body_parts` returns: sha256 hex, length, the stream to hand over, spilled
BodyParts = tuple[str, int, IO[bytes], bool]


def read_body_parts(environ: dict[str, Any], max_size: int, spool_threshold: int) -> BodyParts:
    """:func:`read_body` as a plain tuple ``(sha256, length, stream, spilled)`` (the middleware's)."""
    raw_length = environ.get("CONTENT_LENGTH")
    if not raw_length:
        declared = None
    elif raw_length.isdigit() and raw_length.isascii() and len(raw_length) <= 18:
        declared = int(raw_length)  # the usual, well-formed case
    else:
        declared = _declared_length(raw_length)
    if declared is not None and declared > max_size:
        raise SignatureError("body_too_large", status=413)
    if (declared is None and not _is_terminated(environ)) or declared == 0:
        # PEP 3333: without Content-Length (and without chunking) there is no body.
        return _EMPTY_SHA256, 0, io.BytesIO(b""), False
    source = environ["wsgi.input"]
    if declared is not None and declared <= spool_threshold:
        # the common case: a small body, usually in one read
        try:
            data = _read(source, declared)
        except Exception as exc:  # client went away, server-side stream error
            raise SignatureError("malformed_body", status=400) from exc
        if len(data) == declared:
            return sha256_hex(data), declared, io.BytesIO(data), False
        # a short read: continue below with what arrived
        first = data
    else:
        first = b""
    return _read_streamed(source, first, declared, max_size, spool_threshold)


class _Hasher:
    """sha256 that moves to a background thread once a body spills to disk.

    For large bodies the file write costs about as much as the hash; both
    release the GIL, so hashing on a second thread while the request's
    thread writes the spool file roughly halves the wall time.
    """

    def __init__(self, first: bytes | bytearray) -> None:
        self._digest = hashlib.sha256(first)
        self._queue: queue.Queue[bytes | bytearray | None] | None = None
        self._thread: threading.Thread | None = None

    def go_parallel(self) -> None:
        self._queue = queue.Queue(maxsize=4)  # bounds memory: at most 4 chunks in flight
        self._thread = threading.Thread(target=self._run, name="bailing-body-hash", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        assert self._queue is not None
        while (chunk := self._queue.get()) is not None:
            self._digest.update(chunk)

    def update(self, chunk: bytes | bytearray) -> None:
        if self._queue is None:
            self._digest.update(chunk)
        else:
            self._queue.put(chunk)

    def hexdigest(self) -> str:
        self.stop()
        return self._digest.hexdigest()

    def stop(self) -> None:
        if self._queue is not None and self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._queue = self._thread = None


def _read_streamed(
    source: IO[bytes], first: bytes | bytearray, declared: int | None, max_size: int,
    spool_threshold: int,
) -> BodyParts:
    """The general case: unknown length (chunked), a short read, or a large body."""
    remaining = declared
    hasher = _Hasher(first)
    memory = bytearray(first)
    spill: IO[bytes] | None = None
    total = len(first)
    if remaining is not None:
        remaining -= total
    try:
        while remaining is None or remaining > 0:
            size = _SPILL_CHUNK if spill is not None else _CHUNK
            want = size if remaining is None else min(size, remaining)
            try:
                chunk = _read(source, want)
            except Exception as exc:  # client went away, server-side stream error
                raise SignatureError("malformed_body", status=400) from exc
            if not chunk:
                break
            total += len(chunk)
            if total > max_size:
                raise SignatureError("body_too_large", status=413)
            if remaining is not None:
                remaining -= len(chunk)
            if spill is None and len(memory) + len(chunk) > spool_threshold:
                spill = tempfile.TemporaryFile(buffering=0)
                spill.write(memory)
                memory = bytearray()
                hasher.go_parallel()
            hasher.update(chunk)
            if spill is not None:
                spill.write(chunk)
            else:
                memory += chunk
        if remaining:
            raise SignatureError("malformed_body", status=400)
        digest = hasher.hexdigest()
    except BaseException:
        hasher.stop()
        if spill is not None:
            spill.close()
        raise
    if spill is not None:
        spill.seek(0)
        return digest, total, io.BufferedReader(spill), True  # type: ignore[arg-type,type-var,unused-ignore]
    return digest, total, io.BytesIO(bytes(memory)), False
