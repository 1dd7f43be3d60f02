"""The app's marshmallow schemas, as they were before bailing_flask: nothing re-written."""

from __future__ import annotations

from decimal import Decimal

from marshmallow import Schema, fields, validate


# [start:schemas]
class RefundIn(Schema):
    order_id = fields.Integer(required=True, validate=validate.Range(min=1, max=2**31 - 1),
                              metadata={"description": "The order to refund."})
    amount = fields.Decimal(places=2, required=True, validate=validate.Range(min=Decimal("0.01")),
                            metadata={"description": "How much, in the order's currency."})


class Customer(Schema):
    name = fields.String()
    email = fields.Email(metadata={"sensitive": True})  # never leaves to the model


class RefundOut(Schema):
    id = fields.Integer()
    amount = fields.Decimal(places=2, as_string=True)
    status = fields.String()
    customer = fields.Nested(Customer)


class OrderQuery(Schema):
    status = fields.String(validate=validate.OneOf(["open", "paid"]),
                           metadata={"description": "Only orders in this state."})


class OrderOut(Schema):
    id = fields.Integer()
    status = fields.String()
    total = fields.Decimal(as_string=True)
# [end:schemas]
