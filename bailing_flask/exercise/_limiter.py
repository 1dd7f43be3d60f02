"""Flask-Limiter: do two hub users share one bucket? Seen from what the limiter did.

Every hub call comes from the hub's address, so a limiter keyed on the
remote address counts all of the hub's users in one bucket, whatever its
key function is called: ``get_remote_address``, ``lambda:
request.remote_addr``, a function of the app's that reads
``X-Forwarded-For``. So the exercise does not read names: it sends the same
tool two subjects' calls from one address (both refused by the gate, so
nothing runs) and compares the buckets Flask-Limiter counted each request
in (``limiter.current_limits``, read when the request finishes).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from flask import Flask, request, request_finished

from bailing_flask._pipeline.gate import EXERCISE_KEY
from bailing_flask.exercise._stack import code_name

__all__ = ["Bucket", "SECOND_SUBJECT", "recording", "shared"]

#: The second subject of the comparison: unknown to every app, so the gate refuses it.
SECOND_SUBJECT = "__bailing_exercise__:second"


@dataclass(frozen=True)
class Bucket:
    """One limit Flask-Limiter counted a request against."""

    #: the limit, as Flask-Limiter prints it (``1000 per 1 minute``)
    limit: str
    #: the storage key: the same key is the same bucket
    key: str
    #: what the limit's key function returned
    value: str
    #: the limiter's own ``key_func``, when that is what returned ``value``
    key_func: str | None


def _limiters(app: Flask) -> list[Any]:
    found = app.extensions.get("limiter") or ()
    return list(found) if isinstance(found, (set, list, tuple, frozenset)) else [found]


def _buckets(app: Flask) -> list[Bucket]:
    """The buckets of the current request, in every limiter of ``app``."""
    found = []
    for limiter in _limiters(app):
        try:
            limits = list(getattr(limiter, "current_limits", None) or ())
        except Exception:  # another Flask-Limiter version: nothing to compare
            continue
        default = getattr(limiter, "_key_func", None)
        try:
            default_value = default() if callable(default) else None
        except Exception:
            default_value = None
        for limit in limits:
            args = list(getattr(limit, "request_args", None) or ())
            value = str(args[-2]) if len(args) >= 2 else ""
            found.append(Bucket(str(getattr(limit, "limit", "?")), str(getattr(limit, "key", "")), value,
                                code_name(default) if default_value is not None and str(default_value) == value
                                else None))
    return found


@contextlib.contextmanager
def recording(app: Flask, into: dict[int, list[Bucket]]) -> Iterator[None]:
    """While open, ``into[id(probe)]`` gets the buckets of every exercise request."""
    if not _limiters(app):
        yield
        return

    def finished(sender: Any, response: Any, **extra: Any) -> None:
        probe = request.environ.get(EXERCISE_KEY)
        if probe is not None:
            into[id(probe)] = _buckets(app)

    request_finished.connect(finished, app)
    try:
        yield
    finally:
        request_finished.disconnect(finished, app)


def shared(first: list[Bucket], second: list[Bucket]) -> list[Bucket]:
    """The buckets both requests were counted in."""
    keys = {bucket.key for bucket in second if bucket.key}
    return [bucket for bucket in first if bucket.key in keys]
