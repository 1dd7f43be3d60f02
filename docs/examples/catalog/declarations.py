"""The catalog page's declarations (docs/concepts/catalog.rst), in one app the suite reads the catalog of."""

import enum
import os

from flask import Blueprint, Flask, jsonify
from flask.views import MethodView
from pydantic import BaseModel, ConfigDict, Field

from bailing_flask import Bailing, Param, current_call, tool, tool_defaults

app = Flask(__name__)
app.config.update(BAILING_SECRETS=[os.environ["BAILING_SECRET"]], BAILING_STORE="memory://")
bailing = Bailing(app)
bailing.authorizer(lambda call: True)


class RefundRequestBody(BaseModel):
    order_id: int = Field(ge=1, le=10**9, description="The order to refund.")
    amount: float = Field(gt=0, description="The amount to refund.")
    reason: str = Field(max_length=200, description="Why the customer wants a refund.")


class OrderStatus(str, enum.Enum):
    pending = "pending"
    paid = "paid"
    shipped = "shipped"
    cancelled = "cancelled"
    refunded = "refunded"


# [start:guarded]
@app.post("/api/refunds/requests")
@tool(scope="refund.write", body=RefundRequestBody, risk="medium",
      approval_when=["amount > 500"],
      approval_prompt="Refund {amount} on order {order_id}: {reason}")
def refund_request_create():
    """Request a refund for a paid or shipped order."""
    ...
# [end:guarded]
    return jsonify(status="submitted"), 201


# [start:defaults]
api = Blueprint("api", __name__, url_prefix="/api")
tool_defaults(api, subject_required=True, scope_prefix="shop.")
# [end:defaults]


# [start:methodview]
@tool(scope="staff.manage", risk="medium",
      params=[Param("state", location="path", description="Employment state.")])
class StaffAPI(MethodView):
    def get(self, state):
        """List staff in this state."""

    @tool(scope="staff.manage", risk="high", name="staff_state_change",
          params=[Param("state", location="path", description="Employment state.")])
    def post(self, state):
        """Change the state of staff members."""
# [end:methodview]


app.add_url_rule("/api/staff/<state>", view_func=StaffAPI.as_view("staff"))


# [start:param]
@app.get("/api/orders/<int:order_id>")
@tool(scope="order.read",
      params=[Param("order_id", location="path", description="The order's numeric id.")])
def order_get(order_id): ...
# [end:param]


# [start:query]
class OrderSearchQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    keyword: str | None = Field(None, max_length=100,
                                description="Words that must all appear in the order.")
    status: OrderStatus | None = Field(None, description="Only orders in this status.")
    page: int = Field(1, ge=1, le=1000, description="1-based page (5 orders per page).")


@api.get("/orders")
@tool(name="order_search", scope="order.read", query=OrderSearchQuery)
def order_search():
    """Search the company's orders."""
    query = current_call.query              # an OrderSearchQuery instance
    ...
# [end:query]
    return jsonify(keyword=query.keyword, page=query.page)


app.register_blueprint(api)
