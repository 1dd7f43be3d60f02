"""The ``/api`` routes the hub's agents may call, declared as governed tools.

Each view is a thin adapter: the gate in bailing_flask has already checked
the signature, the subject, the arguments and :func:`example_app.hub.authorize`
before the view runs, so the view only calls a service with the acting
user's tenant and shapes the answer for the agent. Refusals use real HTTP
statuses because the hub treats every 2xx as success.

The first paragraph of each view's docstring is the tool description the
model reads.
"""

from __future__ import annotations

from typing import Any, cast

from flask import Blueprint, current_app, jsonify, url_for
from pydantic import BaseModel, ConfigDict, Field, field_validator

from bailing_flask import Param, current_call, tool, tool_defaults, tool_result

from . import services
from .auth import User
from .db import get_db

__all__ = ["HUB_APPROVAL_LIMIT", "SEARCH_SHOWN", "api"]

#: Refund requests above this amount need a human approval in the hub before
#: they are even sent here (``approval.when``); the preview reports it.
HUB_APPROVAL_LIMIT = 500

api = Blueprint("api", __name__, url_prefix="/api")
# every tool acts for a user of one tenant: anonymous jobs never see them
tool_defaults(api, subject_required=True, allow_unsigned=False)

ORDER_ID = Param(
    "order_id", location="path", description="The order's numeric id (order_id in search results)."
)
MAX_ID = 2**31 - 1


#: How many orders one search shows the agent; the rest are cut (and the cut is named).
SEARCH_SHOWN = 5
#: How many rows the search reads at most (the query is bounded, the answer more so).
SEARCH_LIMIT = 100


class OrderSearchQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    keyword: str | None = Field(
        None, max_length=100,
        description="Words that must all appear in the order number, item or customer name.",
    )
    status: services.OrderStatus | None = Field(None, description="Only orders in this status.")


# -- what the agent gets back (``response=``): only these fields leave, within these limits ----------


class OrderSummary(BaseModel):
    order_id: int
    order_no: str
    customer: str
    item: str
    amount: float
    status: str
    created_at: str


class OrderSearchResult(BaseModel):
    orders: list[OrderSummary] = Field(max_length=SEARCH_SHOWN)
    total: int
    message: str


class CustomerView(BaseModel):
    """The customer as an agent sees it: no phone number (the back office shows it)."""

    customer_id: int
    name: str
    email: str


class RefundView(BaseModel):
    refund_request_id: int
    amount: float
    reason: str = Field(max_length=200)
    status: str
    created_at: str
    executed_at: str | None = None


class OrderView(BaseModel):
    """An order without the internal note, the customer's phone or who filed each refund."""

    order_id: int
    order_no: str
    item: str
    amount: float
    status: str
    created_at: str
    customer: CustomerView
    refund_requests: list[RefundView]
    refundable_amount: float


class RefundPreviewBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    order_id: int = Field(ge=1, le=MAX_ID, description="The order to refund.")
    amount: float | None = Field(
        None, gt=0, le=1_000_000,
        description="Amount to check, in the order's currency; omit to see the maximum.",
    )


def _two_decimals(amount: float) -> float:
    if abs(amount * 100 - round(amount * 100)) > 1e-6:
        raise ValueError("use at most two decimals")
    return amount


class RefundRequestBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    order_id: int = Field(ge=1, le=MAX_ID, description="The order to refund (a paid or shipped order).")
    amount: float = Field(gt=0, le=1_000_000, description="Amount to refund, at most two decimals.")
    reason: str = Field(min_length=3, max_length=500, description="Why the customer gets money back.")

    _amount = field_validator("amount")(_two_decimals)


class PhoneBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    phone: str = Field(
        pattern=r"^\+?[0-9][0-9 \-]{4,18}[0-9]$",
        description="The new phone number, digits with optional leading + and spaces or dashes.",
    )


def _user() -> User:
    """The acting user (the gate guarantees one: every tool requires a subject)."""
    return cast(User, current_call.user)


def _not_found(what: str) -> Any:
    return jsonify(error="not_found", reason="not_found", message=f"No {what} in your company."), 404


def _refused(refused: services.RefundRefused, **data: Any) -> Any:
    # 409: the request is well-formed, the order's state does not allow it
    return tool_result("rejected", refused.message, http_status=409, reason=refused.code, **data)


def _order_page(order_id: int) -> str:
    """Where a human sees the order in the back office (for the agent to link to)."""
    base = str(current_app.config["PUBLIC_BASE_URL"]).rstrip("/")
    return base + url_for("shop.order_detail", order_id=order_id)


def search_observation(found: dict[str, Any]) -> dict[str, Any]:
    """``result=`` of ``order_search``: tell the agent in words when more orders match than it sees."""
    total = found["total"]
    if total > SEARCH_SHOWN:
        message = (f"{total} orders match; the newest {SEARCH_SHOWN} are shown. Narrow the search "
                   "(more keywords, a status) to reach the others.")
    else:
        message = f"{total} order(s) match."
    return {**found, "message": message}


@api.get("/orders")
@tool(
    name="order_search", scope="order.read", query=OrderSearchQuery,
    result=search_observation, response=OrderSearchResult,
    when_to_use="Find orders by customer, item, order number or status before acting on one.",
    examples=[{"keyword": "张三 耳机", "status": "paid"}],
)
def order_search() -> Any:
    """Search the company's orders, newest first.

    Search is always limited to the acting user's tenant by the service.
    The view returns what the back office's search returns; ``result=``
    adds a sentence about the rest and ``response=`` keeps the newest five
    (marking the cut in ``truncated``) and drops the paging fields.
    """
    query = cast(OrderSearchQuery, current_call.query)
    return services.search_orders(
        get_db(), _user().tenant_id, keyword=query.keyword,
        status=query.status.value if query.status else None, page_size=SEARCH_LIMIT,
    )


@api.get("/orders/<int:order_id>")
@tool(name="order_get", scope="order.read", params=[ORDER_ID], response=OrderView,
      examples=[{"order_id": 1001}])
def order_get(order_id: int) -> Any:
    """Read one order in full.

    The service returns the back office's record (customer phone, internal
    note, staff ids); ``response=OrderView`` is what the agent may see.
    """
    try:
        return services.get_order(get_db(), _user().tenant_id, order_id)
    except services.NotFound:
        return _not_found(f"order {order_id}")


@api.post("/refunds/preview")
@tool(
    name="refund_preview", scope="refund.read", body=RefundPreviewBody, readonly=True,
    when_to_use="Check whether an order can be refunded, and by how much, before requesting a refund.",
    examples=[{"order_id": 1001, "amount": 29.9}],
)
def refund_preview() -> Any:
    """Preview a refund without changing anything.

    A POST that only reads (``readonly=True``): the hub sends no idempotency
    key and never asks for approval, and the store does not record it.
    """
    body = cast(RefundPreviewBody, current_call.body)
    amount = None if body.amount is None else services.cents(body.amount)
    try:
        preview = services.preview_refund(get_db(), _user().tenant_id, body.order_id, amount)
    except services.NotFound:
        return _not_found(f"order {body.order_id}")
    if body.amount is not None:
        preview["needs_hub_approval"] = body.amount > HUB_APPROVAL_LIMIT
    return jsonify(preview)


@api.post("/refunds/requests")
@tool(
    name="refund_request_create", scope="refund.write", body=RefundRequestBody, risk="medium",
    approval_when=[f"amount > {HUB_APPROVAL_LIMIT}"],
    approval_prompt="Refund {amount} on order {order_id}: {reason}",
    examples=[{"order_id": 1001, "amount": 29.9, "reason": "Left earbud does not charge"}],
    returns="status submitted (ready to execute) or pending_approval (finance must approve first).",
    repeats="transaction",
)
def refund_request_create() -> Any:
    """Request a refund for a paid or shipped order.

    Side-effecting, so bailing_flask records the outcome under the hub's
    call identity: a repeated delivery of the same call is answered from
    the record and never files a second request. ``repeats="transaction"``:
    the record is written in the same SQLite transaction as the refund
    request (``services.create_refund_request`` runs inside it as a
    savepoint), so a crash anywhere either leaves both or neither -- a call
    is never "uncertain". ``refund_execute`` stays in the store mode: a real
    payout calls a payment provider, which no database rollback undoes.
    """
    body = cast(RefundRequestBody, current_call.body)
    user = _user()
    try:
        created = services.create_refund_request(
            get_db(), user.tenant_id, requested_by=user.user_id, order_id=body.order_id,
            amount_cents=services.cents(body.amount), reason=body.reason, job_id=current_call.job_id,
        )
    except services.NotFound:
        return _not_found(f"order {body.order_id}")
    except services.RefundRefused as refused:
        return _refused(refused, order_id=body.order_id)
    message = (
        f"Refund request {created.id} submitted; it can be executed now."
        if created.status == "submitted"
        else f"Refund request {created.id} waits for a finance supervisor's approval."
    )
    return tool_result(
        "submitted" if created.status == "submitted" else "pending_approval", message,
        business_id=created.id, url=_order_page(body.order_id), http_status=201,
        refund_request_id=created.id, order_id=body.order_id, amount=body.amount,
    )


@api.post("/refunds/<int:request_id>/execute")
@tool(
    name="refund_execute", scope="refund.execute", risk="high", business_approval=True,
    params=[Param("request_id", location="path", description="The refund_request_id to pay out.")],
    examples=[{"request_id": 1}],
    returns="status executed once the money is sent back to the customer.",
)
def refund_execute(request_id: int) -> Any:
    """Pay out a submitted refund request.

    ``risk="high"``: the hub asks for an approval before every call, and
    ``business_approval=True``: this shop's staff give it (on the activity
    page), and the call runs only with exactly the approved arguments.
    """
    user = _user()
    try:
        paid = services.execute_refund(get_db(), user.tenant_id, request_id=request_id,
                                       executed_by=user.user_id)
    except services.NotFound:
        return _not_found(f"refund request {request_id}")
    except services.RefundRefused as refused:
        return _refused(refused, refund_request_id=request_id)
    return tool_result("executed", f"Refund request {request_id} was paid out.",
                       business_id=request_id, url=_order_page(paid["order_id"]), **paid)


@api.put("/customers/<int:customer_id>/phone")
@tool(
    name="customer_update_phone", scope="customer.write", body=PhoneBody, sensitive=True,
    params=[Param("customer_id", location="path", description="The customer's numeric id.")],
    examples=[{"customer_id": 101, "phone": "+86 138 0000 1009"}],
)
def customer_update_phone(customer_id: int) -> Any:
    """Change a customer's phone number.

    ``sensitive=True`` keeps the number out of the hub's audit and ours.
    Setting the same number twice is harmless, but this is not
    ``repeats="safe"``: a captured call replayed after a later change would
    set the old number back. De-duplicated (the default), an identical
    signed call is answered once, from the idempotency record.
    """
    phone = cast(PhoneBody, current_call.body).phone
    try:
        services.update_customer_phone(get_db(), _user().tenant_id, customer_id, phone)
    except services.NotFound:
        return _not_found(f"customer {customer_id}")
    return tool_result("executed", "Phone number updated.", business_id=customer_id)
