"""docs/concepts/idempotency.rst, exactly once with Flask-SQLAlchemy: the record commits with the refund.

``create_app(database_url)`` builds the shop; its ``refund_create`` keeps
the view a legacy app would have (it commits), and the package turns that
commit into a flush of the call's one transaction.
"""

import os
from typing import cast

from flask import Flask, jsonify
from flask.typing import ResponseReturnValue
from flask_sqlalchemy import SQLAlchemy
from pydantic import BaseModel, Field
from sqlalchemy.orm import Mapped, mapped_column

# [start:setup]
from bailing_flask import Bailing, current_call, tool
from bailing_flask.transactional import SQLAlchemyTransaction

db = SQLAlchemy()
bailing = Bailing(transaction=SQLAlchemyTransaction(db))   # or BAILING_TRANSACTION = "sqlalchemy"
# [end:setup]


class Refund(db.Model):  # type: ignore[name-defined,misc]
    id: Mapped[int] = mapped_column(primary_key=True)
    order_id: Mapped[int]
    amount: Mapped[float]


class RefundBody(BaseModel):
    order_id: int = Field(description="The order to refund.", ge=1, le=2**53)
    amount: float = Field(description="The amount, in euros.", gt=0, le=1_000_000)


def create_app(database_url: str) -> Flask:
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[os.environ["BAILING_SECRET"]], SQLALCHEMY_DATABASE_URI=database_url)
    db.init_app(app)
    bailing.init_app(app)
    bailing.authorizer(lambda call: call.subject == "t1:alice")

    # [start:view]
    @app.post("/api/refunds")
    @tool(scope="refund.write", body=RefundBody, repeats="transaction")
    def refund_create() -> ResponseReturnValue:
        body = cast(RefundBody, current_call.body)
        refund = Refund(order_id=body.order_id, amount=body.amount)
        db.session.add(refund)
        db.session.commit()          # unchanged: see below
        return jsonify(refund_id=refund.id), 201
    # [end:view]

    with app.app_context():
        db.create_all()   # the app's tables and bailing_idempotency
    return app
