"""middleware: requests/second of a minimal Flask view with and without
``BailingMiddleware``, called in-process through the WSGI interface.

No test client and no sockets: each request is a fresh environ dict (a
shallow copy of a prebuilt template plus a fresh ``BytesIO`` body) handed to
the WSGI callable, and the response iterable is consumed and closed, as a
server would. The same Flask ``wsgi_app`` serves both sides; only the
``BailingMiddleware`` layer differs, so every ratio isolates its cost.

* ``signed_post``: POST with a small JSON body, signed, through the
  middleware / the same signed POST served by the same app without the
  middleware (target >= 0.85);
* ``signed_get``: the same for a signed GET with a query string (no body)
  (target >= 0.85);
* ``unsigned_passthrough``: middleware installed, the request carries no
  ``X-Bailing-Signature`` / no middleware (target >= 0.98).
"""

from __future__ import annotations

import io
import sys
import time
from typing import Any

from flask import Flask

from bailing_flask.testing import signed_headers
from bailing_flask.wsgi import ENVIRON_KEY, BailingMiddleware

from ._harness import Result, compare, ratio_result

GROUP = "middleware"
SECRET = "bench-secret-0123456789abcdefghijklmnopqrstuvwxyz"
POST_PATH = "/tools/orders"
GET_PATH = "/tools/orders/42"
GET_QUERY = "fields=id%2Cstatus&limit=10"
POST_BODY = b'{"sku":"A-1001","quantity":2,"note":"gift wrap"}'
SUBJECT = "179:1"
JOB_ID = "8d7c2f3e-5b1a-4c9d-9e8f-0a1b2c3d4e5f"


def make_app() -> Flask:
    app = Flask("bench_middleware")

    @app.post(POST_PATH)
    def create_order() -> Any:
        return {"ok": True, "id": 42}

    @app.get(GET_PATH)
    def get_order() -> Any:
        return {"ok": True, "id": 42}

    return app


def base_environ(method: str, path: str, query: str = "", body: bytes = b"") -> dict[str, Any]:
    """What a typical WSGI server (gunicorn / werkzeug) puts in the environ."""
    target = path + ("?" + query if query else "")
    env: dict[str, Any] = {
        "REQUEST_METHOD": method,
        "SCRIPT_NAME": "",
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "RAW_URI": target,
        "REQUEST_URI": target,
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "REMOTE_PORT": "50123",
        "HTTP_HOST": "127.0.0.1:8000",
        "HTTP_USER_AGENT": "node",
        "HTTP_ACCEPT": "application/json",
        "HTTP_CONNECTION": "keep-alive",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        "wsgi.input_terminated": False,
    }
    if body:
        env["CONTENT_TYPE"] = "application/json"
        env["CONTENT_LENGTH"] = str(len(body))
    return env


def with_signature(env: dict[str, Any], method: str, target: str, body: bytes) -> dict[str, Any]:
    headers = signed_headers(
        SECRET, method, target, body, subject=SUBJECT, job_id=JOB_ID, client="acme"
    )
    signed = dict(env)
    for name, value in headers.items():
        signed["HTTP_" + name.upper().replace("-", "_")] = value
    return signed


class _Sink:
    """``start_response`` that only records the status."""

    __slots__ = ("status",)

    def __init__(self) -> None:
        self.status = ""

    def __call__(self, status: str, headers: list, exc_info: Any = None) -> Any:
        self.status = status
        return None


def make_caller(app: Any, template: dict[str, Any], body: bytes, expect: str) -> Any:
    sink = _Sink()
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

    # Check once that the request does what we think it does.
    env = template.copy()
    env["wsgi.input"] = BytesIO(body)
    result = app(env, sink)
    payload = b"".join(result)
    if hasattr(result, "close"):
        result.close()
    if not sink.status.startswith(expect):
        raise AssertionError(f"unexpected status {sink.status!r}: {payload[:200]!r}")
    return call, env


def build_cases() -> dict[str, Any]:
    app = make_app()
    plain = app.wsgi_app  # the Flask application without any middleware
    guarded = BailingMiddleware(plain, SECRET, catalog_path=None)

    post_env = base_environ("POST", POST_PATH, body=POST_BODY)
    get_env = base_environ("GET", GET_PATH, GET_QUERY)
    signed_post_env = with_signature(post_env, "POST", POST_PATH, POST_BODY)
    signed_get_env = with_signature(get_env, "GET", f"{GET_PATH}?{GET_QUERY}", b"")

    cases: dict[str, Any] = {}
    # the baseline serves the very same request (signature headers included,
    # nothing verifies them): the ratio isolates the middleware's own cost
    cases["plain_post"], _ = make_caller(plain, signed_post_env, POST_BODY, "200")
    cases["mw_signed_post"], env = make_caller(guarded, signed_post_env, POST_BODY, "200")
    if env.get(ENVIRON_KEY) is None:
        raise AssertionError("signed POST was not verified")
    cases["mw_unsigned_post"], env = make_caller(guarded, post_env, POST_BODY, "200")
    if env.get(ENVIRON_KEY, "missing") is not None:
        raise AssertionError("unsigned POST did not pass through")
    cases["plain_get"], _ = make_caller(plain, signed_get_env, b"", "200")
    cases["mw_signed_get"], env = make_caller(guarded, signed_get_env, b"", "200")
    if env.get(ENVIRON_KEY) is None:
        raise AssertionError("signed GET was not verified")
    return cases


def _rps_extra(per_round: dict[str, list[float]], *names: str) -> dict[str, Any]:
    import statistics

    return {f"{n}_req_per_s_median": 1e9 / statistics.median(per_round[n]) for n in names}


def run(quick: bool = False) -> list[Result]:
    cases = build_cases()
    rounds_main = 15 if quick else 101
    rounds_pass = 31 if quick else 201
    results: list[Result] = []

    # signed POST / signed GET vs no middleware
    per_round = compare(
        {k: cases[k] for k in ("plain_post", "mw_signed_post", "plain_get", "mw_signed_get")},
        rounds=rounds_main,
        block_ms=4.0,
    )
    results.append(
        ratio_result(
            per_round,
            group=GROUP,
            name="signed_post_vs_plain",
            numerator="plain_post",
            denominator="mw_signed_post",
            metric="req/s signed POST through middleware / req/s same request, no middleware",
            op=">=",
            threshold=0.85,
            extra={**_rps_extra(per_round, "plain_post", "mw_signed_post"),
                   "body_bytes": len(POST_BODY)},
        )
    )
    results.append(
        ratio_result(
            per_round,
            group=GROUP,
            name="signed_get_vs_plain",
            numerator="plain_get",
            denominator="mw_signed_get",
            metric="req/s signed GET through middleware / req/s same GET, no middleware",
            op=">=",
            threshold=0.85,
            extra=_rps_extra(per_round, "plain_get", "mw_signed_get"),
        )
    )

    # unsigned pass-through: a tight A/B pair on its own, more rounds (2 % target)
    per_round = compare(
        {k: cases[k] for k in ("plain_post", "mw_unsigned_post")},
        rounds=rounds_pass,
        block_ms=4.0,
    )
    results.append(
        ratio_result(
            per_round,
            group=GROUP,
            name="unsigned_passthrough_vs_plain",
            numerator="plain_post",
            denominator="mw_unsigned_post",
            metric="req/s unsigned POST, middleware installed / req/s no middleware",
            op=">=",
            threshold=0.98,
            extra=_rps_extra(per_round, "plain_post", "mw_unsigned_post"),
        )
    )
    return results


if __name__ == "__main__":  # pragma: no cover - convenience
    t = time.perf_counter()
    for r in run():
        print(r)
    print(f"{time.perf_counter() - t:.1f}s")
