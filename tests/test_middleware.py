"""BailingMiddleware verifies below the app and never breaks what it protects."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import pytest
from flask import Flask, request
from werkzeug.middleware.dispatcher import DispatcherMiddleware
from werkzeug.test import Client, EnvironBuilder, run_wsgi_app
from werkzeug.wrappers import Response

from bailing_flask import ConfigurationError
from bailing_flask.wire import BailingMiddleware, SignatureError, sign_tool_call
from bailing_flask.testing import catalog_headers, signed_headers
from bailing_flask.wire.middleware import ENVIRON_KEY

from .helpers import HUB_SECRET, VECTOR_TS, FrozenClock


def echo_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """A bare WSGI app reporting what it was handed."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else b""
    call = environ.get(ENVIRON_KEY)
    payload = {
        "body": body.decode("utf-8", "replace"),
        "content_length": environ.get("CONTENT_LENGTH"),
        "call": None
        if call is None
        else {
            "kind": call.kind,
            "subject": call.subject,
            "job_id": call.job_id,
            "key_label": call.key_label,
            "signed_path": call.signed_path,
            "client": call.unsigned.client,
            "idempotency_key": call.unsigned.idempotency_key,
            "tool_scope": call.unsigned.tool_scope,
            "conversation": call.unsigned.conversation,
        },
    }
    data = json.dumps(payload).encode()
    start_response("200 OK", [("Content-Type", "application/json")])
    return [data]


def protect(app: Any = echo_app, **options: Any) -> BailingMiddleware:
    options.setdefault("clock", FrozenClock(VECTOR_TS))
    return BailingMiddleware(app, HUB_SECRET, **options)


def call(app: Any, method: str, path: str, body: bytes = b"", headers: dict | None = None,
         **builder: Any):
    client = Client(app)
    return client.open(
        EnvironBuilder(path=path, method=method, data=body, headers=headers or {}, **builder)
    )


def run(app: Any, environ: dict[str, Any]) -> Response:
    """Run an exact environ (``Client.open`` would rebuild it)."""
    body, status, headers = run_wsgi_app(app, environ, buffered=True)
    return Response(body, status, headers)


def signed(method: str, target: str, body: bytes = b"", **kwargs: Any) -> dict[str, str]:
    kwargs.setdefault("ts", VECTOR_TS)
    return signed_headers(HUB_SECRET, method, target, body, **kwargs)


def test_unsigned_request_passes_through_untouched():
    response = call(protect(), "POST", "/legacy/form", b"a=1&b=2",
                    headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert response.status_code == 200
    assert response.json == {"body": "a=1&b=2", "content_length": "7", "call": None}


def test_signed_tool_call_reaches_the_app_with_the_verified_call():
    body = b'{"title":"test","price":9.9}'
    headers = signed("POST", "/goods/create", body, subject="179:1", client="crm",
                     tool_scope="goods.write", idempotency_key="k" * 64)
    headers["X-Bailing-Conversation"] = "wecom:abc"
    response = call(protect(), "POST", "/goods/create", body, headers)
    assert response.status_code == 200, response.data
    assert response.json["body"] == body.decode()
    assert response.json["content_length"] == str(len(body))
    assert response.json["call"] == {
        "kind": "tool", "subject": "179:1", "job_id": "job-test-001", "key_label": "0",
        "signed_path": "/goods/create", "client": "crm", "idempotency_key": "k" * 64,
        "tool_scope": "goods.write", "conversation": "wecom:abc",
    }


def test_anonymous_call_has_no_subject():
    headers = signed("GET", "/orders", subject=None)
    response = call(protect(), "GET", "/orders", headers=headers)
    assert response.status_code == 200
    assert response.json["call"]["subject"] is None


def test_refusal_is_json_401_with_reason_and_no_secrets(caplog):
    headers = signed("POST", "/goods/create", b"{}", subject="t1:u1")
    app = protect()
    with caplog.at_level(logging.WARNING, logger="bailing_flask"):
        response = call(app, "POST", "/goods/create", b'{"x":1}', headers)
    assert response.status_code == 401
    assert response.headers["Content-Type"] == "application/json; charset=utf-8"
    assert response.json["reason"] == "bad_signature"
    assert response.json["error"] == "bad_signature"
    text = response.get_data(as_text=True) + caplog.text
    assert HUB_SECRET not in text
    assert headers["X-Bailing-Signature"] not in text
    assert '{"x":1}' not in text
    # logged once, with reason, method, path and job id
    records = [r for r in caplog.records if "refused" in r.getMessage()]
    assert len(records) == 1
    assert "bad_signature" in records[0].getMessage()
    assert "POST /goods/create" in records[0].getMessage()
    assert "job-test-001" in records[0].getMessage()


def test_refused_request_never_reaches_the_app():
    reached = []

    def app(environ, start_response):
        reached.append(True)
        start_response("200 OK", [])
        return [b""]

    headers = signed("GET", "/x")
    headers["X-Bailing-Signature"] = "sha256=" + "0" * 64
    response = call(protect(app), "GET", "/x", headers=headers)
    assert response.status_code == 401
    assert reached == []


@pytest.mark.parametrize(
    "mutate,reason",
    [
        (lambda h: h.update({"X-Bailing-Signature": ""}), "missing_signature"),
        (lambda h: h.update({"X-Bailing-Signature": "sha256=XYZ"}), "malformed_signature"),
        (lambda h: h.pop("X-Bailing-Timestamp"), "malformed_timestamp"),
        (lambda h: h.update({"X-Bailing-Timestamp": "+1718000000"}), "malformed_timestamp"),
        (lambda h: h.update({"X-Bailing-Timestamp": "1717999000"}), "timestamp_out_of_window"),
        (lambda h: h.update({"X-Bailing-Job-Id": "a.b"}), "malformed_job_id"),
        (lambda h: h.update({"X-Bailing-On-Behalf-Of": "t1:u2"}), "bad_signature"),
    ],
)
def test_each_refusal_reason(mutate, reason):
    headers = signed("GET", "/x", subject="t1:u1")
    mutate(headers)
    response = call(protect(), "GET", "/x", headers=headers)
    assert response.status_code == 401
    assert response.json["reason"] == reason


def test_query_is_signed_verbatim():
    target = "/staff/list?2024=y&limit=10&dept=R%26D+%7E*%27%28%29%21%2B"
    headers = signed("GET", target, subject="t1:u1001")
    response = call(protect(), "GET", target, headers=headers)
    assert response.status_code == 200
    assert response.json["call"]["signed_path"] == target


def test_encoded_slash_in_path_parameter_is_verified_from_the_raw_target():
    target = "/files/reports%2F2024%3Fv%3D1%20final%232.pdf"  # E2
    headers = signed("GET", target)
    response = call(protect(), "GET", target, headers=headers)
    assert response.status_code == 200
    assert response.json["call"]["signed_path"] == target


def test_fallback_reconstructs_the_path_when_the_server_gives_no_raw_target():
    target = "/goods/%E5%95%86%E5%93%81%20x/detail"
    headers = signed("GET", target + "?q=x+y%2Bz&t=%7E")
    builder = EnvironBuilder(path=target, query_string="q=x+y%2Bz&t=%7E", headers=headers)
    environ = builder.get_environ()
    del environ["REQUEST_URI"], environ["RAW_URI"]
    response = run(protect(), environ)
    assert response.status_code == 200, response.data
    reconstruct = protect(raw_target="reconstruct")
    assert run(reconstruct, builder.get_environ()).status_code == 200


def test_body_is_handed_back_to_flask_for_json_and_get_data_and_never_read_as_a_form():
    app = Flask(__name__)

    @app.post("/json")
    def json_view():
        return {"json": request.get_json(), "raw": request.get_data(as_text=True)}

    @app.post("/form")
    def form_view():
        return {"form": request.form.to_dict()}

    app.wsgi_app = protect(app.wsgi_app)  # type: ignore[method-assign]
    client = app.test_client()
    body = '{"title":"测试 \\"x\\"","price":9.9,"tags":["a","b"]}'.encode()
    response = client.post("/json", data=body, content_type="application/json",
                           headers=signed("POST", "/json", body))
    assert response.status_code == 200
    assert response.json["raw"] == body.decode()
    assert response.json["json"]["title"] == '测试 "x"'
    form = b"a=1&b=x+y"  # the hub sends every body as JSON: a signed form was relabelled
    response = client.post("/form", data=form, content_type="application/x-www-form-urlencoded",
                           headers=signed("POST", "/form", form))
    assert (response.status_code, response.json["reason"]) == (415, "body_not_json")


def test_large_body_spills_to_a_file_and_is_still_intact():
    body = (b"0123456789abcdef" * 4096) * 20  # 1.25 MiB
    response = call(protect(spool_threshold=64 * 1024), "POST", "/upload", body,
                    signed("POST", "/upload", body))
    assert response.status_code == 200
    assert response.json["body"] == body.decode()


def test_body_over_the_maximum_is_refused_with_413():
    body = b"x" * 2048
    response = call(protect(max_body_size=1024), "POST", "/upload", body,
                    signed("POST", "/upload", body))
    assert response.status_code == 413
    assert response.json["reason"] == "body_too_large"


def test_chunked_body_over_the_maximum_is_refused_while_streaming():
    body = b"y" * 5000
    headers = signed("POST", "/upload", body)
    environ = EnvironBuilder(path="/upload", method="POST", headers=headers).get_environ()
    environ["wsgi.input"] = io.BytesIO(body)
    environ["wsgi.input_terminated"] = True
    environ.pop("CONTENT_LENGTH", None)
    response = run(protect(max_body_size=4096), environ)
    assert response.status_code == 413
    environ["wsgi.input"] = io.BytesIO(body)
    response = run(protect(), environ)
    assert response.status_code == 200
    assert response.json["content_length"] == "5000"


def test_truncated_body_is_a_400():
    headers = signed("POST", "/upload", b"abc")
    environ = EnvironBuilder(path="/upload", method="POST", headers=headers).get_environ()
    environ["wsgi.input"] = io.BytesIO(b"ab")
    environ["CONTENT_LENGTH"] = "3"
    response = run(protect(), environ)
    assert response.status_code == 400
    assert response.json["reason"] == "malformed_body"


def test_app_mounted_under_a_prefix_signs_tool_paths_without_it():
    # base_url = https://shop.example.com/openapi (E3): tool calls sign the
    # path without /openapi, the catalog signs the full path.
    inner = protect()
    outer = DispatcherMiddleware(lambda e, s: (s("404 Not Found", []), [b""])[1],
                                 {"/openapi": inner})
    body = '{"title":"测试 \\"x\\"","price":9.9,"tags":["a","b"]}'.encode()
    headers = signed("POST", "/goods/create?dry_run=true", body, subject="t1:u1001")
    environ = EnvironBuilder(path="/openapi/goods/create", query_string="dry_run=true",
                             method="POST", data=body, headers=headers).get_environ()
    response = run(outer, environ)
    assert response.status_code == 200, response.data
    assert response.json["call"]["signed_path"] == "/goods/create?dry_run=true"
    assert headers["X-Bailing-Signature"] == (
        "sha256=71c24b97027c42aa2dc37c4741c489770cfaf8a6e0bf46a48bae2de209331026"
    )

    catalog = catalog_headers(HUB_SECRET, "/openapi/.well-known/bailing/tools.json", ts=VECTOR_TS)
    environ = EnvironBuilder(path="/openapi/.well-known/bailing/tools.json",
                             headers=catalog).get_environ()
    response = run(outer, environ)
    assert response.status_code == 200, response.data
    assert response.json["call"]["kind"] == "catalog"
    assert response.json["call"]["signed_path"] == "/openapi/.well-known/bailing/tools.json"


def test_prefix_stripping_proxy_needs_the_public_prefix():
    # nginx: location /openapi/ { proxy_pass http://app/; } -- the app sees no prefix.
    catalog = catalog_headers(HUB_SECRET, "/openapi/.well-known/bailing/tools.json", ts=VECTOR_TS)
    response = call(protect(), "GET", "/.well-known/bailing/tools.json", headers=catalog)
    assert response.status_code == 401
    response = call(protect(public_prefix="/openapi"), "GET", "/.well-known/bailing/tools.json",
                    headers=catalog)
    assert response.status_code == 200
    # ... tool calls are unaffected by the public prefix
    headers = signed("GET", "/orders")
    assert call(protect(public_prefix="/openapi"), "GET", "/orders", headers=headers).status_code == 200


def test_catalog_is_verified_with_empty_subject_and_job_whatever_the_headers():
    catalog = catalog_headers(HUB_SECRET, "/.well-known/bailing/tools.json", ts=VECTOR_TS)
    catalog["X-Bailing-On-Behalf-Of"] = "t1:u1"
    catalog["X-Bailing-Job-Id"] = "a.b"
    response = call(protect(), "GET", "/.well-known/bailing/tools.json", headers=catalog)
    assert response.status_code == 200
    assert response.json["call"]["subject"] is None
    assert response.json["call"]["kind"] == "catalog"


def test_required_prefixes_refuse_unsigned_requests():
    app = protect(require_signature=["/api"])
    assert call(app, "GET", "/api/orders").status_code == 401
    assert call(app, "GET", "/api").json["reason"] == "missing_signature"
    assert call(app, "GET", "/apidocs").status_code == 200
    assert call(app, "GET", "/").status_code == 200


def test_error_renderer_restyles_refusals():
    def render(error: SignatureError):
        return 401, [("Content-Type", "text/plain")], f"nope: {error.reason}".encode()

    response = call(protect(error_renderer=render), "GET", "/x",
                    headers={"X-Bailing-Signature": "sha256=bad"})
    assert response.status_code == 401
    assert response.get_data(as_text=True) == "nope: malformed_signature"


def test_middleware_refuses_to_start_without_secret():
    with pytest.raises(ConfigurationError) as info:
        BailingMiddleware(echo_app, None, setting="BAILING_SECRETS")
    assert "BAILING_SECRETS" in str(info.value)
    with pytest.raises(ConfigurationError):
        BailingMiddleware(echo_app, [""])


def test_rotation_in_the_middleware_reports_the_label():
    old = "old-secret-0123456789-0123456789-abcdef"
    app = BailingMiddleware(echo_app, {"new": "new-secret-0123456789-0123456789-abcdef", "old": old},
                            clock=FrozenClock(VECTOR_TS))
    headers = {
        "X-Bailing-Timestamp": str(VECTOR_TS),
        "X-Bailing-Signature": sign_tool_call(old, VECTOR_TS, "GET", "/x", b"", "", "j"),
        "X-Bailing-Job-Id": "j",
    }
    response = call(app, "GET", "/x", headers=headers)
    assert response.json["call"]["key_label"] == "old"


def test_spoofed_environ_key_is_cleared_for_unsigned_requests():
    environ = EnvironBuilder(path="/x").get_environ()
    environ[ENVIRON_KEY] = "forged"
    response = run(protect(), environ)
    assert response.json["call"] is None


def test_the_hubs_zero_signature_catalog_probe_is_logged_at_info_only(caplog):
    headers = catalog_headers(HUB_SECRET, "/.well-known/bailing/tools.json", ts=VECTOR_TS)
    headers["X-Bailing-Signature"] = "sha256=" + "0" * 64
    app = protect()
    with caplog.at_level(logging.INFO, logger="bailing_flask"):
        assert call(app, "GET", "/.well-known/bailing/tools.json", headers=headers).status_code == 401
    (record,) = [r for r in caplog.records if "refused" in r.getMessage()]
    assert record.levelno == logging.INFO
