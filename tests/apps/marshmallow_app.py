"""A billing API that validates with marshmallow and webargs, plus bailing_flask.

The legacy views keep their schemas: ``@use_args(RefundIn, location="json")``
on the refund the web client (a bearer token) and the hub share,
``@use_kwargs({...}, location="query")`` on the search; the tool-only views
give marshmallow schemas straight to ``@tool`` (``query=OrderQuery``, a class;
``body=NoteIn()``, an instance; ``response=`` both ways). Agents of two
tenants; every row carries the customer's e-mail address and an internal
note, which must never reach the model.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from flask import Flask, abort, request
from marshmallow import Schema, ValidationError, fields, validate
from webargs import fields as webargs_fields
from webargs.flaskparser import use_args, use_kwargs

from bailing_flask import Bailing, get_arguments, get_current_call, tool

from ..helpers import STRONG_SECRET

#: subject -> tenant
AGENTS = {"t1:alice": "t1", "t2:bob": "t2"}
#: the web client's bearer tokens -> tenant
TOKENS = {"tok-alice": "t1"}
#: order id -> (tenant, status, total)
ORDERS = {1: ("t1", "paid", Decimal("40.00")), 2: ("t2", "paid", Decimal("15.50")),
          3: ("t1", "open", Decimal("9.99"))}
#: the refunds and notes written, as the views received them
REFUNDS: list[dict[str, Any]] = []
NOTES: list[dict[str, Any]] = []


class RefundIn(Schema):
    order_id = fields.Integer(required=True, metadata={"description": "The order to refund."})
    amount = fields.Decimal(places=2, required=True, validate=validate.Range(min=Decimal("0.01")))
    reason = fields.String(validate=validate.Length(max=200))


class Customer(Schema):
    name = fields.String()
    email = fields.Email(metadata={"sensitive": True})


class RefundOut(Schema):
    id = fields.Integer()
    order_id = fields.Integer()
    amount = fields.Decimal(places=2, as_string=True)
    status = fields.String()
    internal_note = fields.String(metadata={"sensitive": True})
    password = fields.String(load_only=True)
    customer = fields.Nested(Customer)


class OrderQuery(Schema):
    status = fields.String(validate=validate.OneOf(["open", "paid"]))
    limit = fields.Integer(load_default=10, validate=validate.Range(min=1, max=50))
    ids = fields.List(fields.Integer(validate=validate.Range(min=1, max=2**31 - 1)))


class OrderOut(Schema):
    id = fields.Integer()
    status = fields.String()
    total = fields.Decimal(as_string=True)


def not_a_card_number(value: str) -> None:
    """A legacy validator whose message quotes what was sent."""
    if value.replace(" ", "").isdigit() and len(value) >= 12:
        raise ValidationError(f"{value} looks like a card number")


class Attachment(Schema):
    name = fields.String(required=True, validate=[validate.Length(max=80), not_a_card_number])
    size = fields.Integer(validate=validate.Range(min=0, max=10_000_000))


class NoteIn(Schema):
    text = fields.String(required=True, validate=[validate.Length(min=1, max=500), not_a_card_number])
    pinned = fields.Boolean(load_default=False)
    attachments = fields.List(fields.Nested(Attachment), validate=validate.Length(max=3))


class Problem(Schema):
    error = fields.String()
    reason = fields.String()
    message = fields.String()


class NoteOut(Schema):
    order_id = fields.Integer()
    text = fields.String()


def _tenant() -> str:
    call = get_current_call()
    if call is not None:
        return AGENTS[str(call.subject)]
    tenant = TOKENS.get(request.headers.get("Authorization", "").removeprefix("Bearer "))
    if tenant is None:
        abort(401)
    return tenant


def _row(order_id: int, tenant: str) -> dict[str, Any]:
    """What the database hands the view: more than the model may see."""
    email = f"buyer{order_id}@{tenant}.example"
    return {"customer_email": email, "internal_note": "chargeback risk", "password": "hunter2",
            "customer": {"name": f"Buyer {order_id}", "email": email}}


def create_app(**config: Any) -> Flask:
    app = Flask("marshmallow_app")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://", **config)
    bailing = Bailing(app)

    @bailing.subject_loader
    def load_subject(subject: str) -> str | None:
        return subject if subject in AGENTS else None

    @bailing.authorizer
    def authorize(call: Any) -> bool:
        return call.user is not None

    @bailing.approval_request
    def approval_request(request: Any) -> None:
        """The business's queue of approvals (decided in the test)."""

    @app.post("/api/refunds")
    @tool(scope="refund.write", response=RefundOut, allow_unsigned=True)
    @use_args(RefundIn, location="json")
    def refund(args: dict[str, Any]) -> Any:
        """Refund part of an order."""
        tenant = _tenant()
        if ORDERS.get(args["order_id"], ("",))[0] != tenant:
            abort(404)
        REFUNDS.append(args)
        row = {"id": len(REFUNDS), "order_id": args["order_id"], "amount": args["amount"],
               "status": "pending", **_row(args["order_id"], tenant)}
        return row, 201

    @app.post("/api/payouts")
    @tool(scope="payout.execute", risk="high", body=RefundIn, business_approval=True)
    def payout() -> Any:
        """Pay a refund out, once this business approved it."""
        REFUNDS.append(dict(get_arguments().body))
        return {"paid": str(get_arguments().body["amount"])}, 201

    @app.get("/api/orders")
    @tool(scope="order.read", query=OrderQuery, response=OrderOut(many=True))
    def orders() -> Any:
        """The orders of the agent's tenant."""
        tenant, query = _tenant(), get_arguments().query
        rows = [{"id": i, "status": s, "total": total, **_row(i, t)}
                for i, (t, s, total) in ORDERS.items()
                if t == tenant and query.get("status") in (None, s) and i in query.get("ids", [i])]
        return rows[: query["limit"]]

    @app.post("/api/orders/<int:order_id>/notes")
    @tool(scope="order.write", body=NoteIn(), response=NoteOut, error_response=Problem)
    def add_note(order_id: int) -> Any:
        """Add a note to an order."""
        if ORDERS.get(order_id, ("",))[0] != _tenant():
            abort(404)
        if ORDERS[order_id][1] == "open":
            return {"error": "locked", "reason": "order_open", "message": "Notes wait for payment.",
                    **_row(order_id, "t1")}, 409
        NOTES.append({"order_id": order_id, **get_arguments().body})
        return {"order_id": order_id, **get_arguments().body, **_row(order_id, "t1")}, 201

    @app.get("/api/search")
    @tool(scope="order.read", allow_unsigned=True)
    @use_kwargs({"q": fields.String(required=True), "limit": fields.Integer(load_default=5),
                 "ids": webargs_fields.DelimitedList(fields.Integer())}, location="query",
                validate=lambda args: args["limit"] <= 20)  # webargs' own check, after the schema's
    def search(q: str, limit: int, ids: list[int] | None = None) -> Any:
        """Search the agent's orders by status."""
        tenant = _tenant()
        found = [i for i, (t, s, _) in ORDERS.items() if t == tenant and q in s and (not ids or i in ids)]
        return {"q": q, "limit": limit, "ids": found[:limit]}

    return app
