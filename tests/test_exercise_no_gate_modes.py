"""The gate has one path: the exercise's marker in the environ opens no door.

``flask bailing check --exercise`` marks its own in-process requests in the
WSGI environ, so that it can see what answered them. No client on the
network can set an environ key, but any code in the process can: a WSGI
middleware, a ``before_request`` function, a bug. Whatever the marker says,
the gate runs the same steps for every request (signature, subject loader,
arguments, authorizer, approval, replay check, admission hooks): a subject
the authorizer refuses never reaches the view's decorators or the view, an
unsigned request is refused, and a captured signed call sent again is
refused as a replay.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from flask import Flask

from bailing_flask import Bailing, tool
from bailing_flask._pipeline.gate import EXERCISE_KEY, ExerciseProbe, ExerciseStop
from bailing_flask.testing import HubSimulator

from .helpers import STRONG_SECRET

MODES = ["probe", "stack", "subject", "unsigned"]


class MarkEveryRequest:
    """A WSGI middleware that puts the exercise's marker on every request (the attacker's foothold)."""

    def __init__(self, app: Any, mode: str) -> None:
        self.app = app
        self.mode = mode

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        environ[EXERCISE_KEY] = ExerciseProbe(self.mode)
        return self.app(environ, start_response)


def make_app(mode: str, **config: Any) -> tuple[Flask, list[str]]:
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://", **config)
    bailing = Bailing(app)
    bailing.subject_loader(lambda subject: subject)
    bailing.authorizer(lambda call: call.subject == "t1:alice")
    ran: list[str] = []

    def counted(view: Any) -> Any:
        @functools.wraps(view)
        def decorated(*args: Any, **kwargs: Any) -> Any:
            ran.append("decorator")
            return view(*args, **kwargs)
        return decorated

    @app.get("/orders/<int:order_id>")
    @counted
    @tool(scope="order.read", subject_required=True)
    def order_get(order_id: int) -> Any:
        ran.append("view")
        return {"order": order_id, "owner": "alice"}

    @app.post("/refunds")
    @counted
    @tool(scope="refund.write", subject_required=True)
    def refund_post() -> Any:
        ran.append("view")
        return {"refunded": True}

    app.wsgi_app = MarkEveryRequest(app.wsgi_app, mode)  # type: ignore[method-assign]
    return app, ran


@pytest.mark.parametrize("mode", MODES)
def test_a_refused_subject_with_the_exercise_marker_never_reaches_the_views_stack(mode):
    app, ran = make_app(mode)
    hub = HubSimulator(app, STRONG_SECRET)
    for name, args in (("order_get", {"order_id": 1}), ("refund_post", {})):
        response = hub.call(name, args, subject="t1:mallory")
        assert (response.status, response.headers.get("X-Bailing-Reason")) == (403, "forbidden"), name
    assert ran == []


@pytest.mark.parametrize("mode", MODES)
def test_a_refused_subject_with_the_exercise_marker_is_refused_over_a_real_server(mode, live_server):
    app, ran = make_app(mode)
    hub = HubSimulator(live_server(app), STRONG_SECRET)
    for name, args in (("order_get", {"order_id": 1}), ("refund_post", {})):
        response = hub.call(name, args, subject="t1:mallory")
        assert (response.status, response.headers.get("X-Bailing-Reason")) == (403, "forbidden"), name
    assert ran == []


@pytest.mark.parametrize("mode", MODES)
def test_an_unsigned_request_with_the_exercise_marker_is_refused(mode, live_server):
    app, ran = make_app(mode)
    for client in (app.test_client(),):
        answer = client.get("/orders/1")
        assert (answer.status_code, answer.headers.get("X-Bailing-Reason")) == (401, "missing_signature")
    import http.client
    from urllib.parse import urlsplit

    conn = http.client.HTTPConnection(urlsplit(live_server(app)).netloc, timeout=60)
    conn.request("POST", "/refunds", body=b"{}", headers={"Content-Type": "application/json"})
    answer = conn.getresponse()
    assert (answer.status, answer.getheader("X-Bailing-Reason")) == (401, "missing_signature")
    conn.close()
    assert ran == []


@pytest.mark.parametrize("mode", ["probe", "stack", "unsigned"])
def test_a_captured_call_sent_again_with_the_exercise_marker_is_refused_as_a_replay(mode):
    app, ran = make_app(mode, BAILING_REJECT_REPLAYS=True)
    hub = HubSimulator(app, STRONG_SECRET)
    captured = hub.build_call("order_get", {"order_id": 1}, subject="t1:alice")
    try:
        hub.replay(captured)  # admitted: the marked request stops where the view would run
    except ExerciseStop:
        pass
    assert ran == ["decorator"]
    again = hub.replay(captured)
    assert (again.status, again.headers.get("X-Bailing-Reason")) == (401, "replayed")
    assert ran == ["decorator"]
