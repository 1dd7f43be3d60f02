"""One way into the gate, and nothing of the package on an ordinary route.

The registry puts the gate in front of every tool endpoint once, when it
compiles (on the first request, or earlier when a test, the CLI or the hub
simulator asks for it). After that an ordinary route of the app runs not one
``before_request``, ``after_request`` or ``teardown_request`` function of
the package. What the app does to its routes later is still gated, or fails
closed: a view function put in place of a tool's, a blueprint registered after
the registry compiled, a tool function called from a view that is not its
route.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from flask import Blueprint, Flask, abort

from bailing_flask import Bailing, tool
from bailing_flask._pipeline.registry import registry_of
from bailing_flask._state import state_of
from bailing_flask.testing import HubSimulator, signed_headers

from .helpers import STRONG_SECRET

SECRET = b"order 1 of alice: 3x gold bars"


def make_app() -> tuple[Flask, list[str]]:
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    bailing = Bailing(app)
    bailing.subject_loader(lambda subject: subject)
    bailing.authorizer(lambda call: call.subject == "t1:alice")
    ran: list[str] = []

    @app.get("/health")
    def health() -> Any:
        return "ok"

    @app.get("/orders/<int:order_id>")
    @tool(scope="order.read", subject_required=True)
    def order_get(order_id: int) -> Any:
        ran.append("view")
        return SECRET

    return app, ran


def _package_functions(app: Flask) -> list[str]:
    found = []
    for registry in (app.before_request_funcs, app.after_request_funcs, app.teardown_request_funcs):
        for functions in registry.values():
            found += [f.__qualname__ for f in functions
                      if getattr(f, "__module__", "").startswith("bailing_flask")]
    return found


def test_an_ordinary_route_runs_no_function_of_the_package_after_the_first_request() -> None:
    app, _ = make_app()
    client = app.test_client()
    assert client.get("/health").data == b"ok"  # the first request compiles the tools
    assert _package_functions(app) == []
    assert client.get("/health").data == b"ok"
    assert client.get("/orders/1").status_code == 401  # and the gate stands in front of the tool


def test_the_first_request_compile_runs_the_apps_later_hooks_too() -> None:
    """The one-time hook takes itself out without making Flask skip the next function."""
    app, _ = make_app()
    seen: list[str] = []
    app.before_request(lambda: seen.append("app hook") and None)
    client = app.test_client()
    client.get("/health")
    client.get("/health")
    assert seen == ["app hook", "app hook"]


def test_a_plain_view_put_in_place_of_a_tools_view_after_the_first_request_is_gated() -> None:
    app, ran = make_app()
    client = app.test_client()
    client.get("/health")

    def replacement(order_id: int) -> Any:  # no @tool: the endpoint is still the tool's
        ran.append("replacement")
        return SECRET

    app.view_functions["order_get"] = replacement
    unsigned = client.get("/orders/1")
    assert unsigned.status_code == 401 and SECRET not in unsigned.data
    hub = HubSimulator(app, STRONG_SECRET)
    assert hub.call("order_get", {"order_id": 1}, subject="t1:mallory").status == 403
    assert ran == []
    assert hub.call("order_get", {"order_id": 1}, subject="t1:alice").body == SECRET
    assert ran == ["replacement"]


def test_a_blueprint_registered_after_the_registry_compiled_is_gated() -> None:
    app, _ = make_app()
    registry_of(state_of(app))  # compiled before any request (the CLI, a test, the simulator)
    late = Blueprint("late", __name__)
    ran: list[str] = []

    @late.get("/invoices/<int:invoice_id>")
    @tool(scope="invoice.read", subject_required=True, name="invoice_get")
    def invoice_get(invoice_id: int) -> Any:
        ran.append("view")
        return SECRET

    app.register_blueprint(late)
    client = app.test_client()
    assert client.get("/invoices/1").status_code == 401
    hub = HubSimulator(app, STRONG_SECRET)
    assert hub.call("invoice_get", {"invoice_id": 1}, subject="t1:mallory").status == 403
    assert ran == []
    assert hub.call("invoice_get", {"invoice_id": 1}, subject="t1:alice").body == SECRET


def test_a_signed_call_to_a_view_that_calls_a_tool_function_fails_closed(caplog: Any) -> None:
    """The tool's function only runs behind its own route's gate.

    A legacy route that delegates to the tool is not the tool: even a call
    the hub signed for it (as alice) does not run the tool's view through it.
    """
    app, ran = make_app()

    @app.get("/legacy/orders/<int:order_id>")
    def legacy(order_id: int) -> Any:
        return order_get_view(order_id)

    order_get_view = app.view_functions["order_get"]
    hub = HubSimulator(app, STRONG_SECRET)
    target = "/legacy/orders/1"
    headers = signed_headers(STRONG_SECRET, "GET", target, b"", subject="t1:alice")
    with caplog.at_level(logging.ERROR, logger="bailing_flask"):
        response = hub.send("GET", target, headers)
    assert SECRET not in response.body
    assert response.status == 500
    assert ran == []
    assert "without its gate" in caplog.text


@pytest.mark.parametrize("status", [404, 409])
def test_a_view_that_raised_is_audited_with_the_status_the_app_answered(caplog: Any, status: int) -> None:
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    bailing = Bailing(app)
    bailing.subject_loader(lambda subject: subject)
    bailing.authorizer(lambda call: True)

    @app.errorhandler(LookupError)
    def missing(error: Any) -> Any:
        return {"error": "missing"}, status

    @app.get("/orders/<int:order_id>")
    @tool(scope="order.read")
    def order_get(order_id: int) -> Any:
        if status == 404:
            abort(404)
        raise LookupError("order 1")

    hub = HubSimulator(app, STRONG_SECRET)
    with caplog.at_level(logging.INFO, logger="bailing_flask.audit"):
        assert hub.call("order_get", {"order_id": 1}, subject="t1:alice").status == status
    records = [r for r in caplog.records if r.name == "bailing_flask.audit"]
    assert len(records) == 1
    assert f'"status":{status}' in records[0].getMessage().replace(" ", "")
