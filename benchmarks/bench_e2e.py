"""e2e: the signed tool call over real sockets, served by gunicorn, driven by another process.

Servers: ``python -m gunicorn`` on a free ``127.0.0.1`` port, one worker
(``sync``, or ``gthread`` with 4 threads), the apps of
``benchmarks/_apps.py``: ``bare_app()`` (the views without the package) and
``tool_app()`` (``Bailing(app)``, loader, authorizer, ``@tool`` views). One
worker, so that on a 2-core machine the server - not the load generator -
is the bottleneck; the load generator's own CPU share is reported.

Load: ``benchmarks/_loadgen.py`` in its own process, over 2 (sync) or 4
(gthread) concurrent loopback connections, kept alive when the server
allows (gunicorn's sync worker closes after every response, so each
request there pays a TCP connect, as it does in production). Every request
is signed like the hub with its own job id; a block's requests are signed
before the block starts (well inside the 300 s window). Every block has the
same request count (calibrated from a warm-up so a block of the slowest
side lasts ``block_s``); blocks run A B B A, rounds alternate the order,
every block is kept.

* ``sync_tool_vs_bare`` (target >= 0.9): req/s of the signed POST tool call
  (50-byte body, ``repeats="safe"``) / req/s of the same POST to the bare
  app (the signature headers are sent too; nothing reads them);
* ``gthread_tool_vs_bare`` (target >= 0.95): the same with gthread workers;
* ``gthread_redis_vs_off`` and ``gthread_redis_deferred_vs_off`` (target
  >= 0.6): req/s of new calls to the same tool with de-duplication in a real
  ``redis-server`` (loopback, started for the run) / the tool with
  ``repeats="safe"`` on the default server; the second is a server of its
  own with ``BAILING_IDEMPOTENCY_DEFER_COMPLETION`` (one round trip per
  call). The three sides are one interleaved series.
* ``gthread_sql_vs_off`` (target >= 0.6): the same tool with the SQL store
  on a real PostgreSQL (loopback, started for the run; ``fsync`` off, as the
  Redis side runs without persistence), on a server of its own, in the same
  interleaved series as the Redis sides; ``gthread_sql_minus_redis`` (target
  >= -0.1): that ratio minus the Redis store's (default settings), round by
  round: the SQL store within 0.1 of Redis.

p50/p99 latency (ms) and the workers' CPU µs per request (from ``/proc``)
are printed under the table; ``sync_tool_vs_bare_server_cpu`` and
``gthread_tool_vs_bare_server_cpu`` (no target) compare the tool and the bare
view by that CPU per request, per round: on a machine other processes keep
busy, req/s also measures how the kernel shares the cores, the CPU per
request does not.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bailing_flask.testing import HubSimulator

from . import _apps
from ._harness import Result, median_ci, quartiles, skipped_result
from ._server import Gunicorn, LoadGen, Side, gunicorn_available, interleaved, rate_ratios, side_summary

GROUP = "e2e"


def _spec(tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """The hub's wire form of a call to ``tool``, and what the load generator signs it with."""
    hub = HubSimulator(_apps.tool_app(store="memory://"), _apps.SECRET, client="bench")
    request = hub.build_call(tool, args, subject=_apps.SUBJECT)
    headers = request.headers
    return {
        "method": request.method,
        "path_with_query": request.path_with_query,
        "body": request.body.decode("utf-8"),
        "headers": {k: v for k, v in headers.items() if not k.startswith("X-Bailing-")},
        "sign": {
            "secret": _apps.SECRET, "subject": _apps.SUBJECT,
            "client": headers.get("X-Bailing-Client"),
            "tool_scope": headers.get("X-Bailing-Tool-Scope"),
            "tool": tool if "X-Bailing-Idempotency-Key" in headers else None,
            "args": dict(args),
        },
    }


def _result(name: str, candidate: Side, baseline: Side, op: str, threshold: float, metric: str,
            extra: dict[str, Any]) -> Result:
    ratio, spread, ratios = rate_ratios(candidate, baseline)
    cand, base = side_summary(candidate), side_summary(baseline)
    details: dict[str, Any] = {candidate.name: cand, baseline.name: base, "ratios": ratios, **extra}
    if candidate.server_cpu_us and baseline.server_cpu_us:
        details["server_cpu_ratio"] = round(
            statistics.median(baseline.server_cpu_us) / statistics.median(candidate.server_cpu_us), 3)
    notes = [
        f"{GROUP}/{name}: " + "; ".join(
            f"{side.name} {s['req_per_s_median']:.0f} req/s, p50 {s['p50_ms']:.2f} ms, "
            f"p99 {s['p99_ms']:.2f} ms, server CPU {s['server_cpu_us_per_request_median']} µs/req"
            for side, s in ((candidate, cand), (baseline, base)))
        + (f"; server CPU ratio {details['server_cpu_ratio']}" if "server_cpu_ratio" in details else "")
        + f"; load generator CPU share {max(cand['client_cpu_share_median'], base['client_cpu_share_median']):.2f}"
    ]
    return Result(group=GROUP, name=name, metric=metric, ratio=ratio, spread=spread, op=op,
                  threshold=threshold, rounds=len(ratios), details=details, notes=notes,
                  ci=median_ci(ratios))


def _cpu_result(name: str, candidate: Side, baseline: Side, metric: str) -> Result | None:
    """Workers' CPU per request, baseline ÷ candidate, per round (no target).

    On a machine other processes keep busy, req/s depends on how the kernel
    shares the cores between the servers and everything else as much as on
    the servers' own work; the CPU each worker spent per request does not.
    """
    if not (candidate.server_cpu_us and len(candidate.server_cpu_us) == len(baseline.server_cpu_us)):
        return None
    ratios = [b / c for b, c in zip(baseline.server_cpu_us, candidate.server_cpu_us) if c]
    if not ratios:
        return None
    return Result(group=GROUP, name=name, metric=metric, ratio=statistics.median(ratios),
                  spread=quartiles(ratios), op="", threshold=0.0, rounds=len(ratios),
                  details={"ratios": ratios, "clock": "workers' user+system CPU from /proc (10 ms ticks)"},
                  ci=median_ci(ratios))


def run(quick: bool = False) -> list[Result]:
    names = [("sync_tool_vs_bare", 0.9), ("gthread_tool_vs_bare", 0.95), ("gthread_redis_vs_off", 0.6),
             ("gthread_redis_deferred_vs_off", 0.6), ("gthread_sql_vs_off", 0.6),
             ("gthread_sql_minus_redis", -0.1)]
    if not gunicorn_available():
        why = "gunicorn is not installed (pip install -e '.[test,bench]')"
        print(f"[{GROUP}] warning: {why}; skipped", file=sys.stderr)
        return [skipped_result(GROUP, n, "end to end", ">=", t, why) for n, t in names]
    rounds, block_s = (5, 0.5) if quick else (7, 1.5)
    post = _spec(_apps.POST_TOOL, _apps.POST_ARGS)
    idem = _spec(_apps.IDEM_TOOL, _apps.POST_ARGS)
    results: list[Result] = []
    servers: list[Gunicorn] = []
    redis: Any = None
    postgres: Any = None
    workdir = tempfile.mkdtemp(prefix="bailing-bench-e2e-")
    gen = LoadGen()
    try:
        for worker_class, threads, concurrency in (("sync", 1, 2), ("gthread", 4, 4)):
            store = "memory://"
            if worker_class == "gthread":
                executable = shutil.which("redis-server")
                if executable is not None:
                    from tests._redis import _start_on_a_free_port

                    redis = _start_on_a_free_port(executable, Path(workdir))
                    store = redis.url
                postgres = _postgres(Path(workdir))
            env = {"BENCH_SECRET": _apps.SECRET, "BENCH_STORE": store}
            bare = Gunicorn("benchmarks._apps:bare_app()", worker_class=worker_class, threads=threads,
                            env=env, label=f"bare/{worker_class}")
            tool = Gunicorn("benchmarks._apps:tool_app()", worker_class=worker_class, threads=threads,
                            env=env, label=f"tool/{worker_class}")
            servers += [bare, tool]
            bare.start()
            tool.start()
            deferred = sql = None
            if worker_class == "gthread" and postgres is not None:
                sql = Gunicorn("benchmarks._apps:tool_app()", worker_class=worker_class,
                               threads=threads, env={**env, "BENCH_STORE": postgres[1]},
                               label=f"tool-sql/{worker_class}")
                servers.append(sql)
                sql.start()
            if worker_class == "gthread" and redis is not None:
                deferred = Gunicorn("benchmarks._apps:tool_app()", worker_class=worker_class,
                                    threads=threads, env={**env, "BENCH_DEFER_COMPLETION": "1"},
                                    label=f"tool-deferred/{worker_class}")
                servers.append(deferred)
                deferred.start()
            print(f"[{GROUP}] {worker_class}: servers on ports {bare.port} (bare), {tool.port} (tool)",
                  file=sys.stderr, flush=True)
            sides = [Side("bare", bare, post), Side("tool", tool, post)]
            n = interleaved(gen, sides, rounds=rounds, block_s=block_s, concurrency=concurrency)
            facts = {"worker_class": worker_class, "workers": 1, "threads": threads,
                     "connections": concurrency, "requests_per_block": n, "body_bytes": len(post["body"])}
            results.append(_result(
                f"{worker_class}_tool_vs_bare", sides[1], sides[0], ">=",
                0.9 if worker_class == "sync" else 0.95,
                f"req/s signed POST @tool call / the same POST to the bare app, gunicorn "
                f"{worker_class} (1 worker{', 4 threads' if threads > 1 else ''}), loopback",
                facts,
            ))
            cpu = _cpu_result(
                f"{worker_class}_tool_vs_bare_server_cpu", sides[1], sides[0],
                f"the same comparison by the workers' CPU per request: bare ÷ tool, gunicorn {worker_class} "
                "(no target; steadier than req/s on a busy machine)")
            if cpu is not None:
                results.append(cpu)
            if worker_class == "gthread":
                if redis is None or deferred is None:
                    why = "redis-server not found on PATH (apt-get install redis-server)"
                    print(f"[{GROUP}] warning: {why}; gthread_redis_*_vs_off skipped", file=sys.stderr)
                    for name in ("gthread_redis_vs_off", "gthread_redis_deferred_vs_off"):
                        results.append(skipped_result(GROUP, name, "Redis store e2e", ">=", 0.6, why))
                else:
                    # one interleaved series: the baseline, then the store with each completion mode
                    sides = [Side("off", tool, post), Side("redis", tool, idem),
                             Side("redis_deferred", deferred, idem)]
                    if sql is not None:
                        sides.append(Side("sql", sql, idem))
                    n = interleaved(gen, sides, rounds=rounds, block_s=block_s, concurrency=concurrency)
                    for side, mode in ((sides[1], "default settings"),
                                       (sides[2], "BAILING_IDEMPOTENCY_DEFER_COMPLETION")):
                        results.append(_result(
                            f"gthread_{side.name}_vs_off", side, sides[0], ">=", 0.6,
                            f"req/s new side-effecting calls, Redis store (loopback, {mode}) / the "
                            "same tool with repeats='safe', gunicorn gthread (1 worker, 4 threads)",
                            {**facts, "requests_per_block": n, "store": "redis (loopback, no persistence)",
                             "defer_completion": side is sides[2]},
                        ))
                    results += _sql_results(sides, facts, n)
                if sql is None or redis is None:
                    why = ("PostgreSQL (initdb/pg_ctl) or psycopg not found (apt-get install "
                           "postgresql; pip install -e '.[test]')" if sql is None else
                           "redis-server not found: the SQL store is compared with it")
                    print(f"[{GROUP}] warning: {why}; gthread_sql_* skipped", file=sys.stderr)
                    for name, target in (("gthread_sql_vs_off", 0.6),
                                         ("gthread_sql_minus_redis", -0.1)):
                        results.append(skipped_result(GROUP, name, "SQL store e2e", ">=", target, why))
            for server in (bare, tool, deferred, sql):
                if server is not None:
                    server.close()
    finally:
        gen.close()
        for server in servers:
            server.close()
        if redis is not None:
            redis.stop()
        if postgres is not None:
            postgres[0].stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return results


def _postgres(workdir: Path) -> tuple[Any, str] | None:
    """A PostgreSQL cluster for the run, with the SQL store's tables: ``(server, url)``."""
    try:
        import psycopg  # noqa: F401

        from tests._postgres import find_binaries, start_server
    except ImportError:
        return None
    if find_binaries() is None:
        return None
    workdir.chmod(0o755)  # PostgreSQL runs as its own user when the run is root's
    directory = workdir / "postgres"
    directory.mkdir()
    directory.chmod(0o755)
    server = start_server(directory)
    url = server.url("postgres")
    from bailing_flask.stores import SQLStore

    store = SQLStore(url)
    store.create_schema()
    store.close()
    return server, url


def _sql_results(sides: list[Side], facts: dict[str, Any], n: int) -> list[Result]:
    """The SQL store against the baseline, and against the Redis store of the same rounds."""
    off, redis, sql = sides[0], sides[1], sides[-1]
    if sql.name != "sql":
        return []
    extra = {**facts, "requests_per_block": n,
             "store": "PostgreSQL (loopback, fsync off, like Redis without persistence)"}
    vs_off = _result("gthread_sql_vs_off", sql, off, ">=", 0.6,
                     "req/s new side-effecting calls, SQL store on PostgreSQL (loopback, default "
                     "settings) / the same tool with repeats='safe', gunicorn gthread "
                     "(1 worker, 4 threads)", extra)
    differences = [s / o - r / o for s, r, o in zip(sql.rates, redis.rates, off.rates)]
    difference = Result(
        group=GROUP, name="gthread_sql_minus_redis",
        metric="(SQL store on PostgreSQL / off) - (Redis store / off), round by round, same series",
        ratio=statistics.median(differences), spread=quartiles(differences), op=">=",
        threshold=-0.1, rounds=len(differences),
        details={"differences": [round(d, 3) for d in differences], **extra})
    return [vs_off, difference]


if __name__ == "__main__":  # pragma: no cover - convenience
    t = time.perf_counter()
    for r in run(quick="--quick" in sys.argv):
        print(r.group, r.name, r.figure(), r.spread_text(), r.target, r.verdict)
        for note in r.notes:
            print("   ", note)
    print(f"{time.perf_counter() - t:.1f}s")
