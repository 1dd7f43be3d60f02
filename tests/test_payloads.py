"""Payload models accept what the hub really sends (CONTRACT.md §7.2-7.4) and
the decision builder reproduces vector V6 byte for byte (§2.6, §7.5)."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from pydantic import ValidationError

from bailing_flask.errors import BailingError
from bailing_flask.hub.payloads import (
    ApprovalDecision,
    ApprovalRequest,
    DeliveryWebhook,
    JobRecord,
    PayloadError,
    build_decision,
    parse_approval_request,
    parse_delivery,
    parse_hub_post,
    parse_job_record,
)
from bailing_flask.wire.signing import CallbackVerifier, sign_callback

from .helpers import FrozenClock

ARGS_HASH = "17b4db064e17f4878e391177e6ca623b798911f34014bc9e78920993d7dd27ad"
V6_BODY = (
    '{"kind":"tool_approval_decision","schema_version":"bailing.approval-decision.v1",'
    '"approval_id":123,"job_id":"job-test-001","request_id":"req-1",'
    '"args_hash":"17b4db064e17f4878e391177e6ca623b798911f34014bc9e78920993d7dd27ad",'
    '"decision_id":"oa:approval:9001","decision":"approved","approver":"user_2002"}'
)
V6_SIGNATURE = "sha256=ebf53b11b94bc00a467d5c72da776719bd7d135b8fdbf6b0f6ec1efde82b2f4f"
V6_TS = 1718000000000
CLIENT_TOKEN = "client-token-abc"
JOB_ID = "3f2c8a1e-5b7d-4e0a-9c6f-1a2b3c4d5e6f"


def hub_json(value: object) -> bytes:
    """Serialise like the hub's JSON.stringify (compact, UTF-8)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def intent(**overrides: object) -> dict:
    value = {
        "approval_id": 123,
        "kind": "tool_approval_intent",
        "schema_version": "bailing.approval-intent.v1",
        "job_id": "job-test-001",
        "request_id": "req-1",
        "route_key": "store_ops",
        "route_name": "门店运营",
        "source": "shop-backend",
        "subject": "tenant_1:user_1001",
        "subject_field": "operator",
        "provider": "shop",
        "tool": "inventory_adjust",
        "scope": "inventory.write",
        "risk": "high",
        "policy": "risk_high",
        "reason": "risk=high",
        "method": "POST",
        "path": "/inventory/{store_id}/adjust",
        "args": {"store_id": 7, "sku": "A-1", "delta": -3},
        "args_hash": ARGS_HASH,
        "summary": "调整门店 7 的 A-1 库存 -3",
        "metadata": {"operator": "tenant_1:user_1001", "principal": {"id": "user_1001"}},
    }
    value.update(overrides)
    return value


def approval_request(**overrides: object) -> dict:
    """A tool_approval_request in the hub's key order (§7.4)."""
    value = {
        "kind": "tool_approval_request",
        "approval_id": 123,
        "job_id": "job-test-001",
        "request_id": "req-1",
        "route": "门店运营",
        "subject": "tenant_1:user_1001",
        "provider": "shop",
        "tool": "inventory_adjust",
        "scope": "inventory.write",
        "risk": "high",
        "policy": "risk_high",
        "reason": "risk=high",
        "method": "POST",
        "path": "/inventory/{store_id}/adjust",
        "args": {"store_id": 7, "sku": "A-1", "delta": -3},
        "args_hash": ARGS_HASH,
        "summary": "调整门店 7 的 A-1 库存 -3",
        "intent": intent(),
        "decision_path": "/approvals/123/decision",
        "decision_contract": {
            "kind": "tool_approval_decision",
            "schema_version": "bailing.approval-decision.v1",
            "required_fields": ["approval_id", "job_id", "request_id", "args_hash",
                                "decision_id", "decision", "approver"],
            "decision_values": ["approved", "denied"],
            "idempotency": "decision_id",
            "match": {"approval_id": 123, "job_id": "job-test-001", "request_id": "req-1",
                      "args_hash": ARGS_HASH},
            "example": {"decision_id": "biz-123-<your-approval-record-id>"},
        },
        "metadata": {"operator": "tenant_1:user_1001"},
    }
    value.update(overrides)
    return value


def tool_approval(**overrides: object) -> dict:
    """The ``type: "webhook"`` variant (§7.4): args is JSON text, no top-level args_hash."""
    value = {
        "kind": "tool_approval",
        "approval_id": 123,
        "job_id": "job-test-001",
        "request_id": "req-1",
        "tool": "inventory_adjust",
        "scope": "inventory.write",
        "risk": "high",
        "policy": "risk_high",
        "reason": "risk=high",
        "args": '{"store_id":7,"sku":"A-1","delta":-3}',
        "intent": intent(),
        "message": "Approval 123 is waiting: inventory_adjust",
    }
    value.update(overrides)
    return value


# --- flow E: callback_url ---------------------------------------------------


def test_callback_job_record_with_every_field_and_unknown_keys():
    record = {
        "job_id": JOB_ID, "request_id": "shop-42", "status": "done", "target": "llm",
        "profile": "default", "project": "", "source": "shop-backend",
        "client_app_id": "shop-backend", "thread_id": 17, "session_id": "s-1",
        "input_preview": "查一下订单", "input": "查一下订单 42",
        "report": None, "result": {"text": "订单 42 已发货"}, "raw_result": "订单 42 已发货",
        "usage": {"duration_ms": 1234, "num_turns": 2, "cost_usd": 0.0012, "tokens": 345},
        "metadata": {"operator": "tenant_1:user_1001", "principal": {"id": "user_1001"}},
        "callback_url": "https://shop.example.com/bailing/callback",
        "dispatch": {"route_key": "orders", "route_name": "订单助手"},
        "attempts": 0, "run_after": "2024-06-10T06:13:20.000Z",
        "created_at": "2024-06-10T06:13:20.000Z", "updated_at": "2024-06-10T06:13:25.000Z",
        "claimed_at": "2024-06-10T06:13:21.000Z", "lease_until": "2024-06-10T06:18:21.000Z",
        "something_new": {"nested": True},
    }
    job = parse_job_record(hub_json(record))
    assert isinstance(job, JobRecord)
    assert job.job_id == JOB_ID and job.status == "done" and job.is_terminal
    assert job.text == "订单 42 已发货"
    assert job.route_name == "订单助手"
    assert job.usage is not None and job.usage.tokens == 345 and job.usage.cost_usd == 0.0012
    assert job.metadata["operator"] == "tenant_1:user_1001"
    assert not hasattr(job, "something_new")


def test_minimal_error_job_record():
    job = parse_job_record({"job_id": JOB_ID, "request_id": "r", "status": "error",
                            "error": "超时", "metadata": {}})
    assert job.is_terminal and job.text is None and job.result is None and job.error == "超时"


def test_running_job_is_not_terminal():
    job = parse_job_record({"job_id": JOB_ID, "request_id": "r", "status": "running"})
    assert not job.is_terminal


# --- flow F: delivery webhook -----------------------------------------------


def test_delivery_webhook_done_with_attachments():
    body = hub_json({
        "kind": "delivery", "job_id": JOB_ID, "request_id": "shop-42", "route_name": "订单助手",
        "status": "done", "message": "订单助手: 订单 42 已发货",
        "text": "![图](https://cdn.example.com/a.png) [报表](https://cdn.example.com/r.xlsx)",
        "attachments": [
            {"type": "image", "url": "https://cdn.example.com/a.png", "caption": "图"},
            {"type": "file", "url": "https://cdn.example.com/r.xlsx", "name": "报表"},
            {"type": "audio", "url": "https://cdn.example.com/v.mp3", "name": "语音"},
        ],
        "report": None, "error": None, "metadata": {"chat_entry": "pub_demo"},
        "finished_at": "2024-06-10T06:13:25.000Z", "future_field": 1,
    })
    delivery = parse_delivery(body)
    assert isinstance(delivery, DeliveryWebhook)
    assert [a.type for a in delivery.attachments] == ["image", "file", "audio"]
    assert delivery.attachments[0].caption == "图" and delivery.attachments[2].name == "语音"
    assert delivery.route_name == "订单助手"


def test_delivery_webhook_error_with_empty_attachments():
    delivery = parse_delivery({
        "kind": "delivery", "job_id": JOB_ID, "request_id": "r", "route_name": "",
        "status": "error", "message": "job failed: 超时", "text": None, "attachments": [],
        "report": None, "error": "超时", "metadata": {}, "finished_at": None,
    })
    assert delivery.text is None and delivery.attachments == [] and delivery.error == "超时"


def test_contract_v3_delivery_subset_is_readable():
    delivery = parse_hub_post('{"kind":"delivery","job_id":"job-test-001","status":"done"}')
    assert isinstance(delivery, DeliveryWebhook)


# --- flow G: approval requests ----------------------------------------------


def test_tool_approval_request_normalised():
    request = parse_approval_request(hub_json(approval_request()))
    assert isinstance(request, ApprovalRequest)
    assert request.variant == "tool_approval_request"
    assert (request.approval_id, request.job_id, request.request_id, request.args_hash) == (
        123, "job-test-001", "req-1", ARGS_HASH)
    assert request.route == "门店运营"  # display name
    assert request.route_key == "store_ops"
    assert request.subject == "tenant_1:user_1001"
    assert request.path == "/inventory/{store_id}/adjust"  # template, not substituted
    assert request.args == {"store_id": 7, "sku": "A-1", "delta": -3}
    assert not request.args_truncated
    assert (request.tool, request.scope, request.risk, request.policy, request.reason) == (
        "inventory_adjust", "inventory.write", "high", "risk_high", "risk=high")
    assert request.summary == "调整门店 7 的 A-1 库存 -3"
    assert request.decision_path == "/approvals/123/decision"


def test_optional_keys_the_hub_omits():
    body = approval_request()
    for key in ("route", "subject", "summary"):
        del body[key]
    del body["intent"]["subject"], body["intent"]["summary"], body["intent"]["route_name"]
    request = parse_approval_request(body)
    assert request.route is None and request.subject is None and request.summary is None


def test_truncated_arguments_arrive_as_a_string():
    full = json.dumps({"note": "x" * 2000}, separators=(",", ":"))
    cut = full[:1000]
    body = approval_request(args=cut, intent=intent(args=cut))
    request = parse_approval_request(body)
    assert request.args == cut and request.args_truncated
    decision = request.decide("denied", approver="user_2002", decision_id="oa:approval:9002")
    assert decision.args_hash == ARGS_HASH  # the hash still covers the full arguments


def test_confirm_when_hit():
    hit = {"param": "delta", "op": "<", "value": -2, "actual": -3, "reason": "大额减库存"}
    body = approval_request(policy="confirm_when", reason="大额减库存",
                            intent=intent(policy="confirm_when", confirm_when=hit))
    request = parse_approval_request(body)
    assert request.confirm_when is not None and request.confirm_when.actual == -3
    assert request.policy == "confirm_when"


def test_tool_approval_variant():
    request = parse_approval_request(hub_json(tool_approval()))
    assert request.variant == "tool_approval"
    assert request.args == {"store_id": 7, "sku": "A-1", "delta": -3}
    assert request.args_hash == ARGS_HASH  # taken from intent
    assert request.route == "门店运营" and request.subject == "tenant_1:user_1001"
    assert request.message.startswith("Approval 123")
    assert request.method == "POST" and request.path == "/inventory/{store_id}/adjust"


def test_tool_approval_variant_with_truncated_text():
    cut = json.dumps({"note": "y" * 2000})[:1000]
    request = parse_approval_request(tool_approval(args=cut, intent=intent(args=cut)))
    assert request.args == cut and request.args_truncated


def test_tool_approval_variant_args_longer_than_1000_is_not_the_hub():
    with pytest.raises(PayloadError, match="args"):
        parse_approval_request(tool_approval(args="x" * 1001))


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"approval_id": "appr_123"}, "approval_id"),  # the docs' shape, not the hub's
        ({"approval_id": "123"}, "approval_id"),
        ({"approval_id": True}, "approval_id"),
        ({"approval_id": 0}, "approval_id"),
        ({"args_hash": "sha256:" + ARGS_HASH}, "args_hash"),
        ({"args_hash": ARGS_HASH.upper()}, "args_hash"),
        ({"job_id": ""}, "job_id"),
        ({"tool": None}, "tool"),
        ({"args": [1, 2]}, "args"),
    ],
)
def test_refuses_shapes_the_hub_does_not_send(overrides, field):
    with pytest.raises(PayloadError) as info:
        parse_approval_request(approval_request(**overrides))
    assert field in str(info.value)


def test_refusal_messages_do_not_repeat_values():
    with pytest.raises(PayloadError) as info:
        parse_approval_request(approval_request(approval_id="secret-ish-value"))
    assert "secret-ish-value" not in str(info.value)


def test_intent_must_agree_with_the_request():
    with pytest.raises(PayloadError, match="job_id"):
        parse_approval_request(approval_request(intent=intent(job_id="other")))
    with pytest.raises(PayloadError, match="args_hash"):
        parse_approval_request(approval_request(intent=intent(args_hash="0" * 64)))


def test_tool_approval_variant_requires_intent():
    body = tool_approval()
    del body["intent"]
    with pytest.raises(PayloadError, match="intent"):
        parse_approval_request(body)


@pytest.mark.parametrize(
    "body",
    [b"\xff", b"[]", b"null", "not json",
     {"kind": "tool_approval_decision"}, {"kind": "alert"}, {}],
)
def test_not_an_approval_request(body):
    with pytest.raises(PayloadError):
        parse_approval_request(body)


def test_parse_hub_post_dispatches_by_kind():
    assert isinstance(parse_hub_post(approval_request()), ApprovalRequest)
    assert isinstance(parse_hub_post(tool_approval()), ApprovalRequest)
    assert isinstance(parse_hub_post({"job_id": JOB_ID, "request_id": "r", "status": "done"}),
                      JobRecord)
    with pytest.raises(PayloadError, match="kind"):
        parse_hub_post({"kind": "alert", "key": "k", "message": "m"})


def test_payload_error_is_a_bailing_error_and_a_value_error():
    assert issubclass(PayloadError, BailingError) and issubclass(PayloadError, ValueError)


# --- flow I: the decision envelope ------------------------------------------


def v6_request() -> ApprovalRequest:
    return parse_approval_request(approval_request())


def test_v6_reproduced_byte_for_byte():
    decision = v6_request().decide("approved", approver="user_2002", decision_id="oa:approval:9001")
    assert decision.to_json() == V6_BODY
    assert decision.body() == V6_BODY.encode()
    assert list(decision.to_dict()) == [
        "kind", "schema_version", "approval_id", "job_id", "request_id", "args_hash",
        "decision_id", "decision", "approver",
    ]
    assert sign_callback(CLIENT_TOKEN, V6_TS, decision.body()) == V6_SIGNATURE
    verifier = CallbackVerifier(CLIENT_TOKEN, clock=FrozenClock(V6_TS / 1000), warn=False)
    assert verifier.verify(V6_SIGNATURE, str(V6_TS), decision.body()) == "0"
    assert decision.path == "/approvals/123/decision"


def test_v6_from_the_tool_approval_variant_and_from_raw_bytes():
    for source in (tool_approval(), hub_json(approval_request())):
        decision = build_decision(source, "approved", approver="user_2002",
                                  decision_id="oa:approval:9001")
        assert decision.to_json() == V6_BODY


def test_optional_fields_follow_the_required_ones():
    decision = v6_request().decide(
        "DENIED", approver="  张三  ", decision_id="biz-123-77", comment=" 超出额度 ",
        decided_at=dt.datetime(2024, 6, 10, 6, 13, 20, tzinfo=dt.timezone.utc),
    )
    data = json.loads(decision.body())
    assert list(data)[-4:] == ["decision", "approver", "comment", "decided_at"]
    assert data["decision"] == "denied"
    assert data["approver"] == "张三" and data["comment"] == "超出额度"
    assert data["decided_at"] == "2024-06-10T06:13:20+00:00"
    assert '"approver":"张三"'.encode() in decision.body()  # UTF-8, not \\u escapes


def test_empty_comment_is_omitted():
    decision = v6_request().decide("approved", approver="a", decision_id="d", comment="  ")
    assert "comment" not in decision.to_dict()


@pytest.mark.parametrize("decision_id", ["oa:approval:9001", "A" * 128, "a.b_c-d:e"])
def test_decision_id_accepted(decision_id):
    v6_request().decide("approved", approver="a", decision_id=decision_id)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"decision": "approve"}, "decision"),
        ({"decision": "deny"}, "decision"),
        ({"decision": True}, "decision"),
        ({"decision_id": ""}, "decision_id"),
        ({"decision_id": "A" * 129}, "decision_id"),
        ({"decision_id": "biz 1"}, "decision_id"),
        ({"decision_id": "biz/1"}, "decision_id"),
        ({"decision_id": "审批1"}, "decision_id"),
        ({"approver": ""}, "approver"),
        ({"approver": "   "}, "approver"),
        ({"approver": "u" * 65}, "approver"),
        ({"approver": "😀" * 33}, "approver"),  # 66 UTF-16 units
        ({"approver": {"id": "u1"}}, "approver"),  # the docs' object shape
        ({"comment": "c" * 1001}, "comment"),
        ({"decided_at": "t" * 65}, "decided_at"),
    ],
)
def test_decision_refusals(kwargs, field):
    arguments = {"decision": "approved", "approver": "user_2002", "decision_id": "oa:approval:9001"}
    arguments.update(kwargs)
    decision = arguments.pop("decision")
    with pytest.raises(PayloadError) as info:
        v6_request().decide(decision, **arguments)
    assert field in str(info.value)


def test_limits_are_inclusive():
    decision = v6_request().decide("approved", approver="u" * 64, decision_id="d",
                                   comment="c" * 1000, decided_at="t" * 64)
    assert len(decision.approver) == 64 and len(decision.comment or "") == 1000


def test_envelope_is_immutable():
    decision = v6_request().decide("approved", approver="a", decision_id="d")
    with pytest.raises(ValidationError):
        decision.decision = "denied"  # type: ignore[misc]


def test_direct_construction_checks_the_echoed_fields():
    with pytest.raises(ValueError):
        ApprovalDecision(approval_id=123, job_id="j", request_id="r", args_hash="sha256:x",
                         decision_id="d", decision="approved", approver="a")
