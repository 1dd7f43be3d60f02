"""big body: a 64 MiB signed body streamed through ``BailingMiddleware``.

``wsgi.input`` is a generator-like reader that hands out one prebuilt
64 KiB block again and again (never 64 MiB in memory); the downstream WSGI
app reads the body back in 64 KiB chunks and discards it. The middleware is
configured with ``max_body_size=128 MiB`` (the default 10 MiB would refuse
the body with 413) and the default 1 MiB ``spool_threshold``.

* ``throughput``: time of ``sha256`` over the same bytes in the same chunks
  from the same reader / time of the whole signed request through the
  middleware (hash + spool + verify + app reads it back); target >= 0.8;
* ``rss_growth``: peak RSS growth during one request (Linux ``VmHWM``
  after resetting it through ``/proc/self/clear_refs``; falls back to
  ``getrusage`` deltas elsewhere) in a fresh subprocess, divided by the body
  size; target <= 0.25 (i.e. <= 16 MiB for 64 MiB);
* ``tracemalloc_peak``: the same with ``tracemalloc``'s peak of Python
  allocations; target <= 0.25.

The plain-hashing baseline's growth is measured in the same subprocess and
reported alongside.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from ._harness import Result, compare, quartiles, ratio_result

GROUP = "bigbody"
SECRET = "bench-secret-0123456789abcdefghijklmnopqrstuvwxyz"
MiB = 1024 * 1024
BODY_SIZE = 64 * MiB
CHUNK = 64 * 1024
PATH = "/upload"
MEMORY_LIMIT_FRACTION = 16 * MiB / BODY_SIZE  # 0.25
_BLOCK = hashlib.shake_256(b"bailing-bench").digest(CHUNK)  # incompressible, deterministic


class ChunkReader:
    """A ``wsgi.input`` producing ``size`` bytes without holding them.

    Aligned reads of exactly ``CHUNK`` bytes return the same prebuilt
    object (no copy); other sizes are sliced out of the repeating block.
    Reading "everything" at once is refused: it would defeat the benchmark.
    """

    __slots__ = ("remaining", "offset")

    def __init__(self, size: int) -> None:
        self.remaining = size
        self.offset = 0

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            raise AssertionError("read() without a size on a 64 MiB stream")
        n = min(n, self.remaining)
        if n <= 0:
            return b""
        self.remaining -= n
        if n == CHUNK and self.offset == 0:
            return _BLOCK
        parts = []
        need = n
        while need:
            take = min(need, CHUNK - self.offset)
            parts.append(_BLOCK[self.offset : self.offset + take])
            self.offset = (self.offset + take) % CHUNK
            need -= take
        return b"".join(parts)

    def readline(self, limit: int = -1) -> bytes:  # pragma: no cover - unused
        raise AssertionError("readline on a binary upload")


def plain_hash(size: int = BODY_SIZE) -> str:
    """The baseline: hashlib.sha256 over the same reader, same chunk size."""
    reader = ChunkReader(size)
    digest = hashlib.sha256()
    read, update = reader.read, digest.update
    while True:
        chunk = read(CHUNK)
        if not chunk:
            break
        update(chunk)
    return digest.hexdigest()


#: perf_counter_ns() when consumer_app was last entered (end of the verify phase).
_ENTERED = [0]


def consumer_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """Downstream app: read the body back in chunks, discard it."""
    _ENTERED[0] = time.perf_counter_ns()
    stream = environ["wsgi.input"]
    expected = int(environ.get("CONTENT_LENGTH") or 0)
    total = 0
    read = stream.read
    while True:
        chunk = read(CHUNK)
        if not chunk:
            break
        total += len(chunk)
    if total != expected:
        start_response("500 Internal Server Error", [("Content-Type", "text/plain")])
        return [f"read {total} of {expected}".encode()]
    body = b'{"ok":true}'
    start_response(
        "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    )
    return [body]


class Bench:
    """The guarded app plus a signed environ template for ``size`` bytes."""

    def __init__(self, size: int = BODY_SIZE) -> None:
        from bailing_flask.signing import canonical_tool_call
        from bailing_flask.wsgi import BailingMiddleware

        self.size = size
        self.app = BailingMiddleware(
            consumer_app, SECRET, max_body_size=2 * BODY_SIZE, catalog_path=None
        )
        stamp = str(int(time.time()))
        canonical = canonical_tool_call(stamp, "POST", PATH, plain_hash(size), "179:1", "job-1")
        signature = "sha256=" + hmac.new(SECRET.encode(), canonical, hashlib.sha256).hexdigest()
        self.template = {
            "REQUEST_METHOD": "POST",
            "SCRIPT_NAME": "",
            "PATH_INFO": PATH,
            "QUERY_STRING": "",
            "RAW_URI": PATH,
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "8000",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "CONTENT_TYPE": "application/octet-stream",
            "CONTENT_LENGTH": str(size),
            "HTTP_X_BAILING_SIGNATURE": signature,
            "HTTP_X_BAILING_TIMESTAMP": stamp,
            "HTTP_X_BAILING_ON_BEHALF_OF": "179:1",
            "HTTP_X_BAILING_JOB_ID": "job-1",
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": False,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
        }
        self.status = ""
        #: ns from the call to the app's entry: hashing + spooling + HMAC only.
        self.verify_phase_ns: list[int] = []

    def _start_response(self, status: str, headers: list, exc_info: Any = None) -> None:
        self.status = status

    def request(self) -> None:
        env = dict(self.template)
        env["wsgi.input"] = ChunkReader(self.size)
        start = time.perf_counter_ns()
        result = self.app(env, self._start_response)
        self.verify_phase_ns.append(_ENTERED[0] - start)
        try:
            payload = b"".join(result)
        finally:
            if hasattr(result, "close"):
                result.close()
        if not self.status.startswith("200"):
            raise AssertionError(f"{self.status}: {payload[:200]!r}")


# --------------------------------------------------------------------------
# memory, measured in a fresh interpreter


def _proc_status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _peak_growth_kib(fn: Any) -> tuple[int, str]:
    """Peak RSS growth in KiB while ``fn`` runs, and the method used."""
    if _reset_peak():
        before = _proc_status_kib("VmRSS")
        fn()
        peak = _proc_status_kib("VmHWM")
        if before is not None and peak is not None:
            return max(0, peak - before), "VmHWM after clear_refs"
    import resource

    # ru_maxrss is a lifetime high-water mark (and may include the parent's
    # peak before exec): the delta is only an upper bound when it moves.
    current = _proc_status_kib("VmRSS")
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    scale = 1 if sys.platform != "darwin" else 1024  # macOS reports bytes
    fn()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = current if current is not None else base // scale
    return max(0, after // scale - start), "getrusage ru_maxrss delta (upper bound)"


def child_main(repeats: int = 3) -> dict[str, Any]:
    import gc
    import tracemalloc

    bench = Bench(BODY_SIZE)
    # warm up every code path (imports, spill to a temporary file) on 4 MiB
    Bench(4 * MiB).request()
    plain_hash(4 * MiB)
    gc.collect()

    out: dict[str, Any] = {"rss": {"plain": [], "middleware": []}, "tracemalloc": {}}
    for _ in range(repeats):
        growth, method = _peak_growth_kib(plain_hash)
        out["rss"]["plain"].append(growth)
        gc.collect()
        growth, method = _peak_growth_kib(bench.request)
        out["rss"]["middleware"].append(growth)
        gc.collect()
    out["rss_method"] = method

    tracemalloc.start()
    for name, fn in (("plain", plain_hash), ("middleware", bench.request)):
        peaks = []
        for _ in range(repeats):
            gc.collect()
            current, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            fn()
            peaks.append(tracemalloc.get_traced_memory()[1] - current)
        out["tracemalloc"][name] = peaks
    tracemalloc.stop()
    return out


def _run_child() -> dict[str, Any]:
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_bigbody", "--child"],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=120,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"memory child failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _memory_result(name: str, metric: str, mw_bytes: list[float], plain_bytes: list[float],
                   method: str) -> Result:
    fractions = [b / BODY_SIZE for b in mw_bytes]
    return Result(
        group=GROUP,
        name=name,
        metric=metric,
        ratio=statistics.median(fractions),
        spread=quartiles(fractions),
        op="<=",
        threshold=MEMORY_LIMIT_FRACTION,
        rounds=len(fractions),
        details={
            "method": method,
            "middleware_growth_MiB": [round(b / MiB, 3) for b in mw_bytes],
            "plain_sha256_growth_MiB": [round(b / MiB, 3) for b in plain_bytes],
            "limit_MiB": MEMORY_LIMIT_FRACTION * BODY_SIZE / MiB,
            "body_MiB": BODY_SIZE / MiB,
        },
    )


def run(quick: bool = False) -> list[Result]:
    results: list[Result] = []

    bench = Bench(BODY_SIZE)
    per_round = compare(
        {"plain_sha256": plain_hash, "middleware": bench.request},
        rounds=3 if quick else 9,
        loops=1,
        warmup_s=0.3,
        measure="wall",
    )
    results.append(
        ratio_result(
            per_round,
            group=GROUP,
            name="throughput_vs_sha256",
            numerator="plain_sha256",
            denominator="middleware",
            metric="64 MiB: plain sha256 time / signed request through middleware time",
            op=">=",
            threshold=0.8,
            extra={
                "plain_sha256_MiB_per_s_median": BODY_SIZE / MiB
                / (statistics.median(per_round["plain_sha256"]) / 1e9),
                "middleware_MiB_per_s_median": BODY_SIZE / MiB
                / (statistics.median(per_round["middleware"]) / 1e9),
                "chunk_bytes": CHUNK,
                # informational: the same ratio stopping the clock when the
                # app is entered (excludes the app reading the spool back)
                "verify_phase_only_ratio": statistics.median(per_round["plain_sha256"])
                / statistics.median(bench.verify_phase_ns),
            },
        )
    )

    mem = _run_child()
    results.append(
        _memory_result(
            "rss_growth",
            "64 MiB: peak RSS growth / body size (subprocess)",
            [k * 1024 for k in mem["rss"]["middleware"]],
            [k * 1024 for k in mem["rss"]["plain"]],
            mem["rss_method"],
        )
    )
    results.append(
        _memory_result(
            "tracemalloc_peak",
            "64 MiB: tracemalloc peak / body size (subprocess)",
            mem["tracemalloc"]["middleware"],
            mem["tracemalloc"]["plain"],
            "tracemalloc peak minus current",
        )
    )
    return results


if __name__ == "__main__":
    if "--child" in sys.argv:
        print(json.dumps(child_main()))
    else:  # pragma: no cover - convenience
        for r in run():
            print(r)
