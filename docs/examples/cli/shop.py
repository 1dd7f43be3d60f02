"""The command-line page's shop (docs/cli.rst): what ``check``, ``tools`` and ``idempotency`` report.

One read tool whose parameter has no description (``check`` warns), one
refund that the hub may retry (its calls are recorded in the idempotency
store, by default a SQLite file in the instance folder), and a route that is
declared but not exported.
"""

import os

from flask import Flask, jsonify, request
from flask.typing import ResponseReturnValue
from pydantic import BaseModel, Field

from bailing_flask import Bailing, ToolCall, tool

app = Flask(__name__)
app.config["BAILING_SECRETS"] = [os.environ["BAILING_SECRET"]]
bailing = Bailing(app)

USERS = {"t1:alice": frozenset({"order.read", "refund.write"})}


@bailing.subject_loader
def load_user(subject: str) -> frozenset[str] | None:
    return USERS.get(subject)


@bailing.authorizer
def authorize(call: ToolCall) -> bool:
    return call.user is not None and call.tool is not None and call.tool.scope in call.user


@app.get("/api/orders/<int:order_id>")
@tool(scope="order.read", subject_required=True)  # no Param description: `check` warns
def order_get(order_id: int) -> ResponseReturnValue:
    """Read one order."""
    return jsonify(order_id=order_id, status="paid")


class RefundBody(BaseModel):
    order_id: int = Field(description="The order to refund.", ge=1, le=2**53)
    amount: float = Field(description="The amount, in euros.")


@app.post("/api/refunds")
@tool(scope="refund.write", risk="medium", subject_required=True, body=RefundBody)
def refund_create() -> ResponseReturnValue:
    """Refund an order."""
    body = request.get_json()
    if body["amount"] > 1000:  # stands for a payment provider that timed out half-way
        raise TimeoutError("payment provider did not answer")
    return jsonify(refund_id=42, order_id=body["order_id"], amount=body["amount"]), 201


@app.delete("/api/orders/<int:order_id>")
@tool(scope="order.write", enabled=False)  # declared, not exported
def order_delete(order_id: int) -> ResponseReturnValue:
    """Delete an order."""
    return "", 204
