"""idempotency: the cost of "at most once" per side-effecting call, per store.

One app per store (``memory://``, a SQLite file, a real ``redis-server``
started here on a free loopback port and stopped at the end), each with the
same two tools:

* ``POST /api/refunds`` - a side-effecting tool (a POST with a small pydantic
  body model): every call reserves an entry in the store, runs the view and
  records the response;
* ``POST /api/refunds/plain`` - the same tool with ``deduplicate=False``.

The view does trivial work (returns a small JSON object, status 201). Every
request is a **new call**: a fresh job id (so a new signature and a new call
identity, hence a new store entry), signed as the hub signs, with the hub's
``X-Bailing-Idempotency-Key``. The requests of a block are built and signed
before the block starts (``prepare`` hook, outside the timing), and both
sides get the same kind of requests through the whole app (middleware,
gate, argument validation, authorizer). Before timing, each store is checked
to be really engaged: repeating a request answers from the store with
``Idempotent-Replayed: true``.

Each store is its own A/B series against the plain tool of the same app:

* ``memory_vs_off`` (target >= 0.9);
* ``sqlite_vs_off`` (target >= 0.5): the file is in ``tempfile.gettempdir()``
  (set ``TMPDIR`` to choose the disk); the store keeps SQLite's
  ``synchronous=FULL``, so every commit waits for the disk;
* ``redis_vs_off`` (target >= 0.5);
* ``sqlite_tmpfs_vs_off`` (no target, full runs only, when ``/dev/shm`` is a
  tmpfs): the same SQLite store on a file system whose ``fsync`` is free,
  to tell the store's own CPU cost from the disk's.

The SQLite and Redis cases wait for I/O, so their blocks are timed once
(no descheduling check, see ``_harness.py``); the memory case and the plain
baselines get the usual check.
"""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path
import statistics
import sys
import tempfile
import time
import uuid
from typing import Any

from flask import Flask
from pydantic import BaseModel, Field

from bailing_flask import Bailing, current_call, tool
from bailing_flask.testing import idempotency_key, signed_headers

from ._harness import Result, compare, ratio_result
from .bench_middleware import base_environ

GROUP = "idempotency"
SECRET = "bench-secret-0123456789abcdefghijklmnopqrstuvwxyz"
SUBJECT = "t1:u1"
PATH = "/api/refunds"
PLAIN_PATH = "/api/refunds/plain"
ARGS = {"order_id": 4711, "amount": 12.5, "reason": "damaged"}
BODY = b'{"order_id":4711,"amount":12.5,"reason":"damaged"}'
REPLAY_HEADER = "Idempotent-Replayed"


class RefundBody(BaseModel):
    order_id: int = Field(description="Order.", ge=1, le=10**9)
    amount: float = Field(description="Amount.", gt=0, le=10**6)
    reason: str = Field(description="Why.", max_length=200)


def make_app(store_url: str) -> Flask:
    app = Flask("bench_idempotency")
    app.config.update(BAILING_SECRETS=[SECRET], BAILING_STORE=store_url)
    bailing = Bailing(app)
    bailing.authorizer(lambda call: call.subject is not None)

    @app.post(PATH)
    @tool(scope="refund.write", body=RefundBody)
    def refund_create() -> Any:
        """Create a refund (side effect: at most once per call)."""
        return {"ok": True, "order_id": current_call.args["order_id"]}, 201

    @app.post(PLAIN_PATH)
    @tool(scope="refund.write", body=RefundBody, deduplicate=False)
    def refund_create_plain() -> Any:
        """The same tool, not de-duplicated."""
        return {"ok": True, "order_id": current_call.args["order_id"]}, 201

    return app


class _Sink:
    """``start_response`` that records status and headers."""

    __slots__ = ("headers", "status")

    def __init__(self) -> None:
        self.status = ""
        self.headers: list[tuple[str, str]] = []

    def __call__(self, status: str, headers: list, exc_info: Any = None) -> Any:
        self.status = status
        self.headers = headers
        return None


def _signed_environ(path: str, job_id: str) -> dict[str, Any]:
    """A new call as the hub sends it: its own job id, signature and idempotency key."""
    env = base_environ("POST", path, body=BODY)
    headers = signed_headers(
        SECRET, "POST", path, BODY, subject=SUBJECT, job_id=job_id, client="bench",
        tool_scope="refund.write",
        idempotency_key=idempotency_key("refund_create", ARGS, job_id, SUBJECT),
    )
    for name, value in headers.items():
        env["HTTP_" + name.upper().replace("-", "_")] = value
    return env


class FreshCalls:
    """A case: one new signed call per invocation, built in ``prepare`` (untimed)."""

    def __init__(self, wsgi: Any, path: str, io_bound: bool = False) -> None:
        self.wsgi = wsgi
        self.path = path
        self.io_bound = io_bound
        self.sink = _Sink()
        self.pending: list[dict[str, Any]] = []
        self.calls = 0

    def prepare(self, loops: int) -> None:
        self.pending = [_signed_environ(self.path, str(uuid.uuid4())) for _ in range(loops)]

    def __call__(self) -> None:
        env = self.pending.pop()
        env["wsgi.input"] = io.BytesIO(BODY)
        result = self.wsgi(env, self.sink)
        try:
            for _ in result:
                pass
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        self.calls += 1

    def check(self, expect_replay: bool) -> None:
        """One new call answers 201 fresh; the same request again is (or is not) replayed."""
        env = _signed_environ(self.path, str(uuid.uuid4()))
        for attempt in (1, 2):
            request = dict(env, **{"wsgi.input": io.BytesIO(BODY)})
            result = self.wsgi(request, self.sink)
            payload = b"".join(result)
            getattr(result, "close", lambda: None)()
            replayed = dict(self.sink.headers).get(REPLAY_HEADER) == "true"
            if not self.sink.status.startswith("201"):
                raise AssertionError(f"{self.path}: {self.sink.status} {payload[:200]!r}")
            if replayed != (attempt == 2 and expect_replay):
                raise AssertionError(
                    f"{self.path}: attempt {attempt} replayed={replayed}, expected "
                    f"{attempt == 2 and expect_replay}"
                )


# -- a real redis-server on a free loopback port: the test suite's helper ---------

def _fs_type(path: str) -> str | None:
    """The file system type of ``path`` (Linux ``/proc/mounts``), for the details."""
    try:
        with open("/proc/mounts", encoding="utf-8") as fh:
            mounts = [line.split()[1:3] for line in fh]
    except OSError:
        return None
    path = os.path.realpath(path)
    best = ("", None)
    for mount, kind in mounts:
        if (path == mount or path.startswith(mount.rstrip("/") + "/")) and len(mount) > len(best[0]):
            best = (mount, kind)
    return best[1]


# -- the runs ---------------------------------------------------------------------------


def _compare_store(
    name: str, app: Flask, *, io_bound: bool, target: float | None, quick: bool,
    rounds: int, block_ms: float, extra: dict[str, Any],
) -> Result:
    store = Bailing.state(app).idempotency.store()
    label = name.replace("_tmpfs", " (tmpfs)")
    off = FreshCalls(app.wsgi_app, PLAIN_PATH)
    on = FreshCalls(app.wsgi_app, PATH, io_bound=io_bound)
    off.check(expect_replay=False)
    on.check(expect_replay=True)
    per_round = compare({"off": off, name: on}, rounds=rounds, block_ms=block_ms,
                        warmup_s=0.1 if quick else 0.3)
    return ratio_result(
        per_round,
        group=GROUP,
        name=f"{name}_vs_off",
        numerator="off",
        denominator=name,
        metric=(f"req/s new side-effecting calls with the {label} store / req/s of the "
                "same tool with deduplicate=False" + ("" if target is not None else " (no target)")),
        op=">=" if target is not None else "",
        threshold=target if target is not None else 0.0,
        extra={
            f"{name}_req_per_s_median": 1e9 / statistics.median(per_round[name]),
            "off_req_per_s_median": 1e9 / statistics.median(per_round["off"]),
            "store": repr(store),
            "new_calls_timed_or_warmup": on.calls,
            **extra,
        },
    )


def run(quick: bool = False) -> list[Result]:
    results: list[Result] = []
    workdir = tempfile.mkdtemp(prefix="bailing-bench-idem-")
    shm_dir: str | None = None
    redis: Any = None
    apps: list[Flask] = []
    try:
        # memory: a tight target (10 %), so more rounds and ~4 ms half-blocks
        app = make_app("memory://")
        apps.append(app)
        results.append(_compare_store("memory", app, io_bound=False, target=0.9, quick=quick,
                                      rounds=15 if quick else 81, block_ms=8.0, extra={}))

        # SQLite in the temp directory (a real disk unless TMPDIR says otherwise)
        db = os.path.join(workdir, "bench.sqlite3")
        app = make_app("sqlite:///" + db)
        apps.append(app)
        results.append(_compare_store(
            "sqlite", app, io_bound=True, target=0.5, quick=quick,
            rounds=7 if quick else 31, block_ms=40.0,
            extra={"path": db, "fs_type": _fs_type(workdir)},
        ))

        executable = shutil.which("redis-server")
        if executable is None:
            print("[idempotency] warning: redis-server not found on PATH; redis_vs_off skipped "
                  "(apt-get install redis-server)", file=sys.stderr, flush=True)
        else:
            from tests._redis import _start_on_a_free_port

            redis = _start_on_a_free_port(executable, Path(workdir))
            app = make_app(redis.url)
            apps.append(app)
            results.append(_compare_store(
                "redis", app, io_bound=True, target=0.5, quick=quick,
                rounds=9 if quick else 41, block_ms=20.0, extra={"server": "127.0.0.1 loopback"},
            ))

        if not quick and _fs_type("/dev/shm") == "tmpfs":
            shm_dir = tempfile.mkdtemp(prefix="bailing-bench-idem-", dir="/dev/shm")
            db = os.path.join(shm_dir, "bench.sqlite3")
            app = make_app("sqlite:///" + db)
            apps.append(app)
            results.append(_compare_store(
                "sqlite_tmpfs", app, io_bound=True, target=None, quick=quick,
                rounds=31, block_ms=20.0, extra={"path": db, "fs_type": "tmpfs"},
            ))
    finally:
        for app in apps:
            try:
                Bailing.state(app).idempotency.store().close()
            except Exception as exc:  # noqa: BLE001 - best effort at the end of a benchmark
                print(f"[idempotency] warning: closing a store failed: {exc!r}", file=sys.stderr)
        if redis is not None:
            redis.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        if shm_dir is not None:
            shutil.rmtree(shm_dir, ignore_errors=True)
    return results


if __name__ == "__main__":  # pragma: no cover - convenience
    t = time.perf_counter()
    for r in run(quick="--quick" in sys.argv):
        print(r)
    print(f"{time.perf_counter() - t:.1f}s")
