"""Two checkouts of the package under gunicorn, by the CPU a worker spends in the app per signed POST.

    python -m benchmarks.ab_server OTHER_CHECKOUT                  # sync worker, 4 rounds
    python -m benchmarks.ab_server OTHER_CHECKOUT --worker gthread --rounds 6

``OTHER_CHECKOUT`` is another tree of this repository (``git worktree add
--detach ../old <commit>``): the directory that holds its ``bailing_flask``.
Three gunicorn servers (one worker each) serve the signed POST tool of
``benchmarks/_apps.py``: with the other checkout's package, with this
one's, and the bare view without the package (this checkout's
``benchmarks`` for all three). Each runs behind :mod:`benchmarks._timed_app`,
which counts the worker's thread CPU from the call into the app to the end
of its response. The load generator (``benchmarks/_loadgen.py``, its own
process) sends blocks of new signed calls, one block per side in turn,
A B C C B A, the order alternating between rounds; after each block the
side's total is read and reset.

Printed: per side, the median over blocks of µs per request in the app;
then, round by round, this checkout minus the other, and each tool minus
the bare view, as medians with their range. Nothing here has a target: it
is the tool for telling whether a change to the request path helps where
the package runs. The in-process ``toolcall`` group repeats one call in a
loop, which keeps the package's code and data in the processor's caches,
and under-reads what a server's worker pays (``benchmarks/README.md``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from . import _apps
from ._server import ROOT, Gunicorn, LoadGen, gunicorn_available
from ._timed_app import TIME_PATH
from .bench_e2e import _spec


def _read_time(server: Gunicorn) -> dict[str, object]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        connection.request("GET", TIME_PATH)
        response = connection.getresponse()
        answer: dict[str, object] = json.loads(response.read())
    finally:
        connection.close()
    return answer


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):7.1f} µs  (range {min(values):.1f} .. {max(values):.1f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ab_server", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("other", type=Path, help="another checkout: the directory holding its bailing_flask/")
    parser.add_argument("--worker", choices=("sync", "gthread"), default="sync")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--calls", type=int, default=2000, help="signed calls per block")
    args = parser.parse_args(argv)
    other = args.other.resolve()
    if not (other / "bailing_flask" / "__init__.py").is_file():
        parser.error(f"{other} holds no bailing_flask/ package")
    if not gunicorn_available():
        parser.error("gunicorn is not installed (pip install -e '.[test,bench]')")
    threads, concurrency = (4, 4) if args.worker == "gthread" else (1, 2)
    env = {"BENCH_SECRET": _apps.SECRET, "BENCH_STORE": "memory://"}
    places: list[str] = []

    def server(spec: str, package_root: Path, label: str) -> Gunicorn:
        # a directory of two links, the server's working directory and its only import path
        # entry: the package from package_root, the benchmarks (and the timed apps) from here
        place = Path(tempfile.mkdtemp(prefix=f"bailing-bench-ab-{label}-"))
        places.append(str(place))
        (place / "bailing_flask").symlink_to(package_root / "bailing_flask", target_is_directory=True)
        (place / "benchmarks").symlink_to(ROOT / "benchmarks", target_is_directory=True)
        return Gunicorn(spec, worker_class=args.worker, threads=threads, label=label,
                        env={**env, "PYTHONPATH": str(place)}, cwd=place)

    sides = {"other": server("benchmarks._timed_app:tool()", other, "other"),
             "this": server("benchmarks._timed_app:tool()", ROOT, "this"),
             "bare": server("benchmarks._timed_app:bare()", ROOT, "bare")}
    expected = {"other": other, "this": ROOT, "bare": ROOT}
    post = _spec(_apps.POST_TOOL, _apps.POST_ARGS)
    per_block: dict[str, list[float]] = {name: [] for name in sides}
    per_round: dict[str, list[float]] = {name: [] for name in sides}
    worker: dict[str, list[float]] = {name: [] for name in sides}  # /proc: the whole worker
    gen = LoadGen()
    try:
        for name, srv in sides.items():
            srv.start()
            gen.block(srv.port, post, 300, concurrency)  # warm-up, then the package it imported
            package = Path(str(_read_time(srv)["package"])).resolve()
            if not package.is_relative_to(expected[name]):
                raise SystemExit(f"the {name} server imported {package}, not the package under {expected[name]}")
        names = list(sides)
        print(f"gunicorn {args.worker}, 1 worker{f', {threads} threads' if threads > 1 else ''}, "
              f"{concurrency} connections, {args.calls} calls per block; other = {other}", flush=True)
        for r in range(args.rounds):
            order = names if r % 2 == 0 else names[::-1]
            spent: dict[str, list[float]] = {name: [] for name in names}
            for name in order + order[::-1]:
                cpu_before = sides[name].cpu_ns()
                answer = gen.block(sides[name].port, post, args.calls, concurrency)
                cpu_after = sides[name].cpu_ns()
                if cpu_before is not None and cpu_after is not None:
                    worker[name].append((cpu_after - cpu_before) / 1000 / args.calls)
                if answer["errors"] or set(answer["statuses"]) != {"200"}:
                    raise SystemExit(f"{name}: {answer['errors']} errors, statuses {answer['statuses']}")
                timed = _read_time(sides[name])
                us = int(str(timed["ns"])) / 1000 / max(1, int(str(timed["requests"])))
                spent[name].append(us)
                per_block[name].append(us)
            for name in names:
                per_round[name].append(statistics.mean(spent[name]))
            print(f"round {r + 1}: " + ", ".join(f"{n} {statistics.mean(spent[n]):.1f}" for n in names), flush=True)
    finally:
        gen.close()
        for srv in sides.values():
            srv.close()
        for place in places:
            shutil.rmtree(place, ignore_errors=True)  # the links, never what they point to
    print("\nCPU µs per request in the app (median over blocks):")
    for name in names:
        print(f"  {name:5s}  {_spread(per_block[name])}")
    if all(worker.values()):
        print("the whole worker's CPU µs per request (/proc, 10 ms ticks; the server's own work too):")
        for name in names:
            print(f"  {name:5s}  {_spread(worker[name])}")
    print("round by round, in the app:")
    for label, a, b in (("this - other", "this", "other"), ("this - bare ", "this", "bare"),
                        ("other - bare", "other", "bare")):
        print(f"  {label}  {_spread([x - y for x, y in zip(per_round[a], per_round[b])])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
