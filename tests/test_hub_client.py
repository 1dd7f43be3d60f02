"""HubClient against a hub stand-in over a real loopback socket (bailing_flask/hub/fake.py)."""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from werkzeug.serving import make_server

from bailing_flask.errors import ConfigurationError
from bailing_flask.hub.client import (
    DecisionResult,
    HubBadRequestError,
    HubClient,
    HubConflictError,
    HubConnectionError,
    HubError,
    HubForbiddenError,
    HubNotFoundError,
    HubPausedError,
    HubRateLimitedError,
    HubRequestError,
    HubUnauthorizedError,
    HubUnavailableError,
    RunAccepted,
)
from bailing_flask.hub.payloads import JobRecord, PayloadError, parse_approval_request

from .helpers import FrozenClock, raw_request
from bailing_flask.hub.fake import FakeHub

CLIENT_TOKEN = "client-token-abc"
OTHER_TOKEN = "other-client-token-0123456789"
ARGS_HASH = "17b4db064e17f4878e391177e6ca623b798911f34014bc9e78920993d7dd27ad"
V6_BODY = (
    b'{"kind":"tool_approval_decision","schema_version":"bailing.approval-decision.v1",'
    b'"approval_id":123,"job_id":"job-test-001","request_id":"req-1",'
    b'"args_hash":"17b4db064e17f4878e391177e6ca623b798911f34014bc9e78920993d7dd27ad",'
    b'"decision_id":"oa:approval:9001","decision":"approved","approver":"user_2002"}'
)
V6_SIGNATURE = "sha256=ebf53b11b94bc00a467d5c72da776719bd7d135b8fdbf6b0f6ec1efde82b2f4f"
HUB_NOW = 1718000000.0


def request_body(approval_id: int = 123, job_id: str = "job-test-001", **extra: object) -> dict:
    """A tool_approval_request as the hub POSTs it (trimmed to what matters here)."""
    return {
        "kind": "tool_approval_request", "approval_id": approval_id, "job_id": job_id,
        "request_id": "req-1", "provider": "shop", "tool": "inventory_adjust",
        "scope": "inventory.write", "risk": "high", "policy": "risk_high", "reason": "risk=high",
        "method": "POST", "path": "/inventory/{store_id}/adjust", "args": {"store_id": 7},
        "args_hash": ARGS_HASH, "decision_path": f"/approvals/{approval_id}/decision",
        "metadata": {}, **extra,
    }


@pytest.fixture
def hub_clock() -> FrozenClock:
    return FrozenClock(HUB_NOW)


class _Switch:
    """One server for the module; each test plugs in a fresh FakeHub."""

    app: Any = None

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        return self.app(environ, start_response)


@pytest.fixture(scope="module")
def hub_server() -> Iterator[tuple[_Switch, str]]:
    switch = _Switch()
    server = make_server("127.0.0.1", 0, switch, threaded=True)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    yield switch, f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join(timeout=5)


@pytest.fixture
def hub(hub_server, hub_clock) -> FakeHub:
    switch, url = hub_server
    fake = FakeHub(clock=hub_clock)
    fake.add_client("shop", CLIENT_TOKEN)
    fake.add_client("other", OTHER_TOKEN)
    fake.add_job("job-test-001", client_app_id="shop", status="done")
    fake.add_approval(123, "job-test-001", args_hash=ARGS_HASH)
    fake.url = url  # type: ignore[attr-defined]
    switch.app = fake
    return fake


@pytest.fixture
def client(hub) -> HubClient:
    return HubClient(hub.url, CLIENT_TOKEN, timeout=5, clock=FrozenClock(HUB_NOW))


def decide(client: HubClient, *, approval_id: int = 123, decision: str = "approved",
           decision_id: str = "oa:approval:9001", **kwargs: object) -> DecisionResult:
    return client.decide_approval(request_body(approval_id), decision, approver="user_2002",
                                  decision_id=decision_id, **kwargs)


# --- POST /approvals/{id}/decision ------------------------------------------


def test_signed_decision_is_vector_v6_on_the_wire(hub, client):
    result = decide(client)
    assert result == DecisionResult(ok=True, status="approved", approval_id=123,
                                    decision_id="oa:approval:9001", idempotent=False, rerun=True)
    sent = hub.requests[-1]
    assert (sent.method, sent.path, sent.query) == ("POST", "/approvals/123/decision", "")
    assert sent.body == V6_BODY
    assert sent.headers["X-Bailing-Timestamp"] == "1718000000000"
    assert sent.headers["X-Bailing-Signature"] == V6_SIGNATURE
    assert sent.headers["Content-Type"] == "application/json"
    assert "Authorization" not in sent.headers
    assert hub.approvals[123]["status"] == "approved"
    assert hub.jobs["job-test-001"]["status"] == "queued"  # re-run for the approved call


def test_bearer_decision(hub, client):
    result = decide(client, auth="bearer")
    assert result.ok and not result.idempotent
    sent = hub.requests[-1]
    assert sent.headers["Authorization"] == f"Bearer {CLIENT_TOKEN}"
    assert "X-Bailing-Signature" not in sent.headers and sent.query == ""
    assert sent.body == V6_BODY


@pytest.mark.parametrize("auth", ["signature", "bearer"])
def test_repeating_the_same_decision_is_an_idempotent_success(hub, client, auth):
    first = decide(client, auth=auth)
    again = decide(client, auth=auth)
    assert not first.idempotent
    assert again == DecisionResult(ok=True, status="approved", approval_id=123,
                                   decision_id="oa:approval:9001", idempotent=True, rerun=False)


def test_decision_on_a_pending_approval_of_a_running_job_does_not_rerun(hub, client):
    hub.jobs["job-test-001"]["status"] = "running"
    assert decide(client).rerun is False


def test_denial_never_reruns(hub, client):
    result = decide(client, decision="denied")
    assert result.status == "denied" and result.rerun is False
    assert hub.jobs["job-test-001"]["status"] == "done"


def test_same_decision_id_with_the_other_decision_is_a_conflict(hub, client):
    decide(client)
    with pytest.raises(HubConflictError) as info:
        decide(client, decision="denied")
    error = info.value
    assert error.status == 409
    assert error.current_status == "approved"
    assert error.current_decision_id == "oa:approval:9001"
    assert "approved" in error.message


def test_same_decision_with_another_decision_id_is_a_conflict(hub, client):
    decide(client)
    with pytest.raises(HubConflictError):
        decide(client, decision_id="oa:approval:9002")


def test_approval_decided_in_the_console_is_a_conflict_even_for_the_same_decision(hub, client):
    hub.approvals[123].update(status="approved", decision_id=None)
    with pytest.raises(HubConflictError) as info:
        decide(client)
    assert info.value.current_decision_id is None


def test_decision_id_used_for_another_approval_is_a_conflict(hub, client):
    hub.add_approval(124, "job-test-001", args_hash=ARGS_HASH)
    decide(client)
    with pytest.raises(HubConflictError) as info:
        decide(client, approval_id=124)
    assert info.value.body["approval_id"] == 123
    assert hub.approvals[124]["status"] == "pending"


def test_unknown_approval_is_not_found(hub, client):
    with pytest.raises(HubNotFoundError) as info:
        decide(client, approval_id=999)
    assert info.value.status == 404 and info.value.message == "no such approval"


@pytest.mark.parametrize(
    "skew_ms, accepted",
    [(300_000, True), (-300_000, True), (300_001, False), (-300_001, False)],
)
def test_hub_window_is_inclusive_at_300000_ms(hub, skew_ms, accepted):
    client_clock = FrozenClock((HUB_NOW * 1000 + skew_ms + 0.5) / 1000)
    client = HubClient(hub.url, CLIENT_TOKEN, clock=client_clock)
    if accepted:
        assert decide(client).ok
    else:
        with pytest.raises(HubUnauthorizedError) as info:
            decide(client)
        assert info.value.status == 401
    assert hub.requests[-1].headers["X-Bailing-Timestamp"] == str(int(HUB_NOW * 1000) + skew_ms)


@pytest.mark.parametrize("auth", ["signature", "bearer"])
def test_a_client_that_did_not_start_the_job_may_not_decide(hub, auth):
    other = HubClient(hub.url, OTHER_TOKEN, clock=FrozenClock(HUB_NOW))
    with pytest.raises(HubUnauthorizedError):
        decide(other, auth=auth)
    assert hub.approvals[123]["status"] == "pending"


@pytest.mark.parametrize("auth", ["signature", "bearer"])
def test_the_chat_entry_ticket_issuer_may_decide(hub, client, auth):
    hub.chat_entries["pub_demo"] = "shop"
    hub.add_job("job-chat-1", status="done", request_id="req-1",
                metadata={"chat_entry": "pub_demo", "visitor_uid": "tenant_1:user_1001"})
    hub.add_approval(200, "job-chat-1", args_hash=ARGS_HASH)
    result = client.decide_approval(request_body(200, "job-chat-1"), "approved",
                                    approver="user_2002", decision_id="chat-200", auth=auth)
    assert result.ok and result.rerun


def test_tool_approval_variant_raw_body_is_accepted(hub, client):
    raw = json.dumps({
        "kind": "tool_approval", "approval_id": 123, "job_id": "job-test-001",
        "request_id": "req-1", "tool": "inventory_adjust", "scope": "inventory.write",
        "risk": "high", "policy": "risk_high", "reason": "risk=high", "args": '{"store_id":7}',
        "intent": {"approval_id": 123, "job_id": "job-test-001", "request_id": "req-1",
                   "tool": "inventory_adjust", "args": {"store_id": 7}, "args_hash": ARGS_HASH},
        "message": "approval needed",
    }, ensure_ascii=False).encode()
    result = client.decide_approval(raw, "approved", approver="user_2002",
                                    decision_id="oa:approval:9001")
    assert result.ok
    assert hub.requests[-1].body == V6_BODY


def test_comment_and_decided_at_reach_the_hub(hub, client):
    decide(client, decision="denied", comment="库存不足", decided_at="2024-06-10T06:13:20Z")
    sent = json.loads(hub.requests[-1].body)
    assert sent["comment"] == "库存不足" and sent["decided_at"] == "2024-06-10T06:13:20Z"
    assert hub.approvals[123]["comment"] == "库存不足"


@pytest.mark.parametrize(
    "kwargs",
    [{"decision": "approve"}, {"decision_id": "has space"}, {"decision_id": "x" * 129}],
)
def test_invalid_decisions_are_refused_before_sending(hub, client, kwargs):
    with pytest.raises(PayloadError):
        decide(client, **kwargs)
    assert hub.requests == []


def test_invalid_approver_is_refused_before_sending(hub, client):
    with pytest.raises(PayloadError):
        client.decide_approval(request_body(), "approved", approver=" ", decision_id="d")
    assert hub.requests == []


def test_unknown_auth_mode(hub, client):
    with pytest.raises(HubRequestError):
        decide(client, auth="query")  # type: ignore[arg-type]
    assert hub.requests == []


def test_send_decision_with_a_prebuilt_envelope(hub, client):
    envelope = parse_approval_request(request_body()).decide(
        "approved", approver="user_2002", decision_id="oa:approval:9001")
    assert client.send_decision(envelope).ok
    assert hub.requests[-1].body == V6_BODY


# --- POST /run --------------------------------------------------------------


def test_run_sends_only_the_declared_fields(hub, client):
    accepted = client.run("ticket-triage", "查一下订单 42", request_id="shop-42")
    assert isinstance(accepted, RunAccepted)
    assert accepted.status == "queued" and accepted.request_id == "shop-42"
    assert accepted.route == "ticket-triage" and accepted.target == "llm"
    assert accepted.is_continue is False and accepted.session_id
    sent = hub.requests[-1]
    assert (sent.method, sent.path, sent.query) == ("POST", "/run", "")
    assert sent.headers["Authorization"] == f"Bearer {CLIENT_TOKEN}"
    assert sent.json() == {
        "request_id": "shop-42", "route": "ticket-triage", "input": "查一下订单 42"
    }
    assert "查一下订单".encode() in sent.body  # UTF-8, not \\u escapes


def test_run_with_metadata_and_callback(hub, client):
    accepted = client.run(
        "auto", "help", request_id="shop-43",
        metadata={"operator": "tenant_1:user_1001", "nested": {"a": [1, 2]}},
        callback_url="https://shop.example.com/bailing/callback",
    )
    sent = hub.requests[-1].json()
    assert list(sent) == ["request_id", "route", "input", "metadata", "callback_url"]
    assert hub.jobs[accepted.job_id]["metadata"]["operator"] == "tenant_1:user_1001"
    assert hub.jobs[accepted.job_id]["callback_url"] == "https://shop.example.com/bailing/callback"


def test_run_warns_about_a_subject_every_tool_call_would_refuse(hub, client, caplog):
    digest = "ab" * 32
    with caplog.at_level(logging.WARNING, logger="bailing_flask"):
        client.run("auto", "help", request_id="shop-44",
                   metadata={"operator": "tenant_1:user_1001", "file": f"a.{digest}.pdf"})
        client.run("auto", "help", request_id="shop-45",
                   metadata={"operator": f"x.{digest}.tenant_1:user_1001"})
    warned = [r.getMessage() for r in caplog.records if "between dots" in r.getMessage()]
    assert len(warned) == 2 and "metadata['file']" in warned[0] and "metadata['operator']" in warned[1]
    assert digest not in " ".join(warned)  # names the key, never the value


def test_run_is_idempotent_on_request_id(hub, client):
    first = client.run("ticket-triage", "a", request_id="shop-44")
    again = client.run("ticket-triage", "a", request_id="shop-44")
    assert again.job_id == first.job_id and again.route is None  # short replay answer


def test_request_id_of_another_client_is_a_conflict(hub, client):
    HubClient(hub.url, OTHER_TOKEN).run("ticket-triage", "a", request_id="shared-1")
    with pytest.raises(HubConflictError) as info:
        client.run("ticket-triage", "a", request_id="shared-1")
    assert info.value.status == 409


def test_ambiguous_auto_route_is_a_conflict(hub, client):
    hub.auto_ambiguous = True
    with pytest.raises(HubConflictError):
        client.run("auto", "a", request_id="shop-45")


def test_paused_hub(hub, client):
    hub.paused = True
    with pytest.raises(HubPausedError) as info:
        client.run("ticket-triage", "a", request_id="shop-46")
    assert isinstance(info.value, HubUnavailableError)
    assert info.value.status == 503 and info.value.body == {"status": "paused"}


def test_other_503_is_unavailable_but_not_paused(hub, client):
    hub.canned = (503, "application/json", b'{"error":"server shutting down"}')
    with pytest.raises(HubUnavailableError) as info:
        client.run("ticket-triage", "a", request_id="shop-47")
    assert not isinstance(info.value, HubPausedError)
    assert info.value.message == "server shutting down"


def test_rate_limited_with_retry_hint(hub, client):
    hub.clients["shop"].rate_limit_per_min = 1
    client.run("ticket-triage", "a", request_id="shop-48")
    with pytest.raises(HubRateLimitedError) as info:
        client.run("ticket-triage", "a", request_id="shop-49")
    assert info.value.status == 429 and info.value.retry_after == 60.0
    assert "request_id" in info.value.message


def test_route_not_allowed_for_this_client(hub, client):
    hub.clients["shop"].allowed_routes = ("store_ops",)
    with pytest.raises(HubForbiddenError) as info:
        client.run("ticket-triage", "a", request_id="shop-50")
    assert info.value.status == 403


def test_unknown_route_is_a_bad_request_with_the_hubs_message(hub, client):
    with pytest.raises(HubBadRequestError) as info:
        client.run("no-such-route", "a", request_id="shop-51")
    assert info.value.message == "unknown route no-such-route"


def test_the_hub_refuses_undeclared_fields_from_clients(hub):
    # Why run() sends nothing else (e.g. the SDKs' wait_ms): the hub answers 400.
    body = b'{"request_id":"r","route":"ticket-triage","input":"a","wait_ms":1000}'
    reply = raw_request(hub.url, "POST", "/run", {"Authorization": f"Bearer {CLIENT_TOKEN}",
                                                 "Content-Type": "application/json"}, body)
    assert reply.status == 400 and "wait_ms" in json.loads(reply.body)["error"]


@pytest.mark.parametrize(
    "args, kwargs",
    [
        (("ticket-triage", "a"), {"request_id": ""}),
        (("ticket-triage", "a"), {"request_id": " \t\u3000"}),
        (("ticket-triage", "a"), {"request_id": "r" * 129}),
        (("ticket-triage", "a"), {"request_id": "😀" * 65}),  # 130 UTF-16 units
        (("ticket-triage", "a"), {"request_id": 42}),
        (("Ticket", "a"), {"request_id": "r"}),
        (("t", "a"), {"request_id": "r"}),
        (("a" * 65, "a"), {"request_id": "r"}),
        (("ticket-triage", ""), {"request_id": "r"}),
        (("ticket-triage", "  \n"), {"request_id": "r"}),
        (("ticket-triage", "x" * 100_001), {"request_id": "r"}),
        (("ticket-triage", "a"), {"request_id": "r", "callback_url": "ftp://x.example/cb"}),
        (("ticket-triage", "a"), {"request_id": "r", "callback_url": "/relative"}),
        (("ticket-triage", "a"),
         {"request_id": "r", "callback_url": "https://x.example/" + "c" * 2031}),
        (("ticket-triage", "a"), {"request_id": "r", "metadata": ["not", "an", "object"]}),
        (("ticket-triage", "a"), {"request_id": "r", "metadata": {"x": float("nan")}}),
        (("ticket-triage", "a"), {"request_id": "r", "metadata": {"x": object()}}),
    ],
)
def test_run_refuses_locally_what_the_hub_would_refuse(hub, client, args, kwargs):
    with pytest.raises(HubRequestError):
        client.run(*args, **kwargs)
    assert hub.requests == []


def test_run_limits_are_inclusive_and_accepted_by_the_hub(hub, client):
    hub.routes.add("ab")
    accepted = client.run("ab", "x" * 100_000, request_id="😀" * 64,
                          callback_url="https://x.example/" + "c" * (2048 - 18))
    assert accepted.status == "queued"
    assert len(hub.requests[-1].json()["input"]) == 100_000


# --- GET /jobs/{job_id} -----------------------------------------------------


def test_read_own_job(hub, client):
    accepted = client.run("ticket-triage", "a", request_id="shop-60", metadata={"k": "v"})
    job = client.job(accepted.job_id)
    assert isinstance(job, JobRecord)
    assert job.job_id == accepted.job_id and job.status == "queued"
    assert job.metadata == {"k": "v"} and job.route_name == "Route ticket-triage"
    sent = hub.requests[-1]
    assert (sent.method, sent.path, sent.query) == ("GET", f"/jobs/{accepted.job_id}", "")
    assert sent.headers["Authorization"] == f"Bearer {CLIENT_TOKEN}"


def test_jobs_of_other_clients_are_not_found(hub, client):
    hub.add_job("job-of-other", client_app_id="other")
    with pytest.raises(HubNotFoundError):
        client.job("job-of-other")
    with pytest.raises(HubNotFoundError):
        client.job("no-such-job")


@pytest.mark.parametrize("job_id", ["", "../admin", "a/b", "a?b", ".", "a b", "x" * 129, None])
def test_job_id_is_checked_before_sending(hub, client, job_id):
    with pytest.raises(HubRequestError):
        client.job(job_id)  # type: ignore[arg-type]
    assert hub.requests == []


# --- transport, errors and the token ----------------------------------------


def test_wrong_token_is_unauthorized_and_never_echoed(hub):
    token = "wrong-token-that-must-not-leak"
    bad = HubClient(hub.url, token)
    with pytest.raises(HubUnauthorizedError) as info:
        bad.run("ticket-triage", "a", request_id="r")
    assert info.value.status == 401 and info.value.message == "unauthorized"
    assert token not in str(info.value) and token not in repr(info.value)
    assert token not in repr(bad)


def test_token_never_in_logs_or_messages(hub, caplog):
    caplog.set_level(logging.DEBUG, logger="bailing_flask")
    client = HubClient(hub.url, CLIENT_TOKEN, clock=FrozenClock(HUB_NOW))
    decide(client)
    decide(client, auth="bearer")
    with pytest.raises(HubError) as info:
        client.job("missing")
    unreachable = HubClient(f"http://127.0.0.1:{_free_port()}", CLIENT_TOKEN, timeout=2)
    with pytest.raises(HubConnectionError) as down:
        unreachable.run("ticket-triage", "a", request_id="r")
    assert caplog.records
    for record in caplog.records:
        assert CLIENT_TOKEN not in record.getMessage()
    for error in (info.value, down.value):
        assert CLIENT_TOKEN not in str(error) and CLIENT_TOKEN not in repr(error)


def test_hub_message_echoing_the_token_is_scrubbed(hub, client):
    hub.canned = (400, "application/json",
                  json.dumps({"error": f"bad token {CLIENT_TOKEN}"}).encode())
    with pytest.raises(HubBadRequestError) as info:
        client.run("ticket-triage", "a", request_id="r")
    assert CLIENT_TOKEN not in str(info.value)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_hub(hub):
    client = HubClient(f"http://127.0.0.1:{_free_port()}", CLIENT_TOKEN, timeout=2)
    with pytest.raises(HubConnectionError) as info:
        client.job("job-test-001")
    assert info.value.status is None


def test_redirects_are_not_followed(live_server, hub, client):
    elsewhere = FakeHub()
    elsewhere_url = live_server(elsewhere)
    hub.redirects["/"] = elsewhere_url + "/run"
    with pytest.raises(HubError) as info:
        client.run("ticket-triage", "a", request_id="r")
    assert info.value.status == 307
    assert elsewhere.requests == []  # the token went nowhere else


def test_non_json_error_page(hub, client):
    hub.canned = (502, "text/html", b"<html>Bad Gateway</html>")
    with pytest.raises(HubError) as info:
        client.job("job-test-001")
    assert type(info.value) is HubError
    assert info.value.status == 502 and info.value.message == "HTTP 502"


def test_non_json_success_is_an_error(hub, client):
    hub.canned = (200, "text/html", b"<html>login</html>")
    with pytest.raises(HubError) as info:
        client.job("job-test-001")
    assert info.value.status == 200


def test_hub_url_with_a_mount_path(live_server, hub):
    from werkzeug.middleware.dispatcher import DispatcherMiddleware

    def not_found(environ, start_response):
        start_response("404 Not Found", [("Content-Type", "application/json")])
        return [b'{"error":"wrong mount"}']

    mounted = live_server(DispatcherMiddleware(not_found, {"/hub": hub}))
    client = HubClient(mounted + "/hub/", CLIENT_TOKEN, clock=FrozenClock(HUB_NOW))
    assert decide(client).ok
    assert client.job("job-test-001").job_id == "job-test-001"


@pytest.mark.parametrize(
    "hub_url, token, timeout",
    [
        ("hub.example.com", CLIENT_TOKEN, 10),
        ("ftp://hub.example.com", CLIENT_TOKEN, 10),
        ("https://hub.example.com/?token=x", CLIENT_TOKEN, 10),
        ("https://u:p@hub.example.com", CLIENT_TOKEN, 10),
        ("https://hub.example.com", "", 10),
        ("https://hub.example.com", "  ", 10),
        ("https://hub.example.com", CLIENT_TOKEN, 0),
        ("https://hub.example.com", CLIENT_TOKEN, True),
    ],
)
def test_configuration_is_checked(hub_url, token, timeout):
    with pytest.raises(ConfigurationError) as info:
        HubClient(hub_url, token, timeout=timeout)
    assert CLIENT_TOKEN not in str(info.value)


def test_user_agent(hub):
    HubClient(hub.url, CLIENT_TOKEN, user_agent="shop/1.0").job("job-test-001")
    assert hub.requests[-1].headers["User-Agent"] == "shop/1.0"
    HubClient(hub.url, CLIENT_TOKEN).job("job-test-001")
    assert hub.requests[-1].headers["User-Agent"].startswith("bailing-flask")
