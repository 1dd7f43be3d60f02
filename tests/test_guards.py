"""``is_tool_call()`` / ``is_hub_request()``: a guard steps aside with one line, for hub calls only."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Flask, jsonify, request, session

from bailing_flask import Bailing, is_hub_request, is_tool_call, tool
from bailing_flask.testing import HubSimulator, catalog_headers, signed_headers

from .helpers import STRONG_SECRET
from .apps.legacy_app import create_app


def make_app() -> tuple[Flask, list[tuple[str, str, bool, bool]]]:
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://", SECRET_KEY="k")
    seen: list[tuple[str, str, bool, bool]] = []

    @app.before_request
    def first_hook() -> None:
        # registered before Bailing: runs before the registry was ever built
        seen.append((request.method, request.path, is_tool_call(), is_hub_request()))

    bailing = Bailing(app)
    bailing.subject_loader(lambda subject: subject)
    bailing.authorizer(lambda call: call.subject == "t1:alice")
    api = Blueprint("api", __name__, url_prefix="/api")

    @api.before_request
    def require_session() -> Any:
        """The blueprint's own guard."""
        if is_tool_call():
            return None  # not yet authorized: the gate decides
        if "user" not in session:
            return jsonify(error="session required"), 401
        return None

    @api.route("/orders", methods=["GET", "POST"])
    @tool(scope="order.read", methods=["GET"])
    def orders() -> Any:
        """Orders (GET is a tool; POST is the web form's)."""
        return jsonify(method=request.method)

    @api.get("/account")
    def account() -> Any:
        return jsonify(page="account")

    app.register_blueprint(api)
    return app, seen


def test_true_exactly_for_signed_calls_to_declared_tools_from_the_first_hook_of_the_first_request():
    app, seen = make_app()
    client = app.test_client()

    def signed(method: str, path: str, **kw: Any) -> dict[str, str]:
        return signed_headers(STRONG_SECRET, method, path, b"{}" if method != "GET" else b"", **kw)

    client.get("/api/orders", headers=signed("GET", "/api/orders", subject="t1:alice"))
    client.get("/api/orders")
    client.post("/api/orders", data=b"{}", headers=signed("POST", "/api/orders", subject="t1:alice"))
    client.get("/api/account", headers=signed("GET", "/api/account", subject="t1:alice"))
    client.get("/.well-known/bailing/tools.json",
               headers=catalog_headers(STRONG_SECRET, "/.well-known/bailing/tools.json"))
    client.get("/.well-known/bailing/tools.json")
    hub = HubSimulator(app, STRONG_SECRET)
    hub.probe()
    assert seen == [
        ("GET", "/api/orders", True, True),       # the first request of all, registry not built yet
        ("GET", "/api/orders", False, False),     # unsigned
        ("POST", "/api/orders", False, False),    # signed, but POST is not a tool
        ("GET", "/api/account", False, False),    # signed, but not a tool
        ("GET", "/.well-known/bailing/tools.json", False, True),   # the catalog verifies itself
        ("GET", "/.well-known/bailing/tools.json", False, True),   # (and refuses the unsigned one)
        ("GET", "/.well-known/bailing/tools.json", False, True),   # the simulator reads the catalog
        ("POST", "/.well-known/bailing/authz-probe", False, True),
    ]


def test_a_blueprint_guard_steps_aside_and_the_gate_still_decides():
    app, _ = make_app()
    hub = HubSimulator(app, STRONG_SECRET)
    assert hub.call("api_orders", subject="t1:alice").json() == {"method": "GET"}
    refused = hub.call("api_orders", subject="t1:mallory")
    assert refused.status == 403 and refused.json()["reason"] == "forbidden"  # the gate, not the guard
    client = app.test_client()
    assert client.get("/api/orders").status_code == 401  # humans still need a session
    signed = signed_headers(STRONG_SECRET, "GET", "/api/account", subject="t1:alice")
    assert client.get("/api/account", headers=signed).json == {"error": "session required"}
    assert hub.fetch_catalog().status == 200 and hub.probe().status == 200


def test_outside_a_request_it_is_false():
    assert is_tool_call() is False and is_hub_request() is False


def test_a_global_guard_that_does_not_step_aside_answers_the_hub_401():
    hub = HubSimulator(create_app(guard="naive"), STRONG_SECRET)
    assert hub.call("api_me", subject="t1:alice").json() == {"error": "session required"}
    aware = HubSimulator(create_app(guard="aware"), STRONG_SECRET)
    assert aware.call("api_me", subject="t1:alice").status == 200
