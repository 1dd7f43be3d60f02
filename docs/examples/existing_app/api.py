"""The JSON API under /api/v1 that the team exposes to the hub, tool by tool."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

from flask import Blueprint, jsonify, request
from flask.views import MethodView
from flask_login import current_user, login_required, login_user
from pydantic import BaseModel, Field

import bailing_flask
from bailing_flask import get_arguments, get_current_call, tool, tool_defaults

from .extensions import cache, db, limiter
from .guards import admin
from .models import Refund, User

api = Blueprint("api", __name__, url_prefix="/api/v1")
tool_defaults(api, subject_required=True)


# [start:login-required]
@api.get("/me")
@login_required                      # unchanged: the bridge makes current_user the subject's user
@tool(scope="profile.read")
def me() -> Any:
    """Who the acting user is."""
    return jsonify(login=current_user.login, tenant=current_user.tenant)
# [end:login-required]


# [start:method-view]
class RefundBody(BaseModel):
    order_id: int = Field(description="The order to refund.", ge=1, le=10**9)
    amount: Decimal = Field(description="The amount to refund, in euros.", gt=0, le=10_000)


class RefundsAPI(MethodView):
    decorators = [login_required]    # unchanged too

    @tool(scope="refund.read")
    def get(self) -> Any:
        """The acting user's refunds."""
        refunds = db.session.scalars(db.select(Refund).filter_by(user_id=current_user.id))
        return jsonify(refunds=[{"order_id": r.order_id, "amount": str(r.amount)} for r in refunds])

    @tool(scope="refund.write", body=RefundBody, approval_when=["amount > 500"])
    def post(self) -> Any:
        """Refund an order; above 500 euros a human approves it in the hub first."""
        body = get_arguments().body_as(RefundBody)
        call = get_current_call()
        db.session.add(Refund(user_id=current_user.id, order_id=body.order_id, amount=body.amount,
                              job_id=call.job_id if call else None))
        db.session.commit()
        return jsonify(ok=True, status="executed", amount=str(body.amount)), 201


api.add_url_rule("/refunds", view_func=RefundsAPI.as_view("refunds"))
# [end:method-view]


# [start:async]
@api.get("/stats")
@tool(scope="stats.read")
async def stats() -> Any:
    """How many refunds the acting user has."""
    await asyncio.sleep(0)           # e.g. an async HTTP client
    count = db.session.scalar(db.select(db.func.count(Refund.id)).filter_by(user_id=current_user.id))
    return jsonify(refunds=count)
# [end:async]


# [start:per-tool-limit]
@api.get("/export")
@limiter.limit("10/hour", exempt_when=lambda: not bailing_flask.is_tool_call())
@tool(scope="refund.read")
def export() -> Any:
    """Export every refund of the acting user (expensive: 10 per hour per hub user)."""
    return jsonify(rows=[])
# [end:per-tool-limit]


# [start:cache]
@api.get("/summary")
@cache.cached(timeout=60, key_prefix=bailing_flask.cache_key)   # one entry per acting user
@tool(scope="refund.read")
def summary() -> Any:
    """The acting user's refund total."""
    total = db.session.scalar(db.select(db.func.sum(Refund.amount)).filter_by(user_id=current_user.id))
    return jsonify(login=current_user.login, total=str(total or 0))
# [end:cache]


# [start:shared-route]
class FeedbackBody(BaseModel):
    text: str = Field(description="The feedback.", min_length=1, max_length=500)


@api.post("/feedback")
@tool(scope="feedback.write", body=FeedbackBody, allow_unsigned=True, validate_unsigned=True,
      subject_required=False)
def feedback() -> Any:
    """Leave feedback (the web page posts the same form here)."""
    if get_current_call() is None and not current_user.is_authenticated:
        return jsonify(error="session required"), 401     # humans: the app's own rule
    text = get_arguments().body_as(FeedbackBody).text     # one way to read it, for both
    return jsonify(ok=True, length=len(text)), 201
# [end:shared-route]


@admin.get("/users")
@tool(scope="user.read")
def user_list() -> Any:
    """The users of the acting user's tenant."""
    users = db.session.scalars(db.select(User).filter_by(tenant=current_user.tenant))
    return jsonify(users=[u.login for u in users])


auth = Blueprint("auth", __name__)


@auth.route("/login", methods=["GET", "POST"])
def login() -> Any:
    if request.method == "POST":
        user = db.session.scalar(db.select(User).filter_by(login=request.form["login"]))
        if user is None:
            return jsonify(error="unknown user"), 401
        login_user(user)
        return jsonify(ok=True)
    from flask_wtf.csrf import generate_csrf

    return jsonify(csrf_token=generate_csrf())
