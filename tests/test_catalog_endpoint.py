"""The signed-only catalog endpoint answers exactly what the hub's refresh expects."""

from __future__ import annotations

import json
import logging

from flask import Flask
from werkzeug.middleware.dispatcher import DispatcherMiddleware

from bailing_flask import Bailing
from bailing_flask.testing import catalog_headers

from .apps.catalog_app import create_app
from .helpers import STRONG_SECRET, raw_request
from bailing_flask._state import state_of
from bailing_flask._pipeline.catalog import catalog_of

PATH = "/.well-known/bailing/tools.json"


def test_signed_fetch_gets_the_catalog_with_no_store():
    app = create_app()
    response = app.test_client().get(PATH, headers=catalog_headers(STRONG_SECRET, PATH))
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json; charset=utf-8"
    assert response.headers["Cache-Control"] == "private, no-store"
    assert response.data == catalog_of(state_of(app)).served_bytes
    assert "/api/orders" in response.json["paths"]


def test_unsigned_fetch_is_401_with_reason():
    response = create_app().test_client().get(PATH)
    assert response.status_code == 401
    assert response.json["reason"] == "missing_signature"
    assert "paths" not in response.json


def test_zero_signature_with_fresh_timestamp_is_401():
    headers = catalog_headers(STRONG_SECRET, PATH)
    headers["X-Bailing-Signature"] = "sha256=" + "0" * 64
    response = create_app().test_client().get(PATH, headers=headers)
    assert response.status_code == 401
    assert response.json["reason"] == "bad_signature"


def test_non_get_is_405_json():
    response = create_app().test_client().post(PATH)
    assert response.status_code == 405
    assert response.json["error"] == "method not allowed"
    assert response.json["reason"] == response.headers["X-Bailing-Reason"] == "method_not_allowed"
    assert response.headers["Allow"] == "GET"


def test_public_catalog_is_an_explicit_opt_in_that_warns(caplog):
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=STRONG_SECRET, BAILING_PUBLIC_CATALOG=True)
    with caplog.at_level(logging.WARNING, logger="bailing_flask"):
        Bailing(app)
    assert "BAILING_PUBLIC_CATALOG is on" in caplog.text
    response = app.test_client().get(PATH)
    assert response.status_code == 200
    assert response.json["openapi"].startswith("3.0")


def test_through_a_real_server_signed_unsigned_and_zeros(live_server):
    base = live_server(create_app())
    signed = raw_request(base, "GET", PATH, catalog_headers(STRONG_SECRET, PATH))
    assert signed.status == 200
    assert signed.headers["Cache-Control"] == "private, no-store"
    assert json.loads(signed.body)["info"]["title"] == "Shop tools"
    assert raw_request(base, "GET", PATH).status == 401
    zeros = catalog_headers(STRONG_SECRET, PATH)
    zeros["X-Bailing-Signature"] = "sha256=" + "0" * 64
    assert raw_request(base, "GET", PATH, zeros).status == 401


def test_mounted_under_a_prefix_the_full_public_path_is_signed(live_server):
    base = live_server(DispatcherMiddleware(Flask("root"), {"/openapi": create_app()}))
    public = "/openapi" + PATH
    signed = raw_request(base, "GET", public, catalog_headers(STRONG_SECRET, public))
    assert signed.status == 200, signed.body
    # a signature over the path without the prefix is not valid for this URL
    wrong = raw_request(base, "GET", public, catalog_headers(STRONG_SECRET, PATH))
    assert wrong.status == 401
    assert raw_request(base, "GET", public).status == 401


def test_catalog_query_string_is_part_of_the_signed_path(live_server):
    base = live_server(create_app())
    target = PATH + "?v=1&x=a%20b&y=%C3%A9"
    assert raw_request(base, "GET", target, catalog_headers(STRONG_SECRET, target)).status == 200
    assert raw_request(base, "GET", target, catalog_headers(STRONG_SECRET, PATH)).status == 401
