"""Counting what one request does: Python calls, ``LocalProxy`` lookups, ``ensure_sync``.

A count is exact and does not depend on the machine's load, so it is the
steadiest of the figures: :func:`count_calls` runs one (warmed-up) call
under :func:`sys.setprofile` and counts the profile events of this thread.

* **Python calls**: every ``call`` event, i.e. every time a Python frame
  starts running - a function call, and a generator or coroutine resuming
  (the WSGI response iterable, ``contextlib`` context managers). The
  driver's own frame (the case being counted) is left out, so the count is
  what ``app(environ, start_response)``, iterating the response and closing
  it cost. Resumptions are also counted apart (``resumed``); C functions
  (``c_call`` events: builtins, methods of C types) apart again (``c_calls``).
* **LocalProxy lookups**: calls of Werkzeug's ``_get_current_object``
  (``werkzeug/local.py``), the function every access through ``request``,
  ``current_app``, ``g``, ``session`` or the package's ``current_call``
  resolves the proxy with. ``by_caller`` says which function outside
  ``werkzeug/local.py`` looked up.
* **ensure_sync**: calls of ``Flask.ensure_sync`` (each view and hook Flask
  runs goes through it once).

The profile hook sees only this thread; the signed requests timed here are
small, so the middleware hashes on this thread too.
"""

from __future__ import annotations

import inspect
import os
import statistics
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

_RESUMABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
_LOCAL = os.sep + os.path.join("werkzeug", "local.py")
_FLASK_APP = (os.sep + os.path.join("flask", "app.py"), os.sep + os.path.join("flask", "sansio", "app.py"))


@dataclass
class CallCount:
    """What one call did, by count."""

    python: int = 0
    resumed: int = 0
    c_calls: int = 0
    proxy_lookups: int = 0
    ensure_sync: int = 0
    #: Python calls per function: ``"file:line(name)"`` -> count (generator resumptions included)
    by_function: Counter[str] = field(default_factory=Counter)
    #: Python calls per top-level package (``bailing_flask``, ``flask``, ``werkzeug``, ``stdlib``, ...)
    by_package: Counter[str] = field(default_factory=Counter)
    #: LocalProxy lookups per calling function (outside ``werkzeug/local.py``)
    proxy_by_caller: Counter[str] = field(default_factory=Counter)
    #: ``ensure_sync`` calls per calling function
    ensure_sync_by_caller: Counter[str] = field(default_factory=Counter)


def _stdlib_dirs() -> tuple[str, ...]:
    import sysconfig

    paths = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")}
    return tuple(os.path.abspath(p) + os.sep for p in paths)


_STDLIB = _stdlib_dirs()


def package_of(filename: str) -> str:
    """The top-level package a code object belongs to (``stdlib`` for the standard library)."""
    path = os.path.abspath(filename)
    parts = path.split(os.sep)
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            rest = parts[parts.index(marker) + 1:]
            return rest[0].removesuffix(".py") if rest else "?"
    if "bailing_flask" in parts:
        return "bailing_flask"
    if "benchmarks" in parts:
        return "benchmarks"
    if path.startswith(_STDLIB) or filename.startswith("<frozen"):
        return "stdlib"
    return os.path.basename(filename)


def where(frame: FrameType) -> str:
    """``package/relative/file.py:line(name)`` of a frame's function."""
    code = frame.f_code
    path = os.path.abspath(code.co_filename)
    parts = path.split(os.sep)
    short = os.path.basename(path)
    for marker in ("site-packages", "dist-packages", "bailing_flask", "benchmarks"):
        if marker in parts:
            i = parts.index(marker)
            short = os.sep.join(parts[i + 1:] if marker.endswith("packages") else parts[i:])
            break
    return f"{short}:{code.co_firstlineno}({code.co_name})"


def _caller(frame: FrameType) -> str:
    """The first frame above ``frame`` that is not Werkzeug's proxy machinery."""
    outer = frame.f_back
    while outer is not None and outer.f_code.co_filename.endswith(_LOCAL):
        outer = outer.f_back
    return where(outer) if outer is not None else "?"


def count_calls(fn: Callable[[], Any]) -> CallCount:
    """Run ``fn()`` once under a profile hook; count what it did (its own frame left out)."""
    counts = CallCount()
    alive: dict[int, FrameType] = {}  # generator frames seen, kept alive so ids stay unique
    packages: dict[str, str] = {}
    me = sys._getframe()

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call":
            counts.c_calls += 1
            return
        if event != "call" or frame.f_back is me:
            return
        code = frame.f_code
        if code.co_flags & _RESUMABLE:
            if id(frame) in alive:
                counts.resumed += 1
            alive[id(frame)] = frame
        counts.python += 1
        filename = code.co_filename
        package = packages.get(filename)
        if package is None:
            package = packages[filename] = package_of(filename)
        counts.by_package[package] += 1
        counts.by_function[where(frame)] += 1
        name = code.co_name
        if name == "_get_current_object" and filename.endswith(_LOCAL):
            counts.proxy_lookups += 1
            counts.proxy_by_caller[_caller(frame)] += 1
        elif name == "ensure_sync" and filename.endswith(_FLASK_APP):
            counts.ensure_sync += 1
            if frame.f_back is not None:
                counts.ensure_sync_by_caller[where(frame.f_back)] += 1

    sys.setprofile(hook)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return counts


@dataclass
class CountSummary:
    """Counts of several calls of one case: the median and the range, per measure."""

    runs: list[CallCount]

    def values(self, measure: str) -> list[int]:
        return [int(getattr(c, measure)) for c in self.runs]

    def median(self, measure: str) -> float:
        return float(statistics.median(self.values(measure)))

    def range(self, measure: str) -> tuple[float, float]:
        values = self.values(measure)
        return float(min(values)), float(max(values))

    def last(self) -> CallCount:
        return self.runs[-1]


def count_case(case: Callable[[], Any], calls: int = 5, warmup: int = 50) -> CountSummary:
    """Warm ``case`` up, then count ``calls`` separate calls (each its own count).

    A case with a ``prepare(loops)`` hook (fresh signed requests) gets one
    before the warm-up and one before the counted calls, outside the counting.
    """
    prepare = getattr(case, "prepare", None)
    if prepare is not None:
        prepare(warmup)
    for _ in range(warmup):
        case()
    if prepare is not None:
        prepare(calls)
    return CountSummary([count_calls(case) for _ in range(calls)])
