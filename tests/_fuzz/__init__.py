"""Fuzz targets shared by the test suite (``tests/test_fuzz_*.py``) and the long run
(``benchmarks/reliability/fuzz.py``).

Each target module offers a hypothesis strategy of cases and a context
manager that starts what the target needs (an app, a server) and yields a
``check(case) -> Outcome``. A check never raises for a problem it finds: it
classifies it (:class:`Outcome`), so the test suite can assert on one case
while the long run counts thousands.

The oracles do not trust the code under test: signatures are recomputed here
from the wire contract (:func:`hub_signature`), independently of
``bailing_flask.wire.signing``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import tracemalloc
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

__all__ = [
    "SECRET", "CLIENT_TOKEN", "PROBLEMS", "Outcome", "Tally", "hub_signature", "callback_signature",
    "refusal_problem", "fuzz_settings", "run_batch", "MemoryMeter", "server_peak_rss",
]

#: The provider secret of every fuzzed app (long enough not to warn).
SECRET = "fuzz-provider-secret-0123456789abcdefghijklmnop"
#: The client token of every fuzzed app (callbacks, tickets).
CLIENT_TOKEN = "fuzz-client-token-0123456789abcdefghijklmnopqr"

#: What a check can find, in the order the figures list them.
PROBLEMS = ("exception", "server_error", "false_accept", "no_reason", "malformed")


@dataclass
class Outcome:
    """What one case did: the problems found (none is the normal case) and a label."""

    problems: list[tuple[str, str]] = field(default_factory=list)
    #: a short label of what happened (``"200"``, ``"401 bad_signature"``), for statistics
    label: str = ""

    def add(self, kind: str, detail: str) -> None:
        assert kind in PROBLEMS, kind
        self.problems.append((kind, detail))

    @property
    def ok(self) -> bool:
        return not self.problems

    def __str__(self) -> str:
        return "; ".join(f"{kind}: {detail}" for kind, detail in self.problems) or f"ok ({self.label})"


@dataclass
class Tally:
    """Counts over a batch: cases, problems by kind, the first examples of each."""

    cases: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PROBLEMS, 0))
    examples: dict[str, list[str]] = field(default_factory=dict)
    labels: dict[str, int] = field(default_factory=dict)

    def record(self, outcome: Outcome, case: Any = None) -> None:
        self.cases += 1
        self.labels[outcome.label] = self.labels.get(outcome.label, 0) + 1
        for kind, detail in outcome.problems:
            self.counts[kind] += 1
            kept = self.examples.setdefault(kind, [])
            if len(kept) < 3:
                kept.append(f"{detail} <- {case!r}"[:2000])


def hub_signature(secret: str, ts: str, method: str, path_with_query: str, body: bytes,
                  subject: str = "", job_id: str = "") -> str:
    """The tool-call signature as the contract defines it (CONTRACT §2.1), written out here.

    ``subject`` and ``job_id`` are the header values as the hub sends them
    (text up to U+00FF); the hub hashes their UTF-8 encoding.
    """
    canonical = (f"{ts}.{method.upper()}.{path_with_query}.{hashlib.sha256(body).hexdigest()}."
                 .encode("utf-8") + subject.encode("utf-8") + b"." + job_id.encode("utf-8"))
    return "sha256=" + hmac.new(secret.encode("utf-8"), canonical, hashlib.sha256).hexdigest()


def callback_signature(token: str, ts_ms: str, body: bytes) -> str:
    """``sha256=HMAC(client token, "<ms>.<body>")`` (CONTRACT §7.1)."""
    return "sha256=" + hmac.new(token.encode("utf-8"), ts_ms.encode("ascii") + b"." + body,
                                hashlib.sha256).hexdigest()


def refusal_problem(status: int, headers: Mapping[str, str], body: bytes) -> str | None:
    """Why a refusal does not explain itself, or ``None`` when it does.

    A refusal explains itself with a JSON object body carrying a non-empty
    string ``reason``, or with an ``X-Bailing-Reason`` header; a package
    reason (one of :data:`bailing_flask.reasons.REASONS`) must come with the
    status the table gives it.
    """
    from bailing_flask.reasons import REASONS

    lowered = {name.lower(): value for name, value in headers.items()}
    header_reason = lowered.get("x-bailing-reason")
    body_reason = None
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        document = None
    if isinstance(document, dict) and isinstance(document.get("reason"), str) and document["reason"]:
        body_reason = document["reason"]
    reason = header_reason or body_reason
    if not reason:
        kind = lowered.get("content-type", "no content type")
        return f"{status} without a reason code ({kind}): {body[:120]!r}"
    if header_reason and body_reason and header_reason != body_reason and document is not None:
        return f"{status}: header reason {header_reason!r} but body reason {body_reason!r}"
    entry = REASONS.get(reason)
    if entry is not None and entry.status != status:
        return f"{status} {reason}: the reason table says {entry.status}"
    return None


def fuzz_settings(max_examples: int, **overrides: Any) -> settings:
    """Hypothesis settings for fuzzing: no example database (nothing written), no deadline."""
    options: dict[str, Any] = {
        "max_examples": max_examples,
        "database": None,
        "deadline": None,
        "suppress_health_check": list(HealthCheck),
        "print_blob": False,
    }
    options.update(overrides)
    return settings(**options)


class MemoryMeter:
    """The largest extra memory (tracemalloc) any one case needed, in bytes.

    Measured per case, from what was allocated when it started to the peak
    while it ran, so the generator's own bookkeeping does not count. The
    first ``warmup`` cases do not count either: they import modules and fill
    caches once.
    """

    def __init__(self, warmup: int = 3) -> None:
        self.peak = 0
        self.warmup = warmup
        self._started = False

    def __enter__(self) -> MemoryMeter:
        if not tracemalloc.is_tracing():
            tracemalloc.start()
            self._started = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._started:
            tracemalloc.stop()

    @contextmanager
    def case(self) -> Iterator[None]:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        try:
            yield
        finally:
            _, peak = tracemalloc.get_traced_memory()
            if self.warmup > 0:
                self.warmup -= 1
            else:
                self.peak = max(self.peak, peak - before)


def server_peak_rss(base_url: str) -> int:
    """The largest peak resident memory (``VmHWM``, bytes) of the processes serving ``base_url``.

    For a server in a subprocess (gunicorn: its master and workers), found by
    the bind address on their command line; 0 where ``/proc`` is not there.
    """
    import os

    bind = base_url.split("//", 1)[1].encode()
    peak = 0
    for pid in (p for p in os.listdir("/proc") if p.isdigit()) if os.path.isdir("/proc") else ():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                if bind not in cmdline.read():
                    continue
            with open(f"/proc/{pid}/status") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]) * 1024)
        except OSError:
            continue
    return peak


def run_batch(strategy: st.SearchStrategy[Any], check: Callable[[Any], Outcome], examples: int, *,
              seconds: float | None = None, meter: MemoryMeter | None = None) -> Tally:
    """Run ``check`` on up to ``examples`` generated cases (or for ``seconds``); count, never stop.

    Exceptions escaping ``check`` itself count as ``exception`` problems.
    """
    tally = Tally()
    deadline = None if seconds is None else time.monotonic() + seconds

    @fuzz_settings(examples, phases=[Phase.generate])
    @given(strategy)
    def one(case: Any) -> None:
        if deadline is not None and time.monotonic() > deadline:
            return
        try:
            if meter is not None:
                with meter.case():
                    outcome = check(case)
            else:
                outcome = check(case)
        except Exception as exc:  # the check itself broke: count it, keep going
            outcome = Outcome(label="check raised")
            outcome.add("exception", f"{type(exc).__name__}: {exc}")
        tally.record(outcome, case)

    one()
    return tally
