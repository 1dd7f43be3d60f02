"""The back office of docs/examples/minimal/orders.py: full records, more than an agent may see."""

from typing import Any

ORDERS: dict[int, dict[str, Any]] = {
    1001: {"order_id": 1001, "status": "paid", "note": "Leave at the door.", "internal_note": "VIP, 20% margin",
           "warehouse": "B7", "customer": {"customer_id": 7, "name": "Alice Martin", "email": "alice@example.com",
                                           "phone": "+33 6 12 34 56 78", "credit_limit": 5000},
           "refund_requests": [{"refund_request_id": 12, "amount": 19.9, "status": "pending",
                                "filed_by": "u7"}]},
    # a row migrated badly from the old system: no e-mail, an amount that is not a number
    1002: {"order_id": 1002, "status": "shipped", "note": "", "customer": {"customer_id": 8, "name": "Bob"},
           "refund_requests": [{"refund_request_id": 13, "amount": "n/a", "status": "pending"}]},
}

#: the list the order list tool reads, newest first; the third one has a long note
LIST = [{"order_id": 1000 + number, "note": "Gift wrap." if number != 6 else "Call before delivery. " * 57,
         "internal_note": "margin 20%"} for number in range(8, 0, -1)]

PROFILES: dict[str, dict[str, Any]] = {"t1:alice": {"user_id": 7, "name": "Alice Martin", "version": 3,
                                           "password_hash": "pbkdf2:sha256:600000$..."}}

REFUND_REQUESTS: dict[int, int] = {1001: 12}   # order -> its open refund request


def get_order(order_id: int) -> dict[str, Any] | None:
    return ORDERS.get(order_id)


def list_orders() -> dict[str, Any]:
    return {"orders": LIST, "total": len(LIST), "page": 1, "page_size": 100}


def profile_of(subject: str | None) -> dict[str, Any]:
    return PROFILES[subject or ""]
