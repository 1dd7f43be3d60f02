"""docs/concepts/minimal.rst, minimal return: the declarations the page shows, on a small shop.

The views return the back office's full records (``backoffice.py``);
``response=`` decides what leaves. ``answers.py`` makes the calls the page
shows and prints what the hub receives.
"""

import os
from typing import Any

from flask import Blueprint, Flask, abort
from flask.typing import ResponseReturnValue
from pydantic import BaseModel, Field

import backoffice
from bailing_flask import Bailing, Param, ToolCall, current_call, tool, tool_result

app = Flask(__name__)
app.config.update(BAILING_SECRETS=[os.environ["BAILING_SECRET"]], BAILING_STORE="memory://")
bailing = Bailing(app)
api = Blueprint("api", __name__, url_prefix="/api")

USERS = {"t1:alice": frozenset({"order.read", "profile.write", "refund.write"})}


@bailing.subject_loader
def load_user(subject: str) -> frozenset[str] | None:
    return USERS.get(subject)


@bailing.authorizer
def authorize(call: ToolCall) -> bool:
    return call.user is not None and call.tool is not None and call.tool.scope in call.user


class RefundView(BaseModel):
    refund_request_id: int
    amount: float
    status: str


# [start:order_get]
class CustomerView(BaseModel):
    customer_id: int
    name: str
    email: str


class OrderView(BaseModel):
    order_id: int
    status: str
    note: str = Field("", max_length=200)
    customer: CustomerView
    refund_requests: list[RefundView]


@api.get("/orders/<int:order_id>")
@tool(name="order_get", scope="order.read", response=OrderView,
      params=[Param("order_id", location="path", description="The order's number.")])
def order_get(order_id: int) -> Any:
    """Read one order."""
    return backoffice.get_order(order_id) or abort(404)   # the back office's full record
# [end:order_get]


class OrderLine(BaseModel):
    order_id: int
    note: str = Field("", max_length=40)


class OrderList(BaseModel):
    orders: list[OrderLine] = Field(max_length=5)
    total: int


@api.get("/orders")
@tool(name="order_list", scope="order.read", response=OrderList)
def order_list() -> Any:
    """The newest orders."""
    return backoffice.list_orders()


class ProfileBody(BaseModel):
    name: str = Field(description="The new display name.")
    version: int = Field(description="The version of the profile this change is based on.", ge=1, le=2**53)


class Profile(BaseModel):
    user_id: int
    name: str
    version: int


# [start:conflict]
class ConflictView(BaseModel):
    error: str
    current_version: int

@api.put("/profile")
@tool(name="profile_update", scope="profile.write", body=ProfileBody, response=Profile,
      error_response=ConflictView)
def profile_update() -> Any:
    """Rename the acting user."""
    row = backoffice.profile_of(current_call.subject)               # whose: the signed subject's
    change = current_call.body_as(ProfileBody)
    if change.version != row["version"]:
        return {**row, "error": "version_conflict", "current_version": row["version"]}, 409
    row.update(name=change.name, version=row["version"] + 1)
    return row
# [end:conflict]


class RefundBody(BaseModel):
    order_id: int = Field(description="The order to refund.", ge=1, le=2**53)
    amount: float = Field(description="The amount, in euros.", gt=0)


# [start:tool_result]
class RefundCreated(BaseModel):
    ok: bool
    status: str
    message: str
    business_id: int

@api.post("/refunds")
@tool(name="refund_request_create", scope="refund.write", body=RefundBody, response=RefundCreated)
def refund_request_create() -> ResponseReturnValue:
    """Ask for a refund of an order."""
    order_id = current_call.body_as(RefundBody).order_id
    if order_id in backoffice.REFUND_REQUESTS:
        abort(409, description=f"Order {order_id} already has an open refund request.")
    backoffice.REFUND_REQUESTS[order_id] = 12
    return tool_result("submitted", "Refund request 12 submitted.", business_id=12,
                       data={"approver_id": "u7"})      # approver_id does not leave
# [end:tool_result]


app.register_blueprint(api)
