"""idempotency: the cost of "at most once" per side-effecting call, with each store.

The tool app of ``benchmarks/_apps.py`` serves the same POST tool twice:
``POST /api/orders/idem`` (de-duplicated, the default for a side-effecting
tool) and ``POST /api/orders`` (``repeats="safe"``). One app per store:
``memory://``; a SQLite file on the repository's file system (a directory
``benchmarks/.tmp-*`` removed at the end; ``BENCH_SQLITE_DIR`` chooses
another); the same on ``/dev/shm`` when it is a tmpfs (``fsync`` is free
there, so what is left is the store's own CPU); a real ``redis-server``
started for the run on a free loopback port (the test suite's helper,
``tests/_redis.py``: ``--save "" --appendonly no``).

Every request is a **new call** (a fresh job id, hence a new signature, a
new call identity and a new store entry), built and signed like the hub in
the case's ``prepare`` hook, before its block starts; both sides of every
comparison get the same kind of requests through the whole app. Before
timing, each store is checked to be engaged: the same request sent again is
answered from the store with ``Idempotent-Replayed: true``.

SQLite and Redis are measured twice: with the default settings and with
``BAILING_IDEMPOTENCY_DEFER_COMPLETION`` (rows ``*_deferred*``: the
completion travels with the next reservation, one write per call; see the
idempotency docs for what that trades).

Ratios (calls/s with the store / calls/s of the same tool without):

* ``memory_vs_off`` (target >= 0.92) and ``sqlite_tmpfs[_deferred]_vs_off``
  (target >= 0.7): thread CPU time;
* ``sqlite[_deferred]_vs_off`` (no target): the repository's disk, wall clock
  on both sides - each commit waits for the disk, so this one measures the
  disk;
* ``redis[_deferred]_vs_off`` (no target in-process): wall clock on both
  sides (each round trip waits for the server, which shares the 2 cores);
  the target for Redis is end to end (``e2e/gthread_redis_deferred_vs_off``).

Counts per call on the request path (the machine-independent figures; the
target is on the deferred rows, the default rows are information):

* ``sqlite_fsyncs_per_call[_deferred]`` (target <= 1): ``fsync`` +
  ``fdatasync`` system calls per new call on the thread that makes the calls
  (the request path), counted by ``strace -f`` around a subprocess that
  makes N new calls, minus the same subprocess making none (so start-up,
  schema, warm-up and the exit cancel out); the whole process's count, the
  store's background checkpoints included, is in the note. Without
  ``strace`` (or when ptrace is not permitted) the fallback counts SQLite
  write transactions through ``sqlite3``'s trace callback - one WAL
  ``fsync`` each under ``synchronous=FULL`` - and the details say so;
* ``redis_round_trips_per_call[_deferred]`` (target <= 1): client -> server
  bursts per new call through a counting TCP proxy in front of the server
  (pipelined commands sent together count once), on the connection of the
  thread that makes the calls (the store keeps one per thread: this is the
  request path; all connections' count, a background thread's sends of
  deferred completions included, is in the note); the details add the
  server's own command counts from ``INFO commandstats``.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from flask import Flask

from bailing_flask import Bailing
from bailing_flask.testing import HubSimulator

from . import _apps
from ._harness import Result, compare, ratio_result, skipped_result
from ._wsgi import FreshCalls, HubSigner, call_once
from bailing_flask._state import state_of
from bailing_flask._pipeline.idempotency import idempotency_of

GROUP = "idempotency"
REPLAY_HEADER = "Idempotent-Replayed"
HERE = Path(__file__).resolve().parent


def signers(app: Flask) -> tuple[HubSigner, HubSigner]:
    """(de-duplicated tool, same tool without) request builders, in the hub's wire form."""
    hub = HubSimulator(app, _apps.SECRET, client="bench")
    out = []
    for tool in (_apps.IDEM_TOOL, _apps.POST_TOOL):
        template = hub.build_call(tool, _apps.POST_ARGS, subject=_apps.SUBJECT, job_id="template")
        signer = HubSigner(_apps.SECRET, template, tool, _apps.POST_ARGS, _apps.SUBJECT)
        if signer.headers("template", ts=template.headers["X-Bailing-Timestamp"]) != template.headers:
            raise AssertionError("HubSigner does not reproduce HubSimulator.build_call's headers")
        out.append(signer)
    return out[0], out[1]


def check(app: Flask, signer: HubSigner, expect_replay: bool) -> None:
    """One new call answers 200 fresh; the same request again is (or is not) replayed."""
    env = signer.environ()
    for attempt in (1, 2):
        status, headers, payload = call_once(app, dict(env), signer.template.body)
        replayed = headers.get(REPLAY_HEADER) == "true"
        if not status.startswith("200"):
            raise AssertionError(f"{signer.tool}: {status} {payload[:200]!r}")
        if replayed != (attempt == 2 and expect_replay):
            raise AssertionError(f"{signer.tool}: attempt {attempt} replayed={replayed}")


def fs_type(path: str) -> str | None:
    """The file system type of ``path`` (Linux ``/proc/mounts``), for the details."""
    try:
        with open("/proc/mounts", encoding="utf-8") as fh:
            mounts = [line.split()[1:3] for line in fh]
    except OSError:
        return None
    path = os.path.realpath(path)
    best: tuple[str, str | None] = ("", None)
    for mount, kind in mounts:
        if (path == mount or path.startswith(mount.rstrip("/") + "/")) and len(mount) > len(best[0]):
            best = (mount, kind)
    return best[1]


def _compare_store(name: str, app: Flask, *, io_bound: bool, target: float | None, rounds: int,
                   block_ms: float, quick: bool, extra: dict[str, Any]) -> Result:
    on_signer, off_signer = signers(app)
    check(app, off_signer, expect_replay=False)
    check(app, on_signer, expect_replay=True)
    off = FreshCalls(app, off_signer)
    on = FreshCalls(app, on_signer, io_bound=io_bound)
    per_round = compare({"off": off, name: on}, rounds=rounds, block_ms=block_ms,
                        warmup_s=0.1 if quick else 0.3, measure="wall" if io_bound else "cpu")
    label = name.replace("_tmpfs", " (tmpfs)").replace("_deferred", ", deferred completions,")
    result = ratio_result(
        per_round, group=GROUP, name=f"{name}_vs_off", numerator="off", denominator=name,
        op=">=" if target is not None else "", threshold=target or 0.0,
        metric=(f"calls/s new side-effecting calls with the {label} store / the same tool with "
                f"repeats='safe' ({per_round.clock} clock"
                + ("" if target is not None else "; no target") + ")"),
        extra={
            f"{name}_us_per_call": round(statistics.median(per_round[name]) / 1000, 1),
            "off_us_per_call": round(statistics.median(per_round["off"]) / 1000, 1),
            "store": repr(idempotency_of(state_of(app)).store()),
            "new_calls_made": on.calls,
            **extra,
        },
    )
    result.notes.append(
        f"{GROUP}/{name}_vs_off: {statistics.median(per_round[name]) / 1000:.1f} µs with the store, "
        f"{statistics.median(per_round['off']) / 1000:.1f} µs without ({per_round.clock} clock); "
        f"on the {'CPU' if per_round.clock == 'wall' else 'wall'} clock the ratio is "
        f"{result.details['ratio_on_' + ('cpu' if per_round.clock == 'wall' else 'wall') + '_clock_median']:.3f}")
    return result


# -- fsyncs per call (a subprocess under strace) ---------------------------------------------


def fsync_child(db: str, calls: int, route: str, mode: str, defer: bool = False) -> dict[str, Any]:
    """Make ``calls`` new calls to ``route`` ("idem" or "off") over a SQLite store at ``db``.

    ``defer``: with ``BAILING_IDEMPOTENCY_DEFER_COMPLETION``. The store is
    flushed at the end, so the last deferred completion is counted too.
    """
    counter = {"transactions": 0}
    if mode == "trace":
        import sqlite3

        connect = sqlite3.connect
        in_tx = [False]

        def traced(sql: str) -> None:
            head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
            if head == "BEGIN":
                in_tx[0] = True
            elif head in ("COMMIT", "END"):
                in_tx[0] = False
                counter["transactions"] += 1
            elif head in ("INSERT", "UPDATE", "DELETE", "REPLACE") and not in_tx[0]:
                counter["transactions"] += 1  # autocommit: its own transaction

        def connect_traced(*args: Any, **kwargs: Any) -> Any:
            conn = connect(*args, **kwargs)
            conn.set_trace_callback(traced)
            return conn

        sqlite3.connect = connect_traced  # type: ignore[assignment]
    app = _apps.tool_app(store="sqlite:///" + db, defer=defer)
    on_signer, off_signer = signers(app)
    signer = on_signer if route == "idem" else off_signer
    for _ in range(3):  # warm-up: schema, WAL, first connection
        call_once(app, signer.environ(), signer.template.body)
    before = counter["transactions"]
    envs = [signer.environ() for _ in range(calls)]
    for env in envs:
        status, _h, payload = call_once(app, env, signer.template.body)
        if not status.startswith("200"):
            raise AssertionError(f"{status} {payload[:200]!r}")
    store = idempotency_of(state_of(app)).store()
    store.flush()
    out: dict[str, Any] = {"transactions": counter["transactions"] - before, "pid": os.getpid()}
    conn = getattr(getattr(store, "_local", None), "conn", None)
    if conn is not None:
        out["journal_mode"] = conn.execute("PRAGMA journal_mode").fetchone()[0]
        out["synchronous"] = conn.execute("PRAGMA synchronous").fetchone()[0]
    return out


_SYNC_CALLS = ("fsync", "fdatasync", "sync_file_range", "msync")


def _strace_counts(path: str, request_thread: int) -> dict[str, dict[str, int]]:
    """``{"request_thread": {syscall: n}, "process": {syscall: n}}`` from ``strace -f -o`` lines.

    Each line starts with the thread id; the request thread is the child's
    main thread (its id is the process id), background threads (the
    store's checkpoints) count for the process only.
    """
    counts: dict[str, dict[str, int]] = {"request_thread": {}, "process": {}}
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            tid, _, rest = line.partition(" ")
            name = rest.lstrip().split("(", 1)[0]
            if name not in _SYNC_CALLS or not tid.isdigit():
                continue
            counts["process"][name] = counts["process"].get(name, 0) + 1
            if int(tid) == request_thread:
                counts["request_thread"][name] = counts["request_thread"].get(name, 0) + 1
    return counts


def _run_fsync_child(db: str, calls: int, route: str, strace: str | None, workdir: str,
                     defer: bool = False) -> tuple[dict[str, Any], dict[str, dict[str, int]] | None]:
    argv = [sys.executable, "-m", "benchmarks.bench_idempotency", "--fsync-child", db, str(calls),
            route, "strace" if strace else "trace", "defer" if defer else "sync"]
    out_file = os.path.join(workdir, f"strace-{route}-{calls}-{int(defer)}.txt")
    if strace:
        argv = [strace, "-f", "-qq", "-e", "trace=" + ",".join(_SYNC_CALLS), "-o", out_file] + argv
    env = dict(os.environ)
    env["PYTHONPATH"] = str(HERE.parent) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=HERE.parent, env=env, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"fsync child failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    return facts, (_strace_counts(out_file, facts["pid"]) if strace else None)


def _strace_works(strace: str) -> bool:
    try:
        proc = subprocess.run([strace, "-f", "-qq", "-c", "-e", "trace=fsync", "-o", os.devnull,
                               sys.executable, "-c", "pass"], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def count_fsyncs(directory: str, calls: int, workdir: str, defer: bool = False) -> Result:
    strace = None if os.environ.get("BENCH_NO_STRACE") else shutil.which("strace")
    if strace is not None and not _strace_works(strace):
        print(f"[{GROUP}] warning: strace cannot trace here (ptrace not permitted?); counting "
              "SQLite write transactions instead", file=sys.stderr)
        strace = None
    per_route: dict[str, dict[str, Any]] = {}
    for route in ("idem", "off"):
        db = os.path.join(directory, f"fsync-{route}-{int(defer)}.sqlite3")
        base_facts, base = _run_fsync_child(db + "-0", 0, route, strace, workdir, defer)
        facts, counted = _run_fsync_child(db, calls, route, strace, workdir, defer)
        entry: dict[str, Any] = {"sqlite": {k: v for k, v in facts.items()
                                            if k not in ("transactions", "pid")}}
        if strace:
            assert counted is not None and base is not None
            for where in ("request_thread", "process"):
                names = sorted(set(counted[where]) | set(base[where]))
                delta = {n: round((counted[where].get(n, 0) - base[where].get(n, 0)) / calls, 4)
                         for n in names}
                entry[f"per_call_{where}"] = delta
                entry[f"fsyncs_per_call_{where}"] = delta.get("fsync", 0.0) + delta.get("fdatasync", 0.0)
            entry["per_call"] = entry["per_call_request_thread"]
            entry["fsyncs_per_call"] = entry["fsyncs_per_call_request_thread"]
        else:
            entry["write_transactions_per_call"] = facts["transactions"] / calls
            entry["fsyncs_per_call"] = entry["write_transactions_per_call"]
        per_route[route] = entry
    method = ("strace -f: (syscalls of N new calls) - (syscalls of 0 calls), / N, on the thread "
              "making the calls (the request path); the whole process's in the details" if strace else
              "no strace: SQLite write transactions per call via sqlite3 set_trace_callback "
              "(each one WAL fsync under synchronous=FULL; fewer under NORMAL)")
    value = per_route["idem"]["fsyncs_per_call"]
    name = "sqlite_fsyncs_per_call" + ("_deferred" if defer else "")
    return Result(
        group=GROUP, name=name, unit="/call",
        metric=("fsync + fdatasync system calls per new side-effecting call, SQLite store "
                f"({'strace' if strace else 'estimated from write transactions'}"
                + (", BAILING_IDEMPOTENCY_DEFER_COMPLETION" if defer else ", default settings; "
                   "no target") + ")"),
        ratio=value, spread=(value, value), op="<=" if defer else "", threshold=1.0 if defer else 0.0,
        rounds=1,
        details={"method": method, "calls": calls, "fs_type": fs_type(directory),
                 "defer_completion": defer, "idem": per_route["idem"],
                 "off_route": per_route["off"]},
        notes=[f"{GROUP}/{name}: {method}; de-duplicated tool "
               f"{per_route['idem'].get('per_call', per_route['idem'].get('write_transactions_per_call'))}"
               + (f" (whole process, background checkpoints included: "
                  f"{per_route['idem']['per_call_process']})" if strace else "") + ", "
               f"same tool without idempotency {per_route['off']['fsyncs_per_call']:.2f}/call; SQLite "
               f"{per_route['idem']['sqlite']}"],
    )


# -- Redis round trips per call (a counting proxy) ------------------------------------------------


class CountingProxy:
    """A loopback TCP proxy that counts client -> server bursts (request round trips).

    A burst is client data arriving after the server last spoke (or first
    on a connection): one command, or one pipeline sent together.
    """

    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = int(self.listener.getsockname()[1])
        self.bursts = 0
        #: bursts per client connection (the store keeps one per thread)
        self.per_connection: dict[int, int] = {}
        self._stop = False
        self._thread = threading.Thread(target=self._serve, name="bench-redis-proxy", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _serve(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self.listener, selectors.EVENT_READ, None)
        last: dict[int, str] = {}
        while not self._stop:
            for key, _ in sel.select(timeout=0.1):
                if key.data is None:
                    client, _addr = self.listener.accept()
                    server = socket.create_connection(self.upstream)
                    pair = id(client)
                    last[pair] = "server"
                    sel.register(client, selectors.EVENT_READ, (server, True, pair))
                    sel.register(server, selectors.EVENT_READ, (client, False, pair))
                    continue
                sock = key.fileobj
                peer, from_client, pair = key.data
                try:
                    data = sock.recv(65536)  # type: ignore[union-attr]
                except OSError:
                    data = b""
                if not data:
                    for s in (sock, peer):
                        try:
                            sel.unregister(s)
                        except (KeyError, ValueError):
                            pass
                        s.close()  # type: ignore[union-attr]
                    continue
                if from_client and last[pair] != "client":
                    self.bursts += 1
                    self.per_connection[pair] = self.per_connection.get(pair, 0) + 1
                last[pair] = "client" if from_client else "server"
                peer.sendall(data)

    def close(self) -> None:
        self._stop = True
        self._thread.join(timeout=2)
        self.listener.close()


def _command_calls(client: Any) -> dict[str, int]:
    stats = client.info("commandstats")
    return {name.replace("cmdstat_", ""): int(v["calls"]) for name, v in stats.items()}


def count_round_trips(redis_url: str, redis_port: int, calls: int, defer: bool = False) -> Result:
    import redis as redis_py

    proxy = CountingProxy(redis_port)
    app = _apps.tool_app(store=proxy.url, defer=defer)
    stats_client = redis_py.Redis.from_url(redis_url)  # one connection: its handshake is not counted
    try:
        on_signer, _off = signers(app)
        envs = [on_signer.environ() for _ in range(calls + 3)]
        for env in envs[:3]:  # warm-up: connection, handshake, script loading
            call_once(app, env, on_signer.template.body)
        envs = envs[3:]
        before_cmds = _command_calls(stats_client)
        before = proxy.bursts
        before_per = dict(proxy.per_connection)
        for env in envs:
            status, _h, payload = call_once(app, env, on_signer.template.body)
            if not status.startswith("200"):
                raise AssertionError(f"{status} {payload[:200]!r}")
        # No flush: the window holds N claims and N completions either way (deferred: the
        # warm-up's last one travels with the first call, the last call's would travel with
        # the next one).
        bursts = proxy.bursts - before
        # the request path: the connection of the thread making the calls (the one with the
        # most bursts); a background thread's (deferred completions nobody took along) is not
        per_connection = sorted((n - before_per.get(pair, 0) for pair, n in proxy.per_connection.items()),
                                reverse=True)
        after_cmds = _command_calls(stats_client)
    finally:
        stats_client.close()
        try:
            idempotency_of(state_of(app)).store().close()
        except Exception:  # noqa: BLE001 - best effort
            pass
        proxy.close()
    delta = {k: (after_cmds.get(k, 0) - before_cmds.get(k, 0)) / calls
             for k in set(after_cmds) | set(before_cmds)}
    delta.pop("info", None)  # our own INFO calls
    delta = {k: round(v, 3) for k, v in sorted(delta.items()) if v}
    value = (per_connection[0] if per_connection else 0) / calls
    name = "redis_round_trips_per_call" + ("_deferred" if defer else "")
    return Result(
        group=GROUP, name=name, unit="/call",
        metric=("request round trips to Redis per new side-effecting call (counting proxy"
                + (", BAILING_IDEMPOTENCY_DEFER_COMPLETION" if defer else
                   ", default settings; no target") + ")"),
        ratio=value, spread=(value, value), op="<=" if defer else "", threshold=1.0 if defer else 0.0,
        rounds=1,
        details={"calls": calls, "server_commands_per_call": delta, "defer_completion": defer,
                 "all_connections_per_call": round(bursts / calls, 4),
                 "per_connection": [n for n in per_connection if n],
                 "method": "client->server bursts through a loopback proxy on the request "
                           "thread's connection, after 3 warm-up calls"},
        notes=[f"{GROUP}/{name}: {value:.3f} round trips per call on the request thread's "
               f"connection ({bursts / calls:.3f} on all connections, background sends "
               f"included: {[n for n in per_connection if n]}); server "
               f"commands per call (INFO commandstats, script-internal commands included): {delta}"],
    )


# -- the group ------------------------------------------------------------------------------------


def _sqlite_dir() -> str:
    base = os.environ.get("BENCH_SQLITE_DIR") or str(HERE)
    return tempfile.mkdtemp(prefix=".tmp-idem-", dir=base)


def run(quick: bool = False) -> list[Result]:
    results: list[Result] = []
    workdir = tempfile.mkdtemp(prefix="bailing-bench-idem-")
    disk_dir = _sqlite_dir()
    shm_dir: str | None = None
    redis: Any = None
    apps: list[Flask] = []
    try:
        app = _apps.tool_app(store="memory://")
        apps.append(app)
        results.append(_compare_store("memory", app, io_bound=False, target=0.92,
                                      rounds=21 if quick else 81, block_ms=8.0, quick=quick, extra={}))

        for defer in (False, True):
            suffix = "_deferred" if defer else ""
            db = os.path.join(disk_dir, f"bench{suffix}.sqlite3")
            app = _apps.tool_app(store="sqlite:///" + db, defer=defer)
            apps.append(app)
            results.append(_compare_store(
                "sqlite" + suffix, app, io_bound=True, target=None, rounds=7 if quick else 31,
                block_ms=40.0, quick=quick,
                extra={"fs_type": fs_type(disk_dir), "where": "the repository's file system",
                       "defer_completion": defer},
            ))

        if fs_type("/dev/shm") == "tmpfs":
            shm_dir = tempfile.mkdtemp(prefix="bailing-bench-idem-", dir="/dev/shm")
            for defer in (False, True):
                suffix = "_deferred" if defer else ""
                app = _apps.tool_app(
                    store="sqlite:///" + os.path.join(shm_dir, f"bench{suffix}.sqlite3"), defer=defer)
                apps.append(app)
                results.append(_compare_store(
                    "sqlite_tmpfs" + suffix, app, io_bound=False, target=0.7,
                    rounds=15 if quick else 61, block_ms=16.0, quick=quick,
                    extra={"fs_type": "tmpfs", "defer_completion": defer},
                ))
        else:
            for suffix in ("", "_deferred"):
                results.append(skipped_result(GROUP, f"sqlite_tmpfs{suffix}_vs_off", "SQLite on tmpfs",
                                              ">=", 0.7, "/dev/shm is not a tmpfs here"))

        for defer in (False, True):
            results.append(count_fsyncs(disk_dir, 40 if quick else 200, workdir, defer=defer))

        executable = shutil.which("redis-server")
        if executable is None:
            why = "redis-server not found on PATH (apt-get install redis-server)"
            print(f"[{GROUP}] warning: {why}; Redis rows skipped", file=sys.stderr, flush=True)
            results.append(skipped_result(GROUP, "redis_round_trips_per_call_deferred",
                                          "Redis round trips", "<=", 1.0, why, unit="/call"))
        else:
            from tests._redis import _start_on_a_free_port

            redis = _start_on_a_free_port(executable, Path(workdir))
            for defer in (False, True):
                app = _apps.tool_app(store=redis.url, defer=defer)
                apps.append(app)
                results.append(_compare_store(
                    "redis" + ("_deferred" if defer else ""), app, io_bound=True, target=None,
                    rounds=9 if quick else 41, block_ms=20.0, quick=quick,
                    extra={"server": "127.0.0.1 loopback, no persistence", "defer_completion": defer},
                ))
            for defer in (False, True):
                results.append(count_round_trips(redis.url, redis.port, 50 if quick else 200,
                                                 defer=defer))
    finally:
        for app in apps:
            try:
                idempotency_of(state_of(app)).store().close()
            except Exception as exc:  # noqa: BLE001 - best effort at the end of a benchmark
                print(f"[{GROUP}] warning: closing a store failed: {exc!r}", file=sys.stderr)
        if redis is not None:
            redis.stop()
        for directory in (workdir, disk_dir, shm_dir):
            if directory is not None:
                shutil.rmtree(directory, ignore_errors=True)
    return results


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "--fsync-child":
        print(json.dumps(fsync_child(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5],
                                     defer=sys.argv[6] == "defer")))
    else:  # pragma: no cover - convenience
        t = time.perf_counter()
        for r in run(quick="--quick" in sys.argv):
            print(r.group, r.name, r.figure(), r.spread_text(), r.target, r.verdict)
            for note in r.notes:
                print("   ", note)
        print(f"{time.perf_counter() - t:.1f}s")
