"""SHA-256 of the short inputs every signed request hashes: the body, the signed string.

``hashlib.sha256`` is OpenSSL's. Through OpenSSL 3's generic digest
interface a short input costs little in a loop that keeps that code in the
processor's caches, but several µs where a real server runs it: between two
requests the worker parses HTTP, waits on sockets and runs the app, and the
caches hold other things by the next call. Python's own SHA-256 (the
``_sha256`` module, ``_sha2`` from Python 3.12) is a few hundred lines of C
that cost about half as much there; OpenSSL stays faster per byte (it uses
the processor's SHA instructions), so inputs over :data:`SMALL` bytes go to
it. Both compute the same standard SHA-256: only the time differs. Where
Python was built without its own (a FIPS build may leave it out), or when
OpenSSL runs in FIPS mode (a system whose policy requires its validated
module for every digest), every input goes to OpenSSL.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable
from typing import Protocol

__all__ = ["SMALL", "HashState", "builtin", "sha256_hex"]

_Input = bytes | bytearray

#: Inputs up to this many bytes are hashed by Python's own SHA-256 (when it has one).
SMALL = 1024


class HashState(Protocol):
    """What the package uses of a SHA-256 object (either implementation)."""

    def update(self, data: bytes | bytearray | memoryview, /) -> None: ...

    def digest(self) -> bytes: ...

    def hexdigest(self) -> str: ...

    def copy(self) -> HashState: ...


def _fips_mode() -> bool:
    """Whether OpenSSL runs in FIPS mode: then every digest is OpenSSL's (its validated module)."""
    try:
        import _hashlib
    except ImportError:  # a Python without OpenSSL: nothing but the builtin anyway
        return False
    get_fips_mode = getattr(_hashlib, "get_fips_mode", None)
    return bool(get_fips_mode()) if callable(get_fips_mode) else False


def _builtin_sha256() -> Callable[[_Input], HashState] | None:
    """Python's own SHA-256 constructor, if this build has one and OpenSSL is not in FIPS mode."""
    if _fips_mode():
        return None
    for module in ("_sha2", "_sha256"):
        try:
            constructor: Callable[[_Input], HashState] = getattr(importlib.import_module(module), "sha256")
        except (ImportError, AttributeError):
            continue
        if constructor(b"abc").hexdigest() == hashlib.sha256(b"abc").hexdigest():
            return constructor
    return None


_openssl: Callable[[_Input], HashState] = hashlib.sha256
#: Python's own SHA-256; OpenSSL's where the build has none or OpenSSL runs in FIPS mode
builtin: Callable[[_Input], HashState] = _builtin_sha256() or _openssl


def sha256_hex(data: _Input) -> str:
    """The hex SHA-256 of ``data``: by Python's own for a short input, else by OpenSSL's."""
    return (builtin if len(data) <= SMALL else _openssl)(data).hexdigest()
