"""The billing blueprint: a webargs view the web client and the hub share, and a tool-only view."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from flask import Blueprint, abort, request
from webargs.flaskparser import use_args

from bailing_flask import get_arguments, get_current_call, tool

from .schemas import OrderOut, OrderQuery, RefundIn, RefundOut

billing = Blueprint("billing", __name__, url_prefix="/api")

#: order id -> (tenant, status, total, customer's e-mail address)
ORDERS = {1: ("t1", "paid", Decimal("40.00"), "ann@t1.example"),
          2: ("t2", "paid", Decimal("15.50"), "ben@t2.example")}
REFUNDS: list[dict[str, Any]] = []
#: the web client's bearer tokens -> tenant
TOKENS = {"tok-ann": "t1"}


def tenant() -> str:
    """The hub's subject (loaded by the subject loader) or the web client's token."""
    call = get_current_call()
    if call is not None:
        return str(call.user)
    found = TOKENS.get(request.headers.get("Authorization", "").removeprefix("Bearer "))
    if found is None:
        abort(401)
    return found


# [start:refund]
@billing.post("/refunds")
@tool(scope="refund.write", response=RefundOut, allow_unsigned=True)
@use_args(RefundIn, location="json")
def refund(args: dict[str, Any]) -> Any:
    """Refund part of an order."""
    order = ORDERS.get(args["order_id"])
    if order is None or order[0] != tenant():
        abort(404)
    REFUNDS.append(args)
    return {"id": len(REFUNDS), "amount": args["amount"], "status": "pending",
            "customer": {"name": "Ann", "email": order[3]}}, 201
# [end:refund]


# [start:orders]
@billing.get("/orders")
@tool(scope="order.read", query=OrderQuery, response=OrderOut(many=True))
def orders() -> Any:
    """The orders of the user's tenant."""
    status = get_arguments().query.get("status")  # what OrderQuery loaded
    return [{"id": i, "status": s, "total": total, "email": email}
            for i, (owner, s, total, email) in ORDERS.items()
            if owner == tenant() and status in (None, s)]
# [end:orders]
