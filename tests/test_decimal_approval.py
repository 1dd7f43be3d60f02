"""A ``Decimal`` amount can drive ``approval_when``, and the view still gets a ``Decimal``.

Pydantic describes a ``Decimal`` as ``anyOf [number, string]``; the hub
needs a plain ``type`` to compare an approval condition against, and
dropped the whole tool (``confirm_when_param_untyped``). The catalog now
publishes it as a number; the hub evaluates ``approval_when`` on the
model's arguments, which carry amounts as JSON numbers.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from flask import Flask, jsonify
from pydantic import BaseModel, Field, condecimal

from bailing_flask import Bailing, Param, get_current_call, tool
from bailing_flask.lint import lint_document
from bailing_flask.testing import HubSimulator

from .helpers import STRONG_SECRET
from bailing_flask._state import state_of
from bailing_flask._pipeline.catalog import catalog_of

received: list[Any] = []


class RefundBody(BaseModel):
    order_id: int = Field(description="The order.", ge=1, le=10**9)
    amount: Decimal = Field(description="Amount to refund.", gt=0, le=100_000)
    fee: condecimal(max_digits=8, decimal_places=2) | None = Field(None, description="A fee.")


def make_app() -> Flask:
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    bailing = Bailing(app)
    bailing.authorizer(lambda call: True)

    @app.post("/refunds")
    @tool(scope="refund.write", body=RefundBody, approval_when=["amount > 500", "fee >= 10"])
    def refund() -> Any:
        """Refund an order."""
        call = get_current_call()
        assert call is not None
        body = call.body_as(RefundBody)
        received.append((body.amount, body.fee))
        return jsonify(ok=True), 201

    @app.get("/quotes")
    @tool(scope="quote.read", approval_when=["limit > 1000"],
          params=[Param("limit", type=Decimal, required=True, description="Upper bound.")])
    def quotes() -> Any:
        """Quotes below a limit."""
        call = get_current_call()
        assert call is not None
        received.append(call.args["limit"])
        return jsonify(ok=True)

    return app


def test_decimal_amounts_are_numbers_the_hub_can_compare():
    app = make_app()
    catalog = catalog_of(state_of(app))
    assert catalog.excluded == []
    codes = {f.code for f in catalog.findings} | {f.code for f in lint_document(catalog.served)}
    assert "confirm_when_param_untyped" not in codes
    operation = catalog.served["paths"]["/refunds"]["post"]
    properties = operation["requestBody"]["content"]["application/json"]["schema"]["properties"]
    assert properties["amount"]["type"] == "number" and "anyOf" not in properties["amount"]
    assert properties["fee"]["type"] == "number"
    assert operation["x-agent-capability"]["approval"]["when"][0] == {
        "param": "amount", "op": ">", "value": 500}
    query = catalog.served["paths"]["/quotes"]["get"]["parameters"][0]
    assert query["schema"]["type"] == "number"


def test_the_view_receives_the_exact_decimal():
    received.clear()
    hub = HubSimulator(make_app(), STRONG_SECRET)
    assert hub.call("refund", {"order_id": 1, "amount": 19.9, "fee": 0.1}).status == 201
    assert hub.call("quotes", {"limit": 0.3}).status == 200
    assert received == [(Decimal("19.9"), Decimal("0.1")), Decimal("0.3")]
    assert all(type(value) is Decimal for value in (received[0][0], received[0][1], received[1]))
    # what a number cannot be is still refused by name
    bad = hub.call("refund", {"order_id": 1, "amount": "lots"})
    assert bad.status == 422 and bad.json()["parameters"] == ["amount"]
