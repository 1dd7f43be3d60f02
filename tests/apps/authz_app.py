"""A small multi-tenant app whose authorization comes from its own tables."""

from __future__ import annotations

from dataclasses import dataclass

from flask import Flask, jsonify
from pydantic import BaseModel, Field

from bailing_flask import Bailing, current_call, get_current_subject, tool, tool_result

from ..helpers import STRONG_SECRET


@dataclass(frozen=True)
class User:
    tenant: str
    user_id: str
    permissions: frozenset[str]


USERS = {
    ("t1", "u1"): User("t1", "u1", frozenset({"order.read", "order.write"})),
    ("t1", "u2"): User("t1", "u2", frozenset({"order.read"})),
    ("t2", "u9"): User("t2", "u9", frozenset({"order.read", "order.write"})),
    ("t1", "u3"): User("t1", "u3", frozenset()),
}
ORDERS = {101: "t1", 102: "t1", 201: "t2"}


class SearchQuery(BaseModel):
    keyword: str | None = Field(None, description="Text to match.", max_length=20)
    page: int = Field(1, ge=1, le=100, description="Page.")


class CreateBody(BaseModel):
    order_id: int = Field(description="Order.", ge=1, le=10**9)
    amount: float = Field(description="Amount.", gt=0, le=10_000)
    reason: str = Field(description="Why.", max_length=200)


def create_app(**config: object) -> tuple[Flask, Bailing]:
    app = Flask("authz_app")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://", **config)
    bailing = Bailing(app)

    @bailing.subject_loader
    def load(subject: str) -> User | None:
        tenant, _, user_id = subject.partition(":")
        if tenant == "boom":
            raise RuntimeError("directory down")
        return USERS.get((tenant, user_id))

    @bailing.authorizer
    def authorize(call) -> bool:
        user: User | None = call.user
        if user is None:
            return False
        needed = "order.write" if not call.tool.readonly else "order.read"
        if needed not in user.permissions:
            return False
        order_id = call.args.get("order_id")
        if order_id is not None and ORDERS.get(order_id) != user.tenant:
            return False
        return True

    @app.get("/api/orders/<int:order_id>")
    @tool(scope="order.read", subject_required=True)
    def order_get(order_id: int):
        """Read one order of the acting user's tenant."""
        return jsonify(order_id=order_id, tenant=ORDERS[order_id], subject=get_current_subject())

    @app.get("/api/orders")
    @tool(scope="order.read", query=SearchQuery)
    def order_search():
        """Search orders."""
        query = current_call.query
        return jsonify(keyword=query.keyword, page=query.page, args=dict(current_call.args))

    @app.post("/api/refunds")
    @tool(scope="order.write", body=CreateBody, subject_required=True)
    def refund_create():
        """Create a refund request."""
        body = current_call.body
        return tool_result("pending_approval", "Refund request created.", business_id=f"r-{body.order_id}")

    @app.get("/api/whoami")
    @tool(scope="order.read", authorizer=lambda call: call.user is not None)
    def whoami():
        """Who is acting (own authorizer: any known user, whatever their permissions)."""
        return jsonify(subject=get_current_subject())

    @app.get("/api/truthy")
    @tool(scope="order.read", authorizer=lambda call: "yes")
    def truthy():
        """An authorizer returning a truthy non-bool."""
        return jsonify(ok=True)

    @app.get("/api/raises")
    @tool(scope="order.read", authorizer=lambda call: 1 / 0)
    def raises():
        """An authorizer that raises."""
        return jsonify(ok=True)

    @app.post("/api/phone")
    @tool(scope="order.write", sensitive=True, body=CreateBody)
    def phone():
        """A sensitive tool."""
        return jsonify(ok=True)

    @app.get("/api/both")
    @tool(scope="order.read", allow_unsigned=True)
    def both():
        """Also serves humans through the app's own authentication."""
        return jsonify(signed=bool(current_call) if _signed() else False)

    def _signed() -> bool:
        from bailing_flask import get_current_call

        return get_current_call() is not None

    return app, bailing
