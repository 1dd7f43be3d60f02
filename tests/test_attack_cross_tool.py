"""An admitted call admits one tool, not every tool function its view (or an error handler) reaches.

The ``@tool`` wrapper and the gate in front of an endpoint took "the gate
admitted *a* call in this request" (``ADMITTED_KEY`` in the environ) for "the
gate admitted a call to *me*". So a tool function called from inside another
admitted tool's view, or rendered by an error handler during one, ran without
its own authorizer; and since an unsigned request to an ``allow_unsigned`` tool
is marked admitted too, a 404 handler that renders a protected tool served its
data to anyone.
"""

from __future__ import annotations

from typing import Any

from flask import Flask, abort

from bailing_flask import Bailing, tool
from bailing_flask.testing import HubSimulator

from .helpers import STRONG_SECRET

SECRET_ORDER = b"order 1 of alice: 3x gold bars"


def make_app() -> tuple[Flask, list[str]]:
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    bailing = Bailing(app)
    bailing.subject_loader(lambda subject: subject)
    bailing.authorizer(lambda call: True)  # the app's: any signed subject may ask for a status
    ran: list[str] = []

    @app.get("/orders/<int:order_id>")
    @tool(scope="order.read", subject_required=True, authorizer=lambda call: call.subject == "t1:alice")
    def order_get(order_id: int) -> Any:
        ran.append("order_get")
        return SECRET_ORDER

    @app.get("/orders/<int:order_id>/status")
    @tool(scope="order.status")
    def order_status(order_id: int) -> Any:
        if order_id == 1:
            return order_get(order_id)  # reuses the other tool's function
        abort(404)

    @app.get("/hello")
    @tool(scope="hello", allow_unsigned=True)  # shared with humans
    def hello() -> Any:
        abort(404)

    @app.errorhandler(404)
    def not_found(error: Any) -> Any:
        return order_get(1)

    return app, ran


def test_a_tool_function_called_from_another_admitted_tool_does_not_skip_its_authorizer() -> None:
    app, ran = make_app()
    hub = HubSimulator(app, STRONG_SECRET)
    assert hub.call("order_get", {"order_id": 1}, subject="t1:mallory").status == 403
    response = hub.call("order_status", {"order_id": 1}, subject="t1:mallory")
    assert SECRET_ORDER not in response.body
    assert response.status >= 400
    assert ran == []


def test_an_error_handler_of_an_unsigned_allow_unsigned_call_does_not_render_a_protected_tool() -> None:
    app, ran = make_app()
    response = app.test_client().get("/hello")
    assert SECRET_ORDER not in response.data
    assert response.status_code >= 400
    assert ran == []


def test_the_admitted_tool_itself_still_runs() -> None:
    app, ran = make_app()
    hub = HubSimulator(app, STRONG_SECRET)
    assert hub.call("order_get", {"order_id": 1}, subject="t1:alice").body == SECRET_ORDER
    assert ran == ["order_get"]
