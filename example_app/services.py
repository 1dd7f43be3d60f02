"""Business rules for orders, refunds and customers, shared by the HTML pages and the tools.

Every function takes the tenant explicitly and filters on it in SQL, so a
caller that forgot an authorization check still cannot reach another
tenant's rows. Amounts are integer cents internally; the edges convert.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from typing import Any

from .db import transaction

__all__ = [
    "BACK_OFFICE_APPROVAL_CENTS",
    "PAGE_SIZE",
    "NotFound",
    "OrderStatus",
    "RefundRefused",
    "RefundRequest",
    "cents",
    "create_refund_request",
    "execute_refund",
    "get_order",
    "owner_tenant",
    "preview_refund",
    "search_orders",
    "update_customer_phone",
]

PAGE_SIZE = 5
#: Refund requests above this need a finance supervisor in the back office
#: before they can be executed (the legacy rule, independent of the hub).
BACK_OFFICE_APPROVAL_CENTS = 200_00
REFUNDABLE = frozenset({"paid", "shipped"})


class OrderStatus(str, Enum):
    """The life cycle of an order, as stored in ``orders.status``."""

    PENDING = "pending"
    PAID = "paid"
    SHIPPED = "shipped"
    CANCELLED = "cancelled"
    REFUNDED = "refunded"


class NotFound(LookupError):
    """No such row in the caller's tenant (other tenants' rows are reported the same way)."""


class RefundRefused(Exception):
    """A business rule refuses the refund; ``code`` is stable, ``message`` is for humans and agents."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class RefundRequest:
    id: int
    order_id: int
    amount_cents: int
    status: str


def cents(amount: float) -> int:
    """Convert a money amount to integer cents (callers validate at most two decimals)."""
    return int(round(amount * 100))


def money(amount_cents: int) -> float:
    return amount_cents / 100


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _like(term: str) -> str:
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _order_json(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "order_id": row["id"],
        "order_no": row["order_no"],
        "customer": row["customer_name"],
        "item": row["item"],
        "amount": money(row["amount_cents"]),
        "status": row["status"],
        "created_at": row["created_at"],
    }


_ORDER_SELECT = """
    SELECT o.id, o.order_no, o.item, o.amount_cents, o.status, o.created_at, o.customer_id,
           o.internal_note, c.name AS customer_name
      FROM orders o JOIN customers c ON c.id = o.customer_id
"""


def search_orders(
    conn: sqlite3.Connection, tenant_id: str, *, keyword: str | None = None,
    status: str | None = None, page: int = 1, page_size: int = PAGE_SIZE,
) -> dict[str, Any]:
    """One page of the tenant's orders, newest first.

    Every whitespace-separated word of ``keyword`` must appear in the order
    number, the item or the customer's name, so "张三 耳机" narrows down
    instead of matching nothing.
    """
    where = ["o.tenant_id = ?"]
    params: list[Any] = [tenant_id]
    for term in (keyword or "").split():
        where.append("(o.order_no LIKE ? ESCAPE '\\' OR o.item LIKE ? ESCAPE '\\' "
                     "OR c.name LIKE ? ESCAPE '\\')")
        params += [_like(term)] * 3
    if status:
        where.append("o.status = ?")
        params.append(status)
    condition = " AND ".join(where)
    total = conn.execute(
        f"SELECT COUNT(*) FROM orders o JOIN customers c ON c.id = o.customer_id WHERE {condition}",
        params,
    ).fetchone()[0]
    rows = conn.execute(
        f"{_ORDER_SELECT} WHERE {condition} ORDER BY o.created_at DESC, o.id DESC LIMIT ? OFFSET ?",
        [*params, page_size, (page - 1) * page_size],
    ).fetchall()
    return {
        "orders": [_order_json(row) for row in rows],
        "page": page,
        "page_size": page_size,
        "total": total,
        "has_more": page * page_size < total,
    }


def _order_row(conn: sqlite3.Connection, tenant_id: str, order_id: int) -> sqlite3.Row:
    row = conn.execute(
        f"{_ORDER_SELECT} WHERE o.tenant_id = ? AND o.id = ?", (tenant_id, order_id)
    ).fetchone()
    if row is None:
        raise NotFound(f"order {order_id}")
    return row  # type: ignore[no-any-return]


def _refund_json(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "refund_request_id": row["id"],
        "amount": money(row["amount_cents"]),
        "reason": row["reason"],
        "status": row["status"],
        "requested_by": row["requested_by"],
        "job_id": row["job_id"],
        "created_at": row["created_at"],
        "executed_at": row["executed_at"],
    }


def get_order(conn: sqlite3.Connection, tenant_id: str, order_id: int) -> dict[str, Any]:
    """An order with its customer and refund requests, as the back office shows it.

    Everything staff may see: the customer's phone number, the internal
    note, who filed each refund request. (The ``order_get`` tool declares
    what of it an agent gets.) Raises :class:`NotFound`.
    """
    row = _order_row(conn, tenant_id, order_id)
    order = _order_json(row)
    order["internal_note"] = row["internal_note"]
    customer = conn.execute(
        "SELECT id, name, email, phone FROM customers WHERE id = ? AND tenant_id = ?",
        (row["customer_id"], tenant_id),
    ).fetchone()
    order["customer"] = {"customer_id": customer["id"], "name": customer["name"],
                         "email": customer["email"], "phone": customer["phone"]}
    refunds = conn.execute(
        "SELECT * FROM refund_requests WHERE order_id = ? AND tenant_id = ? ORDER BY id",
        (order_id, tenant_id),
    ).fetchall()
    order["refund_requests"] = [_refund_json(r) for r in refunds]
    order["refundable_amount"] = money(_refundable_cents(conn, row))
    return order


def _requested_cents(conn: sqlite3.Connection, order_id: int) -> int:
    """Cents already promised back: every request that was not rejected."""
    return int(conn.execute(
        "SELECT COALESCE(SUM(amount_cents), 0) FROM refund_requests "
        "WHERE order_id = ? AND status != 'rejected'",
        (order_id,),
    ).fetchone()[0])


def _refundable_cents(conn: sqlite3.Connection, order: sqlite3.Row) -> int:
    if order["status"] not in REFUNDABLE:
        return 0
    return max(0, order["amount_cents"] - _requested_cents(conn, order["id"]))


def _check_refund(conn: sqlite3.Connection, order: sqlite3.Row, amount_cents: int) -> None:
    if order["status"] not in REFUNDABLE:
        raise RefundRefused(
            "order_not_refundable",
            f"Order {order['id']} is {order['status']}; only paid or shipped orders can be refunded.",
        )
    remaining = _refundable_cents(conn, order)
    if amount_cents > remaining:
        raise RefundRefused(
            "amount_exceeds_refundable",
            f"Order {order['id']} has {money(remaining):.2f} left to refund; "
            f"{money(amount_cents):.2f} was requested.",
        )


def preview_refund(
    conn: sqlite3.Connection, tenant_id: str, order_id: int, amount_cents: int | None
) -> dict[str, Any]:
    """What a refund request would do, without writing anything."""
    order = _order_row(conn, tenant_id, order_id)
    result: dict[str, Any] = {
        "order_id": order_id,
        "order_status": order["status"],
        "order_amount": money(order["amount_cents"]),
        "refundable_amount": money(_refundable_cents(conn, order)),
    }
    if amount_cents is None:
        return result
    try:
        _check_refund(conn, order, amount_cents)
    except RefundRefused as refused:
        result.update(accepted=False, reason=refused.code, message=refused.message)
    else:
        result.update(
            accepted=True,
            needs_back_office_approval=amount_cents > BACK_OFFICE_APPROVAL_CENTS,
        )
    result["requested_amount"] = money(amount_cents)
    return result


def create_refund_request(
    conn: sqlite3.Connection, tenant_id: str, *, requested_by: str, order_id: int,
    amount_cents: int, reason: str, job_id: str | None = None,
) -> RefundRequest:
    """File a refund request; large ones wait for back-office approval.

    The check and the insert share one write transaction, so two concurrent
    requests cannot together exceed the order's amount.
    """
    with transaction(conn):
        order = _order_row(conn, tenant_id, order_id)
        _check_refund(conn, order, amount_cents)
        status = "pending_approval" if amount_cents > BACK_OFFICE_APPROVAL_CENTS else "submitted"
        cursor = conn.execute(
            "INSERT INTO refund_requests (tenant_id, order_id, amount_cents, reason, status, "
            "requested_by, job_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (tenant_id, order_id, amount_cents, reason, status, requested_by, job_id, _now()),
        )
    return RefundRequest(int(cursor.lastrowid or 0), order_id, amount_cents, status)


def execute_refund(
    conn: sqlite3.Connection, tenant_id: str, *, request_id: int, executed_by: str
) -> dict[str, Any]:
    """Pay out a submitted refund request; the order becomes ``refunded`` once fully paid back."""
    with transaction(conn):
        row = conn.execute(
            "SELECT * FROM refund_requests WHERE id = ? AND tenant_id = ?", (request_id, tenant_id)
        ).fetchone()
        if row is None:
            raise NotFound(f"refund request {request_id}")
        if row["status"] == "pending_approval":
            raise RefundRefused(
                "approval_pending",
                f"Refund request {request_id} waits for a finance supervisor's approval in the back office.",
            )
        if row["status"] != "submitted":
            raise RefundRefused(
                f"request_{row['status']}", f"Refund request {request_id} is already {row['status']}."
            )
        conn.execute(
            "UPDATE refund_requests SET status = 'executed', executed_by = ?, executed_at = ? WHERE id = ?",
            (executed_by, _now(), request_id),
        )
        paid_back = conn.execute(
            "SELECT COALESCE(SUM(amount_cents), 0) FROM refund_requests "
            "WHERE order_id = ? AND status = 'executed'",
            (row["order_id"],),
        ).fetchone()[0]
        conn.execute(
            "UPDATE orders SET status = 'refunded' WHERE id = ? AND amount_cents <= ?",
            (row["order_id"], paid_back),
        )
    return {
        "refund_request_id": request_id, "order_id": row["order_id"], "amount": money(row["amount_cents"]),
    }


def update_customer_phone(conn: sqlite3.Connection, tenant_id: str, customer_id: int, phone: str) -> None:
    """Replace a customer's phone number (raises :class:`NotFound`)."""
    with transaction(conn):
        cursor = conn.execute(
            "UPDATE customers SET phone = ? WHERE id = ? AND tenant_id = ?", (phone, customer_id, tenant_id)
        )
    if cursor.rowcount == 0:
        raise NotFound(f"customer {customer_id}")


_OWNER_QUERIES = {
    "order_id": "SELECT tenant_id FROM orders WHERE id = ?",
    "request_id": "SELECT tenant_id FROM refund_requests WHERE id = ?",
    "customer_id": "SELECT tenant_id FROM customers WHERE id = ?",
}


def owner_tenant(conn: sqlite3.Connection, argument: str, value: Any) -> str | None:
    """The tenant owning the row an argument names (``None``: no such row).

    Only for the authorizer: it answers "whose is it", never the row itself.
    """
    query = _OWNER_QUERIES[argument]
    row = conn.execute(query, (value,)).fetchone()
    return None if row is None else str(row[0])


def owned_arguments() -> tuple[str, ...]:
    """The argument names that identify a tenant-owned row."""
    return tuple(_OWNER_QUERIES)
