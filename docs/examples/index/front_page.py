"""The front page's app (docs/index.rst); the page shows it down to the end marker.

The two lookups it calls stand for the app's own, and are defined after it.
"""

# [start:app]
import os

from flask import Flask, jsonify
from bailing_flask import Bailing, Param, current_call, tool

app = Flask(__name__)
app.config["BAILING_SECRETS"] = [os.environ["BAILING_SECRET"]]   # the tool source's secret
bailing = Bailing(app)

@bailing.subject_loader
def load_user(subject):              # "tenant:user", signed by the hub
    return find_user(subject)         # your lookup; None for unknown subjects

@bailing.authorizer
def authorize(call):                  # only True allows; anything else denies
    return call.user is not None and call.user.can(call.tool.scope)

@app.get("/api/orders/<int:order_id>")
@tool(scope="order.read", subject_required=True,
      params=[Param("order_id", location="path", description="The order number.")])
def order_get(order_id):
    """Read one order of the acting user's company."""
    return jsonify(find_order(order_id, tenant=current_call.user.tenant))
# [end:app]


class User:
    def __init__(self, tenant, permissions):
        self.tenant, self.permissions = tenant, permissions

    def can(self, permission):
        return permission in self.permissions


USERS = {"t1:alice": User("t1", {"order.read"}), "t2:bob": User("t2", set())}
ORDERS = {1001: {"order_id": 1001, "tenant": "t1", "status": "paid"}}


def find_user(subject):
    return USERS.get(subject)


def find_order(order_id, tenant):
    order = ORDERS.get(order_id)
    return order if order is not None and order["tenant"] == tenant else {"error": "not_found"}
