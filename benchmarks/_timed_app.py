"""The benchmark apps wrapped to count the CPU a gunicorn worker spends inside them, per request.

``python -m gunicorn 'benchmarks._timed_app:tool()'`` (or ``bare()``)
serves :func:`benchmarks._apps.tool_app` (``bare_app``) behind a WSGI
layer that adds this thread's CPU time (``time.thread_time_ns``) from the
call into the app to the end of its response (iterated and closed) to a
running total. ``GET /__bench_app_time`` answers that total and the request
count since the last such ask, as JSON with the path of the
``bailing_flask`` the worker imported, and starts a new count.

The workers' CPU from ``/proc`` counts in 10 ms ticks and also holds the
server's own work (HTTP parsing, sockets); this is the app's share alone,
in nanoseconds. The layer is the same on every side, so it cancels out of a
difference.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from . import _apps

#: The path that answers the total (and resets it); never timed.
TIME_PATH = "/__bench_app_time"


class TimedApp:
    """A WSGI app that adds the thread CPU each request spends in ``app`` to a total."""

    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app
        self._lock = threading.Lock()
        self._ns = 0
        self._count = 0

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == TIME_PATH:
            return self._answer(start_response)
        clock = time.thread_time_ns
        started = clock()
        result = self.app(environ, start_response)
        try:
            chunks = list(result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        spent = clock() - started
        with self._lock:
            self._ns += spent
            self._count += 1
        return chunks

    def _answer(self, start_response: Callable[..., Any]) -> list[bytes]:
        import bailing_flask

        with self._lock:
            ns, count, self._ns, self._count = self._ns, self._count, 0, 0
        body = json.dumps({"ns": ns, "requests": count, "package": bailing_flask.__file__}).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]


def tool() -> TimedApp:
    """:func:`benchmarks._apps.tool_app`, timed."""
    return TimedApp(_apps.tool_app())


def bare() -> TimedApp:
    """:func:`benchmarks._apps.bare_app`, timed."""
    return TimedApp(_apps.bare_app())
