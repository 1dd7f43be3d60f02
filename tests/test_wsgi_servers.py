"""Every response the package makes arrives intact on every WSGI server.

PEP 3333 forbids an application to send hop-by-hop headers; wsgiref and
waitress enforce it by answering 500 instead. These tests go over real
sockets to wsgiref, waitress, Werkzeug, gunicorn and uWSGI (the last two
in subprocesses), with the bare middleware and with a Flask app.
"""

from __future__ import annotations

import http.client
import json
from typing import Any

import pytest
from flask import Flask, jsonify

from bailing_flask import Bailing, tool
from bailing_flask.wire import BailingMiddleware
from bailing_flask.testing import HubSimulator, signed_headers

from ._servers import gunicorn_serving, serving, uwsgi_serving
from .helpers import STRONG_SECRET, raw_request
from .apps.live_apps import _echo

MAX_BODY = 1024
IN_PROCESS = ("wsgiref", "waitress", "werkzeug")
HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
              "trailers", "transfer-encoding", "upgrade"}


@pytest.fixture(scope="module", params=[*IN_PROCESS, "gunicorn", "uwsgi"])
def echo_server(request):
    """The middleware's echo app (bodies above 1 KiB refused) on each server."""
    env = {"BAILING_TEST_SECRET": STRONG_SECRET, "BAILING_TEST_MAX_BODY": str(MAX_BODY)}
    if request.param == "gunicorn":
        server = gunicorn_serving("tests.apps.live_apps:middleware_app()", env=env)
    elif request.param == "uwsgi":
        server = uwsgi_serving("tests.live_uwsgi", env=env)
    else:
        server = serving(BailingMiddleware(_echo, STRONG_SECRET, max_body_size=MAX_BODY),
                         request.param)
    with server as base:
        yield request.param, base


def signed(method: str, target: str, body: bytes = b"", **kwargs: Any) -> dict[str, str]:
    return signed_headers(STRONG_SECRET, method, target, body, **kwargs)


def content_lengths(response) -> list[str]:
    return response.headers.get_all("Content-Length") or []


def test_body_too_large_arrives_as_413_on_every_server(echo_server):
    kind, base = echo_server
    body = b'{"x":"' + b"y" * (4 * MAX_BODY) + b'"}'
    response = raw_request(base, "POST", "/upload", signed("POST", "/upload", body), body)
    assert response.status == 413, (kind, response.body[:300])
    data = json.loads(response.body)
    assert data["reason"] == "body_too_large"
    assert content_lengths(response) == [str(len(response.body))]


def test_chunked_body_too_large_arrives_as_413(echo_server):
    kind, base = echo_server
    if kind in ("wsgiref", "uwsgi"):
        pytest.skip(f"{kind} does not accept chunked request bodies")
    body = b'{"x":"' + b"y" * (4 * MAX_BODY) + b'"}'
    response = raw_request(base, "POST", "/upload", signed("POST", "/upload", body),
                           [body[:500], body[500:]], chunked=True)
    assert response.status == 413, (kind, response.body[:300])
    assert json.loads(response.body)["reason"] == "body_too_large"


@pytest.mark.parametrize("change, reason", [
    ({"X-Bailing-Signature": "sha256=" + "0" * 64}, "bad_signature"),
    ({"X-Bailing-Job-Id": "a.b"}, "malformed_job_id"),
    ({"X-Bailing-Timestamp": "12x"}, "malformed_timestamp"),
])
def test_every_refusal_arrives_intact_on_every_server(echo_server, change, reason):
    kind, base = echo_server
    headers = {**signed("GET", "/search?q=1"), **change}
    response = raw_request(base, "GET", "/search?q=1", headers)
    assert response.status == 401, (kind, response.body[:300])
    assert json.loads(response.body)["reason"] == reason
    assert content_lengths(response) == [str(len(response.body))]


def test_a_signed_call_still_passes_on_every_server(echo_server):
    kind, base = echo_server
    body = b'{"a":1}'
    response = raw_request(base, "POST", "/upload", signed("POST", "/upload", body), body)
    assert response.status == 200, (kind, response.body[:300])
    assert json.loads(response.body) == {"signed_path": "/upload", "subject": None, "length": 7}


def flask_app() -> Flask:
    """A Flask app whose refusals go through its own error handler."""
    app = Flask("servers")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://",
                      BAILING_MAX_BODY_SIZE=MAX_BODY)
    bailing = Bailing(app)
    bailing.authorizer(lambda call: True)

    @bailing.error_handler
    def restyle(error):
        return jsonify(code=error.status, why=error.reason), error.status

    @app.post("/api/notes")
    @tool(scope="note.write")
    def note_create():
        """Create a note (a side effect, so repeats are answered from the store)."""
        return jsonify(ok=True), 201

    return app


@pytest.mark.parametrize("kind", IN_PROCESS)
def test_refusals_rendered_by_the_apps_error_handler_have_one_content_length(wsgi_server, kind):
    base = wsgi_server(flask_app(), kind)
    body = b"z" * (2 * MAX_BODY)
    too_large = raw_request(base, "POST", "/api/notes", signed("POST", "/api/notes", body), body)
    assert too_large.status == 413, too_large.body[:300]
    assert json.loads(too_large.body) == {"code": 413, "why": "body_too_large"}
    assert content_lengths(too_large) == [str(len(too_large.body))]
    unsigned = raw_request(base, "POST", "/api/notes", {}, b"{}")
    assert unsigned.status == 401
    assert json.loads(unsigned.body)["why"] == "missing_signature"


@pytest.mark.parametrize("kind", IN_PROCESS)
def test_replayed_side_effect_arrives_intact_without_hop_by_hop_headers(wsgi_server, kind):
    base = wsgi_server(flask_app(), kind)
    hub = HubSimulator(base, STRONG_SECRET)
    request = hub.build_call("note_create", {}, subject="t1:u1")
    first, second = hub.replay(request), hub.replay(request)
    assert (first.status, second.status) == (201, 201), second.text
    assert second.headers.get("Idempotent-Replayed") == "true"
    assert not {name.lower() for name in second.headers} & HOP_BY_HOP - {"connection"}


def test_uwsgi_http_socket_with_connection_close_survives_a_keep_alive_client(uwsgi):
    """The documented uWSGI line: 40 calls on one keep-alive client, none lost.

    uWSGI's ``--http-socket`` closes every connection after the response; a
    client that keeps connections alive (the hub's does) only learns so from
    ``Connection: close``, which uWSGI adds with ``--add-header``.
    """
    base = uwsgi("tests.live_uwsgi", env={"BAILING_TEST_SECRET": STRONG_SECRET})
    host, port = base.split("//", 1)[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    statuses = []
    try:
        for _ in range(40):
            body = b"{}"
            headers = signed("POST", "/notes", body)
            headers["Content-Type"] = "application/json"
            conn.request("POST", "/notes", body=body, headers=headers)
            response = conn.getresponse()
            response.read()
            assert response.getheader("Connection", "").lower() == "close"
            statuses.append(response.status)
    finally:
        conn.close()
    assert statuses == [200] * 40
