"""imports: what ``import bailing_flask`` costs a process, against what it cannot do without.

Each measurement is a fresh interpreter (``python -c``) that reads its own
CPU clock (``time.process_time_ns``) just before and just after one
``import`` statement, so interpreter start-up is left out and only the
import is timed; bytecode caches are warm (a warm-up run of each comes
first). Each round runs every statement once, in an order that rotates
and reverses from round to round (so a slow drift of the machine hits every
statement alike); a figure is the median of the per-round ratios.

* ``import_vs_flask_pydantic`` (no target since the names load on first use; was <= 1.2): CPU of ``import
  bailing_flask`` / CPU of ``import flask, pydantic`` - the package's two
  dependencies, so 1.0 is the floor and the rest is what the package adds
  at start-up (every gunicorn worker, every CLI call, every test process
  pays it). pydantic 2 loads lazily: ``import pydantic`` alone does not
  build ``BaseModel``; the next row shows how much of the gap that is;
* ``import_vs_flask_basemodel`` (no target): the same over ``import flask;
  from pydantic import BaseModel`` - what an app that declares one pydantic
  model pays anyway;
* ``app_import_vs_flask_pydantic`` (target <= 1.2, the issue's import row): the same for ``from
  bailing_flask import Bailing, tool``. The package's names load on first
  use, so ``import bailing_flask`` alone no longer loads the extension, the
  declarations or pydantic's models; an application that takes ``Bailing``
  and ``tool`` does, and this row is what it pays;
* ``app_model_import_vs_flask_model`` (no target): the same for an
  application that declares one pydantic model of its own (a tool's
  arguments are one): ``from bailing_flask import Bailing, tool`` and the
  model / ``import flask`` and the model. pydantic's one-time set-up, paid
  by whichever model is built first in a process (its schema machinery and
  a scan of the installed distributions for pydantic plugins), is on both
  sides here, and not in the baseline of the row above;
* ``app_start_vs_flask_app`` (no target): a worker's start-up, the import,
  one model, one route declared with ``@tool(body=Model)`` and
  ``Bailing(app)`` / ``import flask``, the same model and route: the
  options' models, the settings and the pipeline that the import leaves
  for later are paid here;
* ``import_vs_flask`` (no target since issue 22; was <= 1.3, issue 14): the
  same over ``import flask``;
* ``pytest_plugin_suite_ms`` (target <= 50 ms): what the package's pytest
  plugin adds to a one-test suite that does not use it. Installing the
  package registers the plugin in every pytest run of the environment; the
  figure is the median, over alternating pairs, of the CPU time (user +
  system, of the whole ``python -m pytest`` process) with the plugin minus
  without it (``-p no:bailing_flask``). The details say whether
  ``bailing_flask`` or ``flask`` were imported by that run (they must not
  be). A whole pytest run costs seconds of CPU here, so this difference is
  noisy on a busy machine;
* ``pytest_plugin_load_ms`` (target <= 50 ms): the part of it that is the
  plugin's own, measured like the imports: the CPU of loading the
  plugin's entry point in a fresh interpreter that has imported pytest.

The details list what ``import bailing_flask`` loads beyond ``import
flask`` (the package's own modules and third-party top-level packages),
what ``from bailing_flask import Bailing, tool`` loads beyond it, and the
heaviest of the latter by ``-X importtime`` (third-party packages by
cumulative time, the package's own modules by their own time) - what to
make lazy.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
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
#: An application's own pydantic model (a tool's arguments), the same on both sides of a row.
_MODEL = ("from pydantic import BaseModel\n"
          "class Model(BaseModel):\n"
          "    quantity: int = 1\n")
_MODEL_SHOWN = "class Model(BaseModel): quantity: int = 1"
#: A worker's start-up: the app, one route taking the model, and (on the package's side) its
#: declaration and ``Bailing(app)``: what the names an import leaves for later cost then.
_APP = ("app = flask.Flask('bench')\n"
        "@app.post('/orders')\n"
        "{declare}"
        "def create():\n"
        "    return {{}}\n")
_APP_SHOWN = "an app with one route (and its @tool, Bailing(app))"
#: What each round times, by name.
STATEMENTS = {
    "flask": "import flask",
    "flask_pydantic": "import flask, pydantic",
    "flask_basemodel": "import flask; from pydantic import BaseModel",
    "bailing_flask": "import bailing_flask",
    "bailing_flask_app": "from bailing_flask import Bailing, tool",
    "flask_model": "import flask\n" + _MODEL,
    "bailing_flask_app_model": "from bailing_flask import Bailing, tool\n" + _MODEL,
    "flask_app_start": "import flask\n" + _MODEL + _APP.format(declare=""),
    "bailing_flask_app_start": ("import flask\nfrom bailing_flask import Bailing, tool\n" + _MODEL
                                + _APP.format(declare="@tool(scope='orders.create', body=Model)\n")
                                + "Bailing(app, secrets='s' * 40)\n"),
}
#: what :data:`STATEMENTS` measure beyond ``import flask``: the package alone, and an app's import
_IMPORTS = {"package": "import bailing_flask", "app": "from bailing_flask import Bailing, tool"}
_MODULES = ("import sys\n"
            "import flask\n"
            "after_flask = set(sys.modules)\n"
            "{statement}\n"
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


def _shown(statement: str) -> str:
    """One line of a statement for the notes (the model's class is named, not shown)."""
    if "flask.Flask(" in statement:
        return f"{'from bailing_flask' if 'Bailing' in statement else 'import flask'}` + `{_APP_SHOWN}"
    first, _, rest = statement.partition("\n")
    return first if not rest else f"{first}` + `{_MODEL_SHOWN}"


def loaded_beyond_flask(statement: str = _IMPORTS["package"]) -> list[str]:
    """The modules ``statement`` loads in a fresh interpreter that imported flask."""
    proc = subprocess.run([sys.executable, "-c", _MODULES.format(statement=statement)],
                          capture_output=True, text=True, cwd=ROOT, env=_env(), timeout=120, check=True)
    return [line for line in proc.stdout.splitlines() if line]


def import_times(extra: set[str], statement: str = _IMPORTS["app"]) -> list[dict[str, Any]]:
    """``-X importtime`` self and cumulative µs of the modules in ``extra`` that ``statement`` loads."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import flask\n{statement}"],
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
               metric: str, details: dict[str, Any], measured: str = "bailing_flask") -> Result:
    ratios = [b / f for b, f in zip(ns[measured], ns[baseline])]
    return Result(group=GROUP, name=name, metric=metric, ratio=statistics.median(ratios),
                  spread=quartiles(ratios), op=op, threshold=threshold, rounds=len(ratios),
                  details={**details, "ratio_min": min(ratios), "ratio_max": max(ratios)},
                  ci=median_ci(ratios))


_UNRELATED_SUITE = {
    "pytest.ini": "[pytest]\n",
    "test_unrelated.py": "def test_unrelated():\n    assert sum([1, 2]) == 3\n",
    "conftest.py": ("import sys\n\n"
                    "def pytest_sessionfinish(session):\n"
                    "    loaded = [m for m in ('bailing_flask', 'flask') if m in sys.modules]\n"
                    "    print('\\nloaded:', ','.join(loaded) or '-')\n"),
}
PLUGIN_TARGET_MS = 50.0
_PLUGIN_LOAD = ("import sys, time\n"
                "import pytest\n"
                "from importlib.metadata import entry_points\n"
                "(plugin,) = [e for e in entry_points(group='pytest11') if e.name == 'bailing_flask']\n"
                "t0 = time.process_time_ns()\n"
                "plugin.load()\n"
                "t1 = time.process_time_ns()\n"
                "print(t1 - t0, ','.join(m for m in ('bailing_flask', 'flask') if m in sys.modules) or '-')\n")


def plugin_load_ns() -> tuple[int, str]:
    """CPU of loading the plugin's entry point after ``import pytest``, and what it imported."""
    proc = subprocess.run([sys.executable, "-c", _PLUGIN_LOAD], capture_output=True, text=True,
                          cwd=ROOT, env=_env(), timeout=120, check=True)
    cpu, loaded = proc.stdout.split()[-2:]
    return int(cpu), loaded


def pytest_cpu_ns(directory: Path, *args: str) -> tuple[int, str]:
    """CPU (user + system) of one ``python -m pytest`` run in ``directory``, and what it loaded."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", *args],
                          capture_output=True, text=True, cwd=directory, env=_env(), timeout=300,
                          check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    loaded = next((line.split(":", 1)[1].strip() for line in proc.stdout.splitlines()
                   if line.startswith("loaded:")), "?")
    return int(cpu * 1e9), loaded


def plugin_cost(quick: bool) -> Result:
    """What the pytest plugin adds to a suite that does not use it (``pytest_plugin_suite_ms``)."""
    pairs = 5 if quick else 11
    with tempfile.TemporaryDirectory(prefix="bench-plugin-") as tmp:
        directory = Path(tmp)
        for name, text in _UNRELATED_SUITE.items():
            (directory / name).write_text(text)
        without_args = ("-p", "no:bailing_flask")
        pytest_cpu_ns(directory)  # warm the bytecode caches
        with_ns: list[int] = []
        without_ns: list[int] = []
        loaded = {"with": "", "without": ""}
        for i in range(pairs):
            for side in (("with", "without") if i % 2 == 0 else ("without", "with")):
                cpu, loaded[side] = pytest_cpu_ns(directory, *(without_args if side == "without" else ()))
                (with_ns if side == "with" else without_ns).append(cpu)
    added_ms = [(w - wo) / 1e6 for w, wo in zip(with_ns, without_ns)]
    details = {
        "with_plugin_ms_median": round(statistics.median(with_ns) / 1e6, 1),
        "without_plugin_ms_median": round(statistics.median(without_ns) / 1e6, 1),
        "pairs": pairs,
        "imported_with_plugin": loaded["with"],
        "clock": "CPU (user + system) of the whole pytest process, RUSAGE_CHILDREN",
    }
    return Result(
        group=GROUP, name="pytest_plugin_suite_ms", unit="ms",
        metric=("CPU ms the pytest plugin adds to a one-test suite that does not use it "
                "(with it - `-p no:bailing_flask`), fresh processes"),
        ratio=statistics.median(added_ms), spread=quartiles(added_ms), op="<=",
        threshold=PLUGIN_TARGET_MS, rounds=len(added_ms), details=details,
        notes=[f"{GROUP}/pytest_plugin_suite_ms: a one-test pytest run takes "
               f"{details['with_plugin_ms_median']} ms CPU with the plugin, "
               f"{details['without_plugin_ms_median']} ms without; with it the run imported "
               f"{loaded['with'] if loaded['with'] != '-' else 'neither bailing_flask nor flask'}"],
    )


def plugin_load(quick: bool) -> Result:
    """CPU of loading the pytest plugin's entry point alone (``pytest_plugin_load_ms``)."""
    plugin_load_ns()  # warm the bytecode caches
    runs = [plugin_load_ns() for _ in range(7 if quick else 21)]
    load_ms = [cpu / 1e6 for cpu, _ in runs]
    loaded = runs[-1][1]
    return Result(
        group=GROUP, name="pytest_plugin_load_ms", unit="ms",
        metric="CPU ms of loading the pytest plugin's entry point after `import pytest`, fresh interpreters",
        ratio=statistics.median(load_ms), spread=quartiles(load_ms), op="<=",
        threshold=PLUGIN_TARGET_MS, rounds=len(load_ms), details={"imported": loaded},
        notes=[f"{GROUP}/pytest_plugin_load_ms: loading the entry point imported "
               f"{loaded if loaded != '-' else 'neither bailing_flask nor flask'}"],
    )


def run(quick: bool = False) -> list[Result]:
    rounds = 7 if quick else 21
    ns = timed_rounds(rounds)
    extra = loaded_beyond_flask()
    own = [m for m in extra if m == "bailing_flask" or m.startswith("bailing_flask.")]
    third_party = sorted({m.split(".")[0] for m in extra if not m.startswith("bailing_flask")})
    app_extra = loaded_beyond_flask(_IMPORTS["app"])
    app_own = [m for m in app_extra if m == "bailing_flask" or m.startswith("bailing_flask.")]
    app_third_party = sorted({m.split(".")[0] for m in app_extra if not m.startswith("bailing_flask")})
    times = import_times(set(app_extra))
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
        "app_import_modules_beyond_flask": len(app_extra),
        "app_import_own_modules": len(app_own),
        "app_import_top_level_packages_beyond_flask": app_third_party,
        "heaviest_third_party_cumulative": outside,
        "heaviest_own_modules_self": inside,
    }
    heavy = ", ".join(f"{r['module']} {r['cumulative_us'] / 1000:.1f} ms" for r in outside[:3])
    own_heavy = ", ".join(f"{r['module']} {r['self_us'] / 1000:.1f} ms" for r in inside[:5])
    results = [
        _ratio_row("import_vs_flask_pydantic", ns, "flask_pydantic", "", 0.0,
                   "CPU of `import bailing_flask` / CPU of `import flask, pydantic`, fresh interpreters "
                   "(no target: the names load on first use, so this no longer measures an app)",
                   details),
        _ratio_row("import_vs_flask_basemodel", ns, "flask_basemodel", "", 0.0,
                   "CPU of `import bailing_flask` / CPU of `import flask; from pydantic import BaseModel` "
                   "(no target)", details),
        _ratio_row("app_import_vs_flask_pydantic", ns, "flask_pydantic", "<=", 1.2,
                   "CPU of `from bailing_flask import Bailing, tool` / CPU of `import flask, pydantic`: "
                   "what an application's own import pays (the issue's import target)", details,
                   measured="bailing_flask_app"),
        _ratio_row("app_model_import_vs_flask_model", ns, "flask_model", "", 0.0,
                   "CPU of `from bailing_flask import Bailing, tool` and one pydantic model / CPU of "
                   "`import flask` and the same model: what the package adds to an app that declares "
                   "a model anyway (no target)", details, measured="bailing_flask_app_model"),
        _ratio_row("app_start_vs_flask_app", ns, "flask_app_start", "", 0.0,
                   "CPU of importing the package, one model, one declared route and `Bailing(app)` / "
                   "CPU of `import flask`, the same model and route: what a worker's start-up pays, "
                   "where the names an import leaves for later load (no target)", details,
                   measured="bailing_flask_app_start"),
        _ratio_row("import_vs_flask", ns, "flask", "", 0.0,
                   "CPU of `import bailing_flask` / CPU of `import flask` (no target since issue 22)",
                   details),
    ]
    results[-1].notes.append(
        f"{GROUP}: CPU ms per import (median of {rounds} rounds): "
        + ", ".join(f"`{_shown(STATEMENTS[name])}` {value}" for name, value in ms.items())
        + f"; `import bailing_flask` loads {len(own)} of its own modules and {len(extra) - len(own)} "
        f"more beyond flask ({', '.join(third_party) or 'none'}); `{_IMPORTS['app']}` loads "
        f"{len(app_own)} and {len(app_extra) - len(app_own)} more ({', '.join(app_third_party)}); "
        f"its -X importtime: third-party {heavy} (cumulative); own modules {own_heavy} (self)")
    return [*results, plugin_load(quick), plugin_cost(quick)]


if __name__ == "__main__":  # pragma: no cover - convenience
    t = time.perf_counter()
    for r in run(quick="--quick" in sys.argv):
        print(r.group, r.name, r.figure(), r.spread_text(), r.target, r.verdict)
        for note in r.notes:
            print("   ", note)
    print(f"{time.perf_counter() - t:.1f}s")
