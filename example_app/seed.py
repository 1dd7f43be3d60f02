"""Demo data: two tenants, three users with permissions, customers and orders.

The data is written once, into an empty database, so a restarted demo keeps
the refund requests an agent created. Order ids are readable on purpose
(t1: 1001-1008, t2: 2001-2004) so that a cross-tenant attempt is easy to try.
"""

from __future__ import annotations

import sqlite3

from werkzeug.security import generate_password_hash

from .db import transaction

__all__ = ["DEMO_USERS", "seed_if_empty"]

TENANTS = [("t1", "Northwind Electronics"), ("t2", "Blue Bean Coffee")]

#: (tenant, user id, display name, password, permissions). The permission
#: names double as the tool scopes (see example_app.hub).
DEMO_USERS = [
    ("t1", "u1", "Alice Chen (support lead)", "alice-demo",
     ("order.read", "refund.read", "refund.write", "refund.execute", "customer.write")),
    ("t1", "u2", "Bob Wang (trainee, read only)", "bob-demo", ("order.read", "refund.read")),
    ("t2", "u9", "Carla Diaz (owner)", "carla-demo",
     ("order.read", "refund.read", "refund.write", "refund.execute", "customer.write")),
]

CUSTOMERS = [
    (101, "t1", "张三", "+86 138 0000 1001", "zhangsan@example.com"),
    (102, "t1", "Li Wei", "+86 139 0000 1002", "li.wei@example.com"),
    (103, "t1", "Anna Schmidt", "+49 30 1234567", "anna@example.de"),
    (201, "t2", "王五", "+86 137 0000 2001", "wangwu@example.com"),
    (202, "t2", "Bob Miller", "+1 555 0100", "bob.miller@example.com"),
]

ORDERS = [
    # id, tenant, customer, order no, item, amount (cents), status, created at
    (1001, "t1", 101, "T1-1001", "蓝牙耳机 Bluetooth earbuds", 29900, "paid", "2024-05-02T10:15:00Z"),
    (1002, "t1", 102, "T1-1002", "USB-C docking station", 129900, "paid", "2024-05-03T09:00:00Z"),
    (1003, "t1", 101, "T1-1003", "手机壳 Phone case", 3990, "pending", "2024-05-04T16:40:00Z"),
    (1004, "t1", 103, "T1-1004", "Standing desk", 64900, "shipped", "2024-05-05T11:20:00Z"),
    (1005, "t1", 102, "T1-1005", "Mechanical keyboard", 8900, "paid", "2024-05-06T08:05:00Z"),
    (1006, "t1", 103, "T1-1006", "Monitor arm", 12000, "cancelled", "2024-05-07T13:30:00Z"),
    (1007, "t1", 101, "T1-1007", "降噪耳机 Noise-cancelling headphones", 89900, "paid",
     "2024-05-08T19:45:00Z"),
    (1008, "t1", 103, "T1-1008", "Webcam", 7500, "refunded", "2024-05-09T07:10:00Z"),
    (2001, "t2", 201, "T2-2001", "Coffee beans 1 kg", 5800, "paid", "2024-05-02T12:00:00Z"),
    (2002, "t2", 202, "T2-2002", "Espresso machine", 149900, "paid", "2024-05-03T15:00:00Z"),
    (2003, "t2", 201, "T2-2003", "Coffee grinder", 22000, "pending", "2024-05-04T10:30:00Z"),
    (2004, "t2", 202, "T2-2004", "Milk frother", 4500, "paid", "2024-05-05T17:25:00Z"),
]

#: What the support staff wrote about some orders: the back office shows it, the tools never do.
INTERNAL_NOTES = {
    1001: "Customer called twice about the delivery date; goodwill voucher approved by Alice.",
    1002: "Dock was a replacement for a unit returned in April (RMA 4471).",
    1007: "VIP customer: escalate any complaint to the team lead.",
    2002: "Customer disputed the first charge with their bank; resolved.",
}

REFUND_REQUESTS = [
    # the webcam was refunded in full through the back office, before any agent existed
    (1, "t1", 1008, 7500, "Arrived broken", "executed", "u1", None, "2024-05-10T09:00:00Z", "u1",
     "2024-05-10T09:30:00Z"),
]


def seed_if_empty(conn: sqlite3.Connection) -> bool:
    """Insert the demo data unless the database already has tenants; returns whether it did."""
    if conn.execute("SELECT 1 FROM tenants LIMIT 1").fetchone() is not None:
        return False
    with transaction(conn):
        conn.executemany("INSERT INTO tenants (id, name) VALUES (?, ?)", TENANTS)
        for tenant_id, user_id, name, password, permissions in DEMO_USERS:
            conn.execute(
                "INSERT INTO users (tenant_id, user_id, display_name, password_hash) VALUES (?, ?, ?, ?)",
                (tenant_id, user_id, name, generate_password_hash(password)),
            )
            conn.executemany(
                "INSERT INTO permissions (tenant_id, user_id, permission) VALUES (?, ?, ?)",
                [(tenant_id, user_id, permission) for permission in permissions],
            )
        conn.executemany(
            "INSERT INTO customers (id, tenant_id, name, phone, email) VALUES (?, ?, ?, ?, ?)", CUSTOMERS
        )
        conn.executemany(
            "INSERT INTO orders (id, tenant_id, customer_id, order_no, item, amount_cents, status, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            ORDERS,
        )
        conn.executemany(
            "UPDATE orders SET internal_note = ? WHERE id = ?",
            [(note, order_id) for order_id, note in INTERNAL_NOTES.items()],
        )
        conn.executemany(
            "INSERT INTO refund_requests (id, tenant_id, order_id, amount_cents, reason, status, "
            "requested_by, job_id, created_at, executed_by, executed_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            REFUND_REQUESTS,
        )
    return True
