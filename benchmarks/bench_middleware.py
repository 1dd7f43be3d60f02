"""middleware: what ``BailingMiddleware`` costs on its own, in-process through WSGI.

The signed request through the middleware in front of the real views is
timed by the ``toolcall`` group (``middleware_vs_bare_*``, target >= 0.92).
This group keeps the two figures that isolate the layer itself:

* ``unsigned_passthrough_vs_plain`` (target >= 0.98): calls/s of a minimal
  Flask view with the middleware installed and a request that carries no
  ``X-Bailing-Signature`` / the same view without the middleware;
* ``signed_overhead_us_trivial_wsgi`` (no target): CPU µs per call the
  middleware adds to a signed 48-byte POST in front of a trivial WSGI app
  (reads the body, answers a constant) - the layer's own price: header
  checks, body read and hash, canonical string, HMAC, the ``VerifiedCall``;
* ``verify_share_of_overhead`` (no target): of those µs, the share a bare
  ``Verifier.verify`` of the same request takes (hash + HMAC + checks).

Each request is a copy of a prebuilt environ with a fresh ``BytesIO`` body
(``benchmarks/_wsgi.py``); the response iterable is consumed and closed.
"""

from __future__ import annotations

import io
import statistics
import sys
import time
from typing import Any

from flask import Flask

from bailing_flask.wire.signing import Verifier
from bailing_flask.testing import signed_headers
from bailing_flask.wire.middleware import ENVIRON_KEY, BailingMiddleware

from ._harness import Result, compare, quartiles, ratio_result
from ._wsgi import Sink, add_headers, base_environ, call_once

GROUP = "middleware"
SECRET = "bench-secret-0123456789abcdefghijklmnopqrstuvwxyz"
POST_PATH = "/tools/orders"
POST_BODY = b'{"sku":"A-1001","quantity":2,"note":"gift wrap"}'
SUBJECT = "179:1"
JOB_ID = "8d7c2f3e-5b1a-4c9d-9e8f-0a1b2c3d4e5f"


def make_app() -> Flask:
    app = Flask("bench_middleware")

    @app.post(POST_PATH)
    def create_order() -> Any:
        return {"ok": True, "id": 42}

    return app


def trivial_wsgi(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """The cheapest app that still reads the body it was sent."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    environ["wsgi.input"].read(length)
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", "11")])
    return [b'{"ok":true}']


def with_signature(env: dict[str, Any], method: str, target: str, body: bytes) -> dict[str, Any]:
    headers = signed_headers(
        SECRET, method, target, body, subject=SUBJECT, job_id=JOB_ID, client="acme"
    )
    return add_headers(env, headers)


def make_caller(app: Any, template: dict[str, Any], body: bytes, expect: str) -> tuple[Any, dict[str, Any]]:
    """A case calling ``app`` with copies of ``template``; checks the answer once first."""
    sink = Sink()
    BytesIO = io.BytesIO

    def call() -> None:
        env = template.copy()
        env["wsgi.input"] = BytesIO(body)
        result = app(env, sink)
        try:
            for _ in result:
                pass
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()

    env = template.copy()
    status, _headers, payload = call_once(app, env, body)
    if not status.startswith(expect):
        raise AssertionError(f"unexpected status {status!r}: {payload[:200]!r}")
    return call, env


def run(quick: bool = False) -> list[Result]:
    results: list[Result] = []
    app = make_app()
    plain = app.wsgi_app
    guarded = BailingMiddleware(plain, SECRET, catalog_path=None)
    post_env = base_environ("POST", POST_PATH, body=POST_BODY)

    # unsigned pass-through: a tight A/B pair (2 % target), many rounds
    cases: dict[str, Any] = {}
    cases["plain_post"], _ = make_caller(plain, post_env, POST_BODY, "200")
    cases["mw_unsigned_post"], env = make_caller(guarded, post_env, POST_BODY, "200")
    if env.get(ENVIRON_KEY, "missing") is not None:
        raise AssertionError("unsigned POST did not pass through")
    per_round = compare(cases, rounds=41 if quick else 201, block_ms=4.0)
    results.append(ratio_result(
        per_round, group=GROUP, name="unsigned_passthrough_vs_plain", numerator="plain_post",
        denominator="mw_unsigned_post", op=">=", threshold=0.98,
        metric="calls/s unsigned POST, middleware installed / the same without it (thread CPU)",
    ))

    # the layer's own price, over a trivial WSGI app
    signed_env = with_signature(post_env, "POST", POST_PATH, POST_BODY)
    verifier = Verifier(SECRET)
    headers = {k: signed_env["HTTP_X_BAILING_" + k] for k in ("SIGNATURE", "TIMESTAMP")}

    def verify_only() -> None:
        verifier.verify(signature=headers["SIGNATURE"], timestamp=headers["TIMESTAMP"],
                        method="POST", path_with_query=POST_PATH, body=POST_BODY,
                        on_behalf_of=SUBJECT, job_id=JOB_ID)

    trivial: dict[str, Any] = {}
    trivial["trivial"], _ = make_caller(trivial_wsgi, signed_env, POST_BODY, "200")
    trivial["mw_trivial"], env = make_caller(
        BailingMiddleware(trivial_wsgi, SECRET, catalog_path=None), signed_env, POST_BODY, "200")
    if env.get(ENVIRON_KEY) is None:
        raise AssertionError("signed POST was not verified")
    trivial["verify_only"] = verify_only
    per_round = compare(trivial, rounds=21 if quick else 101, block_ms=4.0)
    added = [(m - t) / 1000.0 for m, t in zip(per_round["mw_trivial"], per_round["trivial"])]
    share = [v / (m - t) for v, m, t in zip(per_round["verify_only"], per_round["mw_trivial"],
                                             per_round["trivial"])]
    details = {
        "trivial_us": statistics.median(per_round["trivial"]) / 1000,
        "middleware_over_trivial_us": statistics.median(per_round["mw_trivial"]) / 1000,
        "verify_only_us": statistics.median(per_round["verify_only"]) / 1000,
        "clock": per_round.clock, "blocks": dict(per_round.stats),
    }
    results.append(Result(
        group=GROUP, name="signed_overhead_us_trivial_wsgi", unit="us",
        metric="CPU µs the middleware adds to a signed 48-byte POST over a trivial WSGI app "
               "(no target)",
        ratio=statistics.median(added), spread=quartiles(added), op="", threshold=0.0,
        rounds=len(added), details=details,
    ))
    results.append(Result(
        group=GROUP, name="verify_share_of_overhead",
        metric="Verifier.verify of the same request / the middleware's added µs (no target)",
        ratio=statistics.median(share), spread=quartiles(share), op="", threshold=0.0,
        rounds=len(share), details=details,
    ))
    return results


if __name__ == "__main__":  # pragma: no cover - convenience
    t = time.perf_counter()
    for r in run(quick="--quick" in sys.argv):
        print(r.group, r.name, r.figure(), r.spread_text(), r.target, r.verdict)
    print(f"{time.perf_counter() - t:.1f}s")
