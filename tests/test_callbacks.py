"""Receiving the hub's POSTs: verified with the client token, handled once."""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

import pytest
from flask import Flask, render_template_string
from werkzeug.serving import make_server

from bailing_flask import Bailing, tool
from bailing_flask.wire import sign_callback
from bailing_flask.hub.payloads import ApprovalRequest, DeliveryWebhook, JobRecord
from bailing_flask.hub.tickets import verify_ticket
from bailing_flask.reasons import REASONS

from .helpers import STRONG_SECRET, raw_request, reconfigure
from bailing_flask.hub.fake import FakeHub
from bailing_flask._state import state_of

CLIENT_TOKEN = "client-token-0123456789-abcdefghijklmnop"
JOB_PATH = "/.well-known/bailing/callbacks/job"
DELIVERY_PATH = "/.well-known/bailing/callbacks/delivery"
APPROVAL_PATH = "/.well-known/bailing/callbacks/approval"
ARGS_HASH = "17b4db064e17f4878e391177e6ca623b798911f34014bc9e78920993d7dd27ad"

JOB = {"job_id": "job-1", "request_id": "req-1", "status": "done",
       "result": {"text": "Refund submitted."}, "metadata": {"principal": "crm"},
       "updated_at": "2026-11-30T01:00:00.000Z", "unknown_future_field": [1, 2]}
DELIVERY = {"kind": "delivery", "job_id": "job-2", "request_id": "req-2", "route_name": "客服",
            "status": "done", "message": "【客服】结果通知", "text": "ok", "attachments": [],
            "report": None, "error": None, "metadata": {}, "finished_at": "2026-11-30T01:00:00Z"}
APPROVAL = {"kind": "tool_approval_request", "approval_id": 123, "job_id": "job-3",
            "request_id": "req-3", "route": "售后", "subject": "t1:u1", "provider": "shop",
            "tool": "refund_execute", "scope": "refund.execute", "risk": "high",
            "policy": "risk_high", "reason": "risk=high", "method": "POST",
            "path": "/api/refunds/{request_id}/execute", "args": {"request_id": 9},
            "args_hash": ARGS_HASH, "decision_path": "/approvals/123/decision", "metadata": {}}


def make_app(events: list, fail_times: dict | None = None, **config: Any) -> Flask:
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=STRONG_SECRET, BAILING_CLIENT_TOKENS=[CLIENT_TOKEN],
                      BAILING_STORE="memory://", **config)
    bailing = Bailing(app)
    fails = fail_times if fail_times is not None else {}

    def record(kind):
        def handler(payload):
            if fails.get(kind, 0) > 0:
                fails[kind] -= 1
                raise RuntimeError("downstream busy")
            events.append((kind, payload))
        return handler

    bailing.job_finished(record("job"))
    bailing.delivery(record("delivery"))
    bailing.approval_request(record("approval"))
    return app


def hub_post(base: str, path: str, payload: dict, *, secret: str = CLIENT_TOKEN,
             ts_ms: int | None = None) -> tuple[int, dict]:
    """POST like the hub's outbound sender: ms timestamp, ts.body HMAC, fresh per attempt."""
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    stamp = ts_ms if ts_ms is not None else int(time.time() * 1000)
    headers = {"Content-Type": "application/json", "X-Bailing-Timestamp": str(stamp),
               "X-Bailing-Signature": sign_callback(secret, stamp, body)}
    response = raw_request(base, "POST", path, headers, body)
    return response.status, json.loads(response.body)


@pytest.fixture
def events():
    return []


@pytest.fixture
def base(live_server, events):
    return live_server(make_app(events))


def test_finished_job_reaches_its_handler_as_a_typed_record(base, events):
    assert hub_post(base, JOB_PATH, JOB) == (200, {"ok": True})
    ((kind, job),) = events
    assert kind == "job" and isinstance(job, JobRecord)
    assert (job.job_id, job.status, job.text) == ("job-1", "done", "Refund submitted.")


def test_delivery_and_approval_requests(base, events):
    assert hub_post(base, DELIVERY_PATH, DELIVERY)[0] == 200
    assert hub_post(base, APPROVAL_PATH, APPROVAL)[0] == 200
    (_, delivery), (_, approval) = events
    assert isinstance(delivery, DeliveryWebhook) and delivery.route_name == "客服"
    assert isinstance(approval, ApprovalRequest)
    assert (approval.approval_id, approval.args_hash, approval.route) == (123, ARGS_HASH, "售后")


def test_the_tool_approval_variant_with_truncated_string_args(base, events):
    payload = {"kind": "tool_approval", "approval_id": 124, "job_id": "job-4", "request_id": "r",
               "tool": "refund_execute", "scope": "refund.execute", "risk": "high",
               "policy": "risk_high", "reason": "risk=high", "args": '{"note":"' + "x" * 990,
               "intent": {"approval_id": 124, "kind": "tool_approval_intent",
                          "schema_version": "bailing.approval-intent.v1", "job_id": "job-4",
                          "request_id": "r", "source": "api", "provider": "shop",
                          "tool": "refund_execute", "scope": "refund.execute", "risk": "high",
                          "policy": "risk_high", "reason": "risk=high", "method": "POST",
                          "path": "/x", "args": '{"note":"' + "x" * 990, "args_hash": ARGS_HASH,
                          "metadata": {}},
               "message": "approve?"}
    assert hub_post(base, APPROVAL_PATH, payload)[0] == 200
    ((_, approval),) = events
    assert approval.args_truncated and approval.args_hash == ARGS_HASH


def test_hub_retries_of_the_same_event_run_the_handler_once(base, events):
    for _ in range(3):  # the hub re-signs every attempt with a fresh timestamp
        assert hub_post(base, JOB_PATH, JOB)[0] == 200
    assert len(events) == 1
    # a re-run of the same job after an approval is a new event
    assert hub_post(base, JOB_PATH, {**JOB, "updated_at": "2026-11-30T02:00:00.000Z"})[0] == 200
    assert len(events) == 2


def test_a_handler_that_fails_once_gets_the_retry(live_server, events):
    base = live_server(make_app(events, fail_times={"delivery": 1}))
    status, body = hub_post(base, DELIVERY_PATH, DELIVERY)
    assert status == 500 and body["reason"] == "handler_failed"  # 5xx: the hub retries
    assert hub_post(base, DELIVERY_PATH, DELIVERY)[0] == 200
    assert hub_post(base, DELIVERY_PATH, DELIVERY)[0] == 200
    assert len(events) == 1


@pytest.mark.parametrize(
    "kwargs,reason",
    [
        ({"secret": STRONG_SECRET}, "wrong_key"),
        ({"secret": "someone-elses-token-0123456789abcdef"}, "bad_signature"),
        ({"ts_ms": int(time.time())}, "timestamp_out_of_window"),  # seconds, not ms
        ({"ts_ms": int(time.time() * 1000) - 300_000}, "timestamp_out_of_window"),
    ],
)
def test_refusals_are_401_and_logged_loudly(base, events, caplog, kwargs, reason):
    with caplog.at_level(logging.ERROR, logger="bailing_flask"):
        status, body = hub_post(base, JOB_PATH, JOB, **kwargs)
    assert status == 401 and body["reason"] == reason
    assert events == []
    assert "does not retry a 4xx" in caplog.text
    assert "Likely cause" in caplog.text
    assert CLIENT_TOKEN not in caplog.text and STRONG_SECRET not in caplog.text


def test_malformed_payload_is_400(base, events):
    status, body = hub_post(base, APPROVAL_PATH, {"kind": "tool_approval_request"})
    assert status == 400 and body["reason"] == "invalid_payload"
    assert events == []


def test_callback_paths_are_not_taken_for_tool_calls(base):
    # the middleware leaves them alone: a ms signature is not a tool-call signature
    assert hub_post(base, JOB_PATH, JOB)[0] == 200


def test_no_handler_means_404_and_no_tokens_means_503(live_server):
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=STRONG_SECRET, BAILING_STORE="memory://")
    bailing = Bailing(app)
    base = live_server(app)
    assert hub_post(base, JOB_PATH, JOB)[0] == 404
    bailing.job_finished(lambda job: None)
    assert hub_post(base, JOB_PATH, JOB)[0] == 503


def test_deciding_an_approval_through_the_hub_client(live_server):
    fake = FakeHub()
    fake.add_client("shop", CLIENT_TOKEN)
    fake.add_job("job-3", client_app_id="shop", request_id="req-3")
    fake.add_approval(123, "job-3", args_hash=ARGS_HASH)
    server = make_server("127.0.0.1", 0, fake, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        received = []
        app = make_app(received, BAILING_HUB_URL=f"http://127.0.0.1:{server.server_port}")
        bailing = state_of(app).callbacks
        base = live_server(app)
        assert hub_post(base, APPROVAL_PATH, APPROVAL)[0] == 200
        ((_, approval),) = received
        with app.app_context():
            result = bailing.hub_client().decide_approval(
                approval, "approved", approver="manager_7", decision_id="biz-123-1")
        assert result.ok and not result.idempotent
        assert fake.approvals[123]["status"] == "approved"
        with app.app_context():
            again = bailing.hub_client().decide_approval(
                approval, "approved", approver="manager_7", decision_id="biz-123-1")
        assert again.idempotent
    finally:
        server.shutdown()


def test_chat_widget_template_global_signs_a_ticket(events):
    app = make_app(events, BAILING_HUB_URL="https://hub.example.com")

    @app.get("/page")
    def page():
        return render_template_string("{{ bailing_chat_widget('shop_help', 't1:u1') }}")

    html = app.test_client().get("/page").get_data(as_text=True)
    assert html.startswith('<script src="https://hub.example.com/widget.js"')
    ticket = html.split('data-ticket="', 1)[1].split('"', 1)[0]
    assert verify_ticket(CLIENT_TOKEN, ticket).uid == "t1:u1"


def test_tool_calls_still_verified_next_to_callbacks(events):
    app = make_app(events)

    @app.get("/api/x")
    @tool(scope="x.read", authorizer=lambda call: True)
    def x():
        return "x"

    assert app.test_client().get("/api/x").status_code == 401


def test_every_callback_refusal_comes_from_the_reason_table(live_server):
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=STRONG_SECRET, BAILING_STORE="memory://")
    bailing = Bailing(app)
    base = live_server(app)

    def refusal(path: str, payload: dict, **kwargs: Any) -> tuple[int, dict, str | None]:
        body = json.dumps(payload, separators=(",", ":")).encode()
        stamp = int(time.time() * 1000)
        headers = {"Content-Type": "application/json", "X-Bailing-Timestamp": str(stamp),
                   "X-Bailing-Signature": sign_callback(kwargs.get("secret", CLIENT_TOKEN), stamp, body)}
        response = raw_request(base, "POST", path, headers, body)
        return response.status, json.loads(response.body), response.headers.get("X-Bailing-Reason")

    seen = [refusal(JOB_PATH, JOB)]  # no handler
    bailing.job_finished(lambda job: None)
    bailing.approval_request(lambda request: None)
    seen.append(refusal(JOB_PATH, JOB))  # no client token configured
    reconfigure(app, client_tokens=(CLIENT_TOKEN,))  # the token is set (and the app restarted)
    seen.append(refusal(APPROVAL_PATH, {"kind": "tool_approval_request"}))  # not the hub's payload
    seen.append(refusal(JOB_PATH, JOB, secret="another-token-0123456789abcdefghijkl"))  # bad signature
    assert [body["reason"] for _, body, _ in seen] == [
        "no_handler", "not_configured", "invalid_payload", "bad_signature"]
    for status, body, header in seen:
        entry = REASONS[body["reason"]]
        assert (status, body["error"], header) == (entry.status, entry.sdk_error, entry.code)
        assert body["message"]


def test_a_handler_whose_worker_died_runs_on_a_retry_the_hub_still_sends():
    """The worker handling a job callback dies mid-handler (its entry stays in progress).

    The hub sends each POST at most three times, 2 s and 10 s apart, and then gives up for
    good: a retry must be able to take the event over within that span, or the event is lost.
    """
    from bailing_flask.stores import MemoryStore

    now = [1_800_000_000.0]
    store = MemoryStore(clock=lambda: now[0])
    events: list = []

    def handler(payload):
        if not events:
            events.append("died")
            raise SystemExit("the worker was killed")  # nothing in the package runs after it
        events.append(payload)

    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=STRONG_SECRET, BAILING_CLIENT_TOKENS=[CLIENT_TOKEN],
                      BAILING_STORE=store)
    Bailing(app).job_finished(handler)
    client = app.test_client()
    body = json.dumps(JOB, separators=(",", ":")).encode()

    def attempt() -> int:
        stamp = int(time.time() * 1000)
        return client.post(JOB_PATH, data=body, headers={
            "Content-Type": "application/json", "X-Bailing-Timestamp": str(stamp),
            "X-Bailing-Signature": sign_callback(CLIENT_TOKEN, stamp, body)}).status_code

    with pytest.raises(SystemExit):
        attempt()
    answers = []
    for pause in (2.5, 10.5):  # the hub's second and third attempt, the last it sends
        now[0] += pause
        answers.append(attempt())
    assert answers[-1] == 200 and len(events) == 2, answers
