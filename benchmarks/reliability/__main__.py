"""``python -m benchmarks.reliability``: run the reliability parts and publish their figures.

::

    python -m benchmarks.reliability                     # every part, full runs; publishes
    python -m benchmarks.reliability --quick             # short runs; publishes nothing
    python -m benchmarks.reliability --parts load        # only these parts (comma-separated)
    python -m benchmarks.reliability --quick --publish   # publish a short run anyway
    python -m benchmarks.reliability --no-publish        # a full run that publishes nothing
    python -m benchmarks.reliability --json run.json     # also write this run's record here

Each part is a module of this package (``load``, ``fuzz``, ``faults``) with
``run(quick: bool) -> list[Figure]``; a part whose module does not exist is
skipped with a note. The figures are printed as a table and compared with
the last published run in ``docs/reliability/last-run.json``:

* a figure **misses** when it does not meet its requirement (``== 0``,
  ``>= 0.5`` ...);
* a figure **regressed** when it must be zero, was zero in the last run and
  is not now; or when it is a ratio and is more than
  :data:`RATIO_TOLERANCE` (25 %) worse than the last run's value of the
  same kind of run (full against full, quick against quick; "worse" is
  lower, or higher for a ratio whose requirement is ``<=``/``<``).
  Absolute figures (req/s, ms, MiB) are never compared: they depend on the
  machine.

A figure that is the median of interleaved rounds carries its range (the
quartiles), shown next to it. The load part's throughput ratio comes with
its spread (``..._throughput_ratio_spread``, the interquartile range over
the median) as a figure of its own with a requirement: when the rounds
disagree more than that, the machine was too busy for the ratio to mean
anything, the figure misses and the run says so and publishes nothing.

A run publishes (rewrites ``docs/reliability/last-run.json`` and the
generated ``docs/reliability/figures.rst``) when it is a full run in which
every part ran and no figure missed or regressed, or when ``--publish``
says so. Only the parts that ran are replaced; the others keep their last
published figures. Exit status: 0 when everything met its requirement and
nothing regressed, 1 when a figure missed or regressed, 2 when a part
failed to run.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import importlib.util
import json
import os
import platform
import shlex
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import COMPARISONS, Figure

__all__ = ["PARTS", "RATIO_TOLERANCE", "main", "machine", "compare", "render_rst"]

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "reliability"
LAST_RUN = DOCS / "last-run.json"
FIGURES_RST = DOCS / "figures.rst"
#: the parts, in the order they run and are published
PARTS = ("load", "fuzz", "faults")
#: a ratio more than this fraction worse than the last run of the same kind has regressed
RATIO_TOLERANCE = 0.25
FORMAT = 1


def _package_version(name: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:
        return None


def machine() -> dict[str, Any]:
    """Where the run happened: enough to tell two machines (and a busy one) apart."""
    cpu = platform.processor() or platform.machine()
    memory_gib = None
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    memory_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
                    break
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "memory_gib": memory_gib,
        "cpu": cpu,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "os": platform.platform(),
        "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
        "versions": {name: _package_version(name)
                     for name in ("bailing_flask", "flask", "werkzeug", "gunicorn", "pydantic")},
    }


def _load_previous(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"format": FORMAT, "parts": {}}
    data.setdefault("parts", {})
    return data


def _worse(figure: Figure, value: float, last: float) -> bool:
    """Whether ``value`` is more than the tolerance worse than ``last`` (ratios only)."""
    op = figure.require.partition(" ")[0]
    if op in ("<=", "<"):  # lower is better
        return value > last * (1 + RATIO_TOLERANCE)
    return value < last * (1 - RATIO_TOLERANCE)


def compare(figure: Figure, last: dict[str, Any] | None, same_kind: bool) -> str | None:
    """Why ``figure`` regressed against the last run's figure of the same name, or ``None``."""
    if last is None:
        return None
    previous = float(last["value"])
    if figure.require.replace(" ", "") == "==0" and previous == 0 and figure.value != 0:
        return f"was 0 in the last run, now {figure.value:g}"
    if figure.unit == "ratio" and same_kind and previous > 0 and _worse(figure, figure.value, previous):
        return (f"{figure.value:g} is more than {RATIO_TOLERANCE:.0%} worse than the last run's "
                f"{previous:g}")
    return None


def _number(value: float) -> str:
    return f"{int(value)}" if float(value).is_integer() and abs(value) < 1e15 else f"{value:g}"


def _format_value(value: float, unit: str, low: float | None = None, high: float | None = None) -> str:
    """``0.94 ratio``, or with a range ``0.94 ratio (0.9–1.01)``."""
    text = f"{_number(value)} {unit}".strip()
    if low is not None and high is not None:
        text += f" ({_number(low)}–{_number(high)})"
    return text


def _check(figures: list[Any], part: str) -> list[Figure]:
    names: set[str] = set()
    for figure in figures:
        if not isinstance(figure, Figure):
            raise TypeError(f"{part}.run() returned {type(figure).__name__}, not Figure")
        if figure.require:
            op, _, bound = figure.require.partition(" ")
            if op not in COMPARISONS:
                raise ValueError(f"{figure.name}: unknown comparison {figure.require!r}")
            float(bound)
        if figure.name in names:
            raise ValueError(f"{part}: the figure {figure.name} is reported twice")
        names.add(figure.name)
    return figures


def _run_part(name: str, quick: bool) -> tuple[str, list[Figure] | None, str, float]:
    """``(status, figures, note, seconds)``; status ``ran``, ``absent`` or ``failed``."""
    module_name = f"{__package__}.{name}"
    if importlib.util.find_spec(module_name) is None:
        return "absent", None, f"{module_name} does not exist yet: skipped", 0.0
    started = time.monotonic()
    try:
        module = importlib.import_module(module_name)
        figures = _check(list(module.run(quick=quick)), name)
    except Exception:
        traceback.print_exc()
        return "failed", None, f"{name} failed to run (traceback above)", time.monotonic() - started
    return "ran", figures, "", time.monotonic() - started


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
                     for row in rows)


def render_rst(record: dict[str, Any]) -> str:
    """``docs/reliability/figures.rst``: a table per part of the published record."""
    lines = [
        ".. Generated by ``python -m benchmarks.reliability`` from last-run.json: do not edit.",
        "",
    ]
    parts = record.get("parts", {})
    order = [p for p in PARTS if p in parts] + sorted(p for p in parts if p not in PARTS)
    if not order:
        lines += ["No reliability run has been published yet.", ""]
    for name in order:
        entry = parts[name]
        info = entry["machine"]
        kind = "a short run (``--quick``)" if entry.get("quick") else "a full run"
        load, load_end = info.get("load_average"), info.get("load_average_end")
        load_text = f", load average {load[0]:g} at the start" if load else ""
        if load and load_end:
            load_text += f" and {load_end[0]:g} at the end"
        lines += [
            f".. rubric:: {name.capitalize()}",
            "",
            f"{kind.capitalize()} on {entry['date'][:10]}, {entry['seconds']:.0f} s: "
            f"``{entry['command']}``, on {info['cores']} cores ({info['cpu']}), "
            f"{info['memory_gib']} GiB, {info['os']}, {info['python']}{load_text}.",
            "",
            ".. list-table::",
            "   :header-rows: 1",
            "   :widths: 34 14 10 8 34",
            "",
            "   * - Figure",
            "     - Measured",
            "     - Required",
            "     - Result",
            "     - What it is",
        ]
        for raw in entry["figures"]:
            figure = Figure(**raw)
            result = ("met" if figure.ok() else "**missed**") if figure.require else "info"
            lines += [
                f"   * - ``{figure.name}``",
                f"     - {_format_value(figure.value, figure.unit, figure.low, figure.high)}",
                f"     - {figure.require or '--'}",
                f"     - {result}",
                f"     - {figure.text}",
            ]
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m benchmarks.reliability", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short runs (seconds per part)")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help="comma-separated parts to run (default: %(default)s)")
    publishing = parser.add_mutually_exclusive_group()
    publishing.add_argument("--publish", action="store_true",
                            help="publish this run even if it is short or missed a figure")
    publishing.add_argument("--no-publish", action="store_true", help="never publish this run")
    parser.add_argument("--json", help="also write this run's record to this file")
    parser.add_argument("--record", default=str(LAST_RUN), help=argparse.SUPPRESS)
    parser.add_argument("--rst", default=str(FIGURES_RST), help=argparse.SUPPRESS)
    options = parser.parse_args(args)
    wanted = [p.strip() for p in options.parts.split(",") if p.strip()]
    unknown = [p for p in wanted if p not in PARTS]
    if unknown or not wanted:
        parser.error(f"unknown part(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(PARTS)}")
    command = "python -m benchmarks.reliability" + (" " + shlex.join(args) if args else "")
    record_path, rst_path = Path(options.record), Path(options.rst)
    previous = _load_previous(record_path)
    start_machine = machine()

    rows = [["part", "figure", "measured", "required", "result", "last run", "regression"]]
    notes: list[str] = []
    missed = regressed = failed = 0
    entries: dict[str, dict[str, Any]] = {}
    for name in wanted:
        print(f"== {name}", file=sys.stderr, flush=True)
        status, figures, note, seconds = _run_part(name, options.quick)
        if status != "ran":
            notes.append(note)
            failed += status == "failed"
            continue
        assert figures is not None
        last_entry = previous["parts"].get(name)
        last = {f["name"]: f for f in (last_entry or {}).get("figures", [])}
        same_kind = last_entry is not None and bool(last_entry.get("quick")) == options.quick
        for figure in figures:
            why = compare(figure, last.get(figure.name), same_kind)
            result = ("met" if figure.ok() else "MISSED") if figure.require else "info"
            missed += not figure.ok()
            regressed += why is not None
            before = last.get(figure.name)
            rows.append([name, figure.name, _format_value(figure.value, figure.unit, figure.low, figure.high),
                         figure.require or "-", result,
                         "-" if before is None else _format_value(before["value"], before["unit"]),
                         "REGRESSED" if why else ""])
            if why:
                notes.append(f"{figure.name} regressed: {why}")
            if figure.name.endswith("_spread") and not figure.ok():
                notes.append(f"{figure.name}: {figure.value:g} is wider than {figure.require.split()[-1]}: "
                             "the rounds disagree, the machine was too busy to measure the ratio on; "
                             "it is not published (run again on a quieter machine)")
        entries[name] = {
            "command": command, "quick": options.quick,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "seconds": round(seconds, 1), "machine": start_machine | {"load_average_end": machine()["load_average"]},
            "figures": [f.as_dict() for f in figures],
        }
    print(_table(rows) if len(rows) > 1 else "(no figures)")
    for note in notes:
        print(f"note: {note}")

    record = {"format": FORMAT,
              "updated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "parts": {**previous["parts"], **entries}}
    if options.json:
        Path(options.json).write_text(json.dumps({"command": command, "parts": entries}, indent=1,
                                                 ensure_ascii=False) + "\n", encoding="utf-8")
    clean = not (missed or regressed or failed)
    publish = entries and not options.no_publish and (options.publish or (clean and not options.quick))
    if publish:
        record_path.parent.mkdir(parents=True, exist_ok=True)
        record_path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        rst_path.write_text(render_rst(record), encoding="utf-8")
        print(f"published: {record_path.relative_to(ROOT) if record_path.is_relative_to(ROOT) else record_path}"
              f" and {rst_path.name}")
    elif entries and not options.no_publish:
        why = "a short run" if options.quick else "a figure missed or regressed, or a part failed"
        print(f"not published ({why}; --publish publishes it anyway)")
    if failed:
        return 2
    return 0 if clean else 1


if __name__ == "__main__":
    raise SystemExit(main())
