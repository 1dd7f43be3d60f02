"""ordinary: what an app's own routes pay for the package being installed.

Most requests an app that adopts the package serves are not tool calls: its
pages, its front end's JSON, health checks. They should pay nothing. One
ordinary view (``benchmarks/_apps.py``: ``GET /account/orders?page=2``, reads
the query, answers a small JSON object), called in-process through the WSGI
callable with an unsigned request (no hub header: a browser's or a front
end's), two ways:

* ``plain`` - the app without the package (``_apps.bare_app()``: the same
  business views, plain Flask);
* ``bailing`` - the app as users run it: ``Bailing(app)`` with its
  middleware, its blueprints (catalog, probe, callbacks), the subject loader,
  the authorizer and three ``@tool`` routes beside the ordinary one
  (``_apps.tool_app()``).

* ``route_vs_plain_flask`` (target >= 0.98): calls/s ``bailing`` ÷ ``plain``,
  thread CPU, 201 rounds (``--quick``: 41) of ~2 ms half-blocks: a 2 %
  target needs a tight spread;
* ``route_added_us`` (no target): CPU µs per request the package adds;
* ``route_python_calls`` (no target): Python calls per request of both,
  with the ``LocalProxy`` lookups and ``ensure_sync`` calls in the note (see
  ``benchmarks/_calls.py``) - the per-request hooks show up here.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from typing import Any

from bailing_flask.wire.middleware import ENVIRON_KEY

from . import _apps
from ._calls import count_case
from ._harness import Result, compare, median_ci, quartiles, ratio_result
from ._wsgi import SameRequest, base_environ, call_once

GROUP = "ordinary"


def build() -> tuple[dict[str, Any], dict[str, Any]]:
    """The two cases, checked to answer the same bytes, unsigned, not as a tool call."""
    env = base_environ("GET", _apps.ORDINARY_PATH, _apps.ORDINARY_QUERY)
    env["HTTP_ACCEPT"] = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
    env["HTTP_COOKIE"] = "session=eyJ1c2VyIjoxNzl9.Zk4Q2w.abcdefghijklmnopqrstuvwxyz0"
    apps = {"plain": _apps.bare_app(), "bailing": _apps.tool_app(store="memory://")}
    answers = {}
    for variant, app in apps.items():
        probe = dict(env)
        status, _headers, payload = call_once(app, probe, b"")
        if not status.startswith("200"):
            raise AssertionError(f"{variant}: {status} {payload[:300]!r}")
        if probe.get(ENVIRON_KEY) is not None:
            raise AssertionError(f"{variant}: an unsigned request was treated as a tool call")
        answers[variant] = payload
    if len(set(answers.values())) != 1:
        raise AssertionError(f"the two apps answer different bytes: {answers}")
    cases = {variant: SameRequest(app, lambda: dict(env), b"") for variant, app in apps.items()}
    return cases, {"path_with_query": f"{_apps.ORDINARY_PATH}?{_apps.ORDINARY_QUERY}",
                   "response_bytes": len(answers["plain"])}


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def run(quick: bool = False) -> list[Result]:
    cases, facts = build()
    load0 = _loadavg()
    per_round = compare(cases, rounds=41 if quick else 201, block_ms=4.0, warmup_s=0.2 if quick else 0.5)
    load = [load0, _loadavg()]
    us = {v: statistics.median(per_round[v]) / 1000 for v in cases}
    extra = {**facts, "loadavg": load, **{f"{v}_us_per_call": round(us[v], 2) for v in cases}}
    added = [(b - p) / 1000 for b, p in zip(per_round["bailing"], per_round["plain"])]
    counts = {v: count_case(case) for v, case in cases.items()}
    results = [
        ratio_result(per_round, group=GROUP, name="route_vs_plain_flask", numerator="plain",
                     denominator="bailing", op=">=", threshold=0.98, extra=extra,
                     metric="calls/s of an ordinary (non-tool) route of an app with Bailing(app), "
                            "unsigned GET / the same route in plain Flask (thread CPU)"),
        Result(group=GROUP, name="route_added_us", unit="us", ratio=statistics.median(added),
               spread=quartiles(added), op="", threshold=0.0, rounds=len(added), ci=median_ci(added),
               metric="CPU µs per request the package adds to an ordinary route (no target)",
               details={"clock": per_round.clock, "blocks": dict(per_round.stats)}),
        Result(group=GROUP, name="route_python_calls", unit="/call", ratio=counts["bailing"].median("python"),
               spread=counts["bailing"].range("python"), op="", threshold=0.0,
               rounds=len(counts["bailing"].runs),
               metric="Python calls per request of the ordinary route with Bailing(app) (no target; "
                      "plain Flask in the note)",
               details={"plain_python_calls": counts["plain"].median("python"),
                        "by_function_minus_plain": dict(
                            counts["bailing"].last().by_function - counts["plain"].last().by_function)}),
    ]
    results[-1].notes.append(
        f"{GROUP}: plain {us['plain']:.1f} µs, bailing {us['bailing']:.1f} µs CPU per request (median of "
        f"{len(added)} rounds; {per_round.stats['descheduled']} of {per_round.stats['blocks']} blocks lost the "
        f"core; load average {load[0]} -> {load[1]}); per request: "
        + ", ".join(f"{v} {c.median('python'):.0f} Python calls, {c.median('proxy_lookups'):.0f} LocalProxy "
                    f"lookups, {c.median('ensure_sync'):.0f} ensure_sync" for v, c in counts.items()))
    return results


if __name__ == "__main__":  # pragma: no cover - convenience
    t = time.perf_counter()
    for r in run(quick="--quick" in sys.argv):
        print(r.group, r.name, r.figure(), r.spread_text(), r.target, r.verdict)
        for note in r.notes:
            print("   ", note)
    print(f"{time.perf_counter() - t:.1f}s")
