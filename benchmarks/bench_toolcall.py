"""toolcall: the full signed ``@tool`` call, as users run it, against what they would run instead.

Four variants of the same business view (``benchmarks/_apps.py``), each a
Flask app called in-process through its WSGI callable (``app(environ,
start_response)``, what a server calls) with the same prebuilt, hub-signed
environ:

* ``bare`` - the view without the package (parses its own JSON body);
* ``handwritten`` - the view behind the integration a team would write by
  hand (HMAC verify + window, subject loader, pydantic, authorizer);
* ``middleware`` - the bare app under ``BailingMiddleware`` alone (the
  signed request goes to an undeclared route: verification only);
* ``tool`` - ``Bailing(app)`` with a subject loader, an authorizer and a
  ``@tool`` view with a pydantic body model (``deduplicate=False``: the
  store is timed by the ``idempotency`` group).

The request is built by :class:`bailing_flask.testing.HubSimulator` from the
catalog the tool app serves (the hub's own wire form: a 50-byte
``JSON.stringify`` body, ``URLSearchParams`` query, every hub header),
signed once per block at most (re-signed when older than 120 s). POST and
GET are two separate interleaved series of the four variants, timed on this
thread's CPU clock.

A third series times the return-shape projection: the same read tool
(``_apps.rows_app``: 20 rows of 10 columns with a nested customer, as an
ORM-backed search returns them) without anything (``plain``: the full rows
go out), with ``response=`` (``shaped``: a model of 5 columns and 2
customer fields) and trimming the same fields by hand in the view
(``by_hand``: what a team would write instead). ``shaped`` - ``plain`` is
what the declaration costs a tool that trimmed nothing (the smaller answer
pays part of it back); ``shaped`` - ``by_hand`` is the price of having the
package do it (plus validation and the ``truncated`` bookkeeping).
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

from bailing_flask.testing import HubSimulator
from bailing_flask.wire.middleware import ENVIRON_KEY

from . import _apps
from ._harness import Result, Rounds, compare, quartiles, ratio_result
from ._wsgi import SameRequest, call_once, environ_for

GROUP = "toolcall"
VARIANTS = ("bare", "handwritten", "middleware", "tool")


def build(method: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The four cases for ``method`` ("POST" or "GET") and facts about the request."""
    tool = _apps.tool_app(store="memory://")
    apps = {
        "bare": _apps.bare_app(),
        "handwritten": _apps.handwritten_app(),
        "middleware": _apps.middleware_app(),
        "tool": tool,
    }
    hub = HubSimulator(tool, _apps.SECRET, client="bench")
    name, args = ((_apps.POST_TOOL, _apps.POST_ARGS) if method == "POST"
                  else (_apps.GET_TOOL, _apps.GET_ARGS))

    def make_env() -> dict[str, Any]:
        return environ_for(hub.build_call(name, args, subject=_apps.SUBJECT))

    request = hub.build_call(name, args, subject=_apps.SUBJECT)
    if method == "POST" and len(request.body) != 50:
        raise AssertionError(f"the POST body should be 50 bytes, it is {len(request.body)}")
    env = environ_for(request)
    # every variant answers the same bytes to the same signed request, and the
    # package-side variants really verified it
    answers = {}
    for variant, app in apps.items():
        probe = dict(env)
        status, _headers, payload = call_once(app, probe, request.body)
        if not status.startswith("200"):
            raise AssertionError(f"{variant} {method}: {status} {payload[:300]!r}")
        answers[variant] = payload
        if variant in ("middleware", "tool") and probe.get(ENVIRON_KEY) is None:
            raise AssertionError(f"{variant} {method}: the signature was not verified")
    if len(set(answers.values())) != 1:
        raise AssertionError(f"the variants answer different bytes: {answers}")
    cases = {variant: SameRequest(app, make_env, request.body) for variant, app in apps.items()}
    facts = {"path_with_query": request.path_with_query, "body_bytes": len(request.body),
             "response_bytes": len(answers["tool"]), "headers": sorted(request.headers)}
    return cases, facts


def _us(per_round: Rounds, name: str) -> float:
    return statistics.median(per_round[name]) / 1000.0


def _difference(per_round: Rounds, name: str, minus: str, metric: str, result_name: str) -> Result:
    diffs = [(a - b) / 1000.0 for a, b in zip(per_round[name], per_round[minus])]
    return Result(
        group=GROUP, name=result_name, metric=metric, ratio=statistics.median(diffs),
        spread=quartiles(diffs), op="", threshold=0.0, rounds=len(diffs), unit="us",
        details={"clock": per_round.clock, "blocks": dict(per_round.stats)},
    )


def build_projection() -> tuple[dict[str, Any], dict[str, Any]]:
    """The same read tool with (``shaped``) and without (``plain``) ``response=``."""
    apps = {"plain": _apps.rows_app(shaped=False), "shaped": _apps.rows_app(shaped=True),
            "by_hand": _apps.rows_app(shaped=False, by_hand=True)}
    cases: dict[str, Any] = {}
    facts: dict[str, Any] = {"rows": _apps.ROWS}
    for variant, app in apps.items():
        hub = HubSimulator(app, _apps.SECRET, client="bench")

        def make_env(hub: HubSimulator = hub) -> dict[str, Any]:
            return environ_for(hub.build_call(_apps.ROWS_TOOL, {}, subject=_apps.SUBJECT))

        env = make_env()
        status, _headers, payload = call_once(app, dict(env), b"")
        if not status.startswith("200"):
            raise AssertionError(f"{variant}: {status} {payload[:300]!r}")
        facts[f"{variant}_response_bytes"] = len(payload)
        cases[variant] = SameRequest(app, make_env, b"")
        if variant != "plain" and (b"internal_note" in payload or b'"orders"' not in payload):
            raise AssertionError(f"the {variant} variant did not trim its answer")
    return cases, facts


def _run_projection(quick: bool) -> list[Result]:
    cases, facts = build_projection()
    per_round = compare(cases, rounds=21 if quick else 101, block_ms=8.0,
                        warmup_s=0.2 if quick else 0.5)
    extra = {**facts, **{f"{v}_us_per_call": round(_us(per_round, v), 2) for v in cases}}
    results = [
        ratio_result(per_round, group=GROUP, name="shaped_vs_plain_get", numerator="plain",
                     denominator="shaped", op="", threshold=0.0, extra=extra,
                     metric=f"calls/s of a read tool with response= / the same tool without it "
                            f"({_apps.ROWS} rows of 10 columns kept to 5 and a nested customer of 4 "
                            "kept to 2; no target)"),
        _difference(per_round, "shaped", "plain",
                    "CPU µs per call response= adds to a tool that sent its full rows (keep the "
                    "declared fields, validate, serialise the smaller answer; no target)",
                    "response_projection_us_get"),
        _difference(per_round, "shaped", "by_hand",
                    "CPU µs per call response= costs over picking the same fields by hand in the "
                    "view (no target)", "response_vs_by_hand_us_get"),
    ]
    results[-1].notes.append(
        f"{GROUP}/projection: " + ", ".join(
            f"{v} {_us(per_round, v):.1f} µs ({facts[f'{v}_response_bytes']} bytes)" for v in cases)
        + f" CPU per call (median of {len(per_round['plain'])} rounds)")
    return results


def run(quick: bool = False) -> list[Result]:
    results: list[Result] = []
    for method in ("POST", "GET"):
        cases, facts = build(method)
        m = method.lower()
        per_round = compare(cases, rounds=21 if quick else 101, block_ms=8.0,
                            warmup_s=0.2 if quick else 0.5)
        extra = {**facts, **{f"{v}_us_per_call": round(_us(per_round, v), 2) for v in VARIANTS}}
        what = ("signed POST, 50-byte JSON body, pydantic body model" if method == "POST"
                else "signed GET, query ?status=open&limit=10, pydantic query model")
        results += [
            ratio_result(per_round, group=GROUP, name=f"tool_vs_bare_{m}", numerator="bare",
                         denominator="tool", op=">=", threshold=0.80, extra=extra,
                         metric=f"calls/s of the full signed @tool call / the same bare Flask view "
                                f"({what}; thread CPU)"),
            ratio_result(per_round, group=GROUP, name=f"tool_vs_handwritten_{m}",
                         numerator="handwritten", denominator="tool", op=">=", threshold=1.0,
                         extra=extra,
                         metric="calls/s of the signed @tool call / the same view behind a "
                                "hand-written integration (hmac + window + loader + pydantic + "
                                "authorizer)"),
            ratio_result(per_round, group=GROUP, name=f"middleware_vs_bare_{m}", numerator="bare",
                         denominator="middleware", op=">=", threshold=0.92, extra=extra,
                         metric="calls/s of the bare view under BailingMiddleware alone (signed "
                                "request, undeclared route) / the bare view"),
            ratio_result(per_round, group=GROUP, name=f"handwritten_vs_bare_{m}", numerator="bare",
                         denominator="handwritten", op="", threshold=0.0, extra=extra,
                         metric="calls/s of the hand-written integration / the bare view "
                                "(no target: what the baseline itself costs)"),
            _difference(per_round, "tool", "handwritten",
                        f"CPU µs per call the package adds over the hand-written integration "
                        f"({method}; no target)", f"tool_minus_handwritten_us_{m}"),
        ]
        results[-1].notes.append(
            f"{GROUP}/{method}: " + ", ".join(f"{v} {_us(per_round, v):.1f} µs" for v in VARIANTS)
            + f" CPU per call (median of {len(per_round['tool'])} rounds; "
            f"{per_round.stats['descheduled']} of {per_round.stats['blocks']} blocks lost the core)")
    results += _run_projection(quick)
    return results


if __name__ == "__main__":  # pragma: no cover - convenience
    t = time.perf_counter()
    for r in run(quick="--quick" in sys.argv):
        print(r.group, r.name, r.figure(), r.spread_text(), r.target, r.verdict)
    print(f"{time.perf_counter() - t:.1f}s")
