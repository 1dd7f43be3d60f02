"""transaction: exactly once in the app's own transaction, against no idempotency and the stores.

One Flask-SQLAlchemy app per store, every variant writing to **the same
SQLite file in WAL mode** (``synchronous=FULL``, SQLite's default: one WAL
``fsync`` per commit) on the repository's file system. The same view --
``db.session.add(order); db.session.commit()``, one business row per call --
is declared four ways:

* ``off`` -- ``repeats="safe"`` (every call runs): the baseline;
* ``transaction`` -- ``repeats="transaction"``: the record is inserted in the
  view's transaction and its answer written into it before the one commit;
* ``sqlite_store`` -- the store mode over the default SQLite store (a file
  next to the app's database);
* ``redis_store`` -- the store mode over a real ``redis-server`` on loopback
  (the test suite's helper, ``--save "" --appendonly no``).

Every request is a new call (a fresh job id), signed like the hub between
blocks; all variants are interleaved in one comparison on the wall clock
(each commit waits for the disk). Rows:

* ``transaction_vs_off`` (target >= 0.8), ``sqlite_store_vs_off``,
  ``redis_store_vs_off``: calls/s of the variant / calls/s of ``off``;
* ``transaction_tmpfs_vs_off``: the same two on ``/dev/shm`` on the thread
  CPU clock (``fsync`` is free there): the package's own CPU cost;
* ``transaction_fsyncs_per_call`` (target <= 1): ``fsync`` + ``fdatasync``
  per new call, ``strace -f -c`` of a subprocess making N calls minus one
  making none (the same method as the ``idempotency`` group; without strace,
  commits counted with ``sqlite3``'s trace callback); the note gives
  ``off``'s count, which is the business commit's own;
* ``postgresql_transaction_vs_off``: the same view over PostgreSQL
  (Flask-SQLAlchemy + psycopg 3, a throwaway cluster with ``fsync`` and
  ``synchronous_commit`` on, data on the repository's file system, started
  with Debian's binaries by ``tests/_postgres.py``), wall clock; skipped
  without PostgreSQL.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from flask import Flask
from sqlalchemy.orm import Mapped, mapped_column

from bailing_flask.testing import HubSimulator

from . import _apps
from ._harness import Result, compare, ratio_result, skipped_result
from ._wsgi import FreshCalls, HubSigner, call_once
from bailing_flask._state import state_of
from bailing_flask._pipeline.idempotency import idempotency_of

GROUP = "transaction"
HERE = Path(__file__).resolve().parent
REPLAY_HEADER = "Idempotent-Replayed"
ROUTES = {"off": "order_create_off", "transaction": "order_create_txn", "store": "order_create_store"}


def make_app(database_url: str, store: str) -> Flask:
    """The bench app: the same committing view as three tools, over ``database_url``."""
    from flask_sqlalchemy import SQLAlchemy
    from sqlalchemy import event

    from bailing_flask import Bailing, current_call, tool
    from bailing_flask.transactional import SQLAlchemyTransaction

    app = Flask("bench_transaction")
    app.config.update(
        BAILING_SECRETS=[_apps.SECRET], BAILING_STORE=store, SQLALCHEMY_DATABASE_URI=database_url,
    )
    # expire_on_commit=False: with Flask-SQLAlchemy's default, the baseline's commit expires the
    # order and reading order.id afterwards reloads it (one more SELECT), while the transaction
    # mode's commit-as-flush expires nothing; that difference is SQLAlchemy's, not the package's
    db = SQLAlchemy(session_options={"expire_on_commit": False})

    class BenchOrder(db.Model):  # type: ignore[name-defined,misc]
        __tablename__ = "bench_orders"
        id: Mapped[int] = mapped_column(primary_key=True)
        sku: Mapped[str]
        quantity: Mapped[int]
        job: Mapped[str]

    db.init_app(app)
    if database_url.startswith("sqlite"):
        with app.app_context():
            @event.listens_for(db.engine, "connect")
            def _wal(dbapi_connection: Any, record: Any) -> None:
                dbapi_connection.execute("PRAGMA journal_mode=WAL")
                dbapi_connection.execute("PRAGMA synchronous=FULL")
    bailing = Bailing(app, transaction=SQLAlchemyTransaction(db))
    bailing.subject_loader(_apps.load_subject)
    bailing.authorizer(_apps.authorize)

    def create() -> Any:
        body = current_call.body
        order = BenchOrder(sku=body.sku, quantity=body.quantity, job=current_call.job_id)  # type: ignore[union-attr]
        db.session.add(order)
        db.session.commit()
        return {"ok": True, "id": order.id, "sku": order.sku, "quantity": order.quantity}

    for path, name, options in (
        ("/api/orders/off", ROUTES["off"], {"repeats": "safe"}),
        ("/api/orders/txn", ROUTES["transaction"], {"repeats": "transaction"}),
        ("/api/orders/store", ROUTES["store"], {}),
    ):
        view = tool(name=name, scope=_apps.SCOPE_WRITE, body=_apps.OrderBody, **options)(create)  # type: ignore[arg-type]
        app.add_url_rule(path, name, view, methods=["POST"])
        create = _fresh(create)
    with app.app_context():
        db.create_all()  # bench_orders and bailing_idempotency (defined on db.metadata)
    app.extensions["bench_db"] = db
    return app


def _fresh(view: Any) -> Any:
    """A new function object with the same code: one @tool declaration per function."""
    import types

    return types.FunctionType(view.__code__, view.__globals__, view.__name__ + "_", view.__defaults__,
                              view.__closure__)


def signer(app: Flask, tool_name: str) -> HubSigner:
    hub = HubSimulator(app, _apps.SECRET, client="bench")
    template = hub.build_call(tool_name, _apps.POST_ARGS, subject=_apps.SUBJECT, job_id="template")
    made = HubSigner(_apps.SECRET, template, tool_name, _apps.POST_ARGS, _apps.SUBJECT)
    if made.headers("template", ts=template.headers["X-Bailing-Timestamp"]) != template.headers:
        raise AssertionError("HubSigner does not reproduce HubSimulator.build_call's headers")
    return made


def check(app: Flask, made: HubSigner, replayed: bool) -> None:
    """A new call answers 200; the same again is (or is not) answered from the record."""
    env = made.environ()
    for attempt in (1, 2):
        status, headers, payload = call_once(app, dict(env), made.template.body)
        if not status.startswith("200"):
            raise AssertionError(f"{made.tool}: {status} {payload[:300]!r}")
        if (headers.get(REPLAY_HEADER) == "true") != (attempt == 2 and replayed):
            raise AssertionError(f"{made.tool}: attempt {attempt}, {REPLAY_HEADER}={headers.get(REPLAY_HEADER)}")


def business_rows(app: Flask) -> int:
    from sqlalchemy import text

    with app.app_context():
        return int(app.extensions["bench_db"].session.execute(text("SELECT COUNT(*) FROM bench_orders"))
                   .scalar_one())


def dispose(app: Flask) -> None:
    from bailing_flask import Bailing

    with app.app_context():
        app.extensions["bench_db"].engine.dispose()
    try:
        idempotency_of(state_of(app)).store().close()
    except Exception:  # noqa: BLE001 - best effort at the end of a benchmark
        pass


def _cases(apps: dict[str, Flask]) -> dict[str, FreshCalls]:
    cases: dict[str, FreshCalls] = {}
    first = apps["sqlite_store"]
    for name, app, route, replayed in (
        ("off", first, ROUTES["off"], False),
        ("transaction", first, ROUTES["transaction"], True),
        *((store, apps[store], ROUTES["store"], True) for store in ("sqlite_store", "redis_store")
          if store in apps),
    ):
        made = signer(app, route)
        check(app, made, replayed)
        cases[name] = FreshCalls(app, made, io_bound=True)
    return cases


def _note(per_round: Any, names: list[str], where: str) -> str:
    parts = [f"{name} {statistics.median(per_round[name]) / 1000:.0f} µs" for name in names]
    return f"{GROUP} ({where}, {per_round.clock} clock): " + ", ".join(parts) + " per call"


def compare_on_disk(directory: str, redis_url: str | None, quick: bool) -> list[Result]:
    database = "sqlite:///" + os.path.join(directory, "app.sqlite3")
    apps = {"sqlite_store": make_app(database, "sqlite:///" + os.path.join(directory, "store.sqlite3"))}
    if redis_url:
        apps["redis_store"] = make_app(database, redis_url)
    try:
        cases = _cases(apps)
        before = business_rows(apps["sqlite_store"])
        per_round = compare(cases, rounds=7 if quick else 21, block_ms=40.0 if quick else 60.0,
                            warmup_s=0.2 if quick else 0.5, measure="wall")
        made = sum(case.calls for case in cases.values())
        if business_rows(apps["sqlite_store"]) - before != made:  # every call wrote its row
            raise AssertionError("a variant did not write its business row")
    finally:
        for app in apps.values():
            dispose(app)
    extra = {"fs_type": _fs_type(directory), "where": "the repository's file system",
             "sqlite": "WAL, synchronous=FULL (one WAL fsync per commit)"}
    results = []
    for name, target in (("transaction", 0.8), ("sqlite_store", None), ("redis_store", None)):
        if name not in per_round:
            continue
        result = ratio_result(
            per_round, group=GROUP, name=f"{name}_vs_off", numerator="off", denominator=name,
            op=">=" if target else "", threshold=target or 0.0,
            metric=(f"calls/s of the committing view with {name.replace('_', ' ')} / the same view "
                    "with repeats='safe', same SQLite WAL file, wall clock"
                    + ("" if target else "; no target")),
            extra={**extra, f"{name}_us_per_call": round(statistics.median(per_round[name]) / 1000, 1),
                   "off_us_per_call": round(statistics.median(per_round["off"]) / 1000, 1)},
        )
        results.append(result)
    results[0].notes.append(_note(per_round, list(per_round), "SQLite file on " + str(extra["fs_type"])))
    if "redis_store" not in per_round:
        results.append(skipped_result(GROUP, "redis_store_vs_off", "Redis store", "", 0.0,
                                      "redis-server not found on PATH (apt-get install redis-server)"))
    return results


def compare_on_tmpfs(quick: bool) -> Result:
    if _fs_type("/dev/shm") != "tmpfs":
        return skipped_result(GROUP, "transaction_tmpfs_vs_off", "transaction mode on tmpfs", "", 0.0,
                              "/dev/shm is not a tmpfs here")
    directory = tempfile.mkdtemp(prefix="bailing-bench-txn-", dir="/dev/shm")
    app = make_app("sqlite:///" + os.path.join(directory, "app.sqlite3"), "memory://")
    try:
        cases = {}
        for name, route, replayed in (("off", ROUTES["off"], False), ("transaction", ROUTES["transaction"], True)):
            made = signer(app, route)
            check(app, made, replayed)
            cases[name] = FreshCalls(app, made)
        per_round = compare(cases, rounds=15 if quick else 41, block_ms=16.0, warmup_s=0.2, measure="cpu")
    finally:
        dispose(app)
        shutil.rmtree(directory, ignore_errors=True)
    result = ratio_result(
        per_round, group=GROUP, name="transaction_tmpfs_vs_off", numerator="off",
        denominator="transaction", op="", threshold=0.0,
        metric="the same on /dev/shm (fsync is free), thread CPU: the mode's own CPU cost; no target",
        extra={"transaction_us_per_call": round(statistics.median(per_round["transaction"]) / 1000, 1),
               "off_us_per_call": round(statistics.median(per_round["off"]) / 1000, 1)},
    )
    result.notes.append(_note(per_round, ["off", "transaction"], "tmpfs"))
    return result


def compare_on_postgres(quick: bool) -> Result:
    name = "postgresql_transaction_vs_off"
    try:
        import psycopg  # noqa: F401

        from tests._postgres import find_binaries, start_server
    except ImportError as exc:
        return skipped_result(GROUP, name, "PostgreSQL", "", 0.0, f"cannot import {exc.name}")
    if find_binaries() is None:
        return skipped_result(GROUP, name, "PostgreSQL", "", 0.0,
                              "PostgreSQL not installed (apt-get install postgresql)")
    directory = Path(tempfile.mkdtemp(prefix=".tmp-txn-pg-", dir=os.environ.get("BENCH_SQLITE_DIR") or HERE))
    os.chmod(directory, 0o755)
    server = None
    app = None
    try:
        server = start_server(directory, durable=True)
        app = make_app(server.url(), "memory://")
        cases = {}
        for case, route, replayed in (("off", ROUTES["off"], False), ("transaction", ROUTES["transaction"], True)):
            made = signer(app, route)
            check(app, made, replayed)
            cases[case] = FreshCalls(app, made, io_bound=True)
        per_round = compare(cases, rounds=7 if quick else 21, block_ms=40.0 if quick else 60.0,
                            warmup_s=0.2, measure="wall")
    except RuntimeError as exc:
        return skipped_result(GROUP, name, "PostgreSQL", "", 0.0, f"PostgreSQL did not start: {exc}"[:300])
    finally:
        if app is not None:
            dispose(app)
        if server is not None:
            server.stop()
        shutil.rmtree(directory, ignore_errors=True)
    result = ratio_result(
        per_round, group=GROUP, name=name, numerator="off", denominator="transaction", op="",
        threshold=0.0,
        metric=("calls/s of the committing view in the transaction mode / without idempotency, "
                "PostgreSQL 127.0.0.1 (fsync on, synchronous_commit on), psycopg 3, wall clock; no target"),
        extra={"transaction_us_per_call": round(statistics.median(per_round["transaction"]) / 1000, 1),
               "off_us_per_call": round(statistics.median(per_round["off"]) / 1000, 1),
               "fs_type": _fs_type(str(directory))},
    )
    result.notes.append(_note(per_round, ["off", "transaction"], "PostgreSQL"))
    return result


# -- fsyncs per call -------------------------------------------------------------------------------


def fsync_child(directory: str, calls: int, variant: str, mode: str) -> dict[str, Any]:
    """Make ``calls`` new calls to ``variant`` ("off" or "transaction") on a fresh database."""
    counter = {"commits": 0}
    if mode == "trace":
        import sqlite3

        connect = sqlite3.connect

        def traced(sql: str) -> None:
            if sql.strip().upper().startswith(("COMMIT", "END")):
                counter["commits"] += 1

        def connect_traced(*args: Any, **kwargs: Any) -> Any:
            conn = connect(*args, **kwargs)
            conn.set_trace_callback(traced)
            return conn

        sqlite3.connect = connect_traced  # type: ignore[assignment]
    app = make_app("sqlite:///" + os.path.join(directory, "app.sqlite3"), "memory://")
    made = signer(app, ROUTES[variant])
    for _ in range(3):  # warm-up: connections, WAL, statement caches
        call_once(app, made.environ(), made.template.body)
    before = counter["commits"]
    envs = [made.environ() for _ in range(calls)]
    for env in envs:
        status, _h, payload = call_once(app, env, made.template.body)
        if not status.startswith("200"):
            raise AssertionError(f"{status} {payload[:200]!r}")
    out: dict[str, Any] = {"commits": counter["commits"] - before}
    dispose(app)
    return out


def _run_child(directory: str, calls: int, variant: str, strace: str | None, workdir: str
               ) -> tuple[dict[str, Any], dict[str, int] | None]:
    argv = [sys.executable, "-m", "benchmarks.bench_transaction", "--fsync-child", directory, str(calls),
            variant, "strace" if strace else "trace"]
    out_file = os.path.join(workdir, f"strace-{variant}-{calls}.txt")
    if strace:
        argv = [strace, "-f", "-qq", "-c", "-e", "trace=fsync,fdatasync,sync_file_range,msync",
                "-o", out_file] + argv
    env = dict(os.environ)
    env["PYTHONPATH"] = str(HERE.parent) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=HERE.parent, env=env, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"fsync child failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    return facts, (_strace_counts(out_file) if strace else None)


def _strace_counts(path: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) >= 5 and parts[-1] in ("fsync", "fdatasync", "sync_file_range", "msync"):
                counts[parts[-1]] = int(parts[3])
    return counts


def _strace_works(strace: str) -> bool:
    try:
        proc = subprocess.run([strace, "-f", "-qq", "-c", "-e", "trace=fsync", "-o", os.devnull,
                               sys.executable, "-c", "pass"], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def count_fsyncs(directory: str, calls: int, workdir: str) -> Result:
    strace = None if os.environ.get("BENCH_NO_STRACE") else shutil.which("strace")
    if strace is not None and not _strace_works(strace):
        print(f"[{GROUP}] warning: strace cannot trace here; counting SQLite commits instead",
              file=sys.stderr)
        strace = None
    per_variant: dict[str, float] = {}
    breakdown: dict[str, Any] = {}
    for variant in ("off", "transaction"):
        zero_dir = tempfile.mkdtemp(prefix=f"fsync-{variant}-0-", dir=directory)
        n_dir = tempfile.mkdtemp(prefix=f"fsync-{variant}-n-", dir=directory)
        base_facts, base = _run_child(zero_dir, 0, variant, strace, workdir)
        facts, counted = _run_child(n_dir, calls, variant, strace, workdir)
        if strace:
            assert counted is not None and base is not None
            delta = {n: (counted.get(n, 0) - base.get(n, 0)) / calls for n in set(counted) | set(base)}
            breakdown[variant] = delta
            per_variant[variant] = delta.get("fsync", 0.0) + delta.get("fdatasync", 0.0)
        else:
            per_variant[variant] = facts["commits"] / calls
            breakdown[variant] = {"commits_per_call": per_variant[variant]}
    method = ("strace -f -c: (syscalls of N new calls) - (syscalls of 0 calls), / N" if strace else
              "no strace: SQLite commits per call via sqlite3 set_trace_callback (one WAL fsync each "
              "under synchronous=FULL)")
    value = per_variant["transaction"]
    return Result(
        group=GROUP, name="transaction_fsyncs_per_call", unit="/call",
        metric=("fsync + fdatasync per new call of the committing view in the transaction mode, SQLite "
                f"WAL synchronous=FULL ({'strace' if strace else 'estimated from commits'})"),
        ratio=value, spread=(value, value), op="<=", threshold=1.0, rounds=1,
        details={"method": method, "calls": calls, "per_call": breakdown,
                 "off_fsyncs_per_call": per_variant["off"], "fs_type": _fs_type(directory)},
        notes=[f"{GROUP}/transaction_fsyncs_per_call: {method}; transaction mode {value:.2f}/call, the "
               f"same view without idempotency {per_variant['off']:.2f}/call (the business commit's "
               f"own); {breakdown}"],
    )


def _fs_type(path: str) -> str | None:
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


# -- the group ---------------------------------------------------------------------------------------


def run(quick: bool = False) -> list[Result]:
    results: list[Result] = []
    workdir = tempfile.mkdtemp(prefix="bailing-bench-txn-")
    disk_dir = tempfile.mkdtemp(prefix=".tmp-txn-", dir=os.environ.get("BENCH_SQLITE_DIR") or str(HERE))
    redis: Any = None
    try:
        executable = shutil.which("redis-server")
        if executable is None:
            print(f"[{GROUP}] warning: redis-server not found; the Redis row is skipped", file=sys.stderr)
        else:
            from tests._redis import _start_on_a_free_port

            redis = _start_on_a_free_port(executable, Path(workdir))
        results.extend(compare_on_disk(disk_dir, redis.url if redis else None, quick))
        results.append(compare_on_tmpfs(quick))
        results.append(count_fsyncs(disk_dir, 40 if quick else 200, workdir))
        results.append(compare_on_postgres(quick))
    finally:
        if redis is not None:
            redis.stop()
        for directory in (workdir, disk_dir):
            shutil.rmtree(directory, ignore_errors=True)
    return results


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--fsync-child":
        print(json.dumps(fsync_child(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])))
    else:  # pragma: no cover - convenience
        started = time.perf_counter()
        for r in run(quick="--quick" in sys.argv):
            print(r.group, r.name, r.figure(), r.spread_text(), r.target, r.verdict)
            for note in r.notes:
                print("   ", note)
        print(f"{time.perf_counter() - started:.1f}s")
