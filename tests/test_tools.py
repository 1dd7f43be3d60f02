"""Declaring tools: options are validated at decoration time, defaults layer."""

from __future__ import annotations

import pytest
from flask import Blueprint, Flask
from flask.views import MethodView
from pydantic import BaseModel

from bailing_flask import Bailing, Param, ToolDeclarationError, tool, tool_defaults
from bailing_flask.declare import ApprovalCondition, RateLimit, get_declaration

from .helpers import STRONG_SECRET
from bailing_flask._state import state_of
from bailing_flask._pipeline.registry import registry_of


def make_app() -> tuple[Flask, Bailing]:
    app = Flask(__name__)
    app.config["BAILING_SECRETS"] = STRONG_SECRET
    bailing = Bailing(app)
    bailing.authorizer(lambda call: True)
    return app, bailing


def registry(app: Flask):
    return registry_of(state_of(app))


def test_invalid_option_names_the_view_and_the_field():
    with pytest.raises(ToolDeclarationError) as info:
        @tool(scope="x", risk="extreme")
        def refund_execute():
            pass
    message = str(info.value)
    assert "refund_execute" in message
    assert "risk" in message


def test_unknown_option_is_refused():
    with pytest.raises(ToolDeclarationError) as info:
        @tool(scope="x", subjet_required=True)
        def view():
            pass
    assert "subjet_required" in str(info.value)


@pytest.mark.parametrize(
    "options",
    [
        {"name": "order.get"},
        {"name": "order-get"},
        {"name": "2fa_reset"},
        {"name": "x" * 65},
        {"scope": "订单.read"},
        {"scope": "  "},
        {"timeout_ms": 0},
        {"timeout_ms": 600001},
        {"rate_limit": "30/fortnight"},
        {"rate_limit": {"count": 0, "window": "1m"}},
        {"approval_when": ["amount >"]},
        {"approval_when": [{"param": "amount", "op": "between", "value": 1}]},
        {"approval_prompt": "x" * 201},
        {"examples": [{"a": 1}] * 6},
        {"context": ["   "]},
        {"extensions": {"x-other": 1}},
        {"methods": ["FETCH"]},
        {"outcome": {"result": "ok", "side_effect": "explode"}},
        {"repeats": "yes"},
        {"repeats": "SAFE"},
        {"repeats": True},
    ],
)
def test_each_invalid_value_is_refused(options):
    with pytest.raises(ToolDeclarationError):
        tool(**options)(lambda: None)


def test_rate_limit_forms():
    assert RateLimit.model_validate("30/min").model_dump() == {"count": 30, "window": "1m"}
    assert RateLimit.model_validate("5/s").window == "1s"
    assert RateLimit.model_validate("100 / hour").window == "1h"
    assert RateLimit.model_validate("1000/1d").window == "1d"
    assert RateLimit.model_validate({"count": 2, "window": "1h"}).count == 2


def test_approval_condition_forms():
    assert ApprovalCondition.model_validate("amount > 500").to_capability() == {
        "param": "amount", "op": ">", "value": 500}
    assert ApprovalCondition.model_validate('currency in ["USD", "EUR"]').to_capability() == {
        "param": "currency", "op": "in", "value": ["USD", "EUR"]}
    assert ApprovalCondition.model_validate("note contains urgent").to_capability() == {
        "param": "note", "op": "contains", "value": "urgent"}
    assert ApprovalCondition.model_validate("coupon exists").to_capability() == {
        "param": "coupon", "op": "exists"}
    assert ApprovalCondition.model_validate(
        {"param": "x", "op": "==", "value": None}).to_capability() == {
        "param": "x", "op": "==", "value": None}


def test_only_declared_routes_are_tools():
    app, _ = make_app()

    @app.get("/declared")
    @tool(scope="a.read")
    def declared():
        return "x"

    @app.get("/legacy")
    def legacy():
        return "x"

    names = [t.name for t in registry(app).tools]
    assert names == ["declared"]


def test_blueprint_and_class_defaults_layer_under_tool_options():
    app, _ = make_app()
    bp = Blueprint("crm", __name__, url_prefix="/crm")
    tool_defaults(bp, scope_prefix="crm.", subject_required=True, risk="medium")

    @bp.get("/customers")
    @tool(scope="customer.read", risk="low")
    def customer_search():
        return "x"

    @tool_defaults(sensitive=True, subject_required=False)
    class Notes(MethodView):
        @tool(scope="note.read")
        def get(self):
            return "x"

        def post(self):  # not declared: not a tool
            return "x"

    bp.add_url_rule("/notes", view_func=Notes.as_view("notes"))
    app.register_blueprint(bp)
    tools = {t.name: t for t in registry(app).tools}
    assert set(tools) == {"crm_customer_search", "crm_notes"}
    search = tools["crm_customer_search"]
    assert (search.scope, search.risk, search.subject_required) == ("crm.customer.read", "low", True)
    notes = tools["crm_notes"]
    assert (notes.scope, notes.sensitive, notes.subject_required) == ("crm.note.read", True, False)


def test_class_decorator_declares_every_method_and_names_them_by_method():
    app, _ = make_app()

    @tool(scope="item.manage")
    class Items(MethodView):
        def get(self):
            return "x"

        def post(self):
            return "x"

        @tool(enabled=False)
        def delete(self):
            return "x"

    app.add_url_rule("/items", view_func=Items.as_view("items"))
    reg = registry(app)
    assert sorted((t.name, t.method) for t in reg.tools) == [("items_get", "GET"),
                                                            ("items_post", "POST")]
    assert [(n.method, n.reason) for n in reg.not_exported] == [("DELETE", "enabled=False")]


def test_several_methods_on_one_function_give_one_tool_each():
    app, _ = make_app()

    @app.route("/settings", methods=["GET", "PUT", "DELETE"])
    @tool(scope="settings.manage", methods=["GET", "PUT"])
    def settings():
        return "x"

    reg = registry(app)
    assert [(t.name, t.method) for t in reg.tools] == [("settings_get", "GET"), ("settings_put", "PUT")]
    assert [n.method for n in reg.not_exported] == ["DELETE"]


def test_converters_become_typed_path_parameters():
    app, _ = make_app()

    @app.get("/x/<int:a>/<float:b>/<uuid:c>/<any(red,blue):d>/<e>/<path:f>")
    @tool(scope="x.read")
    def typed(a, b, c, d, e, f):
        return "x"

    (t,) = registry(app).tools
    assert t.path == "/x/{a}/{b}/{c}/{d}/{e}/{f}"
    schemas = {p["name"]: p["schema"] for p in t.parameters}
    assert schemas == {
        "a": {"type": "integer", "minimum": 0, "maximum": 2**53 - 1},
        "b": {"type": "number", "minimum": 0},
        "c": {"type": "string", "format": "uuid"},
        "d": {"type": "string", "enum": ["blue", "red"]},
        "e": {"type": "string"},
        "f": {"type": "string"},
    }
    assert all(p["in"] == "path" and p["required"] for p in t.parameters)
    assert t.path_kinds == {"a": "int", "b": "float", "c": "uuid", "d": "any", "e": "string",
                            "f": "path"}


def test_explicit_params_for_views_reading_request_args():
    app, _ = make_app()

    @app.get("/legacy")
    @tool(scope="legacy.read", params=[Param("q", required=True, description="Text"),
                                        Param("limit", int)])
    def legacy():
        return "x"

    (t,) = registry(app).tools
    assert t.parameters == (
        {"name": "q", "in": "query", "required": True, "description": "Text",
         "schema": {"type": "string"}},
        {"name": "limit", "in": "query", "required": False, "schema": {"type": "integer"}},
    )
    assert t.query_model is not None


def test_query_model_and_params_together_are_refused():
    class Q(BaseModel):
        a: int = 1

    app, _ = make_app()

    @app.get("/both")
    @tool(scope="x.read", query=Q, params=[Param("b")])
    def both():
        return "x"

    with pytest.raises(ToolDeclarationError):
        registry(app)


def test_tool_above_route_is_still_guarded_and_noted_as_decorator_order():
    app, _ = make_app()

    @tool(scope="x.read")
    @app.get("/wrong")
    def wrong():
        return "x"

    reg = registry(app)
    assert [t.name for t in reg.tools] == ["wrong"]
    assert [(f.code, f.severity) for f in reg.findings] == [("decorator_order", "info")]
    unsigned = app.test_client().get("/wrong")  # the gate in front of the route refuses it
    assert unsigned.status_code == 401
    assert unsigned.get_json()["reason"] == "missing_signature"


def test_declaration_is_attached_and_double_declaration_refused():
    @tool(scope="x.read")
    def view():
        return "x"

    assert get_declaration(view).options.scope == "x.read"
    with pytest.raises(ToolDeclarationError):
        tool(scope="y")(view)


def test_tool_defaults_cannot_name_tools():
    with pytest.raises(ToolDeclarationError):
        tool_defaults(Blueprint("b", __name__), name="x")


def test_name_prefix_replaces_the_blueprint_part_of_default_names():
    app, _ = make_app()
    api = Blueprint("api", __name__, url_prefix="/api")
    tool_defaults(api, name_prefix="")
    shop = Blueprint("shop", __name__, url_prefix="/shop")
    tool_defaults(shop, name_prefix="shop_v2_")

    @api.get("/orders")
    @tool(scope="order.read")
    def order_search():
        return "x"

    @shop.get("/orders")
    @tool(scope="order.read")
    def order_search_shop():
        return "x"

    app.register_blueprint(api)
    app.register_blueprint(shop)
    assert sorted(t.name for t in registry(app).tools) == ["order_search", "shop_v2_order_search_shop"]


def test_describing_a_path_parameter_keeps_its_converter_schema():
    app, _ = make_app()

    @app.get("/orders/<int:order_id>")
    @tool(scope="order.read", params=[Param("order_id", location="path", description="The order.")])
    def order_get(order_id):
        return "x"

    (t,) = registry(app).tools
    assert t.parameters == ({"name": "order_id", "in": "path", "required": True,
                             "description": "The order.",
                             "schema": {"type": "integer", "minimum": 0, "maximum": 2**53 - 1}},)
