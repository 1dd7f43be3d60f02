"""imports: what ``import bailing_flask`` costs a process, against ``import flask``.

Each measurement is a fresh interpreter (``python -c``) that reads its own
CPU clock (``time.process_time_ns``) just before and just after one
``import`` statement, so interpreter start-up is left out and only the
import is timed; bytecode caches are warm (a warm-up run of each comes
first). Runs alternate flask, bailing_flask, bailing_flask, flask, ... and
the figure is the median of the per-pair ratios.

* ``import_vs_flask`` (target <= 1.3): CPU of ``import bailing_flask`` /
  CPU of ``import flask``. ``bailing_flask`` imports Flask itself, so 1.0
  is the floor; the rest is what the package adds at start-up (every
  gunicorn worker, every CLI call, every test process pays it).

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

from ._harness import Result, quartiles

GROUP = "imports"
ROOT = Path(__file__).resolve().parent.parent
_TIMED = ("import sys, time\n"
          "t0 = time.process_time_ns()\n"
          "import {module}\n"
          "t1 = time.process_time_ns()\n"
          "print(t1 - t0)\n")
_MODULES = ("import sys\n"
            "before = set(sys.modules)\n"
            "import flask\n"
            "after_flask = set(sys.modules)\n"
            "import bailing_flask\n"
            "print('\\n'.join(sorted(set(sys.modules) - after_flask)))\n")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def import_cpu_ns(module: str) -> int:
    proc = subprocess.run([sys.executable, "-c", _TIMED.format(module=module)], capture_output=True,
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


def run(quick: bool = False) -> list[Result]:
    pairs = 7 if quick else 21
    import_cpu_ns("flask")  # warm the bytecode caches
    import_cpu_ns("bailing_flask")
    flask_ns: list[int] = []
    bailing_ns: list[int] = []
    for i in range(pairs):
        order = ("flask", "bailing_flask") if i % 2 == 0 else ("bailing_flask", "flask")
        for module in order:
            (flask_ns if module == "flask" else bailing_ns).append(import_cpu_ns(module))
    ratios = [b / f for b, f in zip(bailing_ns, flask_ns)]
    extra = loaded_beyond_flask()
    own = [m for m in extra if m == "bailing_flask" or m.startswith("bailing_flask.")]
    third_party = sorted({m.split(".")[0] for m in extra if not m.startswith("bailing_flask")})
    times = import_times(set(extra))
    # third-party packages as a whole (cumulative), the package's own modules by their own time
    outside = sorted((r for r in times if "." not in r["module"] and r["module"] != "bailing_flask"),
                     key=lambda r: -r["cumulative_us"])[:5]
    inside = sorted((r for r in times if r["module"].startswith("bailing_flask")),
                    key=lambda r: -r["self_us"])[:8]
    details = {
        "flask_import_ms_median": round(statistics.median(flask_ns) / 1e6, 2),
        "bailing_flask_import_ms_median": round(statistics.median(bailing_ns) / 1e6, 2),
        "pairs": pairs,
        "modules_beyond_flask": len(extra),
        "bailing_flask_modules_loaded": own,
        "top_level_packages_beyond_flask": third_party,
        "heaviest_third_party_cumulative": outside,
        "heaviest_own_modules_self": inside,
    }
    heavy = ", ".join(f"{r['module']} {r['cumulative_us'] / 1000:.1f} ms" for r in outside[:3])
    own_heavy = ", ".join(f"{r['module']} {r['self_us'] / 1000:.1f} ms" for r in inside[:5])
    return [Result(
        group=GROUP, name="import_vs_flask",
        metric="CPU of `import bailing_flask` / CPU of `import flask`, fresh interpreters",
        ratio=statistics.median(ratios), spread=quartiles(ratios), op="<=", threshold=1.3,
        rounds=len(ratios), details=details,
        notes=[f"{GROUP}/import_vs_flask: flask {details['flask_import_ms_median']} ms, bailing_flask "
               f"{details['bailing_flask_import_ms_median']} ms CPU; loads {len(own)} of its own modules "
               f"and {len(extra) - len(own)} more ({', '.join(third_party)}); -X importtime: "
               f"third-party {heavy} (cumulative); own modules {own_heavy} (self)"],
    )]


if __name__ == "__main__":  # pragma: no cover - convenience
    t = time.perf_counter()
    for r in run(quick="--quick" in sys.argv):
        print(r.group, r.name, r.figure(), r.spread_text(), r.target, r.verdict)
        for note in r.notes:
            print("   ", note)
    print(f"{time.perf_counter() - t:.1f}s")
