"""Timing helpers shared by every benchmark group.

Everything here measures *relative* cost: each benchmark times a candidate
and a baseline in the same process, interleaved, and reports the ratio.
Absolute numbers are kept only as supporting detail in the JSON output.

Method (per comparison):

* warm up every case first (code paths, allocator, caches);
* calibrate a block size so one timed block lasts ~``block_ms``;
* run ``rounds`` rounds; each round times the cases in an ABBA order (the
  order flips every round), so a slow drift of the machine (frequency
  scaling, a neighbour process) hits both sides equally;
* a block whose wall time exceeds this thread's CPU time (another
  process took the core mid-block) is measured again, up to
  ``MAX_RETRIES`` times, keeping the fastest attempt; the counts are
  reported as ``details.blocks``;
* ``gc`` is disabled inside each timed block and a collection is run
  between blocks, outside the timing (objects alive before the measurement
  are ``gc.freeze()``-d first, so those collections stay cheap);
* the per-round ratio is computed from blocks measured seconds apart, and
  the reported figure is the **median** of the per-round ratios, with the
  interquartile range as the spread.

Optional hooks on a case callable (plain functions have none):

* ``fn.prepare(loops)`` is called before every block, outside the timing and
  before the block's ``gc.collect()``: a case that needs one fresh input per
  call (a new signed request, a new job id) builds them there;
* ``fn.io_bound = True`` marks a case that waits for I/O (a Redis round trip,
  an ``fsync``): its wall time always exceeds its CPU time, so the
  descheduling check cannot apply; such blocks are measured once and counted
  as ``unchecked``, and calibration uses their wall time.

``compare(..., measure="cpu")`` times blocks with this thread's CPU time
instead of the wall clock (no retries needed: time spent descheduled is not
counted); for long CPU-bound blocks such as a whole catalog build, where a
wall-clock block of half a second is rarely left alone on a busy machine.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

perf_counter_ns = time.perf_counter_ns
thread_time_ns = time.thread_time_ns
#: How often a block that was descheduled is measured again (the fastest attempt is kept).
MAX_RETRIES = 4


@dataclass
class Result:
    """One line of the results table."""

    group: str
    name: str
    #: What the ratio means, e.g. "verify time / floor time".
    metric: str
    ratio: float
    #: Spread of the per-round ratios: (first quartile, third quartile).
    spread: tuple[float, float]
    #: "<=", "<" or ">=".
    op: str
    threshold: float
    rounds: int
    details: dict[str, Any] = field(default_factory=dict)
    #: "" for a ratio; otherwise the unit of an absolute figure (e.g. "ms").
    unit: str = ""

    @property
    def informational(self) -> bool:
        """A figure reported without a target (``op == ""``); never fails."""
        return not self.op

    @property
    def passed(self) -> bool:
        if not self.op:
            return True
        if self.op == "<=":
            return self.ratio <= self.threshold
        if self.op == "<":
            return self.ratio < self.threshold
        if self.op == ">=":
            return self.ratio >= self.threshold
        raise ValueError(self.op)

    @property
    def target(self) -> str:
        if not self.op:
            return "-"
        return f"{self.op} {self.threshold:g}{' ' + self.unit if self.unit else ''}"

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["spread"] = list(self.spread)
        data["target"] = self.target
        data["passed"] = self.passed
        data["informational"] = self.informational
        return data


#: Block statistics of the last :func:`compare` call (copied into results).
LAST_STATS: dict[str, Any] = {}


def quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return (values[0], values[0])
    q = statistics.quantiles(values, n=4, method="inclusive")
    return (q[0], q[2])


def time_block(fn: Callable[[], Any], loops: int) -> int:
    """Run ``fn`` ``loops`` times with gc disabled; return elapsed ns (wall clock)."""
    return _time_block(fn, loops)[0]


def _time_block(fn: Callable[[], Any], loops: int) -> tuple[int, int]:
    """Like :func:`time_block`; returns (wall ns, this thread's CPU ns)."""
    prepare = getattr(fn, "prepare", None)
    if prepare is not None:
        prepare(loops)  # fresh inputs for this block, outside the timing
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        cpu0 = thread_time_ns()
        start = perf_counter_ns()
        for _ in range(loops):
            fn()
        wall = perf_counter_ns() - start
        cpu = thread_time_ns() - cpu0
        return wall, cpu
    finally:
        if enabled:
            gc.enable()


def _was_descheduled(wall: int, cpu: int) -> bool:
    """True when the block lost the CPU: its wall time exceeds its CPU time.

    On a shared 2-core machine another process can take the core in the
    middle of a block; such a block measures the neighbour, not the code.
    """
    return wall > cpu * 1.05 + 50_000


def clean_block(
    fn: Callable[[], Any], loops: int, stats: dict[str, int], measure: str = "wall"
) -> int:
    """Wall ns of one block; re-run (up to ``MAX_RETRIES``) while descheduled.

    ``measure="cpu"``: this thread's CPU ns of one block (no retries).
    An ``io_bound`` case is measured once (wall) and counted as unchecked.
    """
    if measure == "cpu":
        wall, cpu = _time_block(fn, loops)
        stats["blocks"] += 1
        return cpu
    if getattr(fn, "io_bound", False):
        wall, _cpu = _time_block(fn, loops)
        stats["blocks"] += 1
        stats["unchecked"] = stats.get("unchecked", 0) + 1
        return wall
    best = None
    for attempt in range(MAX_RETRIES + 1):
        wall, cpu = _time_block(fn, loops)
        stats["blocks"] += 1
        best = wall if best is None else min(best, wall)
        if not _was_descheduled(wall, cpu):
            return wall
        stats["retried"] += 1
    stats["dirty"] += 1
    assert best is not None
    return best


def calibrate(fn: Callable[[], Any], block_ms: float, min_loops: int = 1) -> int:
    """Loops per block so that one block lasts about ``block_ms``.

    Uses the smaller of wall and CPU time of several blocks, so a neighbour
    taking the core during calibration does not shrink the blocks.
    """
    io_bound = getattr(fn, "io_bound", False)

    def measured(loops: int) -> int:
        wall, cpu = _time_block(fn, loops)
        return wall if io_bound else min(wall, cpu)

    loops = 1
    while True:
        if measured(loops) >= 1_000_000 or loops >= 1 << 22:  # >= 1 ms: extrapolate
            break
        loops *= 2
    per_call = min(measured(loops) for _ in range(5)) / loops
    return max(min_loops, int(block_ms * 1_000_000 / max(per_call, 1.0)))


def compare(
    cases: dict[str, Callable[[], Any]],
    *,
    rounds: int,
    block_ms: float = 10.0,
    warmup_s: float = 0.2,
    loops: int | None = None,
    measure: str = "wall",
) -> dict[str, list[float]]:
    """Interleaved timing of several cases; returns ns/call per round per case.

    Within a round the cases run in order, then in reverse order (ABBA for
    two cases); the order of the first half alternates between rounds. The
    two half-blocks of a round are summed. ``measure="cpu"`` times with this
    thread's CPU clock instead of the wall clock (see the module docstring).
    """
    if measure not in ("wall", "cpu"):
        raise ValueError(measure)
    names = list(cases)
    gc.collect()
    gc.freeze()  # long-lived objects out of the way: per-block collections stay cheap
    try:
        return _compare(cases, names, rounds, block_ms, warmup_s, loops, measure)
    finally:
        gc.unfreeze()


def _compare(
    cases: dict[str, Callable[[], Any]],
    names: list[str],
    rounds: int,
    block_ms: float,
    warmup_s: float,
    loops: int | None,
    measure: str = "wall",
) -> dict[str, list[float]]:
    # Warm-up: run every case for a while before anything is recorded.
    deadline = perf_counter_ns() + int(warmup_s * 1e9)
    warm_loops = min(10, loops) if loops else 10
    while perf_counter_ns() < deadline:
        for name in names:
            time_block(cases[name], warm_loops)
    if loops is None:
        loops = min(calibrate(cases[name], block_ms / 2) for name in names)
    loops = max(1, loops)
    per_round: dict[str, list[float]] = {name: [] for name in names}
    stats = {"blocks": 0, "retried": 0, "dirty": 0, "unchecked": 0}
    for r in range(rounds):
        order = names if r % 2 == 0 else names[::-1]
        totals = dict.fromkeys(names, 0)
        for name in order + order[::-1]:
            totals[name] += clean_block(cases[name], loops, stats, measure)
        for name in names:
            per_round[name].append(totals[name] / (2 * loops))
    LAST_STATS.clear()
    LAST_STATS.update(stats, loops_per_block=loops, measure=measure)
    return per_round


def ratio_result(
    per_round: dict[str, list[float]],
    *,
    group: str,
    name: str,
    numerator: str,
    denominator: str,
    metric: str,
    op: str,
    threshold: float,
    extra: dict[str, Any] | None = None,
) -> Result:
    """Median over rounds of ``per_round[numerator] / per_round[denominator]``."""
    num, den = per_round[numerator], per_round[denominator]
    ratios = [a / b for a, b in zip(num, den)]
    details: dict[str, Any] = {
        f"{numerator}_ns_per_call_median": statistics.median(num),
        f"{denominator}_ns_per_call_median": statistics.median(den),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
    }
    details["blocks"] = dict(LAST_STATS)
    if extra:
        details.update(extra)
    return Result(
        group=group,
        name=name,
        metric=metric,
        ratio=statistics.median(ratios),
        spread=quartiles(ratios),
        op=op,
        threshold=threshold,
        rounds=len(ratios),
        details=details,
    )
