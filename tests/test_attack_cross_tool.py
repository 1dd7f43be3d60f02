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
from bailing_flask._state import state_of
from bailing_flask._pipeline.registry import registry_of

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


def test_an_alias_endpoint_of_the_same_view_added_after_the_tools_were_compiled_still_runs() -> None:
    """``add_url_rule(..., app.view_functions[...])`` once the gates are in: the alias's gate
    admits the call, the original endpoint's gate in front of the same declaration lets it on."""
    app, ran = make_app()
    registry_of(state_of(app))  # compiled and gated (flask bailing check, a test, an app factory)
    app.add_url_rule("/v2/orders/<int:order_id>", "order_get_v2", app.view_functions["order_get"])
    hub = HubSimulator(app, STRONG_SECRET)
    name = hub.document()["paths"]["/v2/orders/{order_id}"]["get"]["operationId"]
    assert hub.call(name, {"order_id": 1}, subject="t1:alice").body == SECRET_ORDER
    assert hub.call(name, {"order_id": 1}, subject="t1:mallory").status == 403
    assert hub.call("order_get", {"order_id": 1}, subject="t1:alice").body == SECRET_ORDER
    assert ran == ["order_get", "order_get"]


def test_a_method_the_other_tool_leaves_out_does_not_run_its_function_from_inside_a_call() -> None:
    """``methods=`` makes a method of a tool's route a plain route; called as a function from
    another tool's admitted call, it is not that route."""
    app, ran = make_app()

    @app.route("/notes", methods=["GET", "POST"])
    @tool(scope="note.write", methods=["POST"], authorizer=lambda call: call.subject == "t1:alice")
    def note_write() -> Any:
        ran.append("note_write")
        return "noted"

    @app.get("/ping")
    @tool(scope="ping")
    def ping() -> Any:
        return note_write()  # a GET: the method note_write leaves out

    response = HubSimulator(app, STRONG_SECRET).call("ping", subject="t1:mallory")
    assert response.status >= 400 and b"noted" not in response.body
    assert ran == []
