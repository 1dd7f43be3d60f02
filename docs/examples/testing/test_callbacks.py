"""The callback tests of docs/testing.rst: an app that handles the hub's finished-job POSTs."""

# [start:app]
import pytest
from flask import Flask

from bailing_flask import Bailing

SECRET = "test-secret-0123456789-0123456789-abcdef"
CLIENT_TOKEN = "test-client-token-0123456789-0123456789"


@pytest.fixture
def app():
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[SECRET], BAILING_CLIENT_TOKENS=[CLIENT_TOKEN],
                      BAILING_STORE="memory://")
    bailing = Bailing(app)
    app.extensions["finished"] = []

    @bailing.job_finished
    def on_finished(job):
        app.extensions["finished"].append(job.job_id)

    return app
# [end:app]


# [start:retry]
def test_a_job_callback_is_handled_once(bailing_hub, app):
    first = bailing_hub.send_job_finished(job_id="j-1", text="Refund submitted.")
    assert first.json() == {"ok": True}
    assert bailing_hub.retry(first.request).json() == {"ok": True, "duplicate": True}
    assert app.extensions["finished"] == ["j-1"]
# [end:retry]


# [start:by-hand]
import json, time
from bailing_flask.wire import sign_callback


def test_a_hand_signed_callback(app):
    body = json.dumps({"job_id": "job-1", "request_id": "req-1", "status": "done",
                       "result": {"text": "Refund submitted."},
                       "updated_at": "2025-06-01T10:00:00.000Z"}).encode()
    ts = str(int(time.time() * 1000))
    response = app.test_client().post(
        "/.well-known/bailing/callbacks/job", data=body,
        headers={"Content-Type": "application/json", "X-Bailing-Timestamp": ts,
                 "X-Bailing-Signature": sign_callback(CLIENT_TOKEN, ts, body)})
    assert response.status_code == 200
# [end:by-hand]
