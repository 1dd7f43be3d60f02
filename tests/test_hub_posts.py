"""The hub-to-business direction: the simulator POSTs the hub's real payloads, signed like the hub.

Each payload is checked three ways: every key it carries is one the typed
model reads (so the docs' JSON and the model agree), the app's handler gets
it once however often the hub retries, and retries carry a fresh timestamp
and signature over the identical body.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask

from bailing_flask import Bailing, tool
from bailing_flask.hub.posts import (
    APPROVAL_ARGS_LIMIT,
    approval_request,
    args_hash,
    delivery_webhook,
    job_record,
    render_prompt,
)
from bailing_flask.hub.payloads import (
    ApprovalIntent,
    ApprovalRequest,
    DeliveryWebhook,
    JobRecord,
    ToolApprovalPayload,
    ToolApprovalRequestPayload,
    parse_approval_request,
    parse_delivery,
    parse_job_record,
)
from bailing_flask.wire.signing import sign_callback
from bailing_flask.testing import HubSimulator, canonical_json

from .helpers import STRONG_SECRET

CLIENT_TOKEN = "client-token-hub-posts-0123456789abcdef"
JOB_ID = "2b0c8f3e-5a61-4d2e-9c1b-7e4f0a9d3c21"


def create_app() -> Flask:
    app = Flask("posts_app")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_CLIENT_TOKENS=[CLIENT_TOKEN],
                      BAILING_STORE="memory://")
    bailing = Bailing(app)
    bailing.authorizer(lambda call: True)
    events: list[tuple[str, Any]] = []
    app.extensions["events"] = events
    bailing.job_finished(lambda job: events.append(("job", job)))
    bailing.delivery(lambda delivery: events.append(("delivery", delivery)))
    bailing.approval_request(lambda request: events.append(("approval", request)))

    @app.post("/inventory/<int:store_id>/adjust")
    @tool(scope="inventory.write", risk="high",
          approval_prompt="Adjust SKU {sku} in store {store_id} by {delta}")
    def inventory_adjust(store_id: int) -> Any:
        """Adjust a store's stock."""
        return {"ok": True}

    return app


@pytest.fixture
def app() -> Flask:
    return create_app()


def keys_known(data: dict[str, Any], model: Any) -> set[str]:
    """Keys of ``data`` the model does not declare (should be none)."""
    return set(data) - set(model.model_fields)


# --- the payloads and their typed models ------------------------------------------------


def test_a_job_record_has_the_hubs_shape_and_parses() -> None:
    record = job_record(job_id=JOB_ID, request_id="req-7", subject="t1:u1",
                        callback_url="https://shop.example.com/cb")
    assert list(record)[:3] == ["job_id", "request_id", "status"]
    assert keys_known(record, JobRecord) == set()
    parsed = parse_job_record(json.dumps(record))
    assert (parsed.job_id, parsed.status, parsed.text) == (JOB_ID, "done", "已处理完成。")
    assert parsed.metadata == {"uid": "t1:u1"} and parsed.route_name == "门店运营"
    failed = job_record(status="error", error="tool timed out")
    assert "result" not in failed and failed["error"] == "tool timed out"


def test_a_delivery_is_made_from_the_finished_job() -> None:
    record = job_record(job_id=JOB_ID, text="Done: ![receipt](https://cdn.example.com/r.png)")
    delivery = delivery_webhook(record)
    assert list(delivery) == ["kind", "job_id", "request_id", "route_name", "status", "message",
                              "text", "attachments", "report", "error", "metadata", "finished_at"]
    assert keys_known(delivery, DeliveryWebhook) == set()
    assert delivery["attachments"] == [
        {"type": "image", "url": "https://cdn.example.com/r.png", "caption": "receipt"}]
    assert parse_delivery(delivery).finished_at == record["updated_at"]
    with pytest.raises(ValueError):
        delivery_webhook(job_record(status="rejected"))


@pytest.mark.parametrize("variant", ["tool_approval_request", "tool_approval"])
def test_approval_requests_in_both_variants_have_complete_intents(variant: str) -> None:
    record = job_record(job_id=JOB_ID, request_id="req-9", subject="t1:u1")
    args = {"store_id": 8, "sku": "A-10086", "delta": -20}
    payload = approval_request(approval_id=123, job=record, tool="inventory_adjust",
                               scope="inventory.write", method="POST",
                               path="/inventory/{store_id}/adjust", args=args, subject="t1:u1",
                               prompt="Adjust {sku} in store {store_id} by {delta} ({missing})",
                               variant=variant)  # type: ignore[arg-type]
    intent = payload["intent"]
    assert intent["kind"] == "tool_approval_intent"
    assert intent["schema_version"] == "bailing.approval-intent.v1"
    assert (intent["route_key"], intent["route_name"], intent["source"]) == ("store_ops", "门店运营", "crm")
    assert (intent["subject"], intent["subject_field"], intent["provider"]) == ("t1:u1", "uid", "shop")
    assert (intent["policy"], intent["reason"], intent["risk"]) == ("risk_high", "risk=high", "high")
    assert intent["summary"] == "Adjust A-10086 in store 8 by -20 ({missing})"
    assert intent["args"] == args and intent["metadata"] == {"uid": "t1:u1"}
    assert intent["args_hash"] == hashlib.sha256(canonical_json(args).encode()).hexdigest()
    assert keys_known(intent, ApprovalIntent) == set()
    model = ToolApprovalRequestPayload if variant == "tool_approval_request" else ToolApprovalPayload
    assert keys_known(payload, model) == set()
    parsed = parse_approval_request(json.dumps(payload, ensure_ascii=False))
    assert (parsed.variant, parsed.approval_id, parsed.job_id, parsed.subject) == (
        variant, 123, JOB_ID, "t1:u1")
    assert parsed.args == args and parsed.args_hash == intent["args_hash"]
    if variant == "tool_approval_request":
        assert payload["decision_path"] == "/approvals/123/decision"
        contract = payload["decision_contract"]
        assert contract["match"] == {"approval_id": 123, "job_id": JOB_ID, "request_id": "req-9",
                                     "args_hash": intent["args_hash"]}
        assert contract["example"]["decision"] == "approved"
    else:
        assert payload["args"] == '{"store_id":8,"sku":"A-10086","delta":-20}'
        assert "approval needed #123" in payload["message"]


def test_long_arguments_travel_cut_and_the_hash_still_covers_them_all() -> None:
    args = {"note": "很长的说明" * 300, "id": 1}
    payload = approval_request(approval_id=5, job=job_record(), tool="t", scope="s",
                               method="POST", path="/t", args=args)
    assert isinstance(payload["args"], str)
    assert len(payload["args"].encode("utf-16-le")) // 2 == APPROVAL_ARGS_LIMIT
    assert payload["args_hash"] == args_hash(args)
    parsed = parse_approval_request(payload)
    assert parsed.args_truncated and parsed.args_hash == args_hash(args)


def test_policies_and_prompts_follow_the_hub() -> None:
    common: dict[str, Any] = {"approval_id": 1, "job": job_record(), "tool": "t", "scope": "s",
                              "method": "POST", "path": "/t", "args": {"amount": 900}}
    assert approval_request(risk="medium", **common)["policy"] == "confirm_required"
    hit = {"param": "amount", "op": ">", "value": 500, "actual": 900, "reason": "big refund"}
    when = approval_request(risk="medium", confirm_when=hit, **common)
    assert (when["policy"], when["reason"], when["intent"]["confirm_when"]) == (
        "confirm_when", "big refund", hit)
    assert render_prompt("{amount} / {none} / {a.b}", {"amount": 1e21}) == "1e+21 / {none} / {a.b}"
    assert render_prompt(None, {}) is None


# --- sent to the app, signed like the hub -------------------------------------------------------


def test_job_callbacks_are_handled_once_however_often_the_hub_retries(app: Flask) -> None:
    hub = HubSimulator(app, STRONG_SECRET)
    first = hub.send_job_finished(job_id=JOB_ID, subject="t1:u1")
    assert first.status == 200 and first.json() == {"ok": True}
    request = first.request
    assert request is not None
    ts = request.headers["X-Bailing-Timestamp"]
    assert len(ts) == 13  # milliseconds
    assert request.headers["X-Bailing-Signature"] == sign_callback(CLIENT_TOKEN, ts, request.body)
    clock = [float(ts) / 1000 + 2]
    hub.clock = lambda: clock[0]
    retry = hub.retry(request)
    assert retry.status == 200 and retry.json() == {"ok": True, "duplicate": True}
    assert retry.request is not None and retry.request.body == request.body
    assert retry.request.headers["X-Bailing-Signature"] != request.headers["X-Bailing-Signature"]
    events = app.extensions["events"]
    assert [(kind, payload.job_id) for kind, payload in events] == [("job", JOB_ID)]
    assert isinstance(events[0][1], JobRecord)


def test_delivery_and_approval_reach_their_handlers_typed(app: Flask) -> None:
    hub = HubSimulator(app, STRONG_SECRET)
    assert hub.send_delivery(job_id=JOB_ID).status == 200
    response = hub.send_approval_request("inventory_adjust", {"store_id": 8, "sku": "A", "delta": 1},
                                         subject="t1:u1", job_id=JOB_ID, approval_id=77)
    assert response.status == 200
    assert hub.retry(response.request).json()["duplicate"] is True  # type: ignore[arg-type]
    kinds = [(kind, type(payload)) for kind, payload in app.extensions["events"]]
    assert kinds == [("delivery", DeliveryWebhook), ("approval", ApprovalRequest)]
    approval = app.extensions["events"][1][1]
    assert (approval.tool, approval.scope, approval.method, approval.path) == (
        "inventory_adjust", "inventory.write", "POST", "/inventory/{store_id}/adjust")
    assert approval.summary == "Adjust SKU A in store 8 by 1" and approval.route == "门店运营"


def test_posts_signed_with_the_wrong_key_are_refused(app: Flask) -> None:
    hub = HubSimulator(app, STRONG_SECRET, client_token=STRONG_SECRET)  # the provider secret
    response = hub.send_job_finished()
    assert response.status == 401 and response.json()["reason"] == "wrong_key"
    assert app.extensions["events"] == []


def test_posts_over_http_to_a_running_app(live_server: Callable[..., str]) -> None:
    app = create_app()
    hub = HubSimulator(live_server(app), STRONG_SECRET, client_token=CLIENT_TOKEN)
    assert hub.send_job_finished(job_id=JOB_ID).status == 200
    assert hub.send_approval_request("inventory_adjust", {"store_id": 1, "sku": "B", "delta": 2},
                                     job_id=JOB_ID).status == 200
    assert [kind for kind, _ in app.extensions["events"]] == ["job", "approval"]


# --- the fake hub the plugin serves ------------------------------------------------------------


def test_the_plugin_tests_an_approver_end_to_end(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        from flask import Flask
        from bailing_flask import Bailing, tool
        from bailing_flask.hub.client import HubBadRequestError, HubConflictError
        from bailing_flask.hub.payloads import build_decision

        TOKEN = "client-token-for-the-plugin-test-0123456789"

        @pytest.fixture
        def app():
            app = Flask("approver_app")
            app.config.update(BAILING_SECRETS=["a-secret-long-enough-for-no-warning-0123456789"],
                              BAILING_CLIENT_TOKENS=TOKEN, BAILING_STORE="memory://")
            bailing = Bailing(app)
            bailing.authorizer(lambda call: True)

            @bailing.approval_request
            def decide(request):
                verdict = "approved" if request.args.get("amount", 0) <= 100 else "denied"
                bailing.hub_client().decide_approval(request, verdict, approver="finance",
                                                     decision_id=f"oa:{request.approval_id}")

            @app.post("/refunds")
            @tool(scope="refund.write", risk="high")
            def refund():
                return {"ok": True}

            return app

        def test_small_refunds_are_approved(bailing_hub, bailing_fake_hub):
            bailing_hub.send_approval_request("refund", {"amount": 20}, subject="t1:u1")
            bailing_hub.send_approval_request("refund", {"amount": 900}, subject="t1:u1")
            assert [d["decision"] for d in bailing_fake_hub.decisions] == ["approved", "denied"]

        def test_the_hub_rules_apply(app, bailing_hub, bailing_fake_hub):
            sent = bailing_hub.send_approval_request("refund", {"amount": 20}, approval_id=42)
            from bailing_flask.approvals import hub_client_of
            from bailing_flask._state import state_of

            client = hub_client_of(state_of(app))
            again = client.decide_approval(sent.request.json(), "approved", approver="finance",
                                           decision_id="oa:42")
            assert again.idempotent is True
            with pytest.raises(HubConflictError):
                client.decide_approval(sent.request.json(), "denied", approver="x",
                                       decision_id="oa:42")
            envelope = build_decision(sent.request.json(), "approved", approver="x",
                                      decision_id="oa:42b")
            with pytest.raises(HubBadRequestError):  # the envelope must match the approval
                client.send_decision(envelope.model_copy(update={"args_hash": "0" * 64}))
            assert len(bailing_fake_hub.decisions) == 1
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
