"""``check --exercise`` and a limit written on the route: ``@limiter.limit`` above ``@tool``.

The app's limiter is keyed on :func:`bailing_flask.rate_limit_key`, as the
guide says, but a route keeps the limit it had before it was a tool, with
its own ``key_func=get_remote_address``: every hub call comes from the hub's
address, so three hub users making one call each get ``200, 200, 429``.

Such a limit counts only a call the gate admitted (its decorator runs after
the gate), so it is found from the exercise's admitted call as ``--subject``:
the bucket Flask-Limiter counted that call in is compared with the bucket
the same limit keys a second subject's call from the same address on,
which is read, not counted. Real Flask-Limiter, in-memory storage.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask, jsonify
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address

import bailing_flask
from bailing_flask import Bailing, tool
from bailing_flask.exercise import ExerciseReport, ExerciseResult, run_exercise
from bailing_flask.testing import HubSimulator

from .helpers import STRONG_SECRET

REMOTE = "flask_limiter.util.get_remote_address"


def make_app(limit: str = "2/minute", limiter_key: Callable[[], str] = bailing_flask.rate_limit_key,
             **route_limit: Any) -> tuple[Flask, list[str]]:
    """A read tool and a write tool, each under ``@limiter.limit(limit, **route_limit)``."""
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://",
                      RATELIMIT_STORAGE_URI="memory://")
    limiter = Limiter(key_func=limiter_key, app=app)
    bailing = Bailing(app)
    bailing.subject_loader(lambda subject: {"id": subject} if subject.startswith("t") else None)
    bailing.authorizer(lambda call: call.user is not None)
    ran: list[str] = []

    @app.get("/export")
    @limiter.limit(limit, **route_limit)
    @tool(scope="export.read", allow_unsigned=False)
    def export() -> Any:
        """Export the acting user's rows."""
        ran.append("export")
        return jsonify(rows=[])

    @app.post("/refunds")
    @limiter.limit(limit, **route_limit)
    @tool(scope="refund.write", allow_unsigned=False)
    def refund() -> Any:
        """Refund an order."""
        ran.append("refund")
        return jsonify(refunded=True)

    return app, ran


def limiter_results(report: ExerciseReport) -> list[ExerciseResult]:
    return [r for r in report.results if r.target == "limiter" and r.check == "config"]


def failed(report: ExerciseReport) -> list[tuple[str, str]]:
    return [(r.target.split(" (")[0], r.check) for r in report.results if r.status == "fail"]


def user_or_address() -> str:
    """A key of the app's own, as many apps write one: the user, else the address."""
    user = bailing_flask.current_call.user if bailing_flask.is_tool_call() else None
    return str(user["id"]) if user else get_remote_address()


def test_the_hazard_three_hub_users_one_call_each():
    hub = HubSimulator(make_app(key_func=get_remote_address)[0], STRONG_SECRET)
    assert [hub.call("export", subject=s).status for s in ("t1:a", "t2:b", "t3:c")] == [200, 200, 429]


def test_a_route_limit_keyed_on_the_remote_address_is_found_with_one_subject():
    app, ran = make_app(key_func=get_remote_address)
    report = run_exercise(app, subject="t1:alice")
    assert failed(report) == [("limiter", "config")] * 2, report.render()  # the read tool and the write tool
    read, write = limiter_results(report)
    assert read.summary.startswith(
        "the limit '2 per 1 minute' of @limiter.limit('2/minute', key_func=flask_limiter.util.get_remote_address) "
        f"on {__name__}.make_app.<locals>.export counted the admitted call to export as 't1:alice' in the "
        "bucket of another hub user's call from the same address (both keyed '127.0.0.1')")
    assert read.culprit == (f"Flask-Limiter (@limiter.limit('2/minute', key_func={REMOTE}) "
                            f"on {__name__}.make_app.<locals>.export)")
    assert read.fix.startswith("key_func=bailing_flask.rate_limit_key on that @limiter.limit, or drop its "
                               "key_func (the limiter's own is bailing_flask.rate_limit_key)")
    # the write tool's limit is found from the stack call: its view never ran
    assert "admitted call to refund as 't1:alice'" in write.summary
    assert ran == ["export"]


def test_a_429_from_a_route_limit_is_named_as_flask_limiter():
    # as two subjects: alice's stack and subject calls use up the bucket bob's call lands in
    report = run_exercise(make_app(key_func=get_remote_address)[0], subject=["t1:alice", "t2:bob"])
    cache = next(r for r in report.results if r.target.startswith("tool export") and r.check == "cache")
    assert cache.status == "fail" and "HTTP 429" in cache.summary
    assert cache.culprit == (f"Flask-Limiter: the limit '2 per 1 minute' of @limiter.limit('2/minute', "
                             f"key_func={REMOTE}) on {__name__}.make_app.<locals>.export answered 429 "
                             "(RateLimitExceeded): its bucket, keyed '127.0.0.1', is used up")
    assert cache.fix.startswith("it is keyed on the remote address, the hub's for every hub user: "
                                "key_func=bailing_flask.rate_limit_key on that @limiter.limit")
    assert [r.status for r in limiter_results(report)] == ["fail", "fail"]


def test_a_route_limit_on_a_limiter_keyed_on_the_remote_address_names_the_limiter_key():
    report = run_exercise(make_app(limiter_key=get_remote_address)[0], subject="t1:alice")
    result = limiter_results(report)[0]
    assert result.status == "fail"
    assert result.culprit == (f"Flask-Limiter (@limiter.limit('2/minute') on {__name__}.make_app.<locals>.export, "
                              f"with the limiter's key_func={REMOTE})")
    assert result.fix.startswith("Limiter(key_func=bailing_flask.rate_limit_key)")


@pytest.mark.parametrize("route_limit", [
    {},                                                          # the limiter's rate_limit_key
    {"key_func": bailing_flask.rate_limit_key},
    {"exempt_when": lambda: not bailing_flask.is_tool_call()},   # the guide's per-tool limit
    {"key_func": user_or_address},                               # the app's own, on the loaded user
], ids=["limiter-key", "rate_limit_key", "guide-per-tool-limit", "app-user-key"])
@pytest.mark.parametrize("subjects", [["t1:alice"], ["t1:alice", "t2:bob"]], ids=["one", "two"])
def test_a_route_limit_counted_per_subject_passes(route_limit: dict[str, Any], subjects: list[str]):
    report = run_exercise(make_app(**route_limit)[0], subject=subjects)
    assert report.ok, report.render()
    [result] = limiter_results(report)
    assert result.status == "pass" and "a bucket each (2 tool(s) compared)" in result.summary


def test_the_comparison_counts_no_call_of_its_own():
    # the stack call (both tools) and the subject call (the read tool) count, as the hub's calls
    # do, and the exercise sends them with or without a limiter; the second subject's call is
    # refused before the decorator, and the bucket its limit would count it in is only read
    app, _ = make_app(limit="5/minute", key_func=get_remote_address)
    run_exercise(app, subject="t1:alice")
    hub = HubSimulator(app, STRONG_SECRET)
    assert [hub.call("export", subject="t3:carol").status for _ in range(4)] == [200, 200, 200, 429]
    assert [hub.call("refund", subject="t3:carol").status for _ in range(5)] == [200] * 4 + [429]


def test_without_a_subject_the_route_limit_is_not_compared():
    # the authorizer refuses the probe subject: no decorator runs, so there is no admitted call to
    # compare with, and the stack check says how to exercise them
    report = run_exercise(make_app(key_func=get_remote_address)[0])
    assert limiter_results(report) == []
    stack = next(r for r in report.results if r.target.startswith("tool export") and r.check == "stack")
    assert stack.status == "warn" and "pass --subject" in stack.fix
