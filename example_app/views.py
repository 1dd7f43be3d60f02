"""The back-office HTML pages: order list and order detail, behind the session login.

These routes predate the hub integration and are deliberately untouched by
it: no ``@tool``, no signature, the same services as the tools use.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, redirect, render_template, request, url_for

from . import services
from .auth import current_user, login_required, permission_required
from .db import get_db

__all__ = ["bp"]

bp = Blueprint("shop", __name__)


@bp.get("/")
def index() -> Any:
    return redirect(url_for("shop.order_list"))


@bp.get("/orders")
@login_required
@permission_required("order.read")
def order_list() -> Any:
    user = current_user()
    assert user is not None  # login_required
    status = request.args.get("status") or None
    if status not in {s.value for s in services.OrderStatus} | {None}:
        status = None
    page = request.args.get("page", 1, type=int) or 1
    result = services.search_orders(
        get_db(), user.tenant_id, keyword=request.args.get("q"), status=status, page=max(page, 1)
    )
    return render_template(
        "orders.html", result=result, keyword=request.args.get("q", ""), status=status,
        statuses=[s.value for s in services.OrderStatus],
    )


@bp.get("/orders/<int:order_id>")
@login_required
@permission_required("order.read")
def order_detail(order_id: int) -> Any:
    user = current_user()
    assert user is not None
    try:
        order = services.get_order(get_db(), user.tenant_id, order_id)
    except services.NotFound:
        abort(404)  # other tenants' orders do not exist, as far as this user can tell
    return render_template("order_detail.html", order=order)
