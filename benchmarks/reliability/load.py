"""The load run: the example app under gunicorn, a hostile mix at saturation, every answer checked.

``run(quick=False)`` returns the published figures (``python -m
benchmarks.reliability --parts load``; ``python -m benchmarks.reliability.load``
runs this part alone and prints the details). For each gunicorn worker class
(``sync``, then ``gthread``):

1. the example app (``example_app.create_app``, its own defaults; the
   databases in a fresh temporary directory) and the same shop without
   bailing_flask (``_bare_app``) are started under the same gunicorn
   configuration, on loopback;
2. **the comparison** (9 rounds, ``--quick`` 3), on the two fresh databases:
   the signed mix (the hub's valid tool calls, each sent once:
   ``SIGNED_WEIGHTS``) in blocks of 3 s (``--quick`` 1 s) against the
   example app and the bare app in turn, A B B A, the order flipped every
   round; each round gives one throughput ratio, and the published ratio is
   their median with the quartiles as its range. A ratio whose spread (the
   interquartile range over the median) is wider than :data:`SPREAD_LIMIT`
   misses its requirement: the machine was too noisy for it, and the run
   says so instead of publishing it;
3. **the mix** (60 s, ``--quick`` 8 s): separate load-generating processes
   (``_load_client``) send the full mix of ``_load_mix.FULL_WEIGHTS`` to the
   example app as fast as it answers: valid signed calls (duplicates of side
   effects included, sequential and concurrent), every signed element
   tampered one at a time, the canonical string shifted across its field
   boundaries, timestamps outside the window, unsigned calls, oversized
   bodies, wrongly signed hub callbacks and the unsigned back-office pages;
   every answer is checked against what that request must get;
4. afterwards the example app's databases are read: every side effect
   sent as a valid call happened exactly once, none that was refused did.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack, closing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from . import Figure
from .._server import ROOT, Gunicorn, _env

__all__ = ["Settings", "FULL", "QUICK", "run", "run_load", "figures", "RATIO_FLOOR", "SPREAD_LIMIT",
           "FD_GROWTH_LIMIT", "spread"]

SECRET = "load-run-provider-secret-0123456789abcdefghijklmnopqrstuv"
CLIENT_TOKEN = "load-run-client-token-0123456789abcdefghijklmnopqrstuvwx"
#: the throughput ratio (example app ÷ the same shop without the package) must stay above this
RATIO_FLOOR = 0.4
#: the throughput ratio is published only when its rounds agree: interquartile range / median at most
SPREAD_LIMIT = 0.15
#: a worker may open a few files for good (a database connection per thread); a leak per request
#: would show thousands
FD_GROWTH_LIMIT = 16
#: lines of the server log that mean something went wrong in a worker
_LOG_PROBLEMS = re.compile(r"Traceback|WORKER TIMEOUT|exited with code|SIGKILL|Worker failed to boot")


@dataclass(frozen=True)
class Settings:
    """How long and how hard the load run pushes."""

    worker_classes: tuple[str, ...] = ("sync", "gthread")
    #: seconds of the full mix per worker class
    mix_seconds: float = 60.0
    #: A B B A rounds of the comparison (0: no comparison, no bare app); odd, for a median
    compare_rounds: int = 9
    compare_block_seconds: float = 3.0
    #: signed calls to each server before anything is measured (counted and checked all the same)
    warmup_seconds: float = 1.0
    #: load-generating processes, and sending threads in each
    generators: int = 2
    threads: int = 8
    #: gunicorn: sync workers; gthread workers and their threads (0: from the core count)
    sync_workers: int = 0
    gthread_workers: int = 0
    gthread_threads: int = 4
    #: where the databases go (``None``: ``/dev/shm`` when it exists, else the system temp dir)
    data_dir: str | None = None

    def workers(self, worker_class: str) -> int:
        cores = os.cpu_count() or 2
        if worker_class == "sync":
            return self.sync_workers or 2 * cores
        return self.gthread_workers or cores


FULL = Settings()
QUICK = Settings(mix_seconds=8.0, compare_rounds=3, compare_block_seconds=1.0)


def _log(message: str) -> None:
    print(f"[load] {message}", file=sys.stderr, flush=True)


# -- the processes ------------------------------------------------------------------------------------


class Generators:
    """The load-generating processes, driven in parallel."""

    def __init__(self, count: int, threads: int) -> None:
        self.threads = threads
        self.procs = [
            subprocess.Popen([sys.executable, "-m", "benchmarks.reliability._load_client"], cwd=ROOT,
                             env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            for _ in range(count)
        ]
        for index, _ in enumerate(self.procs):
            self._send(index, {"op": "init", "secret": SECRET, "client_token": CLIENT_TOKEN,
                               "index": index, "seed": 7919 * (index + 1)})
        for index, _ in enumerate(self.procs):
            self._answer(index)

    def _send(self, index: int, command: dict[str, Any]) -> None:
        stdin = self.procs[index].stdin
        assert stdin is not None
        stdin.write(json.dumps(command) + "\n")
        stdin.flush()

    def _answer(self, index: int) -> dict[str, Any]:
        stdout = self.procs[index].stdout
        assert stdout is not None
        line = stdout.readline()
        if not line:
            raise RuntimeError("a load generator died")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return answer

    def run(self, port: int, mix: str, seconds: float, *, check_ledger: bool = True,
            weights: dict[str, float] | None = None, sweep: bool = False) -> dict[str, Any]:
        """Every process sends ``mix`` (or these class ``weights``) for ``seconds``; their
        answers merged. ``sweep``: every class of the mix once first, however short the run."""
        from ._load_mix import FULL_WEIGHTS, SIGNED_WEIGHTS

        classes = list(weights or (FULL_WEIGHTS if mix == "full" else SIGNED_WEIGHTS))
        started = time.perf_counter()
        for index, _ in enumerate(self.procs):
            mine = classes[index::len(self.procs)] if sweep else []
            self._send(index, {"op": "run", "port": port, "mix": mix, "seconds": seconds,
                               "threads": self.threads, "check_ledger": check_ledger,
                               "weights": weights, "sweep": mine})
        answers = [self._answer(index) for index, _ in enumerate(self.procs)]
        merged = _merge(answers)
        merged["wall"] = time.perf_counter() - started
        return merged

    def close(self) -> None:
        for index, proc in enumerate(self.procs):
            if proc.poll() is None:
                try:
                    self._send(index, {"op": "quit"})
                    assert proc.stdin is not None
                    proc.stdin.close()
                    proc.wait(timeout=10)
                except (OSError, subprocess.TimeoutExpired):
                    proc.kill()
                    proc.wait(timeout=5)


def _merge(answers: list[dict[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {"requests": 0, "in_progress": 0, "outcomes": {}, "answers": {},
                              "examples": [], "ledger": [], "signed_ms": [], "client_cpu": 0.0,
                              "elapsed": 0.0}
    for answer in answers:
        merged["requests"] += answer["requests"]
        merged["in_progress"] += answer["in_progress"]
        merged["client_cpu"] += answer["client_cpu"]
        merged["elapsed"] = max(merged["elapsed"], answer["elapsed"])
        for key in ("outcomes", "answers"):
            for cls, counts in answer[key].items():
                target = merged[key].setdefault(cls, {})
                for name, n in counts.items():
                    target[name] = target.get(name, 0) + n
        merged["examples"] += answer["examples"]
        merged["ledger"] += answer["ledger"]
        merged["signed_ms"] += answer["signed_ms"]
    return merged


# -- the two apps -------------------------------------------------------------------------------------


def _config(shop: Path, store: Path | None) -> dict[str, Any]:
    config: dict[str, Any] = {"DATABASE": str(shop)}
    if store is not None:
        config["BAILING_STORE"] = "sqlite:///" + str(store)
    return config


def _server_env() -> dict[str, str]:
    # what an operator sets (example_app/README.md): the secret, the client token, the session key
    return {"BAILING_SECRET": SECRET, "BAILING_CLIENT_TOKEN": CLIENT_TOKEN,
            "SECRET_KEY": "load-run-session-key", "PUBLIC_BASE_URL": "http://127.0.0.1:5000"}


def seed_database(path: Path) -> None:
    """Create and seed the example's database once (its password hashing is slow on purpose)."""
    code = ("import sys; from example_app import create_app; "
            "create_app({'DATABASE': sys.argv[1], 'BAILING_STORE': 'memory://'})")
    subprocess.run([sys.executable, "-c", code, str(path)], cwd=ROOT, env=_env(_server_env()),
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def check_generator(shop: Path) -> None:
    """The generator signs exactly what the hub's own request builder would (HubSimulator)."""
    from bailing_flask.testing import HubSimulator
    from example_app import create_app

    from ._load_mix import FULL as SUBJECT, Mix

    app = create_app({"DATABASE": str(shop), "BAILING_STORE": "memory://", "BAILING_SECRETS": [SECRET],
                      "BAILING_CLIENT_TOKENS": [CLIENT_TOKEN], "BAILING_HUB_URL": "http://127.0.0.1:9",
                      "SECRET_KEY": "x"})
    stamp = int(time.time())
    hub = HubSimulator(app, SECRET, clock=lambda: stamp)
    mix = Mix(SECRET, CLIENT_TOKEN, "localhost", index=0, seed=0, clock=lambda: stamp)
    for tool, args in (
        ("order_search", {"keyword": "张三 耳机", "status": "paid"}), ("order_get", {"order_id": 1003}),
        ("refund_preview", {"order_id": 1001, "amount": 10.5}),
        ("refund_request_create", {"order_id": 1002, "amount": 0.01, "reason": "load test 7"}),
        ("customer_update_phone", {"customer_id": 101, "phone": "+86 130 1234 5670"}),
    ):
        want = hub.build_call(tool, args, subject=SUBJECT, job_id="load-check")
        got = mix.call(tool, args, SUBJECT, job="load-check")
        if (want.method, want.path_with_query, want.body, want.headers) != (
                got.method, got.target, got.body, got.headers):
            raise AssertionError(f"the load generator does not sign {tool} as the hub does:\n"
                                 f"{want}\n{got}")


# -- the checks after the run ---------------------------------------------------------------------------


@dataclass
class Effects:
    """The side-effect check of one example-app server."""

    checked: int = 0
    not_once: int = 0
    of_refused: int = 0
    problems: list[str] = field(default_factory=list)

    def problem(self, text: str) -> None:
        if len(self.problems) < 20:
            self.problems.append(text)


def check_effects(ledger: list[list[str]], shop: Path, store: Path) -> Effects:
    """Every key sent as a valid call took effect exactly once; no refused one did.

    Read from the answers (exactly one ran, the others were answered from the
    record or told it was in progress) and from the databases: the shop's own
    ``refund_requests`` rows (one per job) and the package's records (the
    transaction-mode table in the shop's database, the store's entries and
    approval records).
    """
    from bailing_flask.stores import store_from_url

    effects = Effects()
    details: dict[tuple[str, str], Counter[str]] = {}
    for kind, key, detail in ledger:
        details.setdefault((kind, key), Counter())[detail] += 1
    with closing(sqlite3.connect(shop)) as conn:
        refunds = Counter(job for (job,) in conn.execute(
            "SELECT job_id FROM refund_requests WHERE job_id IS NOT NULL"))
        records = Counter(job for (job,) in conn.execute(
            "SELECT job_id FROM bailing_idempotency WHERE state = 'completed'"))
    entries = store_from_url("sqlite:///" + str(store)).list(limit=10**9)
    phones = Counter(e.meta.job_id for e in entries
                     if e.meta.tool == "customer_update_phone" and e.state == "completed")
    approvals = store_from_url("sqlite:///" + str(store))
    expected = {"refund": 0, "approval": 0}
    for (kind, key), seen in sorted(details.items()):
        if kind in ("refund", "phone", "approval"):
            effects.checked += 1
            expected[kind] = expected.get(kind, 0) + 1
            fresh = seen["fresh"]
            stored: tuple[int, ...]
            if kind == "refund":
                stored = (refunds[key], records[key])
            elif kind == "phone":
                stored = (phones[key],)
            else:
                stored = (1 if approvals.get_approval(int(key)) is not None else 0,)
            if fresh != 1 or any(n != 1 for n in stored) or seen["refused"]:
                effects.not_once += 1
                effects.problem(f"{kind} {key}: answers {dict(seen)}, stored {stored}")
        elif kind == "refund_none":  # the shop's own rows: a refused call files nothing
            if refunds[key]:
                effects.of_refused += 1
                effects.problem(f"refused refund call {key} left {refunds[key]} refund rows")
        elif kind == "approval_none":
            if approvals.get_approval(int(key)) is not None:
                effects.of_refused += 1
                effects.problem(f"refused approval request {key} was recorded")
    # nothing took effect that no valid call asked for
    stray_refunds = sum(refunds.values()) - expected["refund"]
    stray_approvals = len(approvals.list_approvals(limit=10**9)) - expected["approval"]
    for what, stray in (("refund requests", stray_refunds), ("approval records", stray_approvals)):
        if stray:
            effects.of_refused += abs(stray)
            effects.problem(f"{stray:+d} {what} beyond the valid calls")
    return effects


def _log_problems(log: Path) -> tuple[int, list[str]]:
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return 0, []
    bad = [line for line in lines if _LOG_PROBLEMS.search(line)]
    return len(bad), bad[:10]


def worker_stats(server: Gunicorn) -> dict[int, tuple[int, float]]:
    """Open file descriptors and resident memory (MiB) of each worker (Linux; else empty)."""
    stats: dict[int, tuple[int, float]] = {}
    for pid in server.worker_pids():
        try:
            fds = len(os.listdir(f"/proc/{pid}/fd"))
            with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
                rss = next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:")) / 1024
        except (OSError, StopIteration, ValueError):
            continue
        stats[pid] = (fds, rss)
    return stats


def _growth(before: dict[int, tuple[int, float]], after: dict[int, tuple[int, float]]
            ) -> tuple[int | None, float | None]:
    """The largest growth of any worker alive at both times: (descriptors, MiB)."""
    common = before.keys() & after.keys()
    if not common:
        return None, None
    return (max(after[p][0] - before[p][0] for p in common),
            round(max(after[p][1] - before[p][1] for p in common), 1))


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


# -- one worker class -------------------------------------------------------------------------------------


def spread(values: list[float]) -> tuple[float, float, float, float]:
    """``(median, lower quartile, upper quartile, interquartile range / median)`` of the rounds."""
    median = statistics.median(values)
    low, high = _percentile(values, 25), _percentile(values, 75)
    return median, low, high, (high - low) / median if median else float("inf")


def _compare(settings: Settings, worker_class: str, gens: Generators, app: Gunicorn, bare: Gunicorn,
             runs: list[dict[str, Any]], result: dict[str, Any]) -> dict[str, Any]:
    """Interleaved rounds of the signed mix, A B B A then B A A B ...: one ratio per round."""
    sides: dict[str, dict[str, list[float]]] = {"app": {"rates": [], "ms": []},
                                                "bare": {"rates": [], "ms": []}}
    ratios: list[float] = []
    for round_no in range(settings.compare_rounds):
        _log(f"{worker_class}: comparison round {round_no + 1}/{settings.compare_rounds}")
        order = ["app", "bare"] if round_no % 2 == 0 else ["bare", "app"]
        per: dict[str, list[tuple[int, float]]] = {"app": [], "bare": []}
        for side in order + order[::-1]:
            port = app.port if side == "app" else bare.port
            block = gens.run(port, "signed", settings.compare_block_seconds, check_ledger=side == "app")
            if side == "app":
                runs.append(block)
            else:
                result.setdefault("bare_outcomes", []).append(block["outcomes"])
            per[side].append((block["requests"], block["elapsed"]))
            sides[side]["ms"] += block["signed_ms"]
        rates = {side: sum(n for n, _ in pair) / sum(s for _, s in pair) for side, pair in per.items()}
        for side, rate in rates.items():
            sides[side]["rates"].append(rate)
        ratios.append(rates["app"] / rates["bare"])
    return {
        "ratios": ratios, "app_rates": sides["app"]["rates"], "bare_rates": sides["bare"]["rates"],
        **{f"{side}_p50_ms": _percentile(v["ms"], 50) for side, v in sides.items()},
        **{f"{side}_p99_ms": _percentile(v["ms"], 99) for side, v in sides.items()},
    }


def run_worker_class(settings: Settings, worker_class: str, work: Path, seed: Path) -> dict[str, Any]:
    """The mix and the comparison on one worker class; the raw results."""
    shop, store = work / f"{worker_class}-shop.sqlite3", work / f"{worker_class}-bailing.sqlite3"
    bare_shop = work / f"{worker_class}-bare-shop.sqlite3"
    shutil.copy(seed, shop)
    shutil.copy(seed, bare_shop)
    workers = settings.workers(worker_class)
    threads = settings.gthread_threads if worker_class == "gthread" else 1
    result: dict[str, Any] = {"worker_class": worker_class, "workers": workers, "threads": threads}
    with ExitStack() as stack:
        app = Gunicorn(f"example_app:create_app({_config(shop, store)!r})", worker_class=worker_class,
                       workers=workers, threads=threads, env=_server_env(), label="example_app")
        stack.callback(app.close)
        app.start()
        bare = None
        if settings.compare_rounds:
            bare = Gunicorn(f"benchmarks.reliability._bare_app:create_app({_config(bare_shop, None)!r})",
                            worker_class=worker_class, workers=workers, threads=threads,
                            env=_server_env(), label="bare")
            stack.callback(bare.close)
            bare.start()
        gens = Generators(settings.generators, settings.threads)
        stack.callback(gens.close)
        runs: list[dict[str, Any]] = []
        _log(f"{worker_class}: warm-up")
        runs.append(gens.run(app.port, "signed", settings.warmup_seconds))
        if bare is not None:
            gens.run(bare.port, "signed", settings.warmup_seconds, check_ledger=False)
        time.sleep(0.5)  # idle keep-alive connections of the warm-up are gone
        before = worker_stats(app)
        if bare is not None:
            # first, while both databases hold the same data: the mix below grows the example's
            result["compare"] = _compare(settings, worker_class, gens, app, bare, runs, result)
        _log(f"{worker_class}: the full mix for {settings.mix_seconds:g} s")
        cpu0 = app.cpu_ns()
        mix = gens.run(app.port, "full", settings.mix_seconds, sweep=True)
        cpu1 = app.cpu_ns()
        runs.append(mix)
        result["mix"] = {"requests": mix["requests"], "seconds": mix["elapsed"],
                         "req_per_s": mix["requests"] / mix["elapsed"],
                         "server_cpu_us": (None if cpu0 is None or cpu1 is None
                                           else (cpu1 - cpu0) / 1000 / max(1, mix["requests"])),
                         "client_cpu_s": mix["client_cpu"],
                         "signed_p50_ms": _percentile(mix["signed_ms"], 50),
                         "signed_p99_ms": _percentile(mix["signed_ms"], 99)}
        gens.close()
        time.sleep(1.0)
        after = worker_stats(app)
        result["fd_growth"], result["rss_growth_mib"] = _growth(before, after)
        result["workers_replaced"] = len(before.keys() - after.keys()) if before else None
        app.stop()
        if bare is not None:
            bare.stop()
        result["log_problems"], result["log_lines"] = _log_problems(app.log)
        if bare is not None:
            result["bare_log_problems"], _ = _log_problems(bare.log)
    merged = _merge_runs(runs)
    result["counts"] = merged
    effects = check_effects(merged["ledger"], shop, store)
    result["effects"] = {"checked": effects.checked, "not_once": effects.not_once,
                         "of_refused": effects.of_refused, "problems": effects.problems}
    del merged["ledger"]
    return result


def _merge_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    totals: Counter[str] = Counter()
    outcomes: dict[str, dict[str, int]] = {}
    answers: dict[str, dict[str, int]] = {}
    ledger: list[list[str]] = []
    examples: list[dict[str, Any]] = []
    in_progress = 0
    for block in runs:
        in_progress += block["in_progress"]
        for cls, counts in block["outcomes"].items():
            target = outcomes.setdefault(cls, {})
            for name, n in counts.items():
                target[name] = target.get(name, 0) + n
                totals[name] += n
        for cls, counts in block["answers"].items():
            target = answers.setdefault(cls, {})
            for name, n in counts.items():
                target[name] = target.get(name, 0) + n
        ledger += block["ledger"]
        examples += block["examples"]
    return {"requests": sum(totals.values()), "totals": dict(totals), "outcomes": outcomes,
            "answers": answers, "in_progress": in_progress, "examples": examples[:40], "ledger": ledger}


# -- the whole run ----------------------------------------------------------------------------------------


def run_load(settings: Settings = FULL) -> dict[str, Any]:
    """Every worker class of ``settings``; the raw results (see :func:`figures`)."""
    base = settings.data_dir or ("/dev/shm" if os.path.isdir("/dev/shm") else None)
    work = Path(tempfile.mkdtemp(prefix="bailing-load-", dir=base))
    try:
        seed = work / "seed.sqlite3"
        seed_database(seed)
        check_copy = work / "check.sqlite3"
        shutil.copy(seed, check_copy)
        check_generator(check_copy)
        runs = [run_worker_class(settings, worker_class, work, seed)
                for worker_class in settings.worker_classes]
        return {"settings": settings.__dict__ | {"worker_classes": list(settings.worker_classes)},
                "data_dir": str(work.parent), "runs": runs}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def figures(results: dict[str, Any]) -> list[Figure]:
    """The published figures of :func:`run_load`'s results."""
    out: list[Figure] = []

    def add(name: str, value: float, unit: str, require: str, text: str, *,
            low: float | None = None, high: float | None = None) -> None:
        out.append(Figure("load", f"load.{name}", float(value), unit, require, text, low, high))

    for run in results["runs"]:
        wc = run["worker_class"]
        label = (f"{wc}, {run['workers']} workers" if wc == "sync"
                 else f"{wc}, {run['workers']} workers x {run['threads']} threads")
        totals = run["counts"]["totals"]
        add(f"{wc}.requests", run["counts"]["requests"], "requests", "",
            f"gunicorn {label}: requests sent to the example app and checked (warm-up, mix, "
            "comparison)")
        label = wc
        add(f"{wc}.mix_req_per_s", round(run["mix"]["req_per_s"], 1), "req/s", "",
            f"{label}: throughput of the full mix ({run['mix']['seconds']:.0f} s at saturation)")
        add(f"{wc}.server_errors", totals.get("server_error", 0), "requests", "== 0",
            f"{label}: answers with a 5xx status")
        add(f"{wc}.false_accepts", totals.get("false_accept", 0), "requests", "== 0",
            f"{label}: requests that must be refused and were served")
        add(f"{wc}.false_rejects", totals.get("false_reject", 0), "requests", "== 0",
            f"{label}: valid requests refused")
        add(f"{wc}.unexpected_answers", totals.get("unexpected", 0), "requests", "== 0",
            f"{label}: answered otherwise than expected (refused with another status or reason)")
        add(f"{wc}.transport_errors", totals.get("transport_error", 0), "requests", "== 0",
            f"{label}: requests that got no complete answer")
        add(f"{wc}.keys_checked", run["effects"]["checked"], "keys", "",
            f"{label}: side effects checked (refund requests, phone updates, approval requests)")
        add(f"{wc}.effects_not_exactly_once", run["effects"]["not_once"], "keys", "== 0",
            f"{label}: side effects sent as valid calls that did not happen exactly once")
        add(f"{wc}.effects_of_refused", run["effects"]["of_refused"], "keys", "== 0",
            f"{label}: side effects of refused requests, or without a valid call")
        add(f"{wc}.server_log_problems", run["log_problems"], "lines", "== 0",
            f"{label}: tracebacks, worker timeouts and worker exits in the server log")
        if run.get("workers_replaced") is not None:
            add(f"{wc}.workers_replaced", run["workers_replaced"], "workers", "== 0",
                f"{label}: workers that died during the run and were replaced")
        if run.get("fd_growth") is not None:
            add(f"{wc}.worker_fd_growth", run["fd_growth"], "descriptors", f"<= {FD_GROWTH_LIMIT}",
                f"{label}: open files of the busiest-growing worker, end of the run minus its start")
            add(f"{wc}.worker_rss_growth", run["rss_growth_mib"], "MiB", "",
                f"{label}: resident memory of the busiest-growing worker, end minus start")
        add(f"{wc}.in_progress_answers", run["counts"]["in_progress"], "requests", "",
            f"{label}: concurrent duplicates told the first copy is still running (409/503)")
        compare = run.get("compare")
        if compare:
            _compare_figures(add, label, wc, compare)
    return out


def _compare_figures(add: Any, label: str, wc: str, compare: dict[str, Any]) -> None:
    """The comparison's figures: medians of the rounds, the quartiles as their range."""
    rounds = len(compare["ratios"])
    for side, what in (("app", "signed mix, example app"),
                       ("bare", "the same requests, the same shop without bailing_flask")):
        median, low, high, _ = spread(compare[f"{side}_rates"])
        name = "signed" if side == "app" else "bare"
        add(f"{wc}.{name}_req_per_s", round(median, 1), "req/s", "",
            f"{label}: {what} (median of {rounds} rounds; range: the quartiles)",
            low=round(low, 1), high=round(high, 1))
    for side, name, what in (("app", "signed", "signed mix, example app"),
                             ("bare", "bare", "without bailing_flask")):
        add(f"{wc}.{name}_p50_ms", round(compare[f"{side}_p50_ms"], 2), "ms", "",
            f"{label}: {what}, median latency")
        add(f"{wc}.{name}_p99_ms", round(compare[f"{side}_p99_ms"], 2), "ms", "",
            f"{label}: {what}, 99th percentile latency")
    median, low, high, relative = spread(compare["ratios"])
    add(f"{wc}.throughput_ratio", round(median, 3), "ratio", f">= {RATIO_FLOOR}",
        f"{label}: signed mix req/s, example app ÷ without bailing_flask: the median of {rounds} "
        f"interleaved rounds (range: the quartiles; all rounds: "
        f"{', '.join(f'{r:.2f}' for r in compare['ratios'])})", low=round(low, 3), high=round(high, 3))
    add(f"{wc}.throughput_ratio_spread", round(relative, 3), "of the median", f"<= {SPREAD_LIMIT}",
        f"{label}: the throughput ratio's interquartile range over its median; wider, the rounds "
        "disagree (a machine too busy to measure on) and the ratio is not published")


def run(quick: bool = False) -> list[Figure]:
    """The load part's figures (``quick``: 8 s of mix per worker class instead of 60)."""
    return figures(run_load(QUICK if quick else FULL))


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m benchmarks.reliability.load", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="8 s of mix per worker class")
    parser.add_argument("--seconds", type=float, help="seconds of mix per worker class")
    parser.add_argument("--worker-class", action="append", choices=["sync", "gthread"])
    parser.add_argument("--data-dir", help="where the databases go (default: /dev/shm)")
    parser.add_argument("--generators", type=int, help="load-generating processes (default 2)")
    parser.add_argument("--threads", type=int, help="sending threads per process (default 8)")
    parser.add_argument("--json", help="write the raw results here")
    options = parser.parse_args(argv)
    settings = QUICK if options.quick else FULL
    if options.seconds:
        settings = replace(settings, mix_seconds=options.seconds)
    if options.worker_class:
        settings = replace(settings, worker_classes=tuple(options.worker_class))
    if options.data_dir:
        settings = replace(settings, data_dir=options.data_dir)
    if options.generators:
        settings = replace(settings, generators=options.generators)
    if options.threads:
        settings = replace(settings, threads=options.threads)
    results = run_load(settings)
    if options.json:
        Path(options.json).write_text(json.dumps(results, indent=1, ensure_ascii=False))
    failed = False
    for run in results["runs"]:
        for cls, counts in sorted(run["counts"]["outcomes"].items()):
            if set(counts) != {"ok"}:
                print(f"{run['worker_class']} {cls}: {counts} {run['counts']['answers'][cls]}")
        for example in run["counts"]["examples"][:10]:
            print("  ", json.dumps(example, ensure_ascii=False)[:600])
        for problem in run["effects"]["problems"] + run["log_lines"]:
            print("  ", problem)
    for figure in figures(results):
        failed |= not figure.ok()
        print(f"{figure.name:40} {figure.value:>12g} {figure.unit:9} {figure.require:8} "
              f"{'' if figure.ok() else 'MISSED'}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
