"""toolcall: the full signed ``@tool`` call, as users run it, against what they would run instead.

The variants of the same business view (``benchmarks/_apps.py``), each a
Flask app called in-process through its WSGI callable (``app(environ,
start_response)``, what a server calls) with the same hub-signed environ:

* ``bare`` - the view without the package (parses its own JSON body);
* ``handwritten`` - the view behind the integration a team would write by
  hand (HMAC verify + window, subject loader, pydantic, authorizer);
* ``middleware`` - the bare app under ``BailingMiddleware`` alone (the
  signed request goes to an undeclared route: verification only);
* ``verify_floor`` - the bare app under the least a verifying WSGI layer
  must do (read the body, ``Verifier.verify``, hand the body back): the
  floor ``middleware`` is measured against (no target);
* ``tool`` - ``Bailing(app)`` with a subject loader, an authorizer and a
  ``@tool`` view with a pydantic body model (``repeats="safe"``), the
  audit logger off (Python's default: not enabled for ``INFO``);
* POST only, the paths production runs (``benchmarks/_audit.py``):

  - ``tool_audit_logging`` - the same tool with audit records on through
    ``logging``, configured as the operating docs show (a ``FileHandler`` on
    a JSON-lines file, ``%(message)s``, ``propagate = False``);
  - ``tool_audit_sink`` - the same through the package's direct JSON-lines
    sink, the same file place (skipped while the package has none);
  - ``tool_audit_nohandler`` - the logger on for ``INFO`` with no handler
    anywhere (up to a05d73f the record was built, logged and dropped; since
    issue 22 none is built);
  - ``default`` - the default side-effecting POST tool: de-duplication on,
    the ``memory://`` store, every call a new one (fresh job id, signed
    before its block, outside the timing).

The request is built by :class:`bailing_flask.testing.HubSimulator` from the
catalog the tool app serves (the hub's own wire form: a 50-byte
``JSON.stringify`` body, ``URLSearchParams`` query, every hub header),
signed once per block at most (re-signed when older than 120 s). POST (all
nine variants) and GET (the first five) are two separate interleaved
series, timed on this thread's CPU clock.

Counts (``benchmarks/_calls.py``): Python calls, ``LocalProxy`` lookups and
``ensure_sync`` calls of one warmed-up signed POST of each variant (exact,
so they do not depend on the machine's load).

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

import logging
import os
import statistics
import sys
import time
from typing import Any

from bailing_flask.audit import AUDIT_LOGGER
from bailing_flask.testing import HubSimulator
from bailing_flask.wire.middleware import ENVIRON_KEY

from . import _apps
from ._audit import SINK_SETTING, AuditFile, LoggingAudit, audited, check_one_line, direct_sink_setup
from ._calls import CountSummary, count_case
from ._harness import Result, Rounds, compare, median_ci, quartiles, ratio_result, skipped_result
from ._wsgi import FreshCalls, HubSigner, SameRequest, call_once, environ_for

GROUP = "toolcall"
VARIANTS = ("bare", "handwritten", "middleware", "verify_floor", "tool")
#: The POST series adds the audited tools and the default (de-duplicated) tool.
POST_VARIANTS = VARIANTS + ("tool_audit_logging", "tool_audit_sink", "tool_audit_nohandler", "default")
REPLAY_HEADER = "Idempotent-Replayed"
#: Issue 22's targets for the signed POST (the GET rows keep issue 14's).
TARGETS = {"tool_vs_bare": 0.90, "tool_audit_sink_vs_bare": 0.85, "tool_audit_logging_vs_bare": 0.70,
           "tool_vs_handwritten": 1.0, "default_tool_vs_bare": 0.85, "middleware_vs_bare": 0.92,
           "python_calls": 240}
GET_TARGETS = {"tool_vs_bare": 0.80, "tool_vs_handwritten": 1.0, "middleware_vs_bare": 0.92}


class Audit:
    """The audit files and the process-wide logger of one run; :meth:`close` restores both."""

    def __init__(self) -> None:
        self.log_file = AuditFile("logging")
        self.sink_file = AuditFile("sink")
        self.logging = LoggingAudit(self.log_file)
        self.sink_config, self.no_sink = direct_sink_setup(self.sink_file.path)

    def flush_sink(self) -> None:
        """Wait until the direct sink has written what it was given (untimed checks only)."""
        flush = getattr((self.sink_config or {}).get(SINK_SETTING), "flush", None)
        if callable(flush):
            flush()

    def close(self) -> None:
        self.logging.restore()
        sink = (self.sink_config or {}).get(SINK_SETTING)
        close = getattr(sink, "close", None)
        if callable(close):
            close()
        self.log_file.close()
        self.sink_file.close()


def _check_answers(apps: dict[str, Any], env: dict[str, Any], body: bytes, method: str) -> bytes:
    """Every variant answers the same bytes; the package-side ones really verified the request."""
    answers = {}
    for variant, app in apps.items():
        probe = dict(env)
        status, _headers, payload = call_once(app, probe, body)
        if not status.startswith("200"):
            raise AssertionError(f"{variant} {method}: {status} {payload[:300]!r}")
        answers[variant] = payload
        if variant == "verify_floor":
            if probe.get(_apps.FLOOR_KEY) is None:
                raise AssertionError(f"{variant} {method}: the signature was not verified")
        elif variant != "bare" and variant != "handwritten" and probe.get(ENVIRON_KEY) is None:
            raise AssertionError(f"{variant} {method}: the signature was not verified")
    if len(set(answers.values())) != 1:
        raise AssertionError(f"the variants answer different bytes: {answers}")
    return answers["tool"]


def _default_case(app: Any, audit: Audit, answer: bytes) -> Any:
    """The de-duplicated POST tool over ``memory://``: a new signed call each time, checked first."""
    hub = HubSimulator(app, _apps.SECRET, client="bench")
    template = hub.build_call(_apps.IDEM_TOOL, _apps.POST_ARGS, subject=_apps.SUBJECT, job_id="template")
    signer = HubSigner(_apps.SECRET, template, _apps.IDEM_TOOL, _apps.POST_ARGS, _apps.SUBJECT)
    if signer.headers("template", ts=template.headers["X-Bailing-Timestamp"]) != template.headers:
        raise AssertionError("HubSigner does not reproduce HubSimulator.build_call's headers")
    env = signer.environ()
    for attempt in (1, 2):  # the store is engaged: the same call again is answered from it
        status, headers, payload = call_once(app, dict(env), template.body)
        if not status.startswith("200") or payload != answer:
            raise AssertionError(f"default POST tool: {status} {payload[:300]!r}")
        if (headers.get(REPLAY_HEADER) == "true") != (attempt == 2):
            raise AssertionError(f"default POST tool: attempt {attempt} was not de-duplicated")
    return audited(FreshCalls(app, signer, copy=True), audit.logging, "off")


def _check_nohandler(case: Any, audit: Audit) -> None:
    """The logger-on-without-handler case's app audits: with a handler (here, once, untimed), one record."""
    records: list[logging.LogRecord] = []

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    catch = Catch()
    case.prepare(1)
    logger = logging.getLogger(AUDIT_LOGGER)
    logger.addHandler(catch)
    try:
        case()
    finally:
        logger.removeHandler(catch)
        audit.logging.set("off")
    if len(records) != 1:
        raise AssertionError(f"audit on without a handler: one call logged {len(records)} records")


def build(method: str, audit: Audit) -> tuple[dict[str, Any], dict[str, Any]]:
    """The cases for ``method`` ("POST" or "GET") and facts about the request."""
    tool = _apps.tool_app(store="memory://")
    apps: dict[str, Any] = {
        "bare": _apps.bare_app(),
        "handwritten": _apps.handwritten_app(),
        "middleware": _apps.middleware_app(),
        "verify_floor": _apps.verify_floor_app(),
        "tool": tool,
    }
    if method == "POST":
        apps["tool_audit_logging"] = _apps.tool_app(store="memory://")
        apps["tool_audit_nohandler"] = _apps.tool_app(store="memory://")
        if audit.sink_config is not None:
            apps["tool_audit_sink"] = _apps.tool_app(store="memory://", config=audit.sink_config)
    hub = HubSimulator(tool, _apps.SECRET, client="bench")
    name, args = ((_apps.POST_TOOL, _apps.POST_ARGS) if method == "POST"
                  else (_apps.GET_TOOL, _apps.GET_ARGS))

    def make_env() -> dict[str, Any]:
        return environ_for(hub.build_call(name, args, subject=_apps.SUBJECT))

    request = hub.build_call(name, args, subject=_apps.SUBJECT)
    if method == "POST" and len(request.body) != 50:
        raise AssertionError(f"the POST body should be 50 bytes, it is {len(request.body)}")
    audit.logging.set("off")
    answer = _check_answers(apps, environ_for(request), request.body, method)
    modes = {"tool_audit_logging": ("logging", audit.log_file), "tool_audit_sink": ("sink", audit.sink_file),
             "tool_audit_nohandler": ("nohandler", None)}
    cases: dict[str, Any] = {}
    for variant, app in apps.items():
        mode, file = modes.get(variant, ("off", None))
        cases[variant] = audited(SameRequest(app, make_env, request.body), audit.logging, mode, file,
                                 flush=audit.flush_sink if variant == "tool_audit_sink" else None)
    facts: dict[str, Any] = {"path_with_query": request.path_with_query, "body_bytes": len(request.body),
                             "response_bytes": len(answer), "headers": sorted(request.headers)}
    if method == "POST":
        cases["default"] = _default_case(_apps.tool_app(store="memory://"), audit, answer)
        _check_nohandler(cases["tool_audit_nohandler"], audit)
        for variant in ("tool_audit_logging", "tool_audit_sink"):
            if variant in cases:
                facts[f"{variant}_record_fields"] = len(check_one_line(cases[variant]))
        facts["audit_file_dir"] = os.path.dirname(audit.log_file.path)
    audit.logging.set("off")
    return cases, facts


def _us(per_round: Rounds, name: str) -> float:
    return statistics.median(per_round[name]) / 1000.0


def _difference(per_round: Rounds, name: str, minus: str, metric: str, result_name: str) -> Result:
    diffs = [(a - b) / 1000.0 for a, b in zip(per_round[name], per_round[minus])]
    return Result(
        group=GROUP, name=result_name, metric=metric, ratio=statistics.median(diffs),
        spread=quartiles(diffs), op="", threshold=0.0, rounds=len(diffs), unit="us",
        details={"clock": per_round.clock, "blocks": dict(per_round.stats)}, ci=median_ci(diffs),
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


def _ratio(per_round: Rounds, name: str, numerator: str, denominator: str, target: float | None,
           metric: str, extra: dict[str, Any]) -> Result:
    return ratio_result(per_round, group=GROUP, name=name, numerator=numerator, denominator=denominator,
                        op=">=" if target is not None else "", threshold=target or 0.0, extra=extra,
                        metric=metric)


def _series_results(method: str, per_round: Rounds, extra: dict[str, Any]) -> list[Result]:
    """The rows every series has: tool, hand-written and middleware against bare."""
    m = method.lower()
    targets = TARGETS if method == "POST" else GET_TARGETS
    what = ("signed POST, 50-byte JSON body, pydantic body model" if method == "POST"
            else "signed GET, query ?status=open&limit=10, pydantic query model")
    return [
        _ratio(per_round, f"tool_vs_bare_{m}", "bare", "tool", targets["tool_vs_bare"],
               f"calls/s of the full signed @tool call, audit logger off / the same bare Flask view "
               f"({what}; thread CPU)", extra),
        _ratio(per_round, f"tool_vs_handwritten_{m}", "handwritten", "tool", targets["tool_vs_handwritten"],
               "calls/s of the signed @tool call / the same view behind a hand-written integration "
               "(hmac + window + loader + pydantic + authorizer)", extra),
        _ratio(per_round, f"middleware_vs_bare_{m}", "bare", "middleware", targets["middleware_vs_bare"],
               "calls/s of the bare view under BailingMiddleware alone (signed request, undeclared "
               "route) / the bare view", extra),
        _ratio(per_round, f"verify_floor_vs_bare_{m}", "bare", "verify_floor", None,
               "calls/s of the bare view behind the least a verifying WSGI layer does (read the "
               "body, Verifier.verify, hand it back) / the bare view (no target: the ceiling of "
               "middleware_vs_bare on this machine)", extra),
        _difference(per_round, "middleware", "verify_floor",
                    f"CPU µs per call the middleware adds over that floor ({method}; no target)",
                    f"middleware_minus_floor_us_{m}"),
        _ratio(per_round, f"handwritten_vs_bare_{m}", "bare", "handwritten", None,
               "calls/s of the hand-written integration / the bare view (no target: what the "
               "baseline itself costs)", extra),
        _difference(per_round, "tool", "handwritten",
                    f"CPU µs per call the package adds over the hand-written integration ({method}; "
                    "no target)", f"tool_minus_handwritten_us_{m}"),
        _difference(per_round, "tool", "bare",
                    f"CPU µs per call the package adds over the bare view ({method}; no target)",
                    f"tool_minus_bare_us_{m}"),
    ]


def _post_results(per_round: Rounds, extra: dict[str, Any], audit: Audit) -> list[Result]:
    """The POST-only rows: audit on (logging, direct sink, no handler) and the default tool."""
    results = [
        _ratio(per_round, "tool_audit_logging_vs_bare_post", "bare", "tool_audit_logging",
               TARGETS["tool_audit_logging_vs_bare"],
               "calls/s of the signed POST tool with audit records on through logging (a "
               "FileHandler on a JSON-lines file, as the operating docs show) / the bare view", extra),
    ]
    sink_metric = ("calls/s of the signed POST tool with audit records on through the package's direct "
                   "JSON-lines sink (the same file place) / the bare view")
    if "tool_audit_sink" in per_round:
        results.append(_ratio(per_round, "tool_audit_sink_vs_bare_post", "bare", "tool_audit_sink",
                              TARGETS["tool_audit_sink_vs_bare"], sink_metric, extra))
    else:
        results.append(skipped_result(GROUP, "tool_audit_sink_vs_bare_post", sink_metric, ">=",
                                      TARGETS["tool_audit_sink_vs_bare"], audit.no_sink))
    results += [
        _ratio(per_round, "tool_audit_nohandler_vs_bare_post", "bare", "tool_audit_nohandler", None,
               "calls/s of the signed POST tool with the audit logger on for INFO but no handler "
               "anywhere (since issue 22 no record is built then; before, it was built, logged and "
               "dropped) / the bare view (no target)", extra),
        _ratio(per_round, "default_tool_vs_bare_post", "bare", "default", TARGETS["default_tool_vs_bare"],
               "calls/s of the default side-effecting POST tool (de-duplication on, memory:// store, "
               "a new call each time, audit logger off) / the bare view", extra),
        _difference(per_round, "tool_audit_logging", "tool",
                    "CPU µs per call audit records through logging with a file handler add (no target)",
                    "audit_logging_us_post"),
        _difference(per_round, "default", "tool",
                    "CPU µs per call de-duplication in the memory:// store adds (no target)",
                    "dedup_memory_us_post"),
    ]
    return results


def _count_results(cases: dict[str, Any]) -> list[Result]:
    """Python calls, LocalProxy lookups and ensure_sync of one warmed-up signed POST per variant."""
    counts: dict[str, CountSummary] = {v: count_case(cases[v]) for v in POST_VARIANTS if v in cases}

    def row(name: str, variant: str, measure: str, metric: str, target: float | None = None) -> Result:
        summary = counts[variant]
        return Result(
            group=GROUP, name=name, metric=metric, ratio=summary.median(measure),
            spread=summary.range(measure), op="<=" if target is not None else "",
            threshold=target or 0.0, rounds=len(summary.runs), unit="/call",
            details={f"{v}_{measure}": counts[v].median(measure) for v in counts}
            | {"counted_calls": len(summary.runs), "spread_is": "min-max of the counted calls"},
        )

    tool = counts["tool"].last()
    results = [
        row("python_calls_per_signed_call", "tool", "python",
            "Python calls (frames started, generator resumptions included) of one signed POST tool "
            "call through the WSGI callable, audit logger off; exact count", TARGETS["python_calls"]),
        row("python_calls_bare_post", "bare", "python",
            "the same count for the bare view (no target: the floor)"),
        row("python_calls_handwritten_post", "handwritten", "python",
            "the same count for the hand-written integration (no target)"),
        row("localproxy_lookups_per_signed_call", "tool", "proxy_lookups",
            "LocalProxy lookups (werkzeug _get_current_object calls) of one signed POST tool call "
            "(no target)"),
        row("ensure_sync_per_signed_call", "tool", "ensure_sync",
            "Flask.ensure_sync calls of one signed POST tool call (no target)"),
    ]
    results[0].details["by_package"] = dict(tool.by_package)
    results[0].details["bare_by_package"] = dict(counts["bare"].last().by_package)
    results[-2].details["by_caller"] = dict(tool.proxy_by_caller)
    results[-1].details["by_caller"] = dict(tool.ensure_sync_by_caller)
    results[-1].notes.append(
        f"{GROUP}/counts per signed POST (exact): "
        + "; ".join(f"{v}: {c.median('python'):.0f} Python calls ({c.median('resumed'):.0f} resumptions), "
                    f"{c.median('proxy_lookups'):.0f} LocalProxy lookups, "
                    f"{c.median('ensure_sync'):.0f} ensure_sync, {c.median('c_calls'):.0f} C calls"
                    for v, c in counts.items())
        + ". Package Python calls of the tool by package: "
        + ", ".join(f"{p} {n}" for p, n in tool.by_package.most_common())
        + " (python -m benchmarks.profile_toolcall --counts lists them by function)")
    return results


def _note(method: str, per_round: Rounds, variants: tuple[str, ...], load: tuple[Any, Any]) -> str:
    return (f"{GROUP}/{method}: " + ", ".join(f"{v} {_us(per_round, v):.1f} µs" for v in variants
                                              if v in per_round)
            + f" CPU per call (median of {len(per_round['tool'])} rounds, {per_round.stats['loops_per_block']}"
            f" calls per half-block; {per_round.stats['descheduled']} of {per_round.stats['blocks']} blocks "
            f"lost the core; load average {load[0]} -> {load[1]})")


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def run(quick: bool = False) -> list[Result]:
    results: list[Result] = []
    audit = Audit()
    try:
        for method in ("POST", "GET"):
            cases, facts = build(method, audit)
            variants = POST_VARIANTS if method == "POST" else VARIANTS
            load0 = _loadavg()
            per_round = compare(cases, rounds=21 if quick else 101, block_ms=8.0,
                                warmup_s=0.2 if quick else 0.5)
            load = (load0, _loadavg())
            audit.logging.set("off")
            extra = {**facts, "loadavg": list(load),
                     **{f"{v}_us_per_call": round(_us(per_round, v), 2) for v in variants if v in cases}}
            series = _series_results(method, per_round, extra)
            if method == "POST":
                series += _post_results(per_round, extra, audit)
            series[-1].notes.append(_note(method, per_round, variants, load))
            results += series
            if method == "POST":
                results += _count_results(cases)
                audit.logging.set("off")
        results += _run_projection(quick)
    finally:
        audit.close()
    return results


if __name__ == "__main__":  # pragma: no cover - convenience
    t = time.perf_counter()
    for r in run(quick="--quick" in sys.argv):
        print(r.group, r.name, r.figure(), r.spread_text(), r.target, r.verdict)
    print(f"{time.perf_counter() - t:.1f}s")
