"""Run the bailing_flask benchmarks and print target / ratio / pass-fail (see benchmarks/README.md)."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time
from typing import Any

from . import GROUPS
from ._harness import Result

_MODULES = {
    "verify": "bench_verify",
    "middleware": "bench_middleware",
    "bigbody": "bench_bigbody",
    "catalog": "bench_catalog",
    "idempotency": "bench_idempotency",
}


def _environment() -> dict[str, Any]:
    import flask
    import werkzeug  # noqa: F401

    from importlib.metadata import version

    info: dict[str, Any] = {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "flask": version("flask"),
        "werkzeug": version("werkzeug"),
    }
    info["loadavg_at_end"] = _loadavg()
    try:
        info["slack_sdk"] = version("slack_sdk")
    except Exception:
        info["slack_sdk"] = None
    del flask
    return info


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def _warn_if_busy() -> None:
    load = _loadavg()
    cpus = os.cpu_count() or 1
    if load and load[0] > max(cpus - 1, 0.5):
        print(
            f"warning: load average {load[0]} on {cpus} CPUs - other processes compete for "
            "the cores; descheduled blocks are re-measured, but expect wider spreads",
            file=sys.stderr,
        )


def _table(results: list[Result]) -> str:
    header = ("group", "benchmark", "ratio", "IQR", "target", "result")
    rows = [
        (
            r.group,
            r.name,
            f"{r.ratio:.1f} {r.unit}" if r.unit else f"{r.ratio:.3f}",
            f"{r.spread[0]:.1f}-{r.spread[1]:.1f}" if r.unit else f"{r.spread[0]:.3f}-{r.spread[1]:.3f}",
            r.target,
            "info" if r.informational else "PASS" if r.passed else "FAIL",
        )
        for r in results
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths))  # noqa: E731
    out = [line(header), line("-" * w for w in widths)]
    out += [line(row) for row in rows]
    out.append("")
    out += [f"{r.group}/{r.name}: {r.metric}" for r in results]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("groups", nargs="*", metavar="GROUP",
                        help=f"groups to run (default: all): {', '.join(GROUPS)}")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--quick", action="store_true", help="fewer rounds (smoke test)")
    parser.add_argument("--strict", action="store_true",
                        help="exit with status 1 when a target is missed")
    args = parser.parse_args(argv)
    groups = args.groups or list(GROUPS)
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        parser.error(f"unknown group(s) {unknown}; choose from {', '.join(GROUPS)}")

    _warn_if_busy()
    results: list[Result] = []
    timings: dict[str, float] = {}
    started = time.perf_counter()
    for group in groups:
        module = importlib.import_module(f".{_MODULES[group]}", __package__)
        t0 = time.perf_counter()
        print(f"[{group}] running...", file=sys.stderr, flush=True)
        results.extend(module.run(quick=args.quick))
        timings[group] = round(time.perf_counter() - t0, 2)
        print(f"[{group}] done in {timings[group]:.1f}s", file=sys.stderr, flush=True)
    total = time.perf_counter() - started

    print(_table(results))
    targeted = [r for r in results if not r.informational]
    print(f"\n{sum(r.passed for r in targeted)}/{len(targeted)} targets met in {total:.1f}s")

    if args.json:
        payload = {
            "created_unix": int(time.time()),
            "environment": _environment(),
            "quick": args.quick,
            "seconds": {"total": round(total, 2), **timings},
            "results": [r.as_dict() for r in results],
        }
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(payload, fh, indent=2)
            fh.write("\n")
    if args.strict and not all(r.passed for r in results):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
