"""The quickstart's complete application (docs/quickstart.rst): one tool the hub can call."""

# [start:shop]
import os
from dataclasses import dataclass

from flask import Flask, jsonify
from flask.typing import ResponseReturnValue

from bailing_flask import Bailing, Param, ToolCall, current_call, tool


@dataclass(frozen=True)
class User:                                  # stands for your existing user model
    tenant: str
    name: str
    permissions: frozenset[str]

    def can(self, permission: str) -> bool:
        return permission in self.permissions


USERS = {("t1", "alice"): User("t1", "alice", frozenset({"order.read"}))}
ORDERS = {1001: {"order_id": 1001, "tenant": "t1", "item": "headphones", "status": "paid"}}

app = Flask(__name__)
app.config["BAILING_SECRETS"] = [os.environ["BAILING_SECRET"]]
bailing = Bailing(app)


@bailing.subject_loader
def load_user(subject: str) -> User | None:
    tenant, _, name = subject.partition(":")
    return USERS.get((tenant, name))         # None for unknown subjects: denied


@bailing.authorizer
def authorize(call: ToolCall) -> bool:
    # call.tool is None only for a signed request to a route that is not a tool
    return call.user is not None and call.tool is not None and call.user.can(call.tool.scope)


@app.get("/api/orders/<int:order_id>")
@tool(scope="order.read", subject_required=True,
      params=[Param("order_id", location="path", description="The order number.")])
def order_get(order_id: int) -> ResponseReturnValue:
    """Read one order of the acting user's company."""
    order = ORDERS.get(order_id)
    if order is None or order["tenant"] != current_call.user.tenant:
        return jsonify(error="not_found"), 404
    return jsonify(order)
# [end:shop]
