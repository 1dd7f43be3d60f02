"""The tests of docs/testing.rst for the example application (``example_app``), run by the suite."""

import threading

import pytest
from werkzeug.middleware.dispatcher import DispatcherMiddleware
from werkzeug.serving import make_server

# [start:fixture]
import pytest

from example_app import create_app

SECRET = "test-secret-0123456789-0123456789-abcdef"
CLIENT_TOKEN = "test-client-token-0123456789-0123456789"


@pytest.fixture
def app(tmp_path):
    return create_app({
        "TESTING": True,
        "DATABASE": str(tmp_path / "shop.sqlite3"),
        "BAILING_SECRETS": [SECRET],
        "BAILING_CLIENT_TOKENS": [CLIENT_TOKEN],   # for the hub's POSTs and the app's decisions
        "BAILING_HUB_URL": "https://hub.example.com",   # bailing_fake_hub points it at itself
        "BAILING_STORE": "memory://",
        "SECRET_KEY": "test",
    }, instance_path=str(tmp_path / "instance"))
# [end:fixture]


# [start:simulator]
from bailing_flask.testing import HubSimulator


def test_the_simulator_calls_like_the_hub(app):
    hub = HubSimulator(app, SECRET)          # in-process
    response = hub.call("order_search", {"keyword": "耳机", "status": "paid"}, subject="t1:u1")
    assert response.status == 200 and "orders" in response.json()
# [end:simulator]


@pytest.fixture
def base_url(app):
    """The app under a real server (Werkzeug's), mounted at /openapi like behind a proxy prefix."""
    server = make_server("127.0.0.1", 0, DispatcherMiddleware(lambda e, s: [], {"/openapi": app}),
                         threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/openapi"
    server.shutdown()
    thread.join(timeout=60)


# [start:server]
def test_through_a_real_server(base_url):     # e.g. "http://127.0.0.1:8000/openapi"
    hub = HubSimulator(base_url, SECRET)
    assert hub.fetch_catalog().status == 200
    assert hub.call("order_get", {"order_id": 1001}, subject="t1:u1").status == 200
# [end:server]


# [start:tests]
def test_search_stays_inside_the_tenant(bailing_hub):
    mine = bailing_hub.call("order_search", {"keyword": "耳机"}, subject="t1:u1")
    theirs = bailing_hub.call("order_search", {"keyword": "耳机"}, subject="t2:u9")
    assert mine.status == theirs.status == 200
    assert mine.json()["orders"] and theirs.json()["orders"] == []


def test_read_only_user_cannot_request_a_refund(bailing_hub):
    args = {"order_id": 1001, "amount": 10, "reason": "Left earbud crackles"}
    response = bailing_hub.call("refund_request_create", args, subject="t1:u2")
    assert response.status == 403
    assert response.json()["reason"] == "forbidden"


def test_refund_request_is_created_once(bailing_hub):
    request = bailing_hub.build_call(
        "refund_request_create",
        {"order_id": 1001, "amount": 20, "reason": "Left earbud crackles"},
        subject="t1:u1",
    )
    first = bailing_hub.replay(request)
    again = bailing_hub.replay(request)          # the same signed request, delivered twice
    assert first.status == again.status == 201
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()


def test_a_changed_subject_breaks_the_signature(bailing_hub):
    request = bailing_hub.build_call("order_get", {"order_id": 1001}, subject="t1:u2")
    response = bailing_hub.replay(request, on_behalf_of="t1:u1")
    assert response.status == 401
    assert response.json()["reason"] == "bad_signature"


def test_probe_and_catalog(bailing_hub):
    assert bailing_hub.probe().json() == {"authorized": False}
    assert bailing_hub.fetch_catalog().status == 200
    assert bailing_hub.fetch_catalog(signature=None).status == 401
    assert bailing_hub.fetch_catalog(signature="zeros").status == 401
# [end:tests]


# [start:fake-hub]
from example_app.hub import bailing


def test_finance_approves_a_payout(app, bailing_hub, bailing_fake_hub):
    filed = bailing_hub.call("refund_request_create",
                             {"order_id": 1001, "amount": 20, "reason": "Left earbud crackles"},
                             subject="t1:u1", job_id="job-1")
    request_id = filed.json()["refund_request_id"]
    bailing_hub.send_approval_request("refund_execute", {"request_id": request_id},
                                      subject="t1:u1", job_id="job-1", approval_id=17)
    with app.app_context():                       # what the back office's button does
        bailing.approvals().decide(17, "approved", approver="t1:u1")
    assert bailing_fake_hub.decisions[0]["decision"] == "approved"
    paid = bailing_hub.call("refund_execute", {"request_id": request_id},
                            subject="t1:u1", job_id="job-1")   # the hub's re-run
    assert paid.status == 200
# [end:fake-hub]


# [start:catalog]
def test_catalog_is_clean(app):
    result = app.test_cli_runner().invoke(args=["bailing", "check"])
    assert result.exit_code == 0, result.output
# [end:catalog]


# [start:signed-headers]
from bailing_flask.testing import signed_headers


def test_a_hand_made_request(app):
    body = b'{"order_id":1001,"amount":20,"reason":"Left earbud crackles"}'
    headers = signed_headers(SECRET, "POST", "/api/refunds/requests", body,
                             subject="t1:u1", job_id="job-1")
    response = app.test_client().post("/api/refunds/requests", data=body,
                                      headers={**headers, "Content-Type": "application/json"})
    assert response.status_code == 201
# [end:signed-headers]
