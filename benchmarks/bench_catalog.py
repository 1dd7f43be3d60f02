"""catalog: building the tool catalog of a 1000-tool app, and serving it memoised.

The app declares ``N_TOOLS`` tools, each on its own endpoint with its own
pydantic model (as a real app would have one request model per view), in
four rotating kinds:

* ``GET /api/g<i>/items`` with a query model;
* ``POST /api/p<i>/orders`` with a body model (some with a nested model,
  approval conditions, a rate limit, tags, examples);
* ``GET /api/c<i>/orders/<int:order_id>`` with a path converter and a
  query model;
* ``POST /api/u<i>/items/<uuid:item_id>`` with a path converter and a body
  model;

plus one app-wide authorizer. The declarations are clean: building the
catalog finds no warning and no error (checked at set-up), so nothing is
logged or excluded while timing.

* ``build_ms`` (absolute, target < 250 ms): one complete, fresh
  ``catalog_of(state)`` - the registry from ``app.url_map``, the
  document, the lint pass and the served bytes - on a new ``BailingState``
  of the same app (nothing memoised), timed with this thread's CPU clock
  (the build is single-threaded and CPU-bound; time spent descheduled is
  not counted), ``gc`` disabled, median over the rounds;
* ``build_vs_json_dumps`` (no target): the same build / one
  ``json.dumps(document).encode()`` of the finished document (the compact
  form the catalog is served in), interleaved in the same rounds - a
  machine-independent way to say "how many serialisations is one build";
* ``served_get_vs_plain`` (target >= 0.9): req/s of a signed catalog GET
  through the whole app (middleware, signature check, blueprint view,
  memoised catalog) / req/s of a plain route of the same app returning the
  same bytes with the same headers, called on the Flask WSGI app under the
  middleware (no signature, no middleware);
* ``socket_vs_plain`` (target >= 0.95): the same two requests over a real
  socket: one gunicorn ``gthread`` worker (4 threads) on loopback serving
  ``benchmarks._apps:catalog_socket_app()`` - the same 1000-tool app, whose
  plain route is dispatched straight to Flask's own ``wsgi_app`` (no
  package code) - driven by the separate load-generating process over 4
  kept-alive connections; req/s of the signed catalog GET / req/s of the
  plain GET of the same bytes.
"""

from __future__ import annotations

import io
import json
import statistics
import sys
import time
from typing import Any, Literal

from flask import Flask, Response
from pydantic import BaseModel, Field, create_model

from bailing_flask import Bailing, Param, tool
from bailing_flask.testing import catalog_headers
from bailing_flask.wire.middleware import ENVIRON_KEY

from ._harness import Result, compare, quartiles, ratio_result, skipped_result
from ._wsgi import base_environ
from .bench_middleware import make_caller
from bailing_flask._state import BailingState, state_of
from bailing_flask._pipeline.catalog import catalog_of

GROUP = "catalog"
SECRET = "bench-secret-0123456789abcdefghijklmnopqrstuvwxyz"
N_TOOLS = 1000
CATALOG_PATH = "/.well-known/bailing/tools.json"
PLAIN_PATH = "/bench/plain-catalog"
BUILD_TARGET_MS = 250.0
#: A typical app's catalog size, for the second over-a-socket comparison.
SMALL_TOOLS = 20
#: Rough CPU seconds the timed builds may take in a full run (sets the round count).
BUILD_BUDGET_S = 15.0


class LineItem(BaseModel):
    sku: str = Field(description="Stock keeping unit.", min_length=1, max_length=32)
    quantity: int = Field(description="How many.", ge=1, le=1000)


def _query_model(i: int) -> type[BaseModel]:
    """A query model of one of three shapes; every tool gets its own class."""
    shape = i % 3
    if shape == 0:
        fields: dict[str, Any] = {
            "keyword": (str | None, Field(None, description="Text to match.", max_length=40)),
            "page": (int, Field(1, ge=1, le=100, description="Page number.")),
        }
    elif shape == 1:
        fields = {
            "status": (Literal["open", "paid", "shipped", "cancelled"] | None,
                       Field(None, description="Only orders in this state.")),
            "limit": (int, Field(20, ge=1, le=100, description="Page size.")),
            "newest_first": (bool, Field(True, description="Sort order.")),
        }
    else:
        fields = {
            "customer_id": (int, Field(description="Customer.", ge=1, le=10**9)),
            "min_total": (float | None, Field(None, ge=0, le=10**6, description="Lower bound.")),
        }
    return create_model(f"Query{i}", **fields)  # type: ignore[call-overload,no-any-return]


def _body_model(i: int) -> type[BaseModel]:
    """A body model of one of three shapes; every tool gets its own class."""
    shape = i % 3
    if shape == 0:
        fields: dict[str, Any] = {
            "order_id": (int, Field(description="Order.", ge=1, le=10**9)),
            "amount": (float, Field(description="Amount.", gt=0, le=10**6)),
            "note": (str, Field("", description="Free text for the customer.", max_length=200)),
        }
    elif shape == 1:
        fields = {
            "customer_id": (int, Field(description="Customer.", ge=1, le=10**9)),
            "items": (list[LineItem], Field(description="What to order.", min_length=1, max_length=20)),
        }
    else:
        fields = {
            "email": (str, Field(description="Where to send it.", max_length=120)),
            "priority": (Literal["low", "normal", "high"], Field("normal", description="Urgency.")),
        }
    return create_model(f"Body{i}", **fields)  # type: ignore[call-overload,no-any-return]


def _view(i: int) -> Any:
    def view(**kwargs: Any) -> Any:
        return {"ok": True, "tool": i}

    view.__name__ = view.__qualname__ = f"tool_{i:04d}"
    view.__doc__ = f"Tool number {i} of the benchmark app.\n\nA longer description nobody reads."
    return view


def make_app(n_tools: int = N_TOOLS) -> tuple[Flask, Bailing, Any]:
    """The app, its extension and the Flask WSGI app *under* the middleware."""
    app = Flask("bench_catalog")
    app.config.update(
        BAILING_SECRETS=[SECRET],
        BAILING_STORE="memory://",
        BAILING_CATALOG_TITLE="Benchmark shop",
    )
    inner = app.wsgi_app  # Flask's own WSGI app, before Bailing wraps it
    bailing = Bailing(app)
    bailing.authorizer(lambda call: call.subject is not None)
    for i in range(n_tools):
        kind = i % 4
        options: dict[str, Any] = {}
        if i % 10 == 0:
            options["tags"] = ("bench", f"group{i % 7}")
        if kind == 0:
            rule, methods = f"/api/g{i}/items", ["GET"]
            options.update(scope=f"shop{i}.read", query=_query_model(i))
        elif kind == 1:
            rule, methods = f"/api/p{i}/orders", ["POST"]
            options.update(scope=f"shop{i}.write", body=_body_model(i), subject_required=True)
            if i % 3 == 0:
                options.update(approval_when=("amount > 500",), rate_limit="30/min",
                               examples=({"order_id": 1, "amount": 12.5},))
        elif kind == 2:
            rule, methods = f"/api/c{i}/orders/<int:order_id>", ["GET"]
            options.update(scope=f"shop{i}.read", query=_query_model(i),
                           params=(Param("order_id", location="path", description="Order id."),))
        else:
            rule, methods = f"/api/u{i}/items/<uuid:item_id>", ["POST"]
            options.update(scope=f"shop{i}.write", body=_body_model(i), risk="high",
                           params=(Param("item_id", location="path", description="Item id."),))
        app.add_url_rule(rule, f"tool_{i:04d}", tool(**options)(_view(i)), methods=methods)
    return app, bailing, inner


def fresh_build(app: Flask, bailing: Bailing) -> Any:
    """The whole catalog from nothing: registry, document, lint, served bytes."""
    current = state_of(app)
    return catalog_of(BailingState(app, current.config, current.middleware, current.callbacks))


def json_dumps(document: dict[str, Any]) -> bytes:
    """The baseline: one compact serialisation of the finished document."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def _check_catalog(catalog: Any, n_tools: int) -> None:
    problems = [f for f in catalog.findings if f.severity in ("error", "warning")]
    if problems:
        first = problems[0]
        raise AssertionError(
            f"the benchmark app should lint clean; {len(problems)} findings, first: "
            f"{first.path} {first.code}: {first.message}"
        )
    operations = sum(len(item) for item in catalog.served["paths"].values())
    if operations != n_tools or catalog.excluded:
        raise AssertionError(f"expected {n_tools} served operations, got {operations}")


class _Repeat:
    """``fn`` called ``times`` times per call (a baseline far shorter than the build)."""

    def __init__(self, fn: Any, times: int) -> None:
        self.fn = fn
        self.times = times

    def __call__(self) -> None:
        fn = self.fn
        for _ in range(self.times):
            fn()


def _cpu_ms(fn: Any) -> float:
    start = time.thread_time_ns()
    fn()
    return (time.thread_time_ns() - start) / 1e6


def run_build(app: Flask, bailing: Bailing, quick: bool) -> list[Result]:
    def build() -> Any:
        return fresh_build(app, bailing)

    start = time.thread_time_ns()
    reference = build()
    build_ms = (time.thread_time_ns() - start) / 1e6
    _check_catalog(reference, N_TOOLS)
    document = reference.document
    if json_dumps(reference.served) != reference.served_bytes:
        raise AssertionError("served bytes are not the compact JSON of the served document")

    # one build lasts dozens of json.dumps: repeat the baseline to a fifth of a build
    dumps_ms = min(_cpu_ms(lambda: json_dumps(document)) for _ in range(3))
    times = max(1, round(build_ms / max(dumps_ms, 1e-3) / 5))
    # rounds: about BUILD_BUDGET_S of CPU (2 builds + 2 baseline blocks a round), odd, 3-11
    round_s = 2.4 * build_ms / 1000
    rounds = 1 if quick else min(11, max(3, int(BUILD_BUDGET_S / max(round_s, 1e-3)) | 1))
    per_round = compare(
        {"build": build, "json_dumps": _Repeat(lambda: json_dumps(document), times)},
        rounds=rounds,
        loops=1,
        warmup_s=0.0,
        measure="cpu",
        gc_enabled=False,
    )
    stats = dict(per_round.stats)
    build_ns = per_round["build"]
    dumps_ns = [ns / times for ns in per_round["json_dumps"]]
    build_ms_rounds = [ns / 1e6 for ns in build_ns]
    ratios = [b / d for b, d in zip(build_ns, dumps_ns)]

    # for reference only: the same build with the collector on (as on a first request)
    gc_on: list[float] = []
    for _ in range(1 if quick else 3):
        start = time.perf_counter_ns()
        build()
        gc_on.append((time.perf_counter_ns() - start) / 1e6)

    details = {
        "tools": N_TOOLS,
        "served_bytes": len(reference.served_bytes),
        "findings": len(reference.findings),
        "build_ms_rounds": [round(x, 2) for x in build_ms_rounds],
        "json_dumps_ms_median": statistics.median(dumps_ns) / 1e6,
        "json_dumps_per_block": times,
        "build_wall_ms_gc_enabled": [round(x, 2) for x in gc_on],
        "clock": "thread CPU time, gc disabled",
        "blocks": stats,
    }
    return [
        Result(
            group=GROUP,
            name="build_ms",
            metric=(f"median ms (thread CPU, gc off) of one fresh catalog_of(state) of a "
                    f"{N_TOOLS}-tool app: registry + document + lint + served bytes (absolute)"),
            ratio=statistics.median(build_ms_rounds),
            spread=quartiles(build_ms_rounds),
            op="<",
            threshold=BUILD_TARGET_MS,
            rounds=len(build_ms_rounds),
            details=details,
            unit="ms",
        ),
        Result(
            group=GROUP,
            name="build_vs_json_dumps",
            metric="fresh catalog build time / json.dumps(document).encode() time (no target)",
            ratio=statistics.median(ratios),
            spread=quartiles(ratios),
            op="",
            threshold=0.0,
            rounds=len(ratios),
            details={"ratio_min": min(ratios), "ratio_max": max(ratios), "blocks": stats},
        ),
    ]


def serving_cases(app: Flask, inner: Any) -> dict[str, Any]:
    state = state_of(app)
    body = catalog_of(state).served_bytes

    def plain_catalog() -> Response:
        response = Response(body, status=200)
        response.headers["Content-Type"] = "application/json; charset=utf-8"
        response.headers["Cache-Control"] = "private, no-store"
        return response

    app.add_url_rule(PLAIN_PATH, "bench_plain_catalog", plain_catalog)
    catalog_of(state)  # the new rule changes the rule count: rebuild once, outside the timing

    signed = dict(base_environ("GET", CATALOG_PATH))
    for name, value in catalog_headers(SECRET, CATALOG_PATH).items():
        signed["HTTP_" + name.upper().replace("-", "_")] = value
    plain = base_environ("GET", PLAIN_PATH)

    cases: dict[str, Any] = {}
    cases["plain_view"], _ = make_caller(inner, plain, b"", "200")
    cases["signed_catalog"], env = make_caller(app.wsgi_app, signed, b"", "200")
    verified = env.get(ENVIRON_KEY)
    if verified is None or verified.kind != "catalog":
        raise AssertionError("the catalog GET was not verified as a catalog fetch")
    # both answer the same bytes
    def start_response(status: str, headers: list, exc_info: Any = None) -> None:
        return None

    for wsgi, template in ((inner, plain), (app.wsgi_app, signed)):
        environ = dict(template, **{"wsgi.input": io.BytesIO(b"")})
        result = wsgi(environ, start_response)
        payload = b"".join(result)
        getattr(result, "close", lambda: None)()
        if payload != body:
            raise AssertionError(f"{template['PATH_INFO']} did not answer the catalog bytes")
    return cases


def run_socket(quick: bool, n_tools: int = N_TOOLS, name: str = "socket_vs_plain") -> Result:
    """Signed catalog GET vs a plain view of the same bytes, through gunicorn on loopback."""
    from ._apps import CATALOG_PLAIN_PATH
    from ._server import Gunicorn, LoadGen, Side, gunicorn_available, interleaved, rate_ratios, side_summary

    if not gunicorn_available():
        why = "gunicorn is not installed (pip install -e '.[test,bench]')"
        return skipped_result(GROUP, name, "catalog over a socket", ">=", 0.95, why)
    server = Gunicorn("benchmarks._apps:catalog_socket_app()", worker_class="gthread", threads=4,
                      env={"BENCH_SECRET": SECRET, "BENCH_CATALOG_TOOLS": str(n_tools)},
                      label=f"catalog-{n_tools}/gthread")
    gen = LoadGen()
    try:
        server.start()
        signed = {"method": "GET", "path_with_query": CATALOG_PATH, "catalog_secret": SECRET}
        plain = {"method": "GET", "path_with_query": CATALOG_PLAIN_PATH}
        sides = [Side("plain", server, plain), Side("catalog", server, signed)]
        n = interleaved(gen, sides, rounds=5 if quick else 7, block_s=0.5 if quick else 1.0,
                        concurrency=4, warmup_n=50 if n_tools > 100 else 300)
    finally:
        gen.close()
        server.close()
    ratio, spread, ratios = rate_ratios(sides[1], sides[0])
    cat, pl = side_summary(sides[1]), side_summary(sides[0])
    details: dict[str, Any] = {"catalog": cat, "plain": pl, "ratios": ratios, "requests_per_block": n,
                               "tools": n_tools, "body_bytes": cat.get("response_bytes"),
                               "server": "gunicorn gthread, 1 worker, 4 threads, loopback"}
    if sides[0].server_cpu_us and sides[1].server_cpu_us:
        details["server_cpu_ratio"] = round(statistics.median(sides[0].server_cpu_us)
                                            / statistics.median(sides[1].server_cpu_us), 3)
    return Result(
        group=GROUP, name=name,
        metric=(f"req/s signed catalog GET / req/s plain view of the same bytes, {n_tools}-tool "
                "catalog over a socket (gunicorn gthread, loopback, separate load generator)"),
        ratio=ratio, spread=spread, op=">=", threshold=0.95, rounds=len(ratios), details=details,
        notes=[f"{GROUP}/{name}: catalog {cat['req_per_s_median']:.0f} req/s, p50 "
               f"{cat['p50_ms']:.2f} ms, p99 {cat['p99_ms']:.2f} ms; plain {pl['req_per_s_median']:.0f} "
               f"req/s, p50 {pl['p50_ms']:.2f} ms, p99 {pl['p99_ms']:.2f} ms; server CPU ratio "
               f"{details.get('server_cpu_ratio')}"],
    )


def run(quick: bool = False) -> list[Result]:
    started = time.perf_counter()
    app, bailing, inner = make_app()
    print(f"[catalog] app with {N_TOOLS} tools built in {time.perf_counter() - started:.1f}s",
          file=sys.stderr, flush=True)
    results = run_build(app, bailing, quick)

    cases = serving_cases(app, inner)
    per_round = compare(cases, rounds=15 if quick else 61, block_ms=10.0)
    results.append(
        ratio_result(
            per_round,
            group=GROUP,
            name="served_get_vs_plain",
            numerator="plain_view",
            denominator="signed_catalog",
            metric=("req/s signed catalog GET through middleware + blueprint (memoised) / req/s "
                    "plain route of the same app returning the same bytes, no middleware"),
            op=">=",
            threshold=0.9,
            extra={
                "signed_catalog_req_per_s_median": 1e9 / statistics.median(per_round["signed_catalog"]),
                "plain_view_req_per_s_median": 1e9 / statistics.median(per_round["plain_view"]),
                "body_bytes": len(catalog_of(state_of(app)).served_bytes),
            },
        )
    )
    results.append(run_socket(quick))
    results.append(run_socket(quick, SMALL_TOOLS, "socket_vs_plain_small"))
    return results


if __name__ == "__main__":  # pragma: no cover - convenience
    t = time.perf_counter()
    for r in run(quick="--quick" in sys.argv):
        print(r.group, r.name, r.figure(), r.spread_text(), r.target, r.verdict)
        for note in r.notes:
            print("   ", note)
    print(f"{time.perf_counter() - t:.1f}s")
