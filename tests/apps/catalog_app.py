"""A fixture app that uses every declaration field and every parameter source.

Its catalog is compared with ``tests/golden/catalog.json``.
"""

from __future__ import annotations

from enum import Enum

from flask import Blueprint, Flask, jsonify
from flask.views import MethodView
from pydantic import BaseModel, Field

from bailing_flask import Bailing, Param, tool, tool_defaults

from ..helpers import STRONG_SECRET


class Status(str, Enum):
    paid = "paid"
    pending = "pending"
    refunded = "refunded"


class OrderQuery(BaseModel):
    keyword: str | None = Field(None, description="Free text matched against titles.", max_length=50)
    status: Status | None = Field(None, description="Only orders in this status.")
    page: int = Field(1, ge=1, le=1000, description="Page number, from 1.")


class Address(BaseModel):
    city: str = Field(description="City.")
    zip: str = Field(description="Postal code.", pattern=r"^[0-9]{6}$")


class GoodsBody(BaseModel):
    title: str = Field(description="Title shown to buyers.", max_length=100)
    price: float = Field(description="Unit price in CNY.", gt=0)
    tags: list[str] = Field(default_factory=list, description="Search tags.")
    address: Address | None = Field(None, description="Warehouse address.")


class PreviewBody(BaseModel):
    order_id: int = Field(description="The order to refund.", ge=1, le=2**53 - 1)
    amount: float = Field(description="Refund amount.", gt=0)


def create_app() -> Flask:
    app = Flask("catalog_app")
    app.config["BAILING_SECRETS"] = [STRONG_SECRET]
    app.config["BAILING_CATALOG_TITLE"] = "Shop tools"
    app.config["BAILING_CATALOG_VERSION"] = "2.1.0"
    bailing = Bailing(app)

    @bailing.authorizer
    def allow_all(call):  # the fixture is about the catalog, not authorization
        return True

    shop = Blueprint("shop", __name__, url_prefix="/api")
    tool_defaults(shop, scope_prefix="shop.", subject_required=True)

    @shop.get("/orders")
    @tool(
        scope="order.read",
        query=OrderQuery,
        rate_limit="30/min",
        timeout_ms=5000,
        when_to_use="The user asks about their orders.",
        returns="A page of orders with their integer order_id.",
        examples=[{"keyword": "phone", "status": "paid"}],
        context=["orders of the acting user only"],
        tags=["orders"],
        outcome={"result": "a list of orders", "side_effect": "read"},
        extensions={"x-business-owner": "order-team"},
    )
    def order_search():
        """Search the acting user's orders.

        This second paragraph is not part of the tool description.
        """
        return jsonify(items=[])

    @shop.get("/orders/<int:order_id>")
    @tool(scope="order.read", params=[Param("order_id", location="path",
                                            description="The order's integer id.")])
    def order_get(order_id: int):
        """Read one order."""
        return jsonify(order_id=order_id)

    @shop.post("/goods")
    @tool(
        name="goods_create",
        description="Create a product listing.",
        scope="goods.write",
        body=GoodsBody,
        approval_when=["price > 500", {"param": "address.city", "op": "==", "value": "Beijing",
                                        "label": "Beijing warehouse needs a manager"}],
        approval_prompt="Create {title} at {price}?",
        sensitive=True,
    )
    def goods_create():
        return jsonify(ok=True), 201

    @shop.delete("/goods/<uuid:goods_id>")
    @tool(scope="goods.write", risk="high", approval_required=True, subject_required=True,
          params=[Param("goods_id", location="path", description="The product's UUID.")])
    def goods_delete(goods_id):
        """Delete a product listing."""
        return jsonify(ok=True)

    @shop.post("/refunds/preview")
    @tool(scope="refund.read", readonly=True, body=PreviewBody)
    def refund_preview():
        """Compute what a refund would return, without doing it."""
        return jsonify(ok=True)

    @shop.post("/refunds/<int:request_id>/execute")
    @tool(scope="refund.execute", risk="high",
          params=[Param("request_id", location="path", description="An approved refund request.")])
    def refund_execute(request_id: int):
        """Execute an approved refund request."""
        return jsonify(ok=True)

    @shop.get("/legacy/search")
    @tool(scope="legacy.read", subject_required=False,
          params=[Param("q", str, required=True, description="Search text."),
                  Param("limit", {"type": "integer", "minimum": 1, "maximum": 100},
                        description="At most this many results.")])
    def legacy_search():
        """A ten-year-old view that reads request.args by hand."""
        return jsonify(items=[])

    @shop.route("/settings", methods=["GET", "PUT"])
    @tool(scope="settings.manage")
    def settings():
        """Read or replace shop settings."""
        return jsonify(ok=True)

    @shop.get("/internal/report")
    @tool(scope="report.read", enabled=False)
    def internal_report():
        return jsonify(ok=True)

    @shop.get("/old/search")
    @tool(scope="order.read", deprecated=True)
    def old_search():
        """Superseded by order_search."""
        return jsonify(ok=True)

    @shop.get("/health")
    def health():  # not declared: never exported
        return jsonify(ok=True)

    @tool(scope="staff.manage", risk="medium",
          params=[Param("state", location="path", description="Employment state.")])
    class StaffAPI(MethodView):
        def get(self, state: str):
            """List staff in this state."""
            return jsonify(items=[])

        @tool(scope="staff.manage", risk="high", name="staff_state_change",
              params=[Param("state", location="path", description="Employment state.")])
        def post(self, state: str):
            """Change the state of staff members."""
            return jsonify(ok=True)

    shop.add_url_rule("/staff/<any(active,left):state>", view_func=StaffAPI.as_view("staff"))
    app.register_blueprint(shop)
    return app
