"""The authz probe runs the app's own loader and authorizers, as the hub sends it."""

from __future__ import annotations

import json

import pytest
from flask import Flask

from bailing_flask import Bailing, tool
from bailing_flask.testing import PROBE_BODY, PROBE_SUBJECT, HubSimulator, signed_headers

from .apps.authz_app import create_app
from .helpers import STRONG_SECRET, raw_request

PROBE = "/.well-known/bailing/authz-probe"


def test_the_catalog_advertises_the_probe(hub):
    assert hub.document()["x-bailing-authz-probe"] == {
        "path": PROBE, "method": "POST", "operationId": "authz_probe"}


def test_synthetic_subject_is_not_authorized(hub):
    response = hub.probe()
    assert response.status == 200
    assert response.json() == {"authorized": False}


def test_a_real_subject_is_authorized(hub):
    response = hub.probe(subject="t1:u2")
    assert response.status == 200
    assert response.json() == {"authorized": True}


def test_the_body_subject_wins_over_the_header(authz_app):
    body = PROBE_BODY.replace(PROBE_SUBJECT, "t1:u1").encode()
    headers = signed_headers(STRONG_SECRET, "POST", PROBE, body, subject=PROBE_SUBJECT,
                             job_id="probe", client="__probe__")
    response = authz_app.test_client().post(PROBE, data=body, headers=headers)
    assert response.json == {"authorized": True}


def test_header_subject_when_the_body_has_none(authz_app):
    headers = signed_headers(STRONG_SECRET, "GET", PROBE, subject="t1:u1", job_id="probe")
    response = authz_app.test_client().get(PROBE, headers=headers)
    assert response.json == {"authorized": True}


def test_authorizers_can_tell_a_probe_from_a_call():
    app = Flask(__name__)
    app.config["BAILING_SECRETS"] = STRONG_SECRET
    bailing = Bailing(app)
    seen = []

    @bailing.authorizer
    def authorize(call):
        seen.append((call.is_probe, dict(call.args)))
        return False

    @app.get("/x/<int:n>")
    @tool(scope="x.read")
    def x(n):
        return "x"

    HubSimulator(app, STRONG_SECRET).probe()
    assert seen == [(True, {})]


def _single_tool_app(authorizer):
    app = Flask(__name__)
    app.config["BAILING_SECRETS"] = STRONG_SECRET
    bailing = Bailing(app)
    bailing.authorizer(authorizer)

    @bailing.subject_loader
    def load(subject):
        if subject == "boom":
            raise RuntimeError("directory down")
        return subject

    @app.get("/x")
    @tool(scope="x.read")
    def x():
        return "x"

    return HubSimulator(app, STRONG_SECRET)


def test_an_authorizer_that_raises_means_not_authorized():
    assert _single_tool_app(lambda call: True).probe(subject="t1:u1").json() == {"authorized": True}
    assert _single_tool_app(lambda call: 1 / 0).probe(subject="t1:u1").json() == {
        "authorized": False}


def test_a_loader_that_raises_means_not_authorized():
    assert _single_tool_app(lambda call: True).probe(subject="boom").json() == {
        "authorized": False}


def test_unsigned_probe_is_401_and_never_ok_true(authz_app):
    response = authz_app.test_client().post(PROBE, data=PROBE_BODY)
    assert response.status_code == 401
    assert response.json["authorized"] is False
    assert "ok" not in response.json


def test_badly_signed_probe_is_401(authz_app):
    headers = signed_headers(STRONG_SECRET, "POST", PROBE, PROBE_BODY, subject=PROBE_SUBJECT,
                             job_id="probe")
    response = authz_app.test_client().post(PROBE, data=PROBE_BODY + " ", headers=headers)
    assert response.status_code == 401


@pytest.mark.parametrize("subject,expected", [(PROBE_SUBJECT, False), ("t1:u1", True)])
def test_probe_through_a_real_server(live_server, subject, expected):
    app, _ = create_app()
    base = live_server(app)
    hub = HubSimulator(base, STRONG_SECRET)
    response = hub.probe(subject=subject)
    assert response.status == 200
    assert json.loads(response.body) == {"authorized": expected}


def test_authorization_through_a_real_server(live_server):
    app, _ = create_app()
    hub = HubSimulator(live_server(app), STRONG_SECRET)
    assert hub.call("order_get", {"order_id": 101}, subject="t1:u1").status == 200
    assert hub.call("order_get", {"order_id": 101}, subject="t2:u9").status == 403
    assert hub.call("order_get", {"order_id": 101}).status == 403
    assert hub.call("order_search", {"limit": 3}, subject="t1:u1").status == 422
    unsigned = raw_request(hub._scheme + "://" + hub._netloc, "GET", "/api/orders/101")
    assert unsigned.status == 401
