"""imports: what ``import bailing_flask`` costs a process, against what it cannot do without.

Each measurement is a fresh interpreter (``python -c``) that reads its own
CPU clock (``time.process_time_ns``) just before and just after one
``import`` statement, so interpreter start-up is left out and only the
import is timed; bytecode caches are warm (a warm-up run of each comes
first). Each round runs every statement once, in an order that rotates
and reverses from round to round (so a slow drift of the machine hits every
statement alike); a figure is the median of the per-round ratios.

* ``import_vs_flask_pydantic`` (target <= 1.2, issue 22): CPU of ``import
  bailing_flask`` / CPU of ``import flask, pydantic`` - the package's two
  dependencies, so 1.0 is the floor and the rest is what the package adds
  at start-up (every gunicorn worker, every CLI call, every test process
  pays it). pydantic 2 loads lazily: ``import pydantic`` alone does not
  build ``BaseModel``; the next row shows how much of the gap that is;
* ``import_vs_flask_basemodel`` (no target): the same over ``import flask;
  from pydantic import BaseModel`` - what an app that declares one pydantic
  model pays anyway;
* ``import_vs_flask`` (no target since issue 22; was <= 1.3, issue 14): the
  same over ``import flask``.

The details list what ``import bailing_flask`` loads beyond ``import
flask`` (the package's own modules and third-party top-level packages) and
the heaviest of those by ``-X importtime`` (third-party packages by
cumulative time, the package's own modules by their own time) - what to
make lazy.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ._harness import Result, median_ci, quartiles

GROUP = "imports"
ROOT = Path(__file__).resolve().parent.parent
_TIMED = ("import sys, time\n"
          "t0 = time.process_time_ns()\n"
          "{statement}\n"
          "t1 = time.process_time_ns()\n"
          "print(t1 - t0)\n")
#: What each round times, by name.
STATEMENTS = {
    "flask": "import flask",
    "flask_pydantic": "import flask, pydantic",
    "flask_basemodel": "import flask; from pydantic import BaseModel",
    "bailing_flask": "import bailing_flask",
}
_MODULES = ("import sys\n"
            "before = set(sys.modules)\n"
            "import flask\n"
            "after_flask = set(sys.modules)\n"
            "import bailing_flask\n"
            "print('\\n'.join(sorted(set(sys.modules) - after_flask)))\n")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    # warm bytecode caches on every side: with PYTHONDONTWRITEBYTECODE set, the package (a
    # source checkout) would be compiled on every import while its dependencies load from the
    # .pyc files pip wrote, and the ratio would time the compiler
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def import_cpu_ns(statement: str) -> int:
    """CPU ns of one import statement in a fresh interpreter."""
    proc = subprocess.run([sys.executable, "-c", _TIMED.format(statement=statement)], capture_output=True,
                          text=True, cwd=ROOT, env=_env(), timeout=120, check=True)
    return int(proc.stdout.strip().splitlines()[-1])


def loaded_beyond_flask() -> list[str]:
    proc = subprocess.run([sys.executable, "-c", _MODULES], capture_output=True, text=True,
                          cwd=ROOT, env=_env(), timeout=120, check=True)
    return [line for line in proc.stdout.splitlines() if line]


def import_times(extra: set[str]) -> list[dict[str, Any]]:
    """``-X importtime`` self and cumulative µs of the modules ``import bailing_flask`` adds."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", "import flask\nimport bailing_flask"],
                          capture_output=True, text=True, cwd=ROOT, env=_env(), timeout=120, check=True)
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        parts = [p.strip() for p in line[len("import time:"):].split("|")]
        if len(parts) != 3 or not parts[0].isdigit():
            continue
        name = parts[2].strip()
        if name in extra:
            rows.append({"module": name, "self_us": int(parts[0]), "cumulative_us": int(parts[1])})
    return rows


_UNCACHED = ("import os, sys\n"
             "import bailing_flask\n"
             "for name, m in sorted(sys.modules.items()):\n"
             "    cached = getattr(m, '__cached__', None)\n"
             "    if name.startswith('bailing_flask') and cached and not os.path.exists(cached):\n"
             "        print(name)\n")


def uncached() -> list[str]:
    """The package's modules ``import bailing_flask`` loads that have no bytecode cache."""
    proc = subprocess.run([sys.executable, "-c", _UNCACHED], capture_output=True, text=True, cwd=ROOT,
                          env=_env(), timeout=120, check=True)
    return proc.stdout.split()


def timed_rounds(rounds: int) -> dict[str, list[int]]:
    """CPU ns per statement per round; the order rotates and reverses between rounds."""
    names = list(STATEMENTS)
    for name in names:  # warm the bytecode caches
        import_cpu_ns(STATEMENTS[name])
    missing = uncached()
    if missing:
        raise RuntimeError(f"no bytecode cache for {missing[:5]} after the warm-up: is "
                           f"{ROOT / 'bailing_flask'} writable?")
    ns: dict[str, list[int]] = {name: [] for name in names}
    for i in range(rounds):
        order = names[i % len(names):] + names[:i % len(names)]
        for name in order[::-1] if i % 2 else order:
            ns[name].append(import_cpu_ns(STATEMENTS[name]))
    return ns


def _ratio_row(name: str, ns: dict[str, list[int]], baseline: str, op: str, threshold: float,
               metric: str, details: dict[str, Any]) -> Result:
    ratios = [b / f for b, f in zip(ns["bailing_flask"], ns[baseline])]
    return Result(group=GROUP, name=name, metric=metric, ratio=statistics.median(ratios),
                  spread=quartiles(ratios), op=op, threshold=threshold, rounds=len(ratios),
                  details={**details, "ratio_min": min(ratios), "ratio_max": max(ratios)},
                  ci=median_ci(ratios))


def run(quick: bool = False) -> list[Result]:
    rounds = 7 if quick else 21
    ns = timed_rounds(rounds)
    extra = loaded_beyond_flask()
    own = [m for m in extra if m == "bailing_flask" or m.startswith("bailing_flask.")]
    third_party = sorted({m.split(".")[0] for m in extra if not m.startswith("bailing_flask")})
    times = import_times(set(extra))
    # third-party packages as a whole (cumulative), the package's own modules by their own time
    outside = sorted((r for r in times if "." not in r["module"] and r["module"] != "bailing_flask"),
                     key=lambda r: -r["cumulative_us"])[:5]
    inside = sorted((r for r in times if r["module"].startswith("bailing_flask")),
                    key=lambda r: -r["self_us"])[:8]
    ms = {name: round(statistics.median(values) / 1e6, 2) for name, values in ns.items()}
    details = {
        **{f"{name}_import_ms_median": value for name, value in ms.items()},
        "statements": STATEMENTS,
        "rounds": rounds,
        "modules_beyond_flask": len(extra),
        "bailing_flask_modules_loaded": own,
        "top_level_packages_beyond_flask": third_party,
        "heaviest_third_party_cumulative": outside,
        "heaviest_own_modules_self": inside,
    }
    heavy = ", ".join(f"{r['module']} {r['cumulative_us'] / 1000:.1f} ms" for r in outside[:3])
    own_heavy = ", ".join(f"{r['module']} {r['self_us'] / 1000:.1f} ms" for r in inside[:5])
    results = [
        _ratio_row("import_vs_flask_pydantic", ns, "flask_pydantic", "<=", 1.2,
                   "CPU of `import bailing_flask` / CPU of `import flask, pydantic`, fresh interpreters",
                   details),
        _ratio_row("import_vs_flask_basemodel", ns, "flask_basemodel", "", 0.0,
                   "CPU of `import bailing_flask` / CPU of `import flask; from pydantic import BaseModel` "
                   "(no target)", details),
        _ratio_row("import_vs_flask", ns, "flask", "", 0.0,
                   "CPU of `import bailing_flask` / CPU of `import flask` (no target since issue 22)",
                   details),
    ]
    results[-1].notes.append(
        f"{GROUP}: CPU ms per import (median of {rounds} rounds): "
        + ", ".join(f"`{STATEMENTS[name]}` {value}" for name, value in ms.items())
        + f"; bailing_flask loads {len(own)} of its own modules and {len(extra) - len(own)} more beyond "
        f"flask ({', '.join(third_party)}); -X importtime: third-party {heavy} (cumulative); own "
        f"modules {own_heavy} (self)")
    return results


if __name__ == "__main__":  # pragma: no cover - convenience
    t = time.perf_counter()
    for r in run(quick="--quick" in sys.argv):
        print(r.group, r.name, r.figure(), r.spread_text(), r.target, r.verdict)
        for note in r.notes:
            print("   ", note)
    print(f"{time.perf_counter() - t:.1f}s")
