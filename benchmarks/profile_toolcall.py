"""Where a signed tool call's time goes: exact counts, then cProfile over many in-process calls.

    python -m benchmarks.profile_toolcall                          # the signed POST tool, audit off
    python -m benchmarks.profile_toolcall --variant default        # de-duplicated POST tool, memory store
    python -m benchmarks.profile_toolcall --variant audit-logging  # audit on through logging + FileHandler
    python -m benchmarks.profile_toolcall --variant audit-sink     # audit on through the direct sink
    python -m benchmarks.profile_toolcall --variant ordinary       # an ordinary route of a Bailing app
    python -m benchmarks.profile_toolcall --method GET
    python -m benchmarks.profile_toolcall --counts                 # only the exact counts (fast)
    python -m benchmarks.profile_toolcall --cold                   # caches evicted before every call
    python -m benchmarks.profile_toolcall --top 40 --dump toolcall.prof

Drives the same apps and the same hub-signed requests as the ``toolcall``
group (``benchmarks/_apps.py``) through the WSGI callable and prints:

1. **CPU µs per call without any profiler**, of the variant and of the bare
   view (a short interleaved run, thread CPU), so the profile below can be
   read against the real figure;
2. **exact counts of one warmed-up call** (``benchmarks/_calls.py``),
   next to the bare view's (or plain Flask's, for ``ordinary``): Python calls
   by package, ``LocalProxy`` lookups by the function that looked up,
   ``Flask.ensure_sync`` calls by caller, and the package's own functions by
   calls per request;
3. **cProfile** of ``--calls`` calls: the functions inside bailing_flask by
   own time and by cumulative time, as µs per call (``own``: in the function
   itself; ``cum``: with what it calls), calls per request and share of the
   whole; then every function by own time (Flask, Werkzeug, pydantic,
   blinker, the standard library), for context.

``--cold`` evicts the processor's caches before every call, outside the
timing (it writes 8 MiB and runs unrelated Python code), as a server's
worker does between two requests: HTTP parsing, socket waits, the rest of
the app. A loop of the same call keeps the package's code and data cached,
so the plain figure is the cheapest a call can be; under gunicorn each
call costs the package about three times as much, and the cold figure
comes close to that (see ``benchmarks/README.md``). Both the unprofiled
figure and the profile are then of cold calls, one at a time (``--calls``
defaults to 3000 there).

cProfile adds a constant cost to every function call, so its µs are inflated
(the header says by how much in all) and code made of many small calls looks
heavier than it is; the counts are exact, and the ``toolcall`` group's
ratios are the measurement.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time
from collections import Counter
from typing import Any

from bailing_flask.testing import HubSimulator

from . import _apps
from ._audit import SINK_SETTING, AuditFile, LoggingAudit, audited, direct_sink_setup
from ._calls import CallCount, count_case
from ._harness import compare
from ._wsgi import FreshCalls, HubSigner, SameRequest, base_environ, environ_for

PACKAGE_DIR = os.path.dirname(os.path.abspath(sys.modules["bailing_flask"].__file__ or ""))
VARIANTS = ("tool", "default", "audit-logging", "audit-sink", "audit-nohandler", "handwritten", "middleware",
            "bare", "ordinary", "ordinary-plain")


def _signed(app: Any, method: str) -> SameRequest:
    hub = HubSimulator(_apps.tool_app(store="memory://"), _apps.SECRET, client="bench")
    name, args = ((_apps.POST_TOOL, _apps.POST_ARGS) if method == "POST"
                  else (_apps.GET_TOOL, _apps.GET_ARGS))
    request = hub.build_call(name, args, subject=_apps.SUBJECT)
    return SameRequest(app, lambda: environ_for(hub.build_call(name, args, subject=_apps.SUBJECT)),
                       request.body)


def make_case(variant: str, method: str, audit: LoggingAudit, file: AuditFile) -> Any:
    """One case of ``variant`` (see :data:`VARIANTS`), with the audit logger in the state it needs."""
    if variant in ("ordinary", "ordinary-plain"):
        env = base_environ("GET", _apps.ORDINARY_PATH, _apps.ORDINARY_QUERY)
        app = _apps.tool_app(store="memory://") if variant == "ordinary" else _apps.bare_app()
        return audited(SameRequest(app, lambda: dict(env), b""), audit, "off")
    if variant == "default":
        app = _apps.tool_app(store="memory://")
        template = HubSimulator(app, _apps.SECRET, client="bench").build_call(
            _apps.IDEM_TOOL, _apps.POST_ARGS, subject=_apps.SUBJECT)
        signer = HubSigner(_apps.SECRET, template, _apps.IDEM_TOOL, _apps.POST_ARGS, _apps.SUBJECT)
        return audited(FreshCalls(app, signer, copy=True), audit, "off")
    if variant == "audit-sink":  # the direct sink: the request queues, the sink's thread writes
        config, why = direct_sink_setup(file.path)
        if config is None:
            raise SystemExit(f"--variant audit-sink: {why}")
        flush = getattr(config[SINK_SETTING], "flush", None)
        return audited(_signed(_apps.tool_app(store="memory://", config=config), method), audit, "sink",
                       file, flush=flush)
    apps = {"bare": _apps.bare_app, "handwritten": _apps.handwritten_app,
            "middleware": _apps.middleware_app}
    app = apps[variant]() if variant in apps else _apps.tool_app(store="memory://")
    mode = {"audit-logging": "logging", "audit-nohandler": "nohandler"}.get(variant, "off")
    return audited(_signed(app, method), audit, mode, file if mode == "logging" else None)


def _baseline(variant: str) -> str:
    return "ordinary-plain" if variant.startswith("ordinary") else "bare"


def unprofiled_us(cases: dict[str, Any], rounds: int = 9) -> dict[str, float]:
    """CPU µs per call of each case without a profiler (short interleaved run, thread CPU)."""
    per_round = compare(cases, rounds=rounds, block_ms=8.0, warmup_s=0.2)
    return {name: statistics.median(values) / 1000 for name, values in per_round.items()}


#: What :func:`evict_caches` writes (beyond a typical L2, most of a shared L3).
_EVICT_BYTES = 8 * 1024 * 1024
_evict_buffer = bytearray(_EVICT_BYTES)
_EVICT_STRIDE = 64  # one byte per cache line


def evict_caches() -> None:
    """Push the package's code and data out of the processor's caches, as a server's other work does."""
    lines = len(_evict_buffer[::_EVICT_STRIDE])
    _evict_buffer[::_EVICT_STRIDE] = bytes(lines)  # every cache line of 8 MiB written
    sorted(str(i) for i in range(2000))  # and unrelated interpreter work


def cold_us(cases: dict[str, Any], calls: int = 3000) -> dict[str, float]:
    """CPU µs per call of each case with the caches evicted before every call (median, thread CPU).

    The cases alternate call by call, so a change of the machine's speed
    meets both alike; eviction is outside the timed span.
    """
    clock = time.thread_time_ns
    times: dict[str, list[int]] = {name: [] for name in cases}
    for case in cases.values():
        case.prepare(calls)
        case()
    for _ in range(calls):
        for name, case in cases.items():
            evict_caches()
            started = clock()
            case()
            times[name].append(clock() - started)
    return {name: statistics.median(values) / 1000 for name, values in times.items()}


def _top(counter: Counter[str], n: int, indent: str = "  ") -> list[str]:
    return [f"{indent}{count:6d}  {name}" for name, count in counter.most_common(n)]


def print_counts(variant: str, counts: CallCount, base: CallCount, top: int) -> None:
    baseline = _baseline(variant)
    print(f"exact counts of one warmed-up call ({variant} / {baseline}):")
    print(f"  Python calls      {counts.python:5d} / {base.python:5d}  (generator resumptions "
          f"{counts.resumed} / {base.resumed}; C calls {counts.c_calls} / {base.c_calls})")
    print(f"  LocalProxy lookups{counts.proxy_lookups:5d} / {base.proxy_lookups:5d}")
    print(f"  Flask.ensure_sync {counts.ensure_sync:5d} / {base.ensure_sync:5d}")
    print("\n  Python calls by package (variant, baseline, difference):")
    for package in sorted(set(counts.by_package) | set(base.by_package),
                          key=lambda p: -counts.by_package.get(p, 0)):
        a, b = counts.by_package.get(package, 0), base.by_package.get(package, 0)
        print(f"    {a:5d} {b:5d} {a - b:+5d}  {package}")
    print("\n  LocalProxy lookups by the function that looked up:")
    print("\n".join(_top(counts.proxy_by_caller, top, "    ")))
    print("\n  Flask.ensure_sync by caller:")
    print("\n".join(_top(counts.ensure_sync_by_caller, top, "    ")))
    own = Counter({k: v for k, v in counts.by_function.items() if k.startswith("bailing_flask")})
    print(f"\n  bailing_flask's functions by calls per request ({sum(own.values())} in all):")
    print("\n".join(_top(own, top, "    ")))
    extra = counts.by_function - base.by_function
    print(f"\n  calls the variant makes beyond the baseline, by function (top {top}):")
    print("\n".join(_top(extra, top, "    ")))


def _rows(stats: pstats.Stats, total: float, calls: int, inside: bool, key: int, top: int) -> list[str]:
    entries: list[tuple[float, float, int, str]] = []
    for (filename, line, func), (_cc, nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        in_package = os.path.abspath(filename).startswith(PACKAGE_DIR)
        if inside and not in_package:
            continue
        where = (os.path.relpath(filename, os.path.dirname(PACKAGE_DIR)) if in_package
                 else os.path.basename(filename))
        entries.append((tt, ct, nc, f"{where}:{line}({func})"))
    entries.sort(key=lambda e: -(e[0] if key == 0 else e[1]))
    out = [f"  {'own µs':>7} {'cum µs':>7} {'calls':>6} {'own %':>6}  function (per request)"]
    for tt, ct, nc, name in entries[:top]:
        out.append(f"  {1e6 * tt / calls:7.2f} {1e6 * ct / calls:7.2f} {nc / calls:6.2f} "
                   f"{100 * tt / total:6.1f}  {name}")
    return out


def profile(case: Any, calls: int, dump: str | None, clock: str = "cpu", cold: bool = False) -> pstats.Stats:
    """cProfile of ``calls`` calls; ``clock="cpu"`` times with this thread's CPU clock.

    cProfile's default clock is the wall clock, which on a shared machine
    charges every function for the time other processes had the core.
    """
    for _ in range(3):  # warm-up, unprofiled
        case.prepare(200)
        for _ in range(200):
            case()
    case.prepare(calls)
    profiler = (cProfile.Profile(time.thread_time_ns, 1e-9) if clock == "cpu"
                else cProfile.Profile())
    if cold:
        for _ in range(calls):
            evict_caches()
            profiler.enable()
            case()
            profiler.disable()
    else:
        profiler.enable()
        for _ in range(calls):
            case()
        profiler.disable()
    if dump:
        profiler.dump_stats(dump)
    return pstats.Stats(profiler, stream=io.StringIO())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.profile_toolcall", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", choices=VARIANTS, default="tool")
    parser.add_argument("--method", choices=("POST", "GET"), default="POST",
                        help="the tool's method (tool, audit-*, handwritten, middleware, bare)")
    parser.add_argument("--store", choices=("memory",), default=None,
                        help="same as --variant default (the de-duplicated POST tool)")
    parser.add_argument("--counts", action="store_true", help="only the exact counts (no timing, no cProfile)")
    parser.add_argument("--cold", action="store_true",
                        help="evict the processor's caches before every call, as a server's other work does")
    parser.add_argument("--calls", type=int, default=None, help="calls to profile (20000; 3000 with --cold)")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--dump", metavar="FILE", help="also write the raw profile (pstats format)")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                        help="cProfile's clock: this thread's CPU time (default) or the wall clock")
    args = parser.parse_args(argv)
    variant = "default" if args.store else args.variant
    file = AuditFile("profile")
    audit = LoggingAudit(file)
    try:
        case = make_case(variant, args.method, audit, file)
        base = make_case(_baseline(variant), args.method, audit, file)
        what = variant + ("" if variant.startswith(("ordinary", "default")) else f" {args.method}")
        print(f"{what}: ", end="")
        if not args.counts:
            both = {"variant": case, "baseline": base}
            us = cold_us(both) if args.cold else unprofiled_us(both)
            print(f"{us['variant']:.1f} µs per call, {_baseline(variant)} {us['baseline']:.1f} µs "
                  f"(+{us['variant'] - us['baseline']:.1f} µs, ratio {us['baseline'] / us['variant']:.3f}), "
                  f"CPU, no profiler{', caches evicted before each call' if args.cold else ''}; load average "
                  f"{[round(x, 2) for x in os.getloadavg()]}")
        print()
        print_counts(variant, count_case(case, calls=1).last(), count_case(base, calls=1).last(), args.top)
        if args.counts:
            return 0
        calls = args.calls or (3000 if args.cold else 20000)
        stats = profile(case, calls, args.dump, args.clock, args.cold)
        audit.set("off")
        total = stats.total_tt  # type: ignore[attr-defined]
        own = sum(tt for (filename, _l, _f), (_cc, _nc, tt, _ct, _c) in stats.stats.items()  # type: ignore[attr-defined]
                  if os.path.abspath(filename).startswith(PACKAGE_DIR))
        profiled = 1e6 * total / calls
        print(f"\ncProfile ({args.clock} clock) of {calls} calls: {profiled:.1f} µs per call (x{profiled / us['variant']:.1f} "
              f"the unprofiled figure: divide by about that, more for functions called many times); "
              f"{100 * own / total:.1f} % in bailing_flask's own frames (the rest: Flask, Werkzeug, "
              "pydantic, blinker, the stdlib - much of it called from the package)\n")
        print("inside bailing_flask, by own time:")
        print("\n".join(_rows(stats, total, calls, True, 0, args.top)))
        print("\ninside bailing_flask, by cumulative time:")
        print("\n".join(_rows(stats, total, calls, True, 1, args.top)))
        print("\neverything, by own time:")
        print("\n".join(_rows(stats, total, calls, False, 0, args.top)))
    finally:
        audit.restore()
        file.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
