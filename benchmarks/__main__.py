"""Run the bailing_flask benchmarks; print every ratio against its target, then issue 22's target table.

See benchmarks/README.md for what each figure measures and why its baseline is fair.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any

from . import GROUPS
from ._harness import Result
from ._targets import ISSUE_22_GROUPS, issue_rows

_MODULES = {group: f"bench_{group}" for group in GROUPS}


def _environment() -> dict[str, Any]:
    from importlib.metadata import version

    info: dict[str, Any] = {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }
    for dist in ("flask", "werkzeug", "pydantic", "gunicorn", "redis", "slack_sdk"):
        try:
            info[dist] = version(dist)
        except Exception:  # noqa: BLE001 - optional packages
            info[dist] = None
    info.update(_commit())
    return info


def _commit() -> dict[str, Any]:
    """The commit the measured package is at, its tree, and whether the package differs from it."""
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=30, check=True).stdout.strip()
        tree = subprocess.run(["git", "rev-parse", "HEAD:bailing_flask"], cwd=root, capture_output=True,
                              text=True, timeout=30, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "bailing_flask"], cwd=root,
                               capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"commit": None}
    # the package's tree id: equal on two commits when the package is the same (benchmarks aside)
    return {"commit": head, "package_tree": tree, "package_modified_since_commit": bool(dirty)}


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
            f"warning: load average {load[0]} on {cpus} CPUs - other processes compete for the "
            "cores; in-process figures use thread CPU time, but expect wider spreads, and the "
            "end-to-end figures (wall clock, real servers) suffer most",
            file=sys.stderr,
        )


def _columns(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]

    def line(cells: Any) -> str:
        return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()

    return [line(header), line("-" * w for w in widths)] + [line(row) for row in rows]


def _table(results: list[Result]) -> str:
    header = ("group", "benchmark", "measured", "IQR", "noise", "95% CI", "rounds", "target", "result")
    rows = [(r.group, r.name, r.figure(), r.spread_text(), r.noise(), r.ci_text(), str(r.rounds), r.target,
             r.verdict + ("?" if r.undecided() else "")) for r in results]
    out = _columns(header, rows)
    notes = [note for r in results for note in r.notes]
    skipped = [f"{r.group}/{r.name}: skipped - {r.skipped}" for r in results if r.skipped]
    if notes or skipped:
        out += ["", "Notes:"] + [f"  {n}" for n in notes + skipped]
    out += ["", "What each figure is:"] + [f"  {r.group}/{r.name}: {r.metric}" for r in results]
    return "\n".join(out)


def _issue_table(rows: list[dict[str, Any]]) -> str:
    header = ("measure (issue 22)", "now", "target", "measured", "IQR", "noise", "95% CI", "result")
    body = [(r["measure"], r["now"], r["target"], r["measured"], r["spread"], r["noise"], r["ci"],
             r["verdict"]) for r in rows]
    return "\n".join(_columns(header, body))


def _load_line(loads: dict[str, tuple[Any, Any]]) -> str:
    return "load average (1, 5, 15 min) per group, start -> end: " + "; ".join(
        f"{group} {a} -> {b}" for group, (a, b) in loads.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("groups", nargs="*", metavar="GROUP",
                        help=f"groups to run (default: all): {', '.join(GROUPS)}")
    parser.add_argument("-x", "--exclude", action="append", default=[], metavar="GROUP",
                        help="leave a group out (repeatable)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--quick", action="store_true",
                        help="fewer rounds and shorter blocks: the whole run in well under 3 minutes")
    parser.add_argument("--strict", action="store_true",
                        help="exit with status 1 when a target is missed")
    args = parser.parse_args(argv)
    groups = args.groups or list(GROUPS)
    unknown = [g for g in groups + args.exclude if g not in GROUPS]
    if unknown:
        parser.error(f"unknown group(s) {unknown}; choose from {', '.join(GROUPS)}")
    groups = [g for g in groups if g not in args.exclude]

    load_start = _loadavg()
    print(f"bailing_flask benchmarks{' (--quick)' if args.quick else ''}: groups {', '.join(groups)}; "
          f"Python {platform.python_version()}, {os.cpu_count()} CPUs, load average at start "
          f"{load_start}", flush=True)
    _warn_if_busy()
    results: list[Result] = []
    timings: dict[str, float] = {}
    loads: dict[str, tuple[Any, Any]] = {}
    failed: dict[str, str] = {}
    started = time.perf_counter()
    for group in groups:
        module = importlib.import_module(f".{_MODULES[group]}", __package__)
        t0 = time.perf_counter()
        load_before = _loadavg()
        print(f"[{group}] running... (load average {load_before})", file=sys.stderr, flush=True)
        try:
            results.extend(module.run(quick=args.quick))
        except Exception:  # noqa: BLE001 - one broken group must not hide the others
            failed[group] = traceback.format_exc()
            print(f"[{group}] FAILED:\n{failed[group]}", file=sys.stderr, flush=True)
        timings[group] = round(time.perf_counter() - t0, 2)
        loads[group] = (load_before, _loadavg())
        print(f"[{group}] done in {timings[group]:.1f}s (load average {loads[group][1]})",
              file=sys.stderr, flush=True)
    total = time.perf_counter() - started
    load_end = _loadavg()

    print()
    print(_table(results))
    rows = issue_rows(results)
    print()
    print(_issue_table(rows))
    targeted = [r for r in results if not r.informational]
    missing = [g for g in ISSUE_22_GROUPS if g not in groups]
    undecided = sum(r["verdict"].endswith("95% CI)") for r in rows)
    print(f"\nissue 22: {sum(r['met'] for r in rows)}/{len(rows)} targets met"
          + (f", {undecided} undecided (target inside the 95% CI: run again)" if undecided else "")
          + (f" (groups not run: {', '.join(missing)})" if missing else "")
          + f"; all groups: {sum(r.passed for r in targeted)}/{len(targeted)} targets met; "
          f"{total:.1f}s; load average at start {load_start}, at end {load_end} on {os.cpu_count()} CPUs")
    print(_load_line(loads))
    if failed:
        print(f"groups that failed: {', '.join(failed)} (tracebacks on stderr)")

    if args.json:
        payload = {
            "created_unix": int(time.time()),
            "environment": {**_environment(), "loadavg_at_start": load_start, "loadavg_at_end": load_end,
                            "loadavg_per_group": {g: list(v) for g, v in loads.items()}},
            "command": "python -m benchmarks " + " ".join(sys.argv[1:] if argv is None else argv),
            "quick": args.quick,
            "seconds": {"total": round(total, 2), **timings},
            "results": [r.as_dict() for r in results],
            "issue_22": rows,
            "failed_groups": failed,
        }
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(payload, fh, indent=2, default=str)
            fh.write("\n")
    if failed:
        return 2
    if args.strict and not all(r.passed for r in targeted):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
