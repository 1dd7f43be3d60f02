"""Fuzzing, the long run: every fuzz target of the test suite with far more cases.

``run(quick=False)`` runs each target of ``tests/_fuzz`` for a time budget
(full: about four and a half minutes in all; quick: about 20 seconds, half of it
starting servers) and returns the
figures :mod:`benchmarks.reliability` publishes, per target:

* ``fuzz.<target>.cases``: cases run (information);
* ``fuzz.<target>.exceptions``: an exception escaped the code under test (``== 0``);
* ``fuzz.<target>.server_errors``: a 5xx answer (``== 0``);
* ``fuzz.<target>.false_accepts``: something ran, or verified, that was not
  signed with the right key (``== 0``);
* ``fuzz.<target>.unexplained_refusals``: a refusal without a reason code (``== 0``);
* ``fuzz.<target>.malformed``: an ill-formed answer or result (``== 0``);
* ``fuzz.<target>.peak_mib``: the most memory one case needed (tracemalloc), or for
  the targets with servers how much the gunicorn worker's peak resident memory
  grew over the run (``<=`` the target's bound).

Plus ``fuzz.atheris.*`` when atheris is installed: the middleware target
driven by libFuzzer's coverage feedback in a subprocess. Run it alone::

    python -m benchmarks.reliability.fuzz [--quick]

The first examples of every problem are printed to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from . import Figure

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # ``python benchmarks/reliability/fuzz.py`` too
    sys.path.insert(0, str(ROOT))

MiB = 1024 * 1024

#: per target: module, seconds of the full run, the memory bound (MiB), what a case is
TARGETS: dict[str, tuple[str, float, float, str]] = {
    "middleware": ("wsgi", 45, 8, "raw WSGI environs through the verifier and the gate"),
    "sockets": ("sockets", 40, 16, "raw request bytes to Werkzeug, gunicorn, waitress and wsgiref"),
    "callbacks": ("callbacks", 35, 16, "signed hub POSTs of any JSON shape, hub answers, decisions"),
    "lint": ("lint", 35, 16, "catalogs and @tool declarations through the linter"),
    "tickets": ("tickets", 25, 4, "visitor tickets: strings, edits, other keys, any payload"),
    "schemathesis": ("openapi", 40, 32, "the example app's served catalog over real sockets"),
}
#: what each problem kind is called in the figures, and its one line
PROBLEM_FIGURES = {
    "exception": ("exceptions", "an exception escaped the code under test"),
    "server_error": ("server_errors", "answers with a 5xx status"),
    "false_accept": ("false_accepts", "calls run or tickets verified that were not signed with the right key"),
    "no_reason": ("unexplained_refusals", "refusals without a reason code (or with another status than the table's)"),
    "malformed": ("malformed", "ill-formed answers or results"),
}
_QUICK_SHARE = 10 / sum(t[1] for t in TARGETS.values())


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextmanager
def _checks(name: str, module: Any) -> Iterator[list[tuple[Any, Callable[[Any], Any]]]]:
    """``[(strategy, check), ...]`` of a target, with what it needs started."""
    if name == "schemathesis":
        with module.target(("werkzeug", "gunicorn")) as (cases, check):
            generators = [(cases("hub"), check)]
            if module.schemathesis_available() is None:
                generators.insert(0, (cases("schemathesis"), check))
            else:
                _log(f"fuzz: {module.schemathesis_available()}: only the hub-encoded calls run")
            yield generators
    elif name == "sockets":
        with module.target(("werkzeug", "gunicorn", "waitress", "wsgiref")) as check:
            import hypothesis.strategies as st

            servers = st.sampled_from(["werkzeug", "gunicorn", "waitress", "wsgiref"])
            strategy = st.builds(lambda case, server: type(case)(**{**case.__dict__, "server": server}),
                                 module.cases, servers)
            yield [(strategy, check)]
    else:
        with module.target() as check:
            yield [(module.cases, check)]


def run_target(name: str, seconds: float) -> tuple[Any, int]:
    """Run one target for ``seconds``; returns its tally and its memory figure in bytes.

    In-process targets: the most memory one case needed (tracemalloc). Targets
    with servers: how much the peak resident memory of the gunicorn worker grew
    over the run after a warm-up (the client's and the in-thread servers'
    allocations would measure Werkzeug's development server, not the package).
    """
    from tests._fuzz import MemoryMeter, Tally, run_batch, server_peak_rss

    module = importlib.import_module(f"tests._fuzz.{TARGETS[name][0]}")
    total = Tally()

    def add(tally: Any) -> None:
        total.cases += tally.cases
        for kind, count in tally.counts.items():
            total.counts[kind] += count
        for kind, examples in tally.examples.items():
            kept = total.examples.setdefault(kind, [])
            kept.extend(examples[: max(0, 3 - len(kept))])

    with _checks(name, module) as generators:
        urls: dict[str, str] = getattr(generators[0][1], "urls", None) or {}
        meter = None if urls else MemoryMeter()
        with meter if meter is not None else contextlib.nullcontext():
            # warm up: the first requests import modules and compile the tools, once per
            # process; every server must have had some before its memory is the baseline
            add(run_batch(generators[0][0], generators[0][1], 60 if urls else 5, meter=meter))
            before = {url: server_peak_rss(url) for url in urls.values()}
            share = seconds / len(generators)
            for strategy, check in generators:
                deadline = time.monotonic() + share
                while time.monotonic() < deadline:
                    tally = run_batch(strategy, check, 100, seconds=deadline - time.monotonic(),
                                      meter=meter)
                    if not tally.cases:
                        break
                    add(tally)
            grown = [server_peak_rss(url) - before[url] for url in urls.values() if before[url]]
    return total, (meter.peak if meter is not None else max(grown, default=0))


def _target_figures(name: str, tally: Any, peak: int) -> list[Figure]:
    _, _, bound, what = TARGETS[name]
    figures = [Figure("fuzz", f"fuzz.{name}.cases", float(tally.cases), "cases", "",
                      f"{name}: cases run ({what})")]
    for kind, (figure, text) in PROBLEM_FIGURES.items():
        figures.append(Figure("fuzz", f"fuzz.{name}.{figure}", float(tally.counts[kind]), "cases",
                              "== 0", f"{name}: {text}"))
    memory = ("how much the gunicorn worker's peak resident memory grew over the run"
              if name in ("sockets", "schemathesis") else "the most memory one case needed (tracemalloc)")
    figures.append(Figure("fuzz", f"fuzz.{name}.peak_mib", round(peak / MiB, 2), "MiB", f"<= {bound:g}",
                          f"{name}: {memory}"))
    return figures


def run_atheris(seconds: float) -> list[Figure]:
    """The middleware target under libFuzzer; no figures when atheris is not installed."""
    try:
        import atheris  # noqa: F401
    except ImportError as exc:
        _log(f"fuzz: atheris is not installed ({exc}); pip install -e '.[fuzz]' to add its run")
        return []
    with tempfile.TemporaryDirectory(prefix="bailing-atheris-") as folder:
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        command = [sys.executable, "-m", "benchmarks.reliability._atheris_wsgi",
                   f"-max_total_time={max(1, int(seconds))}", "-max_len=2048",
                   f"-artifact_prefix={folder}/", "-print_final_stats=1"]
        done = subprocess.run(command, cwd=str(ROOT), env=env, capture_output=True, text=True,
                              timeout=seconds + 120)
        output = done.stdout + done.stderr
        runs = re.findall(r"stat::number_of_executed_units:\s*(\d+)", output) or re.findall(
            r"Done (\d+) runs", output)
        coverage = re.findall(r"cov: (\d+)", output)
        crashes = len([p for p in os.listdir(folder) if p.startswith(("crash-", "oom-", "timeout-"))])
        if done.returncode != 0 and crashes == 0:
            crashes = 1  # it ended on a problem without writing the input
        if crashes:
            _log("fuzz: atheris found a problem:\n" + "\n".join(output.splitlines()[-40:]))
    return [
        Figure("fuzz", "fuzz.atheris.cases", float(runs[-1]) if runs else 0.0, "cases", "",
               "atheris: middleware cases driven by libFuzzer's coverage feedback"),
        Figure("fuzz", "fuzz.atheris.coverage", float(coverage[-1]) if coverage else 0.0, "edges", "",
               "atheris: code edges of bailing_flask the inputs reached"),
        Figure("fuzz", "fuzz.atheris.problems", float(crashes), "cases", "== 0",
               "atheris: inputs on which the oracle found a problem (any kind)"),
    ]


def run(quick: bool = False) -> list[Figure]:
    """Run every fuzz target; returns the figures (see the module docstring)."""
    figures: list[Figure] = []
    share = _QUICK_SHARE if quick else 1.0
    for name, (_, seconds, _, _) in TARGETS.items():
        budget = seconds * share
        started = time.monotonic()
        tally, peak = run_target(name, budget)
        _log(f"fuzz: {name}: {tally.cases} cases in {time.monotonic() - started:.1f} s, "
             f"problems {sum(tally.counts.values())}, peak {peak / MiB:.2f} MiB")
        for kind, examples in tally.examples.items():
            for example in examples:
                _log(f"fuzz: {name}: {kind}: {example[:600]}")
        figures.extend(_target_figures(name, tally, peak))
    figures.extend(run_atheris(2 if quick else 30))
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run, about 20 seconds")
    options = parser.parse_args(argv)
    figures = run(quick=options.quick)
    width = max(len(f.name) for f in figures)
    for figure in figures:
        verdict = "info" if not figure.require else ("met" if figure.ok() else "MISSED")
        print(f"{figure.name:<{width}}  {figure.value:>10g} {figure.unit:<6} {figure.require:<8} {verdict}")
    return 0 if all(f.ok() for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main())
