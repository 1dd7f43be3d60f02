"""The example shop, called exactly as BailingHub calls it (HubSimulator), plus its legacy pages.

Every test gets its own copy of the seeded database and an in-memory
idempotency store, so nothing is written into the repository.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import closing
from typing import Any
from pathlib import Path

import pytest
from flask import Flask

from bailing_flask.hub.fake import FakeHub, serve
from bailing_flask.testing import HubResponse, HubSimulator
from example_app import create_app

from .helpers import STRONG_SECRET, reconfigure

SECRET = STRONG_SECRET
TOOL_NAMES = {
    "order_search", "order_get", "refund_preview", "refund_request_create", "refund_execute",
    "customer_update_phone",
}
T1_ORDERS = set(range(1001, 1009))
T2_ORDERS = set(range(2001, 2005))


CLIENT_TOKEN = "client-token-example-shop-0123456789abcdef"


def _config(database: Path, **extra: object) -> dict[str, object]:
    return {
        "TESTING": True,
        "DATABASE": str(database),
        "BAILING_SECRETS": [SECRET],
        "BAILING_STORE": "memory://",
        "SECRET_KEY": "test-session-key",
        "BAILING_CLIENT_TOKENS": [CLIENT_TOKEN],
        "BAILING_HUB_URL": "http://127.0.0.1:9",  # a fake hub replaces it where decisions are sent
        **extra,
    }


@pytest.fixture(scope="session")
def seeded_database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Create and seed the demo database once (password hashing is slow on purpose)."""
    path = tmp_path_factory.mktemp("seed") / "shop.sqlite3"
    create_app(_config(path))
    return path


@pytest.fixture
def database(tmp_path: Path, seeded_database: Path) -> Path:
    path = tmp_path / "shop.sqlite3"
    shutil.copy(seeded_database, path)
    return path


@pytest.fixture
def app(database: Path) -> Flask:
    return create_app(_config(database))


@pytest.fixture
def hub(app: Flask) -> HubSimulator:
    return HubSimulator(app, SECRET)


@pytest.fixture
def fake_hub(app: Flask, hub: HubSimulator) -> Iterator[FakeHub]:
    """The hub's decision endpoint on a loopback port; the simulator registers approvals there."""
    with serve() as (fake, url):
        reconfigure(app, hub_url=url)
        hub.fake_hub = fake
        yield fake


def staff(app: Flask, user: str = "u1", password: str = "alice-demo", tenant: str = "t1") -> Any:
    client = app.test_client()
    client.post("/login", data={"tenant": tenant, "username": user, "password": password})
    return client


def approve_on_the_activity_page(app: Flask, hub: HubSimulator, args: dict[str, Any], *,
                                 subject: str = "t1:u1", job_id: str) -> int:
    """The hub asks the shop; Alice approves on /activity; the decision goes to the hub."""
    sent = hub.send_approval_request("refund_execute", args, subject=subject, job_id=job_id)
    assert sent.status == 200, sent.text
    approval_id = int(sent.request.json()["approval_id"])  # type: ignore[union-attr]
    client = staff(app)
    assert f"<td>{approval_id}</td>" in client.get("/activity/").get_data(as_text=True)
    decided = client.post(f"/activity/approvals/{approval_id}", data={"decision": "approved"})
    assert decided.status_code == 302
    return approval_id


def order_ids(response: HubResponse) -> list[int]:
    assert response.status == 200, response.text
    return [order["order_id"] for order in response.json()["orders"]]


def refund_rows(database: Path, order_id: int) -> list[sqlite3.Row]:
    with sqlite3.connect(database) as conn:
        conn.row_factory = sqlite3.Row
        return conn.execute("SELECT * FROM refund_requests WHERE order_id = ?", (order_id,)).fetchall()


# -- order_search / order_get ----------------------------------------------------------------------


def test_search_by_keyword_and_status(hub: HubSimulator) -> None:
    assert set(order_ids(hub.call("order_search", {"keyword": "耳机"}, subject="t1:u1"))) == {1001, 1007}
    assert set(order_ids(hub.call("order_search", {"keyword": "张三 降噪"}, subject="t1:u1"))) == {1007}
    paid = hub.call("order_search", {"status": "paid"}, subject="t1:u1").json()
    assert {o["order_id"] for o in paid["orders"]} == {1001, 1002, 1005, 1007}
    assert paid["message"] == "4 order(s) match." and "truncated" not in paid


def test_search_shows_the_newest_five_and_says_more_exist(hub: HubSimulator) -> None:
    found = hub.call("order_search", {}, subject="t1:u1").json()
    assert [o["order_id"] for o in found["orders"]] == [1008, 1007, 1006, 1005, 1004]
    assert found["total"] == 8
    # the package's marker, and the sentence the tool's result= converter adds
    assert found["truncated"] == {"orders": "5 of 8 items shown; more exist"}
    assert found["message"].startswith("8 orders match; the newest 5 are shown. Narrow the search")
    # the service's paging fields are not part of the declared shape
    assert set(found) == {"orders", "total", "message", "truncated"}
    assert all(isinstance(o["order_id"], int) for o in found["orders"])
    older = hub.call("order_search", {"keyword": "T1-100"}, subject="t1:u1").json()
    assert older["total"] == 8 and "truncated" in older


def test_search_only_sees_the_subjects_tenant(hub: HubSimulator) -> None:
    assert set(order_ids(hub.call("order_search", {}, subject="t2:u9"))) == T2_ORDERS
    assert order_ids(hub.call("order_search", {"keyword": "T1-1001"}, subject="t2:u9")) == []
    assert order_ids(hub.call("order_search", {"keyword": "耳机"}, subject="t2:u9")) == []


def test_search_rejects_an_unknown_status(hub: HubSimulator) -> None:
    response = hub.call("order_search", {"status": "lost"}, subject="t1:u1")
    assert response.status == 422
    assert response.json()["parameters"] == ["status"]


def test_order_get_reads_an_order_of_the_own_tenant(hub: HubSimulator) -> None:
    response = hub.call("order_get", {"order_id": 1008}, subject="t1:u2")
    assert response.status == 200
    order = response.json()
    assert (order["order_id"], order["status"], order["refundable_amount"]) == (1008, "refunded", 0)
    assert order["customer"]["name"] == "Anna Schmidt"
    assert [r["status"] for r in order["refund_requests"]] == ["executed"]


def test_order_get_leaves_out_the_phone_number_and_the_internal_note(
    hub: HubSimulator, app: Flask, caplog: pytest.LogCaptureFixture,
) -> None:
    from example_app import services
    from example_app.db import get_db

    with app.app_context():  # what the service (and the back office) has
        full = services.get_order(get_db(), "t1", 1001)
    assert full["customer"]["phone"] and full["internal_note"]
    with caplog.at_level(logging.INFO, logger="bailing_flask.audit"):
        response = hub.call("order_get", {"order_id": 1001}, subject="t1:u1")
    assert response.status == 200
    text = response.text
    order = response.json()
    assert set(order["customer"]) == {"customer_id", "name", "email"}
    assert "internal_note" not in order
    assert full["customer"]["phone"] not in text and full["internal_note"] not in text
    record = next(r.bailing for r in caplog.records if getattr(r, "bailing", {}).get("tool") == "order_get")
    assert record["response"]["fields_dropped"] == 2  # the note, the phone


def test_the_back_office_still_shows_the_phone_and_the_note(app: Flask) -> None:
    client = app.test_client()
    client.post("/login", data={"tenant": "t1", "username": "u1", "password": "alice-demo"})
    page = client.get("/orders/1001").get_data(as_text=True)
    assert "+86 138 0000 1001" in page and "goodwill voucher" in page


def test_a_database_from_before_the_internal_note_gets_the_column(database: Path) -> None:
    with sqlite3.connect(database) as conn:
        conn.execute("ALTER TABLE orders DROP COLUMN internal_note")
    hub = HubSimulator(create_app(_config(database)), SECRET)
    assert hub.call("order_get", {"order_id": 1001}, subject="t1:u1").status == 200


def test_the_catalog_tells_the_model_what_comes_back(hub: HubSimulator) -> None:
    paths = hub.document()["paths"]
    returns = paths["/api/orders/{order_id}"]["get"]["x-agent-capability"]["guidance"]["returns"]
    assert returns.startswith("An object with: order_id, order_no")
    assert "customer {customer_id, name, email}" in returns and "phone" not in returns
    search = paths["/api/orders"]["get"]["x-agent-capability"]["guidance"]["returns"]
    assert "orders (list, at most 5)" in search and '"truncated"' in search


def test_other_tenant_cannot_read_an_order(hub: HubSimulator) -> None:
    response = hub.call("order_get", {"order_id": 1001}, subject="t2:u9")
    assert response.status == 403
    assert response.json()["reason"] == "forbidden"


@pytest.mark.parametrize("subject", ["t1:nobody", "t3:u1", "u1", "__bailing_authz_probe__:nobody"])
def test_unknown_subjects_get_nothing(hub: HubSimulator, subject: str) -> None:
    assert hub.call("order_search", {}, subject=subject).status == 403
    assert hub.call("order_get", {"order_id": 1001}, subject=subject).status == 403


def test_order_get_without_subject_is_refused(hub: HubSimulator) -> None:
    response = hub.call("order_get", {"order_id": 1001})
    assert response.status == 403
    assert response.json()["reason"] == "subject_required"


def test_unsigned_api_requests_are_refused(app: Flask) -> None:
    response = app.test_client().get("/api/orders")
    assert response.status_code == 401
    assert response.get_json()["reason"] == "missing_signature"


# -- refunds -------------------------------------------------------------------------------------------


def test_refund_preview_reads_only(hub: HubSimulator, database: Path) -> None:
    request = hub.build_call("refund_preview", {"order_id": 1001, "amount": 20}, subject="t1:u2")
    assert "X-Bailing-Idempotency-Key" not in request.headers  # a read-only POST
    preview = hub.replay(request).json()
    assert preview["accepted"] is True
    assert (preview["refundable_amount"], preview["needs_hub_approval"]) == (299, False)

    too_much = hub.call("refund_preview", {"order_id": 1001, "amount": 300}, subject="t1:u1").json()
    assert (too_much["accepted"], too_much["reason"]) == (False, "amount_exceeds_refundable")
    assert refund_rows(database, 1001) == []


def test_read_only_user_cannot_request_a_refund(hub: HubSimulator, database: Path) -> None:
    args = {"order_id": 1001, "amount": 10, "reason": "Left earbud crackles"}
    response = hub.call("refund_request_create", args, subject="t1:u2")
    assert response.status == 403
    assert response.json()["reason"] == "forbidden"
    assert refund_rows(database, 1001) == []


def test_refund_request_is_created_once_even_when_replayed(hub: HubSimulator, database: Path) -> None:
    request = hub.build_call(
        "refund_request_create", {"order_id": 1001, "amount": 20, "reason": "Left earbud crackles"},
        subject="t1:u1",
    )
    assert "X-Bailing-Idempotency-Key" in request.headers

    first = hub.replay(request)
    assert first.status == 201, first.text
    result = first.json()
    assert (result["ok"], result["status"], result["order_id"]) == (True, "submitted", 1001)
    assert result["business_id"] == result["refund_request_id"]
    assert result["url"].endswith("/orders/1001")
    assert "Idempotent-Replayed" not in first.headers

    again = hub.replay(request)
    assert again.status == 201
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert again.json() == result

    rows = refund_rows(database, 1001)
    assert len(rows) == 1
    assert (rows[0]["amount_cents"], rows[0]["requested_by"], rows[0]["status"]) == (2000, "u1", "submitted")
    assert rows[0]["job_id"] == request.headers["X-Bailing-Job-Id"]
    # the transaction mode: the record is in the shop's own database, committed with the row
    with sqlite3.connect(database) as conn:
        records = conn.execute("SELECT tool, state, job_id, status FROM bailing_idempotency").fetchall()
    assert records == [("refund_request_create", "completed", rows[0]["job_id"], 201)]


def test_a_refund_request_that_fails_after_its_insert_leaves_nothing_and_runs_again(
    app: Flask, hub: HubSimulator, database: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The service's insert is a savepoint of the call's transaction: a failure after it undoes it."""
    from example_app import tools

    def fails_after_insert(*args: object, **kwargs: object) -> object:
        created = original(*args, **kwargs)
        raise RuntimeError(f"the notification for request {created.id} timed out")

    original = tools.services.create_refund_request
    monkeypatch.setattr(tools.services, "create_refund_request", fails_after_insert)
    request = hub.build_call(
        "refund_request_create", {"order_id": 1001, "amount": 20, "reason": "Left earbud crackles"},
        subject="t1:u1",
    )
    with pytest.raises(RuntimeError, match="timed out"):  # TESTING: the exception propagates
        hub.replay(request)
    assert refund_rows(database, 1001) == []  # rolled back with the call
    monkeypatch.setattr(tools.services, "create_refund_request", original)
    again = hub.replay(request)  # not uncertain: nothing had happened, so it runs
    assert again.status == 201 and "Idempotent-Replayed" not in again.headers
    assert len(refund_rows(database, 1001)) == 1


def test_only_the_refund_request_runs_in_the_transaction_mode(app: Flask) -> None:
    listing = app.test_cli_runner().invoke(args=["bailing", "tools"])
    header, *lines = listing.output.splitlines()
    assert header.split()[5] == "REPEATS"
    modes = {line.split()[0]: line.split()[5] for line in lines if line.strip() and line[0] != " "}
    assert [name for name, mode in modes.items() if mode == "transaction"] == ["refund_request_create"]


def test_large_refund_waits_for_back_office_approval(hub: HubSimulator) -> None:
    response = hub.call(
        "refund_request_create", {"order_id": 1002, "amount": 600, "reason": "Dock ports dead"},
        subject="t1:u1",
    )
    assert response.status == 201
    assert response.json()["status"] == "pending_approval"


def test_unpaid_order_is_refused(hub: HubSimulator, database: Path) -> None:
    response = hub.call(
        "refund_request_create", {"order_id": 1003, "amount": 5, "reason": "Changed my mind"}, subject="t1:u1"
    )
    assert response.status == 409
    body = response.json()
    assert (body["ok"], body["status"], body["reason"]) == (False, "rejected", "order_not_refundable")
    assert "pending" in body["message"]
    assert refund_rows(database, 1003) == []


def test_other_tenant_cannot_request_a_refund_on_our_order(hub: HubSimulator, database: Path) -> None:
    response = hub.call(
        "refund_request_create", {"order_id": 1001, "amount": 5, "reason": "Not mine"}, subject="t2:u9"
    )
    assert response.status == 403
    assert refund_rows(database, 1001) == []


def test_amount_with_more_than_two_decimals_is_invalid(hub: HubSimulator) -> None:
    response = hub.call(
        "refund_request_create", {"order_id": 1001, "amount": 1.005, "reason": "Rounding"}, subject="t1:u1"
    )
    assert response.status == 422
    assert response.json()["parameters"] == ["amount"]


def test_refund_execute_pays_out_a_submitted_request_once(
    app: Flask, hub: HubSimulator, fake_hub: FakeHub,
) -> None:
    created = hub.call(
        "refund_request_create", {"order_id": 1005, "amount": 89, "reason": "Wrong layout"}, subject="t1:u1"
    ).json()
    request_id = created["refund_request_id"]

    assert hub.call("refund_execute", {"request_id": request_id}, subject="t1:u2").status == 403
    assert hub.call("refund_execute", {"request_id": request_id}, subject="t2:u9").status == 403
    unapproved = hub.call("refund_execute", {"request_id": request_id}, subject="t1:u1")
    assert (unapproved.status, unapproved.json()["reason"]) == (403, "business_approval_required")

    approval_id = approve_on_the_activity_page(app, hub, {"request_id": request_id}, job_id="job-pay-1")
    assert fake_hub.decisions[0]["approver"] == "t1:u1"
    executed = hub.call("refund_execute", {"request_id": request_id}, subject="t1:u1", job_id="job-pay-1")
    assert executed.status == 200, executed.text
    assert executed.json()["status"] == "executed"
    order = hub.call("order_get", {"order_id": 1005}, subject="t1:u1").json()
    assert order["status"] == "refunded"  # paid back in full

    approve_on_the_activity_page(app, hub, {"request_id": request_id}, job_id="job-pay-2")
    again = hub.call("refund_execute", {"request_id": request_id}, subject="t1:u1", job_id="job-pay-2")
    assert again.status == 409
    assert again.json()["reason"] == "request_executed"
    page = staff(app).get("/activity/").get_data(as_text=True)
    assert f"approval {approval_id}" in page and "business_approval_required" in page


def test_refund_execute_waits_for_approval(app: Flask, hub: HubSimulator, fake_hub: FakeHub) -> None:
    created = hub.call(
        "refund_request_create", {"order_id": 1007, "amount": 899, "reason": "Defective"}, subject="t1:u1"
    ).json()
    args = {"request_id": created["refund_request_id"]}
    approve_on_the_activity_page(app, hub, args, job_id="job-wait-1")
    response = hub.call("refund_execute", args, subject="t1:u1", job_id="job-wait-1")
    assert response.status == 409
    assert response.json()["reason"] == "approval_pending"


# -- the activity page -----------------------------------------------------------------------------------


def test_the_activity_page_shows_who_did_what_and_the_refusals(app: Flask, hub: HubSimulator) -> None:
    hub.call("order_get", {"order_id": 1001}, subject="t1:u1", job_id="job-a1")
    hub.call("order_get", {"order_id": 2001}, subject="t1:u1", job_id="job-a2")  # another tenant's
    hub.call("refund_request_create", {"order_id": 1001, "amount": 5, "reason": "Scratched"},
             subject="t1:u2", job_id="job-a3")  # read-only user
    hub.call("order_get", {"order_id": 2001}, subject="t2:u9", job_id="job-b1")
    forged = hub.build_call("order_get", {"order_id": 1001}, subject="t1:u1", job_id="job-forged")
    hub.replay(forged, on_behalf_of="t1:u2")
    page = staff(app).get("/activity/").get_data(as_text=True)
    assert "Alice Chen (support lead)" in page and "Bob Wang (trainee, read only)" in page
    assert "job-a1" in page and "job-a3" in page and "forbidden" in page
    assert "job-b1" not in page and "Carla" not in page  # t2's calls are not t1's business
    assert "bad_signature" in page and "not verified" in page
    other = staff(app, "u9", "carla-demo", "t2").get("/activity/").get_data(as_text=True)
    assert "job-b1" in other and "job-a1" not in other


def test_only_the_companys_staff_with_the_tools_permission_decide(
    app: Flask, hub: HubSimulator, fake_hub: FakeHub,
) -> None:
    sent = hub.send_approval_request("refund_execute", {"request_id": 1}, subject="t1:u1",
                                     job_id="job-d1")
    approval_id = sent.request.json()["approval_id"]  # type: ignore[union-attr]
    trainee = staff(app, "u2", "bob-demo")
    assert "needs refund.execute" in trainee.get("/activity/").get_data(as_text=True)
    assert trainee.post(f"/activity/approvals/{approval_id}", data={"decision": "approved"}).status_code == 403
    outsider = staff(app, "u9", "carla-demo", "t2")
    assert f"<td>{approval_id}</td>" not in outsider.get("/activity/").get_data(as_text=True)
    assert outsider.post(f"/activity/approvals/{approval_id}", data={"decision": "approved"}).status_code == 404
    assert app.test_client().post(f"/activity/approvals/{approval_id}").status_code == 302  # login
    assert fake_hub.decisions == []
    denied = staff(app).post(f"/activity/approvals/{approval_id}", data={"decision": "denied"},
                             follow_redirects=True)
    assert f"Approval {approval_id} denied." in denied.get_data(as_text=True)
    assert [d["decision"] for d in fake_hub.decisions] == ["denied"]


# -- customers -----------------------------------------------------------------------------------------


def test_customer_update_phone(hub: HubSimulator, database: Path) -> None:
    ok = hub.call("customer_update_phone", {"customer_id": 101, "phone": "+86 138 1234 5678"},
                  subject="t1:u1")
    assert ok.status == 200, ok.text
    assert "+86" not in ok.text  # the sensitive value is not echoed back
    assert hub.call("customer_update_phone", {"customer_id": 101, "phone": "+1 555 0199"},
                    subject="t2:u9").status == 403
    assert hub.call("customer_update_phone", {"customer_id": 101, "phone": "call me"},
                    subject="t1:u1").status == 422
    with sqlite3.connect(database) as conn:
        assert conn.execute("SELECT phone FROM customers WHERE id = 101").fetchone()[0] == "+86 138 1234 5678"


# -- catalog, check, probe -----------------------------------------------------------------------------


def test_catalog_declares_exactly_the_six_tools(hub: HubSimulator) -> None:
    document = hub.document()
    operations = {
        op["operationId"]: op["x-agent-capability"]
        for path in document["paths"].values() for op in path.values()
    }
    assert set(operations) == TOOL_NAMES

    assert all(cap["subject"]["required"] for cap in operations.values())
    assert operations["order_search"]["execution"]["readonly"] is True
    assert operations["refund_preview"]["execution"] == {"readonly": True, "idempotent": False}
    assert operations["refund_preview"]["risk"]["level"] == "low"

    create = operations["refund_request_create"]
    assert create["risk"]["level"] == "medium"
    assert create["execution"] == {"readonly": False, "idempotent": False}
    assert create["approval"]["when"] == [{"param": "amount", "op": ">", "value": 500}]

    assert operations["refund_execute"]["risk"]["level"] == "high"
    sensitive = {name for name, cap in operations.items() if cap["audit"]["sensitive"]}
    assert sensitive == {"customer_update_phone"}

    search = document["paths"]["/api/orders"]["get"]["parameters"]
    assert {p["name"]: p["schema"]["type"] for p in search} == {
        "keyword": "string", "status": "string",
    }
    assert "paid" in next(p for p in search if p["name"] == "status")["schema"]["enum"]
    assert all(p["description"] for p in search)


def test_catalog_needs_a_signature(hub: HubSimulator) -> None:
    assert hub.fetch_catalog().status == 200
    assert hub.fetch_catalog(signature=None).status == 401
    assert hub.fetch_catalog(signature="zeros").status == 401


def test_bailing_check_finds_no_errors(app: Flask) -> None:
    result = app.test_cli_runner().invoke(args=["bailing", "check"])
    assert result.exit_code == 0, result.output
    assert "6 tool(s), 0 error(s)" in result.output


def test_the_exercise_as_a_demo_user_exercises_every_tool_without_a_warning(
        app: Flask, database: Path) -> None:
    """The README's ``check --exercise --subject t1:u1``: each tool's example names a row of
    tenant t1, so the authorizer admits it; the refund payout gets the exercise's own approval."""
    def counts() -> dict[str, Any]:
        with closing(sqlite3.connect(database)) as conn:
            return {table: conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()
                    for table in ("orders", "refund_requests", "customers")}

    before = counts()
    result = app.test_cli_runner().invoke(
        args=["bailing", "check", "--exercise", "--subject", "t1:u1"])
    assert result.exit_code == 0, result.output
    assert "exercise: 23 passed, 0 warning(s), 0 failed" in result.output, result.output
    assert "views: order_search as 't1:u1', order_get as 't1:u1', refund_preview as 't1:u1'" \
        in result.output
    assert counts() == before  # every write was rolled back


@pytest.mark.parametrize(
    ("subject", "authorized"),
    [("__bailing_authz_probe__:nobody", False), ("t1:u1", True), ("t1:u2", True), ("t1:ghost", False)],
)
def test_authz_probe(hub: HubSimulator, subject: str, authorized: bool) -> None:
    response = hub.probe(subject)
    assert response.status == 200
    assert response.json() == {"authorized": authorized}


# -- the legacy pages -----------------------------------------------------------------------------------


def test_pages_redirect_to_login(app: Flask) -> None:
    response = app.test_client().get("/orders/1001")
    assert response.status_code == 302
    assert response.headers["Location"].startswith("/login?next=/orders/1001")


def test_login_shows_the_users_orders_only(app: Flask) -> None:
    client = app.test_client()
    response = client.post(
        "/login?next=/orders", data={"tenant": "t1", "username": "u1", "password": "alice-demo"}
    )
    assert response.status_code == 302 and response.headers["Location"] == "/orders"

    page = client.get("/orders?status=paid").get_data(as_text=True)
    assert "T1-1001" in page and "T1-1003" not in page and "T2-" not in page
    detail = client.get("/orders/1001").get_data(as_text=True)
    assert "张三" in detail and "蓝牙耳机" in detail
    assert client.get("/orders/2001").status_code == 404  # t2's order does not exist for t1

    client.post("/logout")
    assert client.get("/orders").status_code == 302


def test_login_with_a_wrong_password_fails(app: Flask) -> None:
    client = app.test_client()
    response = client.post("/login", data={"tenant": "t1", "username": "u1", "password": "nope"})
    assert response.status_code == 401
    assert "Unknown company" in response.get_data(as_text=True)
    assert client.get("/orders").status_code == 302


def test_login_never_redirects_off_site(app: Flask) -> None:
    response = app.test_client().post(
        "/login?next=//evil.example/", data={"tenant": "t2", "username": "u9", "password": "carla-demo"}
    )
    assert response.headers["Location"] == "/orders"


def test_agent_refund_shows_up_in_the_back_office(app: Flask, hub: HubSimulator) -> None:
    hub.call("refund_request_create", {"order_id": 1001, "amount": 20, "reason": "Left earbud crackles"},
             subject="t1:u1")
    client = app.test_client()
    client.post("/login", data={"tenant": "t1", "username": "u2", "password": "bob-demo"})
    page = client.get("/orders/1001").get_data(as_text=True)
    assert "Left earbud crackles" in page and "submitted" in page


# -- a real server, and start-up -----------------------------------------------------------------------


def test_through_a_real_server(
    live_server: Callable[[Flask], str], database: Path, tmp_path: Path
) -> None:
    app = create_app(_config(database, BAILING_STORE=f"sqlite:///{tmp_path / 'idem.sqlite3'}"))
    hub = HubSimulator(live_server(app), SECRET)

    found = hub.call("order_search", {"keyword": "张三 耳机", "status": "paid"}, subject="t1:u1")
    assert set(order_ids(found)) == {1001, 1007}
    assert "张三" in found.text  # raw UTF-8, not \u escapes that eat the model's budget

    request = hub.build_call(
        "refund_request_create",
        {"order_id": 1001, "amount": 12.5, "reason": "Late delivery, 50% of shipping"},
        subject="t1:u1",
    )
    assert hub.replay(request).status == 201
    replayed = hub.replay(request)
    assert (replayed.status, replayed.headers.get("Idempotent-Replayed")) == (201, "true")
    assert len(refund_rows(database, 1001)) == 1
    assert hub.probe().json() == {"authorized": False}


def _fresh_start(instance: Path, **config: object) -> Flask:
    """The example with its embedded defaults: only the instance folder is the test's own."""
    return create_app({"BAILING_STORE": "memory://", "PUBLIC_BASE_URL": "http://127.0.0.1:5000",
                       **config}, instance_path=str(instance))


@pytest.fixture
def no_secrets_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("BAILING_SECRET", "BAILING_CLIENT_TOKEN", "SECRET_KEY", "BAILING_HUB_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.usefixtures("no_secrets_in_the_environment")
def test_the_secrets_nobody_gave_are_generated_once_and_kept_in_the_instance_folder(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        app = _fresh_start(tmp_path / "instance")
    (secret,) = app.config["BAILING_SECRETS"]
    (token,) = app.config["BAILING_CLIENT_TOKENS"]
    assert len(secret) >= 60 and len(token) >= 40 and app.config["SECRET_KEY"]
    first = caplog.text
    for expected in ("http://127.0.0.1:5000", "http://127.0.0.1:5000/.well-known/bailing/tools.json",
                     secret, token, "signed_required", "example_app.secrets.json"):
        assert expected in first
    assert HubSimulator(app, secret).fetch_catalog().status == 200
    kept = tmp_path / "instance" / "example_app.secrets.json"
    assert kept.stat().st_mode & 0o077 == 0  # the owner's only

    caplog.clear()
    with caplog.at_level(logging.INFO):
        again = _fresh_start(tmp_path / "instance")  # the next start, the next flask command
    assert again.config["BAILING_SECRETS"] == [secret]
    assert again.config["BAILING_CLIENT_TOKENS"] == [token]
    assert again.config["SECRET_KEY"] == app.config["SECRET_KEY"]  # logins survive a restart
    assert "signed_required" in caplog.text and "kept in" in caplog.text
    assert secret not in caplog.text and token not in caplog.text  # shown once, when made
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]

    elsewhere = _fresh_start(tmp_path / "other-instance")
    assert elsewhere.config["BAILING_SECRETS"] != [secret]  # kept per instance folder


@pytest.mark.usefixtures("no_secrets_in_the_environment")
def test_workers_starting_at_once_agree_on_the_generated_secrets(tmp_path: Path) -> None:
    """gunicorn's workers each build the app: the first to write the file wins, the others read it."""
    code = ("import sys; from example_app import create_app; "
            "app = create_app({'BAILING_STORE': 'memory://', 'DATABASE': sys.argv[2]}, "
            "instance_path=sys.argv[1]); "
            "print(app.config['BAILING_SECRETS'][0], app.config['BAILING_CLIENT_TOKENS'][0], "
            "app.config['SECRET_KEY'])")
    root = Path(__file__).resolve().parent.parent
    workers = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "instance"),
                                 str(tmp_path / f"shop-{i}.sqlite3")],
                                cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for i in range(4)]
    answers = []
    for worker in workers:
        out, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err
        answers.append(out.split())
    assert len({tuple(a) for a in answers}) == 1, answers


@pytest.mark.usefixtures("no_secrets_in_the_environment")
def test_the_shipped_example_starts_and_passes_its_check_without_an_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing configured: no ERROR at start nor at the first request, and ``check`` passes."""
    with caplog.at_level(logging.INFO):
        app = _fresh_start(tmp_path / "instance")
        assert app.test_client().get("/login").status_code == 200  # the first-request checks ran
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert app.config["BAILING_HUB_URL"] == "http://127.0.0.1:18900"  # a hub started with its defaults
    result = app.test_cli_runner().invoke(args=["bailing", "check"])
    assert result.exit_code == 0, result.output
    assert "6 tool(s), 0 error(s), 0 warning(s)" in result.output


@pytest.mark.usefixtures("no_secrets_in_the_environment")
def test_flask_commands_log_no_error_and_print_the_secret_only_the_first_time(tmp_path: Path) -> None:
    """``flask --app example_app ...`` as a user types it, in a copy of the example (its own instance folder)."""
    shutil.copytree(Path(__file__).resolve().parent.parent / "example_app", tmp_path / "example_app",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLASK_")}

    def flask(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "flask", "--app", "example_app", *args],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)

    first = flask("bailing", "--help")
    assert first.returncode == 0, first.stderr
    secret = json.loads((tmp_path / "instance" / "example_app.secrets.json").read_text())["BAILING_SECRET"]
    assert secret in first.stderr and "ERROR" not in first.stderr
    for args in (("bailing", "--help"), ("bailing", "tools")):
        later = flask(*args)
        assert later.returncode == 0, later.stderr
        assert "ERROR" not in later.stderr and secret not in later.stderr
    check = flask("bailing", "check")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "0 error(s)" in check.stdout and "ERROR" not in check.stderr


def test_secret_from_the_environment_is_used_and_not_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("BAILING_SECRET", SECRET)
    monkeypatch.setenv("BAILING_CLIENT_TOKEN", CLIENT_TOKEN)
    monkeypatch.setenv("SECRET_KEY", "session-key-from-the-environment")
    with caplog.at_level(logging.INFO):
        app = create_app({"DATABASE": str(tmp_path / "shop.sqlite3"), "BAILING_STORE": "memory://"},
                         instance_path=str(tmp_path / "instance"))
    assert app.config["BAILING_SECRETS"] == [SECRET]
    assert app.config["BAILING_CLIENT_TOKENS"] == [CLIENT_TOKEN]
    assert SECRET not in caplog.text and CLIENT_TOKEN not in caplog.text
    assert "signed_required" in caplog.text
    assert not (tmp_path / "instance" / "example_app.secrets.json").exists()  # nothing to keep
    assert hub_reads_catalog(app)


def hub_reads_catalog(app: Flask) -> bool:
    return HubSimulator(app, SECRET).fetch_catalog().status == 200


# -- the pytest plugin ---------------------------------------------------------------------------


def test_bailing_hub_fixture_from_the_pytest_plugin(bailing_hub):
    """``bailing_hub`` comes with the package's pytest plugin: it only needs an ``app`` fixture."""
    assert bailing_hub.call("order_get", {"order_id": 1001}, subject="t1:u1").status == 200
    assert bailing_hub.call("order_get", {"order_id": 1001}, subject="t2:u9").status == 403
    assert bailing_hub.probe().json() == {"authorized": False}
