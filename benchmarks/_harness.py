"""Timing helpers shared by every benchmark group.

Everything here measures *relative* cost: each benchmark times a candidate
and a baseline in the same process, interleaved, and reports the ratio.
Absolute numbers are kept only as supporting detail in the JSON output.

Method (per comparison):

* warm up every case first (code paths, allocator, caches);
* calibrate one block size for all cases so a half-block lasts about
  ``block_ms`` for the slowest case;
* run ``rounds`` rounds; each round times the cases in order and then in
  reverse order (A B B A for two cases), and the order of the first half
  flips every round, so a slow drift of the machine (frequency scaling, a
  neighbour process) hits every side equally;
* **every block is measured exactly once, with the same clock, and kept**:
  no retries, no "fastest of n", no discarded outliers, for the baseline as
  for the candidate. The spread of the per-round ratios shows the noise;
* the clock is this thread's CPU time (``time.thread_time_ns``) for
  in-process CPU-bound work: time spent descheduled by another process is
  not counted, so a busy shared machine adds spread, not bias. A comparison
  with an ``io_bound`` case (waiting on a disk ``fsync`` or a Redis round
  trip) is timed on the wall clock, **both sides**; the other clock is
  always recorded too and reported next to the ratio;
* ``gc`` stays enabled inside the timed blocks (a package that leaves more
  garbage pays for the collections it causes, as it does in production),
  and a full collection runs before each block, outside the timing; objects
  alive before the measurement are ``gc.freeze()``-d so those collections
  stay cheap. ``gc_enabled=False`` switches the collector off inside blocks
  (used for the catalog build, a single long allocation-heavy call);
* the per-round ratio is computed from blocks measured seconds apart, and
  the reported figure is the **median** of the per-round ratios, with the
  interquartile range as the spread.

Optional hooks on a case callable (plain functions have none):

* ``fn.prepare(loops)`` is called before every block, outside the timing and
  before the block's ``gc.collect()``: a case that needs one fresh input per
  call (a new signed request, a new job id) builds them there;
* ``fn.io_bound = True`` marks a case that waits for I/O: the comparison it
  is part of runs on the wall clock (see above).
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

perf_counter_ns = time.perf_counter_ns
thread_time_ns = time.thread_time_ns


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
    #: "<=", "<", ">=" or "" (no target: an informational row).
    op: str
    threshold: float
    rounds: int
    details: dict[str, Any] = field(default_factory=dict)
    #: "" for a ratio; otherwise the unit of an absolute figure (e.g. "ms", "MiB", "/call").
    unit: str = ""
    #: Set when the figure could not be measured here (the row says why; never a pass).
    skipped: str = ""
    #: Lines printed under the table (absolute figures that help read the ratio).
    notes: list[str] = field(default_factory=list)
    #: Distribution-free 95 % confidence interval of the median over rounds (``None``: not computed).
    ci: tuple[float, float] | None = None

    @property
    def informational(self) -> bool:
        """A figure reported without a target (``op == ""``); never fails."""
        return not self.op

    @property
    def passed(self) -> bool:
        if self.skipped:
            return False
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
    def verdict(self) -> str:
        if self.skipped:
            return "skipped"
        if self.informational:
            return "info"
        return "met" if self.passed else "MISSED"

    @property
    def target(self) -> str:
        if not self.op:
            return "-"
        return f"{self.op} {self.threshold:g}{' ' + self.unit if self.unit else ''}"

    def figure(self) -> str:
        """The measured value as printed (a ratio, or a number with its unit)."""
        if self.skipped:
            return "-"
        if self.unit:
            return f"{_number(self.ratio)} {self.unit}"
        return f"{self.ratio:.3f}"

    def spread_text(self) -> str:
        if self.skipped:
            return "-"
        if self.unit:
            return f"{_number(self.spread[0])}-{_number(self.spread[1])}"
        return f"{self.spread[0]:.3f}-{self.spread[1]:.3f}"

    def noise(self) -> str:
        """How wide the spread is: the IQR as +-% of the median (ratios only)."""
        if self.skipped or self.unit or not self.ratio:
            return "-"
        return f"±{50 * (self.spread[1] - self.spread[0]) / abs(self.ratio):.1f}%"

    def target_in_spread(self) -> bool:
        """The target lies inside the IQR: met or missed is within the noise of this run."""
        return bool(self.op) and not self.skipped and self.spread[0] <= self.threshold <= self.spread[1]

    def undecided(self) -> bool:
        """The target lies inside the median's 95 % confidence interval (else the IQR): this run cannot tell."""
        if not self.op or self.skipped:
            return False
        if self.ci is None:
            return self.target_in_spread()
        return self.ci[0] <= self.threshold <= self.ci[1]

    def ci_text(self) -> str:
        if self.skipped or self.ci is None:
            return "-"
        if self.unit:
            return f"{_number(self.ci[0])}-{_number(self.ci[1])}"
        return f"{self.ci[0]:.3f}-{self.ci[1]:.3f}"

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["spread"] = list(self.spread)
        data["ci"] = list(self.ci) if self.ci is not None else None
        data["target"] = self.target
        data["passed"] = self.passed
        data["informational"] = self.informational
        data["verdict"] = self.verdict
        if self.skipped:
            data["ratio"] = None  # NaN is not JSON
        return data


def _number(value: float) -> str:
    """A count as an integer, anything else with two decimals."""
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.2f}"


def skipped_result(group: str, name: str, metric: str, op: str, threshold: float, why: str,
                   unit: str = "") -> Result:
    """A row for a figure that could not be measured on this machine (with the reason)."""
    return Result(group=group, name=name, metric=metric, ratio=float("nan"), spread=(0.0, 0.0),
                  op=op, threshold=threshold, rounds=0, details={"skipped": why}, unit=unit,
                  skipped=why)


def quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return (values[0], values[0])
    q = statistics.quantiles(values, n=4, method="inclusive")
    return (q[0], q[2])


def median_ci(values: list[float]) -> tuple[float, float]:
    """Distribution-free 95 % confidence interval of the median (order statistics).

    The ranks ``(n - 1.96 sqrt(n)) / 2`` and ``1 + (n + 1.96 sqrt(n)) / 2`` of
    the sorted values, clamped to the smallest and the largest: with 7 values
    that is their whole range, with 101 the 40th to the 62nd. It assumes the
    rounds are independent; a machine whose load drifts through a run makes
    them less so, so read it as the least uncertainty there is.
    """
    ordered = sorted(values)
    n = len(ordered)
    half = 1.96 * math.sqrt(n)
    lo = max(int(math.floor((n - half) / 2)), 1)
    hi = min(int(math.ceil(1 + (n + half) / 2)), n)
    return ordered[lo - 1], ordered[hi - 1]


def percentile(values: list[float], p: float) -> float:
    """The ``p``-th percentile (0-100) by linear interpolation."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


class Rounds(dict[str, list[float]]):
    """ns per call per round per case, on the comparison's clock (``clock``).

    ``cpu`` and ``wall`` hold the same series on both clocks; ``stats`` the
    block counts (``descheduled``: blocks whose wall time exceeded their CPU
    time by more than 5 % - another process had the core; they are kept).
    """

    def __init__(self, clock: str, cpu: dict[str, list[float]], wall: dict[str, list[float]],
                 stats: dict[str, Any]) -> None:
        super().__init__(cpu if clock == "cpu" else wall)
        self.clock = clock
        self.cpu = cpu
        self.wall = wall
        self.stats = stats

    def other(self) -> dict[str, list[float]]:
        return self.wall if self.clock == "cpu" else self.cpu


def _time_block(fn: Callable[[], Any], loops: int, gc_enabled: bool = True,
                cpu_clock: Callable[[], int] = thread_time_ns) -> tuple[int, int]:
    """Run ``fn`` ``loops`` times; return (wall ns, CPU ns: this thread's unless told)."""
    prepare = getattr(fn, "prepare", None)
    if prepare is not None:
        prepare(loops)  # fresh inputs for this block, outside the timing
    gc.collect()
    was_enabled = gc.isenabled()
    if not gc_enabled:
        gc.disable()
    try:
        cpu0 = cpu_clock()
        start = perf_counter_ns()
        for _ in range(loops):
            fn()
        wall = perf_counter_ns() - start
        cpu = cpu_clock() - cpu0
        return wall, cpu
    finally:
        if was_enabled and not gc_enabled:
            gc.enable()


def time_block(fn: Callable[[], Any], loops: int) -> int:
    """Run ``fn`` ``loops`` times; return elapsed wall ns."""
    return _time_block(fn, loops)[0]


def _was_descheduled(wall: int, cpu: int) -> bool:
    return wall > cpu * 1.05 + 50_000


def _clock_of(cases: dict[str, Callable[[], Any]], measure: str) -> str:
    if measure not in ("auto", "cpu", "wall"):
        raise ValueError(measure)
    if measure != "auto":
        return measure
    return "wall" if any(getattr(fn, "io_bound", False) for fn in cases.values()) else "cpu"


def calibrate(fn: Callable[[], Any], block_ms: float, clock: str = "cpu", min_loops: int = 1) -> int:
    """Loops per block so that one block of ``fn`` lasts about ``block_ms`` on ``clock``."""

    def measured(loops: int) -> int:
        wall, cpu = _time_block(fn, loops)
        return cpu if clock == "cpu" else wall

    loops = 1
    while True:
        if measured(loops) >= 1_000_000 or loops >= 1 << 22:  # >= 1 ms: extrapolate
            break
        loops *= 2
    per_call = statistics.median(measured(loops) for _ in range(3)) / loops
    return max(min_loops, int(block_ms * 1_000_000 / max(per_call, 1.0)))


def compare(
    cases: dict[str, Callable[[], Any]],
    *,
    rounds: int,
    block_ms: float = 10.0,
    warmup_s: float = 0.2,
    loops: int | None = None,
    measure: str = "auto",
    gc_enabled: bool = True,
    process_cpu: bool = False,
) -> Rounds:
    """Interleaved timing of several cases; returns ns/call per round per case.

    Within a round the cases run in order, then in reverse order; the order
    of the first half alternates between rounds. The two half-blocks of a
    round are summed. ``measure``: ``"auto"`` (thread CPU time, or the wall
    clock when a case is ``io_bound``), ``"cpu"`` or ``"wall"``.
    """
    clock = _clock_of(cases, measure)
    names = list(cases)
    gc.collect()
    gc.freeze()  # long-lived objects out of the way: per-block collections stay cheap
    try:
        return _compare(cases, names, rounds, block_ms, warmup_s, loops, clock, gc_enabled,
                        time.process_time_ns if process_cpu else thread_time_ns)
    finally:
        gc.unfreeze()


def _compare(
    cases: dict[str, Callable[[], Any]],
    names: list[str],
    rounds: int,
    block_ms: float,
    warmup_s: float,
    loops: int | None,
    clock: str,
    gc_enabled: bool,
    cpu_clock: Callable[[], int] = thread_time_ns,
) -> Rounds:
    # Warm-up: run every case for a while before anything is recorded.
    deadline = perf_counter_ns() + int(warmup_s * 1e9)
    warm_loops = min(10, loops) if loops else 10
    while perf_counter_ns() < deadline:
        for name in names:
            _time_block(cases[name], warm_loops, gc_enabled, cpu_clock)
    if loops is None:
        loops = min(calibrate(cases[name], block_ms / 2, clock) for name in names)
    loops = max(1, loops)
    cpu: dict[str, list[float]] = {name: [] for name in names}
    wall: dict[str, list[float]] = {name: [] for name in names}
    stats: dict[str, Any] = {"blocks": 0, "descheduled": 0}
    for r in range(rounds):
        order = names if r % 2 == 0 else names[::-1]
        totals_cpu = dict.fromkeys(names, 0)
        totals_wall = dict.fromkeys(names, 0)
        for name in order + order[::-1]:
            w, c = _time_block(cases[name], loops, gc_enabled, cpu_clock)
            stats["blocks"] += 1
            if not getattr(cases[name], "io_bound", False) and _was_descheduled(w, c):
                stats["descheduled"] += 1
            totals_cpu[name] += c
            totals_wall[name] += w
        for name in names:
            cpu[name].append(totals_cpu[name] / (2 * loops))
            wall[name].append(totals_wall[name] / (2 * loops))
    stats.update(loops_per_block=loops, clock=clock, gc_in_blocks=gc_enabled,
                 cpu_clock="process" if cpu_clock is not thread_time_ns else "thread")
    return Rounds(clock, cpu, wall, stats)


def ratio_result(
    per_round: Rounds,
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
    """Median over rounds of ``per_round[numerator] / per_round[denominator]``.

    With times per call, ``numerator=baseline, denominator=candidate`` is the
    candidate's throughput relative to the baseline (1.0 = as fast).
    """
    num, den = per_round[numerator], per_round[denominator]
    ratios = [a / b for a, b in zip(num, den)]
    other = per_round.other()
    other_ratios = [a / b for a, b in zip(other[numerator], other[denominator])]
    details: dict[str, Any] = {
        f"{numerator}_ns_per_call_median": round(statistics.median(num)),
        f"{denominator}_ns_per_call_median": round(statistics.median(den)),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "clock": per_round.clock,
        f"ratio_on_{'wall' if per_round.clock == 'cpu' else 'cpu'}_clock_median": statistics.median(
            other_ratios),
        "blocks": dict(per_round.stats),
    }
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
        ci=median_ci(ratios),
    )


def per_call_us(per_round: Rounds, name: str) -> float:
    """Median µs per call of one case (on the comparison's clock)."""
    return statistics.median(per_round[name]) / 1000.0
