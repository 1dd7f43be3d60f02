"""The base URL page's shop (docs/concepts/base-url.rst): served under ``/api``, registered at the origin."""

import os

from flask import Flask, jsonify
from flask.typing import ResponseReturnValue

from bailing_flask import Bailing, ToolCall, tool

app = Flask(__name__)
app.config.update(
    BAILING_SECRETS=[os.environ["BAILING_SECRET"]],
    BAILING_BASE_URL="https://shop.example.com",  # what the hub's tool source says
    APPLICATION_ROOT="/api",                       # where the server mounts the app
)
bailing = Bailing(app)


@bailing.subject_loader
def load_user(subject: str) -> str | None:
    return subject if subject == "t1:alice" else None


@bailing.authorizer
def authorize(call: ToolCall) -> bool:
    return call.user is not None


@app.get("/orders")
@tool(scope="order.read", subject_required=True)
def order_search() -> ResponseReturnValue:
    """List the acting user's orders."""
    return jsonify(orders=[])
