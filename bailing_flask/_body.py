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
import tempfile
from typing import IO, Any

from .errors import SignatureError

__all__ = ["ReadBody", "read_body"]

_CHUNK = 64 * 1024


class ReadBody:
    """The outcome of :func:`read_body`: digest, length and a rewound stream."""

    __slots__ = ("sha256", "length", "stream", "spilled")

    def __init__(self, sha256: str, length: int, stream: IO[bytes], spilled: bool) -> None:
        self.sha256 = sha256
        self.length = length
        self.stream = stream
        self.spilled = spilled


def _declared_length(environ: dict[str, Any]) -> int | None:
    raw = environ.get("CONTENT_LENGTH")
    if raw is None or raw == "":
        return None
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
    declared = _declared_length(environ)
    if declared is not None and declared > max_size:
        raise SignatureError("body_too_large", status=413)
    if declared is None and not _is_terminated(environ):
        # PEP 3333: without Content-Length (and without chunking) there is no body.
        return ReadBody(hashlib.sha256(b"").hexdigest(), 0, io.BytesIO(b""), False)
    source = environ["wsgi.input"]
    remaining = declared
    digest = hashlib.sha256()
    memory = bytearray()
    spill: IO[bytes] | None = None
    total = 0
    while remaining is None or remaining > 0:
        want = _CHUNK if remaining is None else min(_CHUNK, remaining)
        try:
            chunk = source.read(want)
        except Exception as exc:  # client went away, server-side stream error
            if spill is not None:
                spill.close()
            raise SignatureError("malformed_body", status=400) from exc
        if not chunk:
            break
        total += len(chunk)
        if total > max_size:
            if spill is not None:
                spill.close()
            raise SignatureError("body_too_large", status=413)
        digest.update(chunk)
        if remaining is not None:
            remaining -= len(chunk)
        if spill is None and len(memory) + len(chunk) > spool_threshold:
            spill = tempfile.TemporaryFile()
            spill.write(memory)
            memory = bytearray()
        if spill is not None:
            spill.write(chunk)
        else:
            memory += chunk
    if remaining:
        if spill is not None:
            spill.close()
        raise SignatureError("malformed_body", status=400)
    stream: IO[bytes]
    if spill is not None:
        spill.seek(0)
        stream = spill
    else:
        stream = io.BytesIO(bytes(memory))
    return ReadBody(digest.hexdigest(), total, stream, spill is not None)
