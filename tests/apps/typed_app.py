"""A small user app written against bailing_flask's public API, type-checked with ``mypy --strict``.

CI checks it (and ``tests/test_typing.py`` does too): a ``@tool`` view keeps
its own type, ``tool_defaults`` returns what it was given, and
``bailing.hub_client()`` is a :class:`~bailing_flask.HubClient`.
"""

from __future__ import annotations

from flask import Blueprint, Flask, Response, jsonify
from flask.views import MethodView
from pydantic import BaseModel, Field

from bailing_flask import Bailing, Param, ToolCall, get_current_call, tool, tool_defaults
from bailing_flask.hub.client import HubClient


class RefundBody(BaseModel):
    order_id: int = Field(ge=1, description="The order to refund.")
    reason: str = Field(max_length=200, description="Why.")


app = Flask(__name__)
bailing = Bailing(app, secrets=["a-secret-of-at-least-32-bytes-0123456789"], store="memory://",
                  response_max_items=20)
api: Blueprint = tool_defaults(Blueprint("api", __name__), scope_prefix="shop.", subject_required=True)


@bailing.subject_loader
def load_user(subject: str) -> str | None:
    return subject if subject.startswith("t1:") else None


@bailing.authorizer
def authorize(call: ToolCall) -> bool:
    return call.user is not None


@api.get("/orders/<int:order_id>")
@tool(scope="order.read", risk="low", returns="One order.")
def order_get(order_id: int) -> Response:
    """Read one order."""
    call = get_current_call()
    return jsonify(order_id=order_id, subject=call.subject if call else None)


class OrderView(BaseModel):
    order_id: int
    status: str


def observation(value: dict[str, object]) -> dict[str, object]:
    return {**value, "message": "one order"}


@api.get("/orders")
@tool(scope="order.read", response=list[OrderView], result=observation,
      params=[Param("owner", description="Whose orders to review.")],
      model_chooses={"owner": "the support lead picks whose orders to review"})
def order_list() -> list[dict[str, object]]:
    """List orders."""
    return [{"order_id": 1, "status": "paid", "internal_note": "x"}]


@api.get("/orders/latest")
@tool(scope="order.read", response=OrderView)
def order_latest() -> dict[str, object]:
    """The newest order."""
    return {"order_id": 1, "status": "paid"}


@tool(scope="refund.write", body=RefundBody, repeats="replay")
class RefundAPI(MethodView):
    def post(self) -> tuple[Response, int]:
        call = get_current_call()
        assert call is not None
        body = call.body_as(RefundBody)
        return jsonify(order_id=body.order_id), 201


api.add_url_rule("/refunds", view_func=RefundAPI.as_view("refund"))
app.register_blueprint(api, url_prefix="/api")


def decide(approval_id: int) -> None:
    with app.app_context():
        client: HubClient = bailing.hub_client()
        del client, approval_id

