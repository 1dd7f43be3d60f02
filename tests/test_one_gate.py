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

import functools
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


@pytest.mark.parametrize("how", ["bare", "after_a_new_route", "decorated"])
def test_attack_a_tool_view_put_in_place_of_another_tools_runs_under_its_own_declaration(how: str) -> None:
    """A ``@tool`` view written over another tool's endpoint after the compile is governed by
    its own declaration (its authorizer, its scope), never admitted under the old tool's."""
    app, _ = make_app()
    registry_of(state_of(app))  # compiled before (a test, the CLI, the simulator)

    @tool(scope="admin.read", subject_required=True, authorizer=lambda call: False)
    def admin_dump(order_id: int) -> Any:
        return SECRET

    replacement: Any = admin_dump
    if how == "decorated":
        @functools.wraps(admin_dump)
        def logged(*args: Any, **kwargs: Any) -> Any:
            return admin_dump(*args, **kwargs)

        replacement = logged
    if how == "after_a_new_route":
        app.add_url_rule("/ping", "ping", lambda: "pong")
    app.view_functions["order_get"] = replacement
    signed = signed_headers(STRONG_SECRET, "GET", "/orders/1", subject="t1:alice")
    response = app.test_client().get("/orders/1", headers=signed)
    assert response.status_code == 403 and SECRET not in response.data
    assert registry_of(state_of(app)).by_endpoint[("order_get", "GET")].options.scope == "admin.read"


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


def test_an_alias_route_of_a_tools_view_added_after_the_registry_compiled_is_gated() -> None:
    """Flask accepts a second route for an endpoint only with the same view; the gate
    standing there counts as the view it guards, and the alias is gated like the first."""
    app, ran = make_app()
    registry_of(state_of(app))
    view = app.view_functions["order_get"]
    assert view is state_of(app).gates["order_get"]
    app.add_url_rule("/v1/orders/<int:order_id>", "order_get", view.__wrapped__)
    client = app.test_client()
    assert client.get("/v1/orders/1").status_code == 401
    assert client.get("/orders/1").status_code == 401
    signed = signed_headers(STRONG_SECRET, "GET", "/v1/orders/1", subject="t1:alice")
    assert client.get("/v1/orders/1", headers=signed).data == SECRET
    assert ran == ["view"]


def test_an_alias_route_of_a_bound_method_tool_added_after_the_compile_is_accepted() -> None:
    """Flask compares views with ``==``; a bound method taken twice is two equal objects."""
    app, _ = make_app()

    class Reports:
        @tool(scope="report.read")
        def report(self) -> Any:
            return "report"

    reports = Reports()
    app.add_url_rule("/report", "report", reports.report)
    registry_of(state_of(app))
    app.add_url_rule("/v1/report", "report", reports.report)
    client = app.test_client()
    assert client.get("/v1/report").status_code == 401
    signed = signed_headers(STRONG_SECRET, "GET", "/v1/report", subject="t1:alice")
    assert client.get("/v1/report", headers=signed).data == b"report"


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


@pytest.mark.parametrize(("declared", "route", "caller"), [
    ("POST", "POST", "GET"),  # a write tool that names its method, called from a GET route
    ("GET", "GET", "HEAD"),  # a read tool, reached with HEAD through an ordinary GET route
    ("GET", "GET", "POST"),  # a read tool, called from an ordinary POST route
], ids=["write tool from a GET route", "read tool by HEAD", "read tool from a POST route"])
def test_attack_a_tool_naming_its_methods_runs_only_behind_its_own_route(
    declared: str, route: str, caller: str
) -> None:
    """``@tool(methods=[...])`` leaves the other methods of the tool's own route to the app; it
    opens nothing anywhere else. An ordinary route that calls the tool's function with another
    method fails closed, as it does without ``methods=``, and the view never runs unsigned."""
    app, ran = make_app()

    @app.route("/refunds", methods=[route], endpoint="refund_create")
    @tool(scope="refund.write", methods=[declared], name="refund_create")
    def refund_create() -> Any:
        ran.append("refund issued")
        return SECRET

    @app.route("/legacy", methods=["GET", "POST"])
    def legacy() -> Any:
        return refund_create()

    response = app.test_client().open("/legacy", method=caller)
    assert response.status_code == 500
    assert response.headers["X-Bailing-Reason"] == "tool_not_registered"
    assert SECRET not in response.data and ran == []
    assert app.test_client().open("/refunds", method=route).status_code == 401


def test_the_methods_a_tool_leaves_out_of_its_own_route_are_plain_routes() -> None:
    """Left out with ``methods=`` or ``tool_defaults(enabled=False)``, or a class view's handler
    without ``@tool``: the app serves it as it would without the package (HEAD with GET)."""
    from flask.views import MethodView

    from bailing_flask import tool_defaults

    app, ran = make_app()

    @app.route("/fn", methods=["GET", "POST"])
    @tool(scope="fn.write", methods=["POST"], name="fn_create")
    def fn() -> Any:
        return "fn"

    class Orders(MethodView):
        @tool(scope="order.read", name="order_list")
        def get(self) -> Any:
            ran.append("list")
            return SECRET

        def post(self) -> Any:
            return "created by a form", 201

    app.add_url_rule("/orders", view_func=Orders.as_view("orders"))
    legacy = tool_defaults(Blueprint("legacy", __name__), enabled=False)

    @legacy.get("/legacy")
    @tool(scope="x.read")
    def old() -> Any:
        return "legacy"

    only_get = tool_defaults(Blueprint("only_get", __name__), methods=["GET"])

    @only_get.route("/both", methods=["GET", "POST"])
    @tool(scope="y.read")
    def both() -> Any:
        return "both"

    app.register_blueprint(legacy)
    app.register_blueprint(only_get)
    client = app.test_client()
    assert (client.get("/fn").status_code, client.get("/fn").data) == (200, b"fn")
    assert client.head("/fn").status_code == 200
    assert client.post("/fn").status_code == 401
    assert (client.post("/orders").status_code, client.post("/orders").data) == (201, b"created by a form")
    assert client.get("/orders").status_code == 401 and ran == []
    assert (client.get("/legacy").status_code, client.get("/legacy").data) == (200, b"legacy")
    assert (client.post("/both").status_code, client.post("/both").data) == (200, b"both")
    assert client.get("/both").status_code == 401


def test_a_plain_view_merged_into_view_functions_with_or_is_gated() -> None:
    """``app.view_functions |= {...}`` (dict's own update, past ``__setitem__``) gates like ``[]=``."""
    app, ran = make_app()
    client = app.test_client()
    client.get("/health")

    def replacement(order_id: int) -> Any:
        ran.append("replacement")
        return SECRET

    app.view_functions |= {"order_get": replacement}
    unsigned = client.get("/orders/1")
    assert unsigned.status_code == 401 and SECRET not in unsigned.data and ran == []
    assert isinstance(app.view_functions, dict) and app.view_functions["order_get"] is not replacement
    hub = HubSimulator(app, STRONG_SECRET)
    assert hub.call("order_get", {"order_id": 1}, subject="t1:alice").body == SECRET


def test_attack_a_view_being_replaced_is_never_reachable_ungated(monkeypatch: pytest.MonkeyPatch) -> None:
    """While the gate for a replacing view is built, another thread dispatching to the
    endpoint still finds a gate there (the old one), never the bare new view."""
    import bailing_flask._pipeline.gate as gate_module

    app, _ = make_app()
    app.test_client().get("/health")
    seen_while_building: list[Any] = []
    build = gate_module._gated

    def watching_build(*args: Any) -> Any:
        seen_while_building.append(app.view_functions["order_get"])
        return build(*args)

    monkeypatch.setattr(gate_module, "_gated", watching_build)

    def replacement(order_id: int) -> Any:
        return SECRET

    app.view_functions["order_get"] = replacement
    gates = state_of(app).gates
    assert seen_while_building and replacement not in seen_while_building
    assert app.view_functions["order_get"] is gates["order_get"]
    assert app.view_functions["order_get"].__wrapped__ is replacement


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
