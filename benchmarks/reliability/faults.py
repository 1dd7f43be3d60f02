"""Faults under load: Redis and the SQL store's database restarted, SQLite locked, slow clients.

``run(quick=False)`` starts real servers (gunicorn, redis-server, Werkzeug's
server) on loopback, puts load on them, injects each fault in the middle of
the load, and returns the figures the Reliability page publishes:

* ``faults.redis.*`` -- Redis (``appendonly yes``) stopped for a few seconds
  and started again during a refund load on two gunicorn workers; every call
  is then sent once more. Side effects run twice, effects left unrecorded,
  5xx answers with a traceback, seconds until the store answers again. The
  same run without persistence is published for information: it shows what
  a Redis that restarts empty forgets.
* ``faults.postgresql.*``, ``faults.mariadb.*`` -- the SQL store's database
  (durable) stopped at once (PostgreSQL's immediate shutdown, MariaDB
  SIGKILLed) for a few seconds and started again during the same load; the
  same figures as for Redis. Left out, with a warning, where the server is
  not installed.
* ``faults.sqlite_lock.*`` -- the SQLite store file locked by another
  process (``BEGIN EXCLUSIVE``) for 10 s during the load.
* ``faults.slowloris.<server>.*`` -- fifty connections at once sending a
  signed body a byte at a time to gunicorn (gthread) and Werkzeug's server,
  with a 2 s ``BAILING_BODY_TIMEOUT``: how long past the deadline a
  connection was held, how many were not refused with 408, and whether a
  normal call was still served meanwhile.
* ``faults.peak_rss_per_worker`` -- the largest peak RSS of any worker
  during all of the above.

``quick=True`` shortens every phase (a smoke run of under a minute).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bailing_flask.testing import HubSimulator, signed_headers

from . import Figure
from .._server import Gunicorn, free_port
from ._fault_app import runs_by_order

__all__ = ["run"]

SECRET = "faults-run-secret-0123456789abcdefghijklmnop"
APP = "benchmarks.reliability._fault_app:create_app()"
#: what the figures must satisfy
RECOVERY_BOUND_S = 5.0
HELD_AFTER_DEADLINE_BOUND_S = 2.0
RSS_BOUND_MIB = 150.0
SLOW_DEADLINE_S = 2.0


# --- measuring ------------------------------------------------------------------------------


@dataclass
class Answer:
    order: int
    status: int
    reason: str | None
    traceback: bool
    replayed: bool
    at: float


@dataclass
class Tally:
    """What a load saw, and the figures made from it."""

    answers: list[Answer] = field(default_factory=list)
    requests: dict[int, Any] = field(default_factory=dict)

    def bad_5xx(self) -> int:
        """5xx answers that are not the package's own refusal, or that carry a traceback."""
        return sum(1 for a in self.answers if a.traceback or (
            a.status >= 500 and not (a.status == 503 and a.reason in (
                "idempotency_store_unavailable", "idempotency_store_busy", "transaction_failed")))
            or a.status == 0)

    def recovered_after(self, moment: float) -> float | None:
        served = [a.at for a in self.answers if a.at > moment and a.status not in (0, 503)]
        return min(served) - moment if served else None


def send(hub: HubSimulator, order: int, request: Any) -> Answer:
    try:
        response = hub.replay(request)
    except OSError:
        return Answer(order, 0, "connection", False, False, time.monotonic())
    text = response.body.decode("utf-8", "replace")
    try:
        reason = json.loads(text).get("reason")
    except (ValueError, AttributeError):
        reason = None
    return Answer(order, response.status, reason, "Traceback" in text,
                  response.headers.get("Idempotent-Replayed") == "true", time.monotonic())


def load(hub: HubSimulator, tally: Tally, stop: threading.Event, orders: Iterator[int],
         max_orders: int) -> None:
    """One load thread: new refunds, and repeats of those already sent."""
    for round_ in itertools.count():
        if stop.is_set():
            return
        time.sleep(0.01)
        sent = list(tally.requests)
        if sent and (round_ % 3 == 2 or len(sent) >= max_orders):
            order = sent[round_ % len(sent)]
            tally.answers.append(send(hub, order, tally.requests[order]))
            continue
        order = next(orders)
        request = hub.build_call("refund_create", {"order_id": order, "amount": 1},
                                 subject="t1:u1")
        tally.requests[order] = request
        tally.answers.append(send(hub, order, request))


def effects(tally: Tally, database: str, hub: HubSimulator) -> tuple[int, int]:
    """``(run twice, unrecorded)`` once every call has been sent once more.

    Unrecorded: a refund that ran although every answer to it was a refusal,
    or whose repeat found no record and ran again.
    """
    with ThreadPoolExecutor(max_workers=8) as pool:
        again = dict(zip(tally.requests, pool.map(
            lambda item: send(hub, *item), tally.requests.items())))
    tally.answers.extend(again.values())
    runs = runs_by_order(database)
    twice = sum(1 for count in runs.values() if count > 1)
    seen: dict[int, set[int]] = {}
    for answer in tally.answers:
        seen.setdefault(answer.order, set()).add(answer.status)
    refused_but_ran = sum(1 for order, statuses in seen.items()
                          if statuses == {503} and runs.get(order, 0))
    ran_again = sum(1 for order, answer in again.items()
                    if answer.status == 201 and not answer.replayed and runs.get(order, 0) > 1)
    return twice, refused_but_ran + ran_again


def peak_rss_mib(server: Gunicorn) -> float:
    peak = 0
    for pid in server.worker_pids():
        try:
            with open(f"/proc/{pid}/status", encoding="ascii") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
        except OSError:
            continue
    return peak / 1024


# --- Redis --------------------------------------------------------------------------------------


class Redis:
    """A redis-server on a fixed loopback port that can be stopped and started again."""

    def __init__(self, directory: Path, *args: str) -> None:
        executable = shutil.which("redis-server")
        if executable is None:
            raise RuntimeError("redis-server not found on PATH (apt-get install redis-server)")
        self.argv = [executable, "--port", str(free_port()), "--bind", "127.0.0.1",
                     "--save", "", "--appendonly", "no", "--dir", str(directory), *args]
        self.port = int(self.argv[2])
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.terminate()
            process.wait(timeout=10)


def _url(server: Gunicorn) -> str:
    return f"http://127.0.0.1:{server.port}"


@contextmanager
def serving(env: dict[str, str], *, worker_class: str = "sync", workers: int = 2,
            threads: int = 1) -> Iterator[Gunicorn]:
    server = Gunicorn(APP, worker_class=worker_class, workers=workers, threads=threads,
                      env={"FAULTS_SECRET": SECRET, **env}, label="faults")
    try:
        yield server.start()
    finally:
        server.close()


def under_load(base: str, fault: Callable[[], float], *, seconds: float,
               max_orders: int) -> tuple[Tally, float, HubSimulator]:
    """Load ``base`` with four threads; ``fault()`` runs meanwhile and returns its end."""
    hub = HubSimulator(base, SECRET)
    tally = Tally()
    stop = threading.Event()
    orders = itertools.count(1)
    with ThreadPoolExecutor(max_workers=4) as pool:
        for _ in range(4):
            pool.submit(load, hub, tally, stop, orders, max_orders)
        started = time.monotonic()
        ended = fault()
        time.sleep(max(0.0, seconds - (time.monotonic() - started)))
        stop.set()
    return tally, ended, hub


def redis_run(quick: bool, persistence: bool, rss: list[float]) -> list[Figure]:
    seconds, down = (6.0, 1.5) if quick else (20.0, 5.0)
    with tempfile.TemporaryDirectory(prefix="bailing-faults-") as work:
        redis = Redis(Path(work), *(("--appendonly", "yes") if persistence else ()))
        redis.start()
        database = os.path.join(work, "business.sqlite3")
        try:
            with serving({"BAILING_STORE": redis.url, "FAULTS_DB": database,
                          "FAULTS_DELAY": "0.05"}) as server:
                def outage() -> float:
                    time.sleep(seconds / 4)
                    redis.stop()
                    time.sleep(down)
                    redis.start()
                    return time.monotonic()

                tally, back, hub = under_load(_url(server), outage, seconds=seconds,
                                              max_orders=80 if quick else 300)
                recovered = tally.recovered_after(back)
                twice, unrecorded = effects(tally, database, hub)
                rss.append(peak_rss_mib(server))
        finally:
            redis.stop()
    if not persistence:
        return [Figure("faults", "faults.redis_no_persistence.side_effects_twice", twice, "calls",
                       "", "Redis without persistence restarted under load: calls completed "
                       "before the restart that ran again when repeated (what such a Redis "
                       "forgets)")]
    return [
        Figure("faults", "faults.redis.side_effects_twice", twice, "calls", "== 0",
               f"Redis (appendonly yes) down {down:g} s during a {seconds:g} s refund load on "
               "two gunicorn workers, every call repeated afterwards: side effects run twice"),
        Figure("faults", "faults.redis.unrecorded_effects", unrecorded, "calls", "== 0",
               "side effects that ran while their call was refused, or that a repeat did not "
               "find on record"),
        Figure("faults", "faults.redis.bad_5xx", tally.bad_5xx(), "answers", "== 0",
               f"of {len(tally.answers)} answers: 5xx other than the store's 503 refusal, "
               "or with a traceback, or no answer at all"),
        Figure("faults", "faults.redis.recovery_s", round(recovered, 3) if recovered is not None
               else 999.0, "s", f"<= {RECOVERY_BOUND_S:g}",
               "seconds from Redis' restart to the first call the same workers served"),
    ]


# --- the SQL store's database restarted ----------------------------------------------------------


class _SQLServer:
    """A durable PostgreSQL or MariaDB of the run's own, with the SQL store's tables."""

    def __init__(self, dialect: str, directory: Path) -> None:
        # the servers run as their own user when the run is root's
        directory.parent.chmod(0o755)
        directory.mkdir(mode=0o755)
        directory.chmod(0o755)
        self.dialect = dialect
        if dialect == "postgresql":
            from tests._postgres import start_server

            self.server: Any = start_server(directory, durable=True)
            self.url = self.server.url("postgres")
        else:
            from tests._mariadb import start_server as start_mariadb

            self.server = start_mariadb(directory)
            admin = self.server.admin()
            with admin.cursor() as cursor:
                cursor.execute("CREATE DATABASE t_faults CHARACTER SET utf8mb4")
            admin.close()
            self.url = self.server.url("t_faults")
        from bailing_flask.stores import SQLStore

        store = SQLStore(self.url)
        store.create_schema()
        store.close()

    def stop(self) -> None:
        """PostgreSQL: an immediate shutdown (crash recovery follows); MariaDB: SIGKILL."""
        if self.dialect == "postgresql":
            self.server.stop()
        else:
            self.server.kill()

    def start(self) -> None:
        if self.dialect == "mariadb":
            self.server.start()
            return
        server = self.server
        options = (f"-p {server.port} -k {server.directory} -c listen_addresses=127.0.0.1 "
                   "-c max_connections=60 -c shared_buffers=16MB")
        done = server._run(str(server.bindir / "pg_ctl"), "-D", str(server.directory / "data"),
                           "-l", str(server.directory / "server.log"), "-o", options, "-w", "-t",
                           "60", "start")
        if done.returncode != 0:
            raise RuntimeError(f"PostgreSQL did not start again: {done.stderr[-500:]}")

    def close(self) -> None:
        self.server.stop()


def sql_run(quick: bool, dialect: str, rss: list[float]) -> list[Figure]:
    """The SQL store's database killed and started again under load (PostgreSQL, MariaDB)."""
    seconds, down = (6.0, 1.5) if quick else (20.0, 5.0)
    with tempfile.TemporaryDirectory(prefix="bailing-faults-") as work:
        try:
            server = _SQLServer(dialect, Path(work) / dialect)
        except (RuntimeError, ImportError, OSError) as exc:
            print(f"[faults] warning: {dialect} not available ({exc}); faults.{dialect}.* "
                  "not measured", file=sys.stderr)
            return []
        database = os.path.join(work, "business.sqlite3")
        try:
            with serving({"BAILING_STORE": server.url, "FAULTS_DB": database,
                          "FAULTS_DELAY": "0.05"}) as gunicorn:
                def outage() -> float:
                    time.sleep(seconds / 4)
                    server.stop()
                    time.sleep(down)
                    server.start()
                    return time.monotonic()

                tally, back, hub = under_load(_url(gunicorn), outage, seconds=seconds,
                                              max_orders=80 if quick else 300)
                recovered = tally.recovered_after(back)
                twice, unrecorded = effects(tally, database, hub)
                rss.append(peak_rss_mib(gunicorn))
        finally:
            server.close()
    name = "PostgreSQL" if dialect == "postgresql" else "MariaDB"
    how = "stopped immediately" if dialect == "postgresql" else "SIGKILLed"
    return [
        Figure("faults", f"faults.{dialect}.side_effects_twice", twice, "calls", "== 0",
               f"the SQL store's {name} {how} and down {down:g} s during a {seconds:g} s refund "
               "load on two gunicorn workers, every call repeated afterwards: side effects run "
               "twice"),
        Figure("faults", f"faults.{dialect}.unrecorded_effects", unrecorded, "calls", "== 0",
               "side effects that ran while their call was refused, or that a repeat did not "
               "find on record"),
        Figure("faults", f"faults.{dialect}.bad_5xx", tally.bad_5xx(), "answers", "== 0",
               f"of {len(tally.answers)} answers: 5xx other than the store's 503 refusal, "
               "or with a traceback, or no answer at all"),
        Figure("faults", f"faults.{dialect}.recovery_s", round(recovered, 3)
               if recovered is not None else 999.0, "s", f"<= {RECOVERY_BOUND_S:g}",
               f"seconds from {name}'s return to the first call the same workers served"),
    ]


# --- SQLite locked ----------------------------------------------------------------------------


def sqlite_lock_run(quick: bool, rss: list[float]) -> list[Figure]:
    seconds, locked = (6.0, 2.5) if quick else (20.0, 10.0)
    with tempfile.TemporaryDirectory(prefix="bailing-faults-") as work:
        store = os.path.join(work, "store.sqlite3")
        database = os.path.join(work, "business.sqlite3")
        with serving({"BAILING_STORE": f"sqlite:///{store}?busy_timeout=1", "FAULTS_DB": database,
                      "FAULTS_DELAY": "0.02"}, worker_class="gthread", threads=4) as server:
            HubSimulator(_url(server), SECRET).call("refund_create",
                                                       {"order_id": 10**8, "amount": 1},
                                                       subject="t1:u1")  # the file exists

            def lock() -> float:
                time.sleep(seconds / 4)
                holder = subprocess.Popen(
                    [sys.executable, "-c",
                     "import sqlite3,sys,time; c=sqlite3.connect(sys.argv[1],isolation_level=None);"
                     "c.execute('BEGIN EXCLUSIVE'); print('locked',flush=True); "
                     "time.sleep(float(sys.argv[2])); c.execute('COMMIT')", store, str(locked)],
                    stdout=subprocess.PIPE, text=True)
                assert holder.stdout is not None
                holder.stdout.readline()
                holder.wait(timeout=locked + 30)
                return time.monotonic()

            tally, unlocked, hub = under_load(_url(server), lock, seconds=seconds,
                                              max_orders=80 if quick else 300)
            recovered = tally.recovered_after(unlocked)
            twice, unrecorded = effects(tally, database, hub)
            rss.append(peak_rss_mib(server))
    refused = sum(1 for a in tally.answers if a.status == 503)
    return [
        Figure("faults", "faults.sqlite_lock.side_effects_twice", twice, "calls", "== 0",
               f"SQLite store locked by another process for {locked:g} s during a {seconds:g} s "
               "refund load (gunicorn gthread, busy_timeout=1): side effects run twice"),
        Figure("faults", "faults.sqlite_lock.unrecorded_effects", unrecorded, "calls", "== 0",
               "side effects that ran while their call was refused, or unrecorded"),
        Figure("faults", "faults.sqlite_lock.bad_5xx", tally.bad_5xx(), "answers", "== 0",
               f"of {len(tally.answers)} answers ({refused} refused with 503): 5xx other than "
               "the store's refusal, or with a traceback"),
        Figure("faults", "faults.sqlite_lock.recovery_s", round(recovered, 3) if recovered
               is not None else 999.0, "s", f"<= {RECOVERY_BOUND_S:g}",
               "seconds from the end of the lock to the first call served again"),
    ]


# --- slow clients ---------------------------------------------------------------------------


def slow_client(base: str, give_up: float) -> tuple[float | None, int | None]:
    """Send a 5000-byte signed body a byte every 50 ms; ``(seconds held, status)``."""
    host, port = base.split("//", 1)[1].rsplit(":", 1)
    body_length = 5000
    headers = signed_headers(SECRET, "POST", "/upload", b"x" * body_length, subject="t1:u1")
    head = (f"POST /upload HTTP/1.1\r\nHost: {host}\r\nContent-Length: {body_length}\r\n"
            + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n")
    with socket.create_connection((host, int(port)), timeout=give_up) as sock:
        sock.sendall(head.encode("latin-1"))
        started = time.monotonic()
        sock.settimeout(0.05)
        answer = b""
        while time.monotonic() - started < give_up:
            try:
                sock.sendall(b"x")
                chunk = sock.recv(4096)
            except socket.timeout:
                continue
            except OSError:
                break
            if not chunk:
                break
            answer += chunk
        held = time.monotonic() - started
    if held >= give_up:
        return None, None
    status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.") else None
    return held, status


def slowloris_run(quick: bool, rss: list[float]) -> list[Figure]:
    connections = 20 if quick else 50
    give_up = 30.0
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="bailing-faults-") as work:
        env = {"FAULTS_DB": os.path.join(work, "b.sqlite3"),
               "BAILING_STORE": f"sqlite:///{work}/store.sqlite3",
               "FAULTS_BODY_TIMEOUT": str(SLOW_DEADLINE_S)}
        for kind in ("gthread", "werkzeug"):
            with _slow_target(kind, env, connections) as (base, server):
                hub = HubSimulator(base, SECRET)
                with ThreadPoolExecutor(max_workers=connections + 1) as pool:
                    held = pool.map(lambda _: slow_client(base, give_up), range(connections))
                    time.sleep(SLOW_DEADLINE_S / 2)
                    served = hub.call("refund_create", {"order_id": 7, "amount": 1},
                                      subject="t1:u1").status == 201
                    results = list(held)
                if server is not None:
                    rss.append(peak_rss_mib(server))
            times = [t for t, _ in results]
            worst = (max(times) - SLOW_DEADLINE_S) if None not in times else give_up
            figures += [
                Figure("faults", f"faults.slowloris.{kind}.held_after_deadline_s",
                       round(worst, 3), "s", f"<= {HELD_AFTER_DEADLINE_BOUND_S:g}",
                       f"{connections} connections at once sending a signed body a byte every "
                       f"50 ms to {_LABELS[kind]}, {SLOW_DEADLINE_S:g} s body deadline: the "
                       "longest any was held past the deadline"),
                Figure("faults", f"faults.slowloris.{kind}.not_refused_408",
                       sum(1 for _, status in results if status != 408), "connections", "== 0",
                       "slow connections that were not answered 408 body_timeout"),
                Figure("faults", f"faults.slowloris.{kind}.call_served_meanwhile",
                       1.0 if served else 0.0, "ratio", "== 1",
                       "a normal signed call sent while the slow connections were open was served"),
            ]
    return figures


_LABELS = {"gthread": "gunicorn gthread (2 workers, a thread per connection)",
           "werkzeug": "Werkzeug's threaded server"}


@contextmanager
def _slow_target(kind: str, env: dict[str, str], connections: int
                 ) -> Iterator[tuple[str, Gunicorn | None]]:
    if kind == "gthread":
        # as many threads per worker as there are slow clients: gunicorn does not balance
        # connections between workers, and a connection waiting for a thread is not yet read
        with serving(env, worker_class="gthread", threads=connections) as server:
            yield _url(server), server
        return
    from werkzeug.serving import make_server

    previous = {key: os.environ.get(key) for key in (*env, "FAULTS_SECRET")}
    os.environ.update(env, FAULTS_SECRET=SECRET)
    try:
        from ._fault_app import create_app

        wsgi = make_server("127.0.0.1", 0, create_app(), threaded=True)
    finally:
        for key, value in previous.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    thread = threading.Thread(target=wsgi.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    # one log line per request and per refusal: fifty of each say nothing here
    quiet = {name: logging.getLogger(name).level for name in ("werkzeug", "bailing_flask")}
    for name in quiet:
        logging.getLogger(name).setLevel(logging.ERROR)
    thread.start()
    try:
        yield f"http://127.0.0.1:{wsgi.server_port}", None
    finally:
        wsgi.shutdown()
        thread.join(timeout=5)
        for name, level in quiet.items():
            logging.getLogger(name).setLevel(level)


# --- the entry point ------------------------------------------------------------------------


def run(quick: bool = False) -> list[Figure]:
    """Every fault scenario under load; the figures, requirements included."""
    rss: list[float] = []
    figures = redis_run(quick, True, rss)
    figures += redis_run(quick, False, rss)
    figures += sql_run(quick, "postgresql", rss)
    figures += sql_run(quick, "mariadb", rss)
    figures += sqlite_lock_run(quick, rss)
    figures += slowloris_run(quick, rss)
    figures.append(Figure(
        "faults", "faults.peak_rss_per_worker", round(max(rss), 1), "MiB",
        f"<= {RSS_BOUND_MIB:g}", "the largest peak resident memory of any gunicorn worker "
        "during the runs above"))
    return [replace(figure, value=float(figure.value)) for figure in figures]


if __name__ == "__main__":  # pragma: no cover - a manual run prints the figures
    import argparse

    parser = argparse.ArgumentParser(prog="python -m benchmarks.reliability.faults",
                                     description="The fault scenarios under load, with their figures.")
    parser.add_argument("--quick", action="store_true", help="short runs (under a minute)")
    for figure in run(quick=parser.parse_args().quick):
        mark = "ok " if figure.ok() else "FAIL"
        print(f"{mark} {figure.name:52s} {figure.value:>10g} {figure.unit:12s} "
              f"{figure.require:8s} {figure.text}")
