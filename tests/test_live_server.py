"""The middleware behind real servers over real sockets.

The Werkzeug test client differs from real servers in how it fills
``REQUEST_URI``/``RAW_URI`` and decodes headers, so these tests send bytes
over a socket exactly as the hub's HTTP client would.
"""

from __future__ import annotations

import json
import pytest
from flask import Flask, jsonify, request
from werkzeug.middleware.dispatcher import DispatcherMiddleware

from bailing_flask.wire import BailingMiddleware
from bailing_flask.testing import catalog_headers, signed_headers
from bailing_flask.wire.middleware import ENVIRON_KEY

from .helpers import STRONG_SECRET, raw_request


def make_app() -> Flask:
    app = Flask(__name__)

    def report(**extra):
        call = request.environ.get(ENVIRON_KEY)
        return jsonify(
            signed_path=call.signed_path if call else None,
            subject=call.subject if call else None,
            body=request.get_data(as_text=True),
            **extra,
        )

    @app.get("/files/<name>")
    def file(name):
        return report(name=name)

    @app.get("/search")
    def search():
        return report(args=request.args.to_dict())

    @app.post("/upload")
    def upload():
        return report(length=len(request.get_data()))

    @app.post("/form")
    def form():
        return report(form=request.form.to_dict())

    @app.get("/.well-known/bailing/tools.json")
    def catalog():
        return report()

    app.wsgi_app = BailingMiddleware(app.wsgi_app, STRONG_SECRET)  # type: ignore[method-assign]
    return app


@pytest.fixture
def server(live_server):
    return live_server(make_app())


def hub(method, target, body=b"", **kwargs):
    return signed_headers(STRONG_SECRET, method, target, body, **kwargs)


@pytest.mark.parametrize(
    "value",
    ["商品 x", "a+b", "é%25", "R&D ~*'()!", "semi;colon,comma=eq", "émoji-😀"],
)
def test_path_parameters_with_non_ascii_and_reserved_characters(server, value):
    from bailing_flask.wire.jsenc import encode_uri_component

    target = "/files/" + encode_uri_component(value)
    response = raw_request(server, "GET", target, hub("GET", target, subject="t1:u1"))
    assert response.status == 200, response.body
    data = json.loads(response.body)
    assert data["signed_path"] == target
    assert data["name"] == value


def test_query_with_plus_and_encoded_tilde(server):
    target = "/search?q=x+y%2Bz&t=%7E&k=%E5%BC%A0"
    response = raw_request(server, "GET", target, hub("GET", target))
    assert response.status == 200, response.body
    data = json.loads(response.body)
    assert data["args"] == {"q": "x y+z", "t": "~", "k": "张"}
    assert data["signed_path"] == target


def test_tampered_query_is_refused(server):
    target = "/search?q=x+y%2Bz"
    headers = hub("GET", target)
    response = raw_request(server, "GET", "/search?q=x+y%2Bw", headers)
    assert response.status == 401
    assert json.loads(response.body)["reason"] == "bad_signature"


def test_chunked_body(server):
    pieces = [b'{"part":1,', b'"data":"' + b"z" * 100000 + b'"}']
    body = b"".join(pieces)
    response = raw_request(server, "POST", "/upload", hub("POST", "/upload", body), pieces,
                           chunked=True)
    assert response.status == 200, response.body
    assert json.loads(response.body)["length"] == len(body)


def test_a_signed_form_encoded_body_is_refused_before_the_app_parses_it(server):
    """The hub sends every body as JSON, and Content-Type is not signed: a form was relabelled."""
    body = b"title=%E6%B5%8B%E8%AF%95&amount=9.9"
    headers = hub("POST", "/form", body)
    headers["Content-Type"] = "application/x-www-form-urlencoded"
    response = raw_request(server, "POST", "/form", headers, body)
    assert response.status == 415, response.body
    assert json.loads(response.body)["reason"] == "body_not_json"


def test_latin1_subject(server):
    response = raw_request(server, "GET", "/search", hub("GET", "/search", subject="café:ü"))
    assert response.status == 200, response.body
    assert json.loads(response.body)["subject"] == "café:ü"


def test_unsigned_request_is_untouched(server):
    response = raw_request(server, "POST", "/upload", {}, b"plain")
    assert response.status == 200
    assert json.loads(response.body) == {"signed_path": None, "subject": None, "body": "plain",
                                         "length": 5}


def test_app_mounted_under_a_prefix(live_server):
    outer = DispatcherMiddleware(Flask("root"), {"/openapi": make_app()})
    base = live_server(outer)
    body = b'{"a":1}'
    # tool calls sign the path without the base_url prefix ...
    response = raw_request(base, "POST", "/openapi/upload", hub("POST", "/upload", body), body)
    assert response.status == 200, response.body
    assert json.loads(response.body)["signed_path"] == "/upload"
    # ... the catalog fetch signs the full path of spec_url
    path = "/openapi/.well-known/bailing/tools.json"
    response = raw_request(base, "GET", path, catalog_headers(STRONG_SECRET, path))
    assert response.status == 200, response.body
    assert json.loads(response.body)["signed_path"] == path


def test_gunicorn_gives_the_raw_target(gunicorn):
    """gunicorn (a real pre-fork server) in a subprocess, with a prefix via SCRIPT_NAME."""
    base = gunicorn("tests.apps.live_apps:middleware_app()",
                    env={"BAILING_TEST_SECRET": STRONG_SECRET, "SCRIPT_NAME": "/openapi"})
    from bailing_flask.wire.jsenc import encode_uri_component

    target = "/files/" + encode_uri_component("a/b?c d#é%")
    response = raw_request(base, "GET", "/openapi" + target + "?q=x+y%2Bz",
                           hub("GET", target + "?q=x+y%2Bz", subject="café"))
    assert response.status == 200, response.body
    assert json.loads(response.body)["signed_path"] == target + "?q=x+y%2Bz"
    body = b'{"x":"' + b"y" * 3000 + b'"}'
    response = raw_request(base, "POST", "/openapi/upload", hub("POST", "/upload", body),
                           [body[:1000], body[1000:]], chunked=True)
    assert response.status == 200, response.body
    assert json.loads(response.body)["length"] == len(body)
