"""The example app without bailing_flask: the baseline of the load run's throughput figure.

``create_app(config)`` builds the same shop as ``example_app.create_app``
(the same SQLite database and services, the same back-office pages and
login, the same activity table) but serves the tool routes with plain Flask
views instead of ``@tool`` + ``Bailing``. Each view does, by hand and in the
cheapest correct form, the work the package does for the example's view
before it runs, so that the comparison measures what the package adds and
not a view that skips the business's own work:

* the acting user is read from ``X-Bailing-On-Behalf-Of`` and loaded with
  the shop's own ``load_user`` (nothing verifies that the header was
  signed);
* the same permission and tenant-ownership checks as
  ``example_app.hub.authorize``;
* the arguments are validated with the same pydantic models;
* the same service calls, the same statuses and the same answer shapes
  (``OrderSearchResult``, ``OrderView``, the workflow result);
* one row per call in the shop's ``hub_activity`` table, written by the
  example's own function (in the real app the package's audit signal feeds
  it; here an ``after_request`` hook does).

What is left out is what the package brings: signature verification, the
gate's bookkeeping, the idempotency records (a repeated call runs again
here), the business-approval check (``refund_execute`` is not served), the
response projection machinery and the audit record itself.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from flask import Blueprint, Flask, Response, current_app, g, jsonify, request, url_for
from pydantic import BaseModel, ValidationError

from example_app import activity, auth, db, services, settings, views
from example_app.auth import User, load_user
from example_app.hub import parse_subject
from example_app.tools import (
    HUB_APPROVAL_LIMIT,
    SEARCH_SHOWN,
    OrderSearchQuery,
    OrderSearchResult,
    OrderView,
    PhoneBody,
    RefundPreviewBody,
    RefundRequestBody,
    search_observation,
)

__all__ = ["create_app"]

api = Blueprint("bare_api", __name__, url_prefix="/api")


def _json(payload: Any, status: int = 200) -> Response:
    """Compact UTF-8 JSON in the payload's own key order, as the package answers."""
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return Response(body, status=status, mimetype="application/json")


_MESSAGES = {
    "forbidden": "The acting subject is not allowed to use this tool.",
    "invalid_parameter": "Some parameters do not match the tool's declaration.",
}


def _refusal(status: int, reason: str) -> Response:
    g.bare_reason = reason
    return _json({"error": reason, "reason": reason, "message": _MESSAGES[reason]}, status)


def _user(scope: str, owned: Mapping[str, Any]) -> User | Response:
    """What the gate and ``example_app.hub`` decide before the view, without any signature."""
    parsed = parse_subject(request.headers.get("X-Bailing-On-Behalf-Of", ""))
    user = load_user(db.get_db(), *parsed) if parsed else None
    if user is None or not user.can(scope):
        return _refusal(403, "forbidden")
    conn = db.get_db()
    for name, value in owned.items():
        if services.owner_tenant(conn, name, value) != user.tenant_id:
            return _refusal(403, "forbidden")
    g.bare_user = user
    return user


def _query(model: type[BaseModel]) -> Any:
    try:
        return model.model_validate(request.args.to_dict())
    except ValidationError:
        return _refusal(422, "invalid_parameter")


def _body(model: type[BaseModel]) -> Any:
    try:
        return model.model_validate_json(request.get_data())
    except ValidationError:
        return _refusal(422, "invalid_parameter")


def _not_found(what: str) -> Response:
    return _json({"error": "not_found", "reason": "not_found", "message": f"No {what} in your company."},
                 404)


def _result(status: str, message: str, http_status: int, **fields: Any) -> Response:
    return _json({"ok": status != "rejected", "status": status, "message": message, **fields}, http_status)


def _order_page(order_id: int) -> str:
    return str(current_app.config["PUBLIC_BASE_URL"]).rstrip("/") + url_for("shop.order_detail",
                                                                           order_id=order_id)


@api.get("/orders")
def order_search() -> Any:
    query = _query(OrderSearchQuery)
    if isinstance(query, Response):
        return query
    user = _user("order.read", {})
    if isinstance(user, Response):
        return user
    found = search_observation(services.search_orders(
        db.get_db(), user.tenant_id, keyword=query.keyword,
        status=query.status.value if query.status else None, page_size=100,
    ))
    shown = OrderSearchResult.model_validate({**found, "orders": found["orders"][:SEARCH_SHOWN]})
    answer = shown.model_dump(mode="json")
    if found["total"] > SEARCH_SHOWN:
        answer["truncated"] = {"orders": f"{SEARCH_SHOWN} of {found['total']} items shown; more exist"}
    return _json(answer)


@api.get("/orders/<int:order_id>")
def order_get(order_id: int) -> Any:
    user = _user("order.read", {"order_id": order_id})
    if isinstance(user, Response):
        return user
    try:
        order = services.get_order(db.get_db(), user.tenant_id, order_id)
    except services.NotFound:
        return _not_found(f"order {order_id}")
    order["refund_requests"] = order["refund_requests"][:50]  # the package's default list cap
    return _json(OrderView.model_validate(order).model_dump(mode="json"))


@api.post("/refunds/preview")
def refund_preview() -> Any:
    body = _body(RefundPreviewBody)
    if isinstance(body, Response):
        return body
    user = _user("refund.read", {"order_id": body.order_id})
    if isinstance(user, Response):
        return user
    amount = None if body.amount is None else services.cents(body.amount)
    try:
        preview = services.preview_refund(db.get_db(), user.tenant_id, body.order_id, amount)
    except services.NotFound:
        return _not_found(f"order {body.order_id}")
    if body.amount is not None:
        preview["needs_hub_approval"] = body.amount > HUB_APPROVAL_LIMIT
    return jsonify(preview)  # as the example's view answers it


@api.post("/refunds/requests")
def refund_request_create() -> Any:
    body = _body(RefundRequestBody)
    if isinstance(body, Response):
        return body
    user = _user("refund.write", {"order_id": body.order_id})
    if isinstance(user, Response):
        return user
    try:
        created = services.create_refund_request(
            db.get_db(), user.tenant_id, requested_by=user.user_id, order_id=body.order_id,
            amount_cents=services.cents(body.amount), reason=body.reason,
            job_id=request.headers.get("X-Bailing-Job-Id"),
        )
    except services.NotFound:
        return _not_found(f"order {body.order_id}")
    except services.RefundRefused as refused:
        return _result("rejected", refused.message, 409, reason=refused.code, order_id=body.order_id)
    submitted = created.status == "submitted"
    message = (f"Refund request {created.id} submitted; it can be executed now." if submitted
               else f"Refund request {created.id} waits for a finance supervisor's approval.")
    return _result("submitted" if submitted else "pending_approval", message, 201,
                   business_id=created.id, url=_order_page(body.order_id),
                   refund_request_id=created.id, order_id=body.order_id, amount=body.amount)


@api.put("/customers/<int:customer_id>/phone")
def customer_update_phone(customer_id: int) -> Any:
    body = _body(PhoneBody)
    if isinstance(body, Response):
        return body
    user = _user("customer.write", {"customer_id": customer_id})
    if isinstance(user, Response):
        return user
    try:
        services.update_customer_phone(db.get_db(), user.tenant_id, customer_id, body.phone)
    except services.NotFound:
        return _not_found(f"customer {customer_id}")
    return _result("executed", "Phone number updated.", 200, business_id=customer_id)


@api.before_request
def _started() -> None:
    g.bare_started = time.perf_counter()


@api.after_request
def _activity(response: Response) -> Response:
    """The row the example's audit-signal listener writes, written here by hand."""
    user = g.get("bare_user")
    record = {
        "time": datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "event": "tool_call", "subject": request.headers.get("X-Bailing-On-Behalf-Of"),
        "tool": request.endpoint.rsplit(".", 1)[-1] if request.endpoint else None,
        "status": response.status_code, "reason": g.get("bare_reason"),
        "duration_ms": (time.perf_counter() - g.get("bare_started", time.perf_counter())) * 1000,
        "job_id": request.headers.get("X-Bailing-Job-Id"),
        "error": None, "approval_id": None,
    }
    if user is None:
        record["subject"] = None
    activity._record(current_app._get_current_object(), record)  # type: ignore[attr-defined]
    return response


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    """The shop of ``example_app.create_app`` with plain views in place of the governed tools."""
    app = Flask("example_app", instance_relative_config=True)
    app.config.update(config or {})
    settings.apply(app)
    app.json.ensure_ascii = False  # type: ignore[attr-defined]
    db.init_app(app)
    app.register_blueprint(auth.bp)
    app.register_blueprint(views.bp)
    app.register_blueprint(api)
    from contextlib import closing

    with closing(db.connect(app.config["DATABASE"])) as conn:
        conn.executescript(activity.SCHEMA)
    return app
