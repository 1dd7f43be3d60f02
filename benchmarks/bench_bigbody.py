"""big body: a 64 MiB signed body streamed through ``BailingMiddleware``, against its real floor.

``wsgi.input`` is a reader that hands out one prebuilt 64 KiB block again
and again (never 64 MiB in memory); the downstream WSGI app reads the body
back in 64 KiB chunks and discards it. The middleware is configured with
``max_body_size=128 MiB`` (the default 10 MiB would refuse the body with
413) and the default 1 MiB ``spool_threshold``, so the body is hashed while
being spooled to an anonymous temporary file, which the app then reads.

* ``throughput_vs_floor`` (target >= 0.9): time of the **floor** - the work
  any verifier that keeps the body off the heap must do: ``sha256`` of every
  byte, writing it to an anonymous temporary file (``tempfile.TemporaryFile``
  in the same directory the middleware uses) and reading it back in the
  same 64 KiB chunks the app reads - / time of the whole signed request
  through the middleware. CPU time of the whole process, both sides: the
  middleware hashes on a second thread, which this thread's CPU clock would
  not see, and on a loaded server (every core busy with a worker) that
  second core is not free, so CPU is what limits throughput. The wall-clock
  ratio (what one request waits on an idle multi-core machine, where the
  parallel hash pays off) is in the details as ``ratio_on_wall_clock_median``;
* ``throughput_vs_sha256_only`` (no target): the old figure, ``sha256``
  alone over the same reader / the same request; kept for continuity;
* ``rss_growth`` (target <= 8 MiB): peak RSS growth during one request
  (Linux ``VmHWM`` after resetting it through ``/proc/self/clear_refs``;
  falls back to ``getrusage`` deltas elsewhere) in a fresh subprocess,
  median of 3, in MiB;
* ``tracemalloc_peak`` (no target): ``tracemalloc``'s peak of Python
  allocations during one request, same subprocess, in MiB.

The floor's and plain hashing's growth are measured in the same subprocess
and reported alongside.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import io
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from ._harness import Result, compare, quartiles, ratio_result

GROUP = "bigbody"
SECRET = "bench-secret-0123456789abcdefghijklmnopqrstuvwxyz"
MiB = 1024 * 1024
BODY_SIZE = 64 * MiB
CHUNK = 64 * 1024
PATH = "/upload"
RSS_LIMIT_MIB = 8.0
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


def floor_spool(size: int = BODY_SIZE) -> str:
    """The floor: hash every byte, spool it to a temporary file, read it back.

    Single-threaded and copy-free: 64 KiB reads of the same reader, one
    ``sha256.update`` and one unbuffered file write per chunk, then the file
    read back through a ``BufferedReader`` in 64 KiB chunks, as the app
    below the middleware reads it.
    """
    reader = ChunkReader(size)
    digest = hashlib.sha256()
    spool = tempfile.TemporaryFile(buffering=0)
    try:
        read, update, write = reader.read, digest.update, spool.write
        while True:
            chunk = read(CHUNK)
            if not chunk:
                break
            update(chunk)
            write(chunk)
        hexdigest = digest.hexdigest()
        spool.seek(0)
        stream = io.BufferedReader(spool)  # type: ignore[arg-type,type-var]
        back = stream.read
        total = 0
        while True:
            chunk = back(CHUNK)
            if not chunk:
                break
            total += len(chunk)
        if total != size:
            raise AssertionError(f"floor read back {total} of {size} bytes")
    finally:
        spool.close()
    return hexdigest


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
        from bailing_flask.wire.signing import canonical_tool_call
        from bailing_flask.wire.middleware import BailingMiddleware

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

    floor_spool(4 * MiB)
    out: dict[str, Any] = {"rss": {"plain": [], "floor": [], "middleware": []}, "tracemalloc": {}}
    for _ in range(repeats):
        for name, fn in (("plain", plain_hash), ("floor", floor_spool), ("middleware", bench.request)):
            growth, method = _peak_growth_kib(fn)
            out["rss"][name].append(growth)
            gc.collect()
    out["rss_method"] = method

    tracemalloc.start()
    for name, fn in (("plain", plain_hash), ("floor", floor_spool), ("middleware", bench.request)):
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


def _memory_result(name: str, metric: str, kib: dict[str, list[float]], method: str,
                   limit_mib: float | None) -> Result:
    mib = [k / 1024 for k in kib["middleware"]]
    return Result(
        group=GROUP,
        name=name,
        metric=metric,
        ratio=statistics.median(mib),
        spread=quartiles(mib),
        op="<=" if limit_mib is not None else "",
        threshold=limit_mib or 0.0,
        rounds=len(mib),
        unit="MiB",
        details={
            "method": method,
            "middleware_growth_MiB": [round(x, 3) for x in mib],
            "floor_growth_MiB": [round(k / 1024, 3) for k in kib["floor"]],
            "plain_sha256_growth_MiB": [round(k / 1024, 3) for k in kib["plain"]],
            "body_MiB": BODY_SIZE / MiB,
        },
    )


def run(quick: bool = False) -> list[Result]:
    results: list[Result] = []

    bench = Bench(BODY_SIZE)
    per_round = compare(
        {"floor": floor_spool, "plain_sha256": plain_hash, "middleware": bench.request},
        rounds=5 if quick else 11,
        loops=1,
        warmup_s=0.3,
        measure="cpu",
        process_cpu=True,
    )
    mib_per_s = {name: BODY_SIZE / MiB / (statistics.median(per_round[name]) / 1e9)
                 for name in per_round}
    extra = {
        **{f"{name}_MiB_per_s_median": round(v, 1) for name, v in mib_per_s.items()},
        "chunk_bytes": CHUNK,
        "spool_dir": tempfile.gettempdir(),
        # informational: stopping the clock when the app is entered (hash + spool + HMAC)
        "verify_phase_only_vs_sha256": statistics.median(per_round["plain_sha256"])
        / statistics.median(bench.verify_phase_ns),
    }
    floor_result = ratio_result(
        per_round, group=GROUP, name="throughput_vs_floor", numerator="floor",
        denominator="middleware", op=">=", threshold=0.9, extra=extra,
        metric="64 MiB: CPU of sha256 + spool to a temp file + read back / CPU of the signed "
               "request through the middleware (process CPU, all threads)",
    )
    floor_result.notes.append(
        f"{GROUP}/throughput_vs_floor: MiB/s on process CPU - floor {mib_per_s['floor']:.0f}, sha256 "
        f"alone {mib_per_s['plain_sha256']:.0f}, middleware {mib_per_s['middleware']:.0f}; on the wall "
        f"clock the ratio is {floor_result.details['ratio_on_wall_clock_median']:.3f} (the second "
        "hashing thread pays off only while a core is idle)")
    results.append(floor_result)
    results.append(ratio_result(
        per_round, group=GROUP, name="throughput_vs_sha256_only", numerator="plain_sha256",
        denominator="middleware", op="", threshold=0.0, extra=extra,
        metric="64 MiB: CPU of sha256 alone / CPU of the signed request through the middleware "
               "(no target; the old floor, which left out the spool)",
    ))

    mem = _run_child()
    results.append(_memory_result(
        "rss_growth", "64 MiB: peak RSS growth during one signed request, MiB (subprocess)",
        mem["rss"], mem["rss_method"], RSS_LIMIT_MIB,
    ))
    tm = {name: [b / 1024 for b in values] for name, values in mem["tracemalloc"].items()}
    results.append(_memory_result(
        "tracemalloc_peak", "64 MiB: tracemalloc peak of one signed request, MiB (no target)",
        tm, "tracemalloc peak minus current", None,
    ))
    return results


if __name__ == "__main__":
    if "--child" in sys.argv:
        print(json.dumps(child_main()))
    else:  # pragma: no cover - convenience
        for r in run():
            print(r)
