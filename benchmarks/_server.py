"""Real servers for the end-to-end benchmarks: gunicorn on loopback, and the load generator.

:class:`Gunicorn` starts ``python -m gunicorn`` in a subprocess on a free
``127.0.0.1`` port (the repository root on ``PYTHONPATH``, so the app specs
in ``benchmarks._apps`` import), waits until a worker answers, reads the
workers' CPU time from ``/proc`` and stops the server (SIGTERM, then
SIGKILL) - also when the benchmark fails. :class:`LoadGen` drives the
separate load-generating process (``benchmarks/_loadgen.py``).
:func:`interleaved` runs A/B blocks against several servers in the same
A B B A order as the in-process harness.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._harness import percentile, quartiles

ROOT = Path(__file__).resolve().parent.parent
_START_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra or {})
    return env


def gunicorn_available() -> bool:
    try:
        import gunicorn  # noqa: F401
    except ImportError:
        return False
    return True


class Gunicorn:
    """One gunicorn master with its workers, on a free loopback port."""

    def __init__(self, app_spec: str, *, worker_class: str = "sync", workers: int = 1,
                 threads: int = 1, env: dict[str, str] | None = None, label: str = "",
                 cwd: Path | None = None) -> None:
        self.app_spec = app_spec
        #: the server's working directory, first on its import path (the repository root by default)
        self.cwd = cwd or ROOT
        self.worker_class = worker_class
        self.workers = workers
        self.threads = threads
        self.env = env or {}
        self.label = label or app_spec
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._log_dir = tempfile.mkdtemp(prefix="bailing-bench-gunicorn-")
        self.log = Path(self._log_dir) / "gunicorn.log"

    def start(self) -> Gunicorn:
        for _attempt in range(3):  # the chosen port may be taken meanwhile
            self.port = free_port()
            argv = [sys.executable, "-m", "gunicorn", "-w", str(self.workers), "-k", self.worker_class,
                    "-b", f"127.0.0.1:{self.port}", "--graceful-timeout", "2", "--timeout", "60",
                    "--backlog", "2048", "--log-level", "warning"]
            if self.worker_class == "gthread":
                argv += ["--threads", str(self.threads), "--keep-alive", "5"]
            if os.path.isdir("/dev/shm"):
                argv += ["--worker-tmp-dir", "/dev/shm"]  # as gunicorn's docs advise for containers
            argv.append(self.app_spec)
            with open(self.log, "ab") as log:
                self.process = subprocess.Popen(argv, cwd=self.cwd, env=_env(self.env), stdout=log,
                                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            if self._wait_ready():
                return self
            self.stop()
        raise RuntimeError(f"gunicorn {self.label} did not start:\n{self.tail()}")

    def _wait_ready(self) -> bool:
        """True once a worker answered an HTTP request (the app is imported)."""
        deadline = time.monotonic() + _START_TIMEOUT
        assert self.process is not None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=_START_TIMEOUT) as sock:
                    sock.sendall(b"GET /__bench_ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    if sock.recv(64).startswith(b"HTTP/1."):
                        return True
            except OSError:
                time.sleep(0.1)
        return False

    def tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def worker_pids(self) -> list[int]:
        if self.process is None:
            return []
        master = self.process.pid
        pids = []
        for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == master:
                pids.append(int(entry))
        return pids

    def cpu_ns(self) -> int | None:
        """user + system CPU of the workers so far (Linux), else ``None``."""
        pids = self.worker_pids()
        if not pids:
            return None
        tick = os.sysconf("SC_CLK_TCK")
        total = 0
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                return None
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
        return total * 1_000_000_000 // tick

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)

    def close(self) -> None:
        self.stop()
        try:
            self.log.unlink()
            os.rmdir(self._log_dir)
        except OSError:
            pass


class LoadGen:
    """The separate load-generating process."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks._loadgen"], cwd=ROOT, env=_env(),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )

    def block(self, port: int, spec: dict[str, Any], n: int, concurrency: int) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps({"op": "block", "port": port, "spec": spec, "n": n,
                                             "concurrency": concurrency}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the load generator died")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return answer

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.process.stdin.close()
                self.process.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait(timeout=5)


@dataclass
class Side:
    """One side of an end-to-end comparison: a server and the request it gets."""

    name: str
    server: Gunicorn
    spec: dict[str, Any]
    expect: str = "200"
    rates: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    server_cpu_us: list[float] = field(default_factory=list)
    client_cpu_share: list[float] = field(default_factory=list)
    response_bytes: int = 0


def _one_block(gen: LoadGen, side: Side, n: int, concurrency: int) -> tuple[float, float | None]:
    cpu0 = side.server.cpu_ns()
    answer = gen.block(side.server.port, side.spec, n, concurrency)
    cpu1 = side.server.cpu_ns()
    wrong = {k: v for k, v in answer["statuses"].items() if not k.startswith(side.expect[:1])}
    if answer["errors"] or wrong or answer["n"] != n:
        raise RuntimeError(f"{side.name}: {answer['errors']} errors, statuses {answer['statuses']} "
                           f"for {n} requests\n{side.server.tail()}")
    rate = answer["n"] / (answer["elapsed_ns"] / 1e9)
    side.response_bytes = answer["response_bytes"] // max(1, answer["n"])
    side.latencies.extend(answer["latency_us"])
    side.client_cpu_share.append(answer["client_cpu_ns"] / answer["elapsed_ns"])
    server_cpu = None if cpu0 is None or cpu1 is None else (cpu1 - cpu0) / 1000 / n
    return rate, server_cpu


def interleaved(gen: LoadGen, sides: list[Side], *, rounds: int, block_s: float,
                concurrency: int, warmup_n: int = 300) -> int:
    """A B B A blocks of the same request count on every side; returns that count.

    The count is calibrated from a warm-up block of each side so that a
    block of the slowest side lasts about ``block_s``; every block is kept.
    """
    warm = []
    for side in sides:
        rate, _ = _one_block(gen, side, warmup_n, concurrency)
        warm.append(rate)
        side.latencies.clear()
        side.client_cpu_share.clear()
    n = max(200, int(min(warm) * block_s))
    names = [s.name for s in sides]
    by_name = {s.name: s for s in sides}
    for r in range(rounds):
        order = names if r % 2 == 0 else names[::-1]
        per: dict[str, list[tuple[float, float | None]]] = {name: [] for name in names}
        for name in order + order[::-1]:
            per[name].append(_one_block(gen, by_name[name], n, concurrency))
        for name in names:
            side = by_name[name]
            pair = per[name]
            # the round's rate: requests over the summed time of both half-blocks
            side.rates.append(2 * n / sum(n / rate for rate, _ in pair))
            cpus = [c for _, c in pair if c is not None]
            if len(cpus) == len(pair):
                side.server_cpu_us.append(sum(cpus) / len(cpus))
    return n


def side_summary(side: Side) -> dict[str, Any]:
    return {
        "req_per_s_median": round(statistics.median(side.rates), 1),
        "p50_ms": round(percentile(side.latencies, 50) / 1000, 3),
        "p99_ms": round(percentile(side.latencies, 99) / 1000, 3),
        "server_cpu_us_per_request_median": (round(statistics.median(side.server_cpu_us), 1)
                                             if side.server_cpu_us else None),
        "client_cpu_share_median": round(statistics.median(side.client_cpu_share), 3),
        "requests_timed": len(side.latencies),
        "response_bytes": side.response_bytes,
    }


def rate_ratios(candidate: Side, baseline: Side) -> tuple[float, tuple[float, float], list[float]]:
    ratios = [c / b for c, b in zip(candidate.rates, baseline.rates)]
    return statistics.median(ratios), quartiles(ratios), ratios
