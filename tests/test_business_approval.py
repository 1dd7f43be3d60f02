"""``business_approval=True``: a tool runs only for a call this business approved itself.

End to end over real parts: the hub simulator sends the approval request
(signed with the client token), the app's approver decides through
``bailing.hub_client()`` against the plugin's fake hub on a loopback socket
(which applies the hub's decision rules), and the simulator then makes the
re-run's tool call. The decisions are kept in each real store.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from flask import Flask, jsonify
from pydantic import BaseModel, Field

from bailing_flask import Bailing, current_call, tool
from bailing_flask.hub.fake import FakeHub
from bailing_flask.hub.client import HubClient, HubConflictError
from bailing_flask.hub.payloads import ApprovalRequest
from bailing_flask.testing import HubSimulator

from .helpers import STRONG_SECRET, reconfigure
from bailing_flask._state import state_of
from bailing_flask.approvals import hub_client_of
from bailing_flask.approvals import approvals_of

CLIENT_TOKEN = "client-token-business-approvals-0123456789"
JOB = "6f1c2b1e-8d0a-4c7e-9a53-2f4b8c1d9e01"


class Payout(BaseModel):
    note: str = Field(max_length=5000)
    amount: float = Field(gt=0)


class ExportQuery(BaseModel):
    limit: int = Field(ge=1, le=1000)


def create_app(store: str = "memory://", auto_decide: str | None = None) -> Flask:
    app = Flask("approvals_app")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_CLIENT_TOKENS=CLIENT_TOKEN,
                      BAILING_STORE=store)
    bailing = Bailing(app)
    bailing.authorizer(lambda call: call.subject in ("t1:u1", "t1:u2"))
    received: list[ApprovalRequest] = []
    app.extensions["received"] = received
    runs: list[Any] = []
    app.extensions["runs"] = runs

    @bailing.approval_request
    def approval_request(request: ApprovalRequest) -> None:
        received.append(request)
        if auto_decide:
            bailing.hub_client().decide_approval(request, auto_decide, approver="finance-1",
                                                 decision_id=f"oa:{request.approval_id}")

    @app.post("/refunds/<int:request_id>/execute")
    @tool(scope="refund.execute", risk="high", body=Payout, business_approval=True)
    def refund_execute(request_id: int) -> Any:
        """Pay out a refund."""
        runs.append((request_id, dict(current_call.args)))
        return jsonify(paid=request_id), 201

    @app.get("/exports")
    @tool(scope="export.read", query=ExportQuery, business_approval=True)
    def export() -> Any:
        """Export customer rows."""
        runs.append(("export", dict(current_call.args)))
        return jsonify(rows=[])

    @app.get("/plain")
    @tool(scope="plain.read")
    def plain() -> Any:
        """No approval needed."""
        return jsonify(ok=True)

    return app


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'approvals.sqlite3'}"
    return str(request.getfixturevalue("redis_server").url)


@pytest.fixture
def app() -> Flask:
    return create_app()


def approve(app: Flask, approval_id: int, decision: str = "approved") -> Any:
    with app.app_context():
        return approvals_of(state_of(app)).decide(approval_id, decision, approver="finance-1")


def pay(hub: HubSimulator, request_id: Any = 7, *, subject: str = "t1:u1", job_id: str = JOB,
        note: str = "customer returned the item", amount: float = 19.9) -> Any:
    return hub.call("refund_execute", {"request_id": request_id, "note": note, "amount": amount},
                    subject=subject, job_id=job_id)


def test_the_catalog_asks_the_hub_for_an_approval(bailing_hub: HubSimulator) -> None:
    operation = bailing_hub.document()["paths"]["/refunds/{request_id}/execute"]["post"]
    assert operation["x-agent-capability"]["approval"] == {"required": True}


def test_without_an_approval_request_the_call_is_refused_and_audited(
    bailing_hub: HubSimulator, caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="bailing_flask.audit"):
        response = pay(bailing_hub)
    assert response.status == 403
    assert response.json()["reason"] == "business_approval_required"
    assert response.json()["approval"] == "missing"
    (record,) = [json.loads(r.getMessage()) for r in caplog.records if r.name == "bailing_flask.audit"]
    assert (record["tool"], record["status"], record["reason"]) == (
        "refund_execute", 403, "business_approval_required")
    assert bailing_hub.call("plain", subject="t1:u1").status == 200


def test_approved_here_then_called_with_the_same_arguments_runs_once(
    store_url: str, bailing_fake_hub_for: Any,
) -> None:
    app = create_app(store_url)
    hub, fake = bailing_fake_hub_for(app)
    sent = hub.send_approval_request(
        "refund_execute", {"request_id": 7, "note": "customer returned the item", "amount": 19.9},
        subject="t1:u1", job_id=JOB, approval_id=501)
    assert sent.status == 200
    assert pay(hub).json()["approval"] == "pending"  # received, not decided yet
    result = approve(app, 501)
    assert (result.status, result.idempotent) == ("approved", False)
    assert fake.decisions[0]["decision"] == "approved" and fake.decisions[0]["approval_id"] == 501
    ok = pay(hub)
    assert ok.status == 201, ok.text
    assert app.extensions["runs"] == [(7, {"request_id": 7, "note": "customer returned the item",
                                           "amount": 19.9})]
    # the same decision again is an idempotent retry at the hub, and changes nothing here
    assert approve(app, 501).idempotent is True
    # a retry of the request after the decision does not reset it
    assert hub.retry(sent.request).status == 200  # type: ignore[arg-type]
    assert pay(hub).status == 201  # the same call again: answered from the idempotency store
    assert len(app.extensions["runs"]) == 1


@pytest.fixture
def bailing_fake_hub_for(request: pytest.FixtureRequest) -> Any:
    """The plugin's fake hub for an app built inside the test (the store is parametrized)."""
    from bailing_flask.hub.fake import serve

    stack: list[Any] = []

    def start(app: Flask) -> tuple[HubSimulator, FakeHub]:
        context = serve()
        fake, url = context.__enter__()
        stack.append(context)
        reconfigure(app, hub_url=url)
        hub = HubSimulator(app, STRONG_SECRET)
        hub.fake_hub = fake
        return hub, fake

    yield start
    for context in stack:
        context.__exit__(None, None, None)


def test_other_arguments_another_subject_or_job_are_refused(
    app: Flask, bailing_hub: HubSimulator, bailing_fake_hub: FakeHub,
) -> None:
    bailing_hub.send_approval_request(
        "refund_execute", {"request_id": 7, "note": "customer returned the item", "amount": 19.9},
        subject="t1:u1", job_id=JOB, approval_id=601)
    approve(app, 601)
    assert pay(bailing_hub, amount=1999.0).json()["approval"] == "arguments_differ"
    assert pay(bailing_hub, request_id=8).json()["approval"] == "arguments_differ"
    assert pay(bailing_hub, subject="t1:u2").json()["approval"] == "missing"
    assert pay(bailing_hub, job_id="another-job").json()["approval"] == "missing"
    assert app.extensions["runs"] == []
    assert pay(bailing_hub).status == 201


def test_values_are_compared_under_the_tools_schema(
    app: Flask, bailing_hub: HubSimulator, bailing_fake_hub: FakeHub,
) -> None:
    # the model wrote the path value and the amount as strings; the hub approved them so
    bailing_hub.send_approval_request(
        "refund_execute", {"request_id": "7", "note": "customer returned the item",
                           "amount": "19.9", "unused": None},
        subject="t1:u1", job_id=JOB, approval_id=602)
    approve(app, 602)
    assert pay(bailing_hub).status == 201
    bailing_hub.send_approval_request("export", {"limit": "50"}, subject="t1:u1", job_id=JOB,
                                      approval_id=603)
    approve(app, 603)
    assert bailing_hub.call("export", {"limit": 50}, subject="t1:u1", job_id=JOB).status == 200
    assert bailing_hub.call("export", {"limit": 51}, subject="t1:u1", job_id=JOB).status == 403


def test_a_denied_call_stays_refused_and_a_later_approval_conflicts(
    app: Flask, bailing_hub: HubSimulator, bailing_fake_hub: FakeHub,
) -> None:
    bailing_hub.send_approval_request(
        "refund_execute", {"request_id": 7, "note": "customer returned the item", "amount": 19.9},
        subject="t1:u1", job_id=JOB, approval_id=604)
    assert approve(app, 604, "denied").status == "denied"
    assert pay(bailing_hub).json()["approval"] == "denied"
    with pytest.raises(HubConflictError):
        with app.app_context():
            approvals_of(state_of(app)).decide(604, "approved", approver="boss",
                                                  decision_id="oa:604:again")
    record = approvals_of(state_of(app)).get(604)
    assert record is not None and record.status == "denied"
    assert pay(bailing_hub).status == 403


def test_a_decision_made_elsewhere_does_not_count(
    app: Flask, bailing_hub: HubSimulator, bailing_fake_hub: FakeHub,
) -> None:
    bailing_hub.send_approval_request(
        "refund_execute", {"request_id": 7, "note": "customer returned the item", "amount": 19.9},
        subject="t1:u1", job_id=JOB, approval_id=605)
    request = app.extensions["received"][0]
    # a client built by hand records nothing; the hub's console would not tell this app either
    HubClient(str(Bailing.config(app).hub_url), CLIENT_TOKEN).decide_approval(
        request, "approved", approver="someone", decision_id="console:605")
    assert bailing_fake_hub.approvals[605]["status"] == "approved"
    assert pay(bailing_hub).json()["approval"] == "pending"


def test_an_approval_request_this_app_never_received_does_not_count(
    app: Flask, bailing_hub: HubSimulator, bailing_fake_hub: FakeHub,
    caplog: pytest.LogCaptureFixture,
) -> None:
    payload = bailing_hub.approval_payload(
        "refund_execute", {"request_id": 7, "note": "customer returned the item", "amount": 19.9},
        subject="t1:u1", job_id=JOB, approval_id=606)
    bailing_fake_hub.register_approval_request(payload, client_token=CLIENT_TOKEN, client_app_id="crm")
    with app.app_context(), caplog.at_level(logging.WARNING, logger="bailing_flask"):
        hub_client_of(state_of(app)).decide_approval(payload, "approved", approver="x",
                                                        decision_id="oa:606")
    assert "never received" in caplog.text
    assert pay(bailing_hub).json()["approval"] == "missing"


@pytest.mark.parametrize("variant", ["tool_approval_request", "tool_approval"])
def test_arguments_cut_by_the_hub_are_compared_by_their_hash(
    variant: str, bailing_fake_hub_for: Any,
) -> None:
    app = create_app(auto_decide="approved")
    hub, fake = bailing_fake_hub_for(app)
    long_note = "退货原因：" + "包装破损，" * 300
    sent = hub.send_approval_request(
        "refund_execute", {"request_id": 7, "note": long_note, "amount": 20},
        subject="t1:u1", job_id=JOB, approval_id=607, variant=variant)
    assert sent.status == 200, sent.text
    (request,) = app.extensions["received"]
    assert request.args_truncated and request.variant == variant
    record = approvals_of(state_of(app)).get(607)
    assert record is not None and record.status == "approved" and record.args_truncated
    assert pay(hub, note=long_note, amount=20).status == 201
    assert pay(hub, note=long_note + "!", amount=20).json()["approval"] == "arguments_differ"


def test_the_audit_names_the_approval_that_admitted_the_call(
    app: Flask, bailing_hub: HubSimulator, bailing_fake_hub: FakeHub,
    caplog: pytest.LogCaptureFixture,
) -> None:
    bailing_hub.send_approval_request(
        "refund_execute", {"request_id": 7, "note": "customer returned the item", "amount": 19.9},
        subject="t1:u1", job_id=JOB, approval_id=608)
    approve(app, 608)
    with caplog.at_level(logging.INFO, logger="bailing_flask.audit"):
        assert pay(bailing_hub).status == 201
    (record,) = [json.loads(r.getMessage()) for r in caplog.records if r.name == "bailing_flask.audit"]
    assert record["approval_id"] == 608 and record["status"] == 201


def test_the_request_is_recorded_before_the_handler_runs(bailing_fake_hub_for: Any) -> None:
    app = create_app(auto_decide="approved")  # the handler decides at once
    hub, fake = bailing_fake_hub_for(app)
    hub.send_approval_request(
        "refund_execute", {"request_id": 7, "note": "customer returned the item", "amount": 19.9},
        subject="t1:u1", job_id=JOB, approval_id=609)
    assert [d["decision_id"] for d in fake.decisions] == ["oa:609"]
    assert pay(hub).status == 201
