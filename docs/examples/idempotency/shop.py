"""docs/concepts/idempotency.rst: a shop whose refunds the package records, so that a repeat runs nothing.

``refund_create`` is a write tool in the store mode (the default store: a
SQLite file in the instance folder, shared by the commands the page runs);
an amount above 1000 stands for a payment provider that timed out half-way,
so that call is uncertain. ``refund_request_create`` has a domain key: one
open refund request per order and user, whatever the job.
"""

import os

from flask import Flask, jsonify
from flask.typing import ResponseReturnValue
from pydantic import BaseModel, Field

from bailing_flask import Bailing, ToolCall, current_call, tool

app = Flask(__name__)
app.config["BAILING_SECRETS"] = [os.environ["BAILING_SECRET"]]
bailing = Bailing(app)

USERS = {"t1:alice": frozenset({"refund.write"})}
REFUNDS: list[dict[str, object]] = []


@bailing.subject_loader
def load_user(subject: str) -> frozenset[str] | None:
    return USERS.get(subject)


@bailing.authorizer
def authorize(call: ToolCall) -> bool:
    return call.user is not None and call.tool is not None and call.tool.scope in call.user


class RefundBody(BaseModel):
    order_id: int = Field(description="The order to refund.", ge=1, le=2**53)
    amount: float = Field(description="The amount, in euros.", gt=0, le=1_000_000)


@app.post("/api/refunds")
@tool(scope="refund.write", body=RefundBody, subject_required=True)
def refund_create() -> ResponseReturnValue:
    """Refund an order."""
    body = current_call.body
    assert isinstance(body, RefundBody)
    if body.amount > 1000:  # stands for a payment provider that timed out half-way
        raise TimeoutError("payment provider did not answer")
    REFUNDS.append({"order_id": body.order_id, "amount": body.amount})
    return jsonify(refund_id=41 + len(REFUNDS), order_id=body.order_id, amount=body.amount), 201


class RefundRequestBody(BaseModel):
    order_id: int = Field(description="The order whose refund to ask for.", ge=1, le=2**53)
    reason: str = Field(description="Why the customer gets money back.", min_length=3, max_length=500)


@app.post("/api/refund-requests")
# [start:domain_key]
@tool(scope="refund.write", body=RefundRequestBody,
      idempotency_key=lambda call: f"{call.subject}:{call.body.order_id}")
# [end:domain_key]
def refund_request_create() -> ResponseReturnValue:
    """Ask for a refund of an order (one open request per order)."""
    body = current_call.body
    assert isinstance(body, RefundRequestBody)
    REFUNDS.append({"order_id": body.order_id, "reason": body.reason})
    return jsonify(refund_request_id=len(REFUNDS), order_id=body.order_id), 201
