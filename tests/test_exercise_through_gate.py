"""The exercise goes through the real gate and observes it from outside.

Every request of ``flask bailing check --exercise`` passes the same steps as
the hub's: the authorizer decides for real (a refused exercise subject is
the stack check's result), the replay check runs (against a throwaway store
of the run's own), and what the exercise adds for its run (an admission
hook, a signal receiver, the throwaway store, an unsigned flag) is gone
afterwards.
"""

from __future__ import annotations

import functools
from typing import Any

from flask import Flask

from bailing_flask import Bailing, tool
from bailing_flask._pipeline.idempotency import idempotency_of
from bailing_flask._pipeline.registry import registry_of
from bailing_flask._state import state_of
from bailing_flask.exercise import ExerciseReport, run_exercise
from bailing_flask.signals import tool_denied

from .helpers import STRONG_SECRET


def make_app(authorizer: Any = None, **config: Any) -> tuple[Flask, list[str]]:
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://", **config)
    bailing = Bailing(app)
    bailing.subject_loader(lambda subject: {"t1:alice": "alice"}.get(subject))
    bailing.authorizer(authorizer or (lambda call: call.user is not None))
    ran: list[str] = []

    def counted(view: Any) -> Any:
        @functools.wraps(view)
        def decorated(*args: Any, **kwargs: Any) -> Any:
            ran.append(f"decorator {view.__name__}")
            return view(*args, **kwargs)
        return decorated

    @app.get("/orders/<int:order_id>")
    @counted
    @tool(scope="order.read")
    def order_get(order_id: int) -> Any:
        """One order."""
        ran.append("view order_get")
        return {"order": order_id}

    @app.post("/refunds")
    @counted
    @tool(scope="refund.write", allow_unsigned=False)
    def refund_post() -> Any:
        """Refund an order."""
        ran.append("view refund_post")
        return {"refunded": True}

    return app, ran


def one(report: ExerciseReport, target: str, check: str) -> Any:
    return next(r for r in report.results if r.target.startswith(target) and r.check == check)


def test_without_a_subject_the_stack_check_reports_the_authorizers_refusal():
    app, ran = make_app()
    report = run_exercise(app)
    result = one(report, "tool order_get", "stack")
    assert result.status == "warn"
    assert result.summary == ("not exercised: the authorizer refused '__bailing_authz_probe__:nobody' "
                              "(403 forbidden); the view's decorators did not run")
    # asked for every probe and stack request (and by the probe endpoint), never skipped
    assert "authorizer: 6 call(s)" in report.render()
    assert ran == ["decorator order_get"] * 2  # only the two unsigned requests reached the decorators


def test_with_a_subject_the_authorizer_admits_and_the_decorators_run_never_the_write_view():
    app, ran = make_app()
    report = run_exercise(app, subject="t1:alice")
    assert report.ok, report.render()
    assert one(report, "tool refund_post", "stack").status == "pass"
    assert "view refund_post" not in ran and "decorator refund_post" in ran
    assert ran.count("view order_get") == 1  # the read-only view, as the subject


def test_an_authorizer_that_admits_the_probe_subject_runs_nothing_of_the_views_stack():
    app, ran = make_app(authorizer=lambda call: True)
    report = run_exercise(app, probe_only=True)
    assert one(report, "tool refund_post", "probe").status == "fail"
    assert ran == []


def test_the_exercise_passes_with_replays_rejected_and_leaves_the_apps_store_untouched():
    app, ran = make_app(BAILING_REJECT_REPLAYS=True)
    store = idempotency_of(state_of(app)).store()
    report = run_exercise(app, subject="t1:alice")
    assert report.ok, report.render()
    # the stack and subject checks' requests are signed apart: neither is a replay of the other
    assert one(report, "tool order_get", "stack").status == "pass", report.render()
    assert one(report, "tool order_get", "subject").status == "pass", report.render()
    assert ran.count("view order_get") == 1
    assert idempotency_of(state_of(app)).store() is store
    # neither the exercise's signatures nor its calls went to the app's store
    assert (store._entries, store._signatures) == ({}, {})  # type: ignore[attr-defined]


def test_the_exercise_leaves_the_gates_hooks_signals_and_flags_as_they_were():
    app, _ = make_app()
    state = state_of(app)
    hooks = list(state.callbacks.admission_hooks)
    receivers = dict(tool_denied.receivers)
    options = {tool.name: tool.options for tool in registry_of(state).tools}
    run_exercise(app, subject="t1:alice")
    assert state.callbacks.admission_hooks == hooks
    assert dict(tool_denied.receivers) == receivers
    assert {tool.name: tool.options for tool in registry_of(state).tools} == options
    hub_unsigned = app.test_client().get("/orders/1")
    assert (hub_unsigned.status_code, hub_unsigned.headers.get("X-Bailing-Reason")) == (401, "missing_signature")
