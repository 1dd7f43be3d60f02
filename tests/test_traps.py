"""Regression tests for the hub's traps that had none, each named after what it is about.

Every test reproduces what the hub does (its encoders, its header handling,
its arithmetic) and checks that bailing_flask agrees, over real sockets
where servers differ.
"""

from __future__ import annotations

import hashlib
import json
import time

import pytest
from flask import Flask, jsonify
from pydantic import BaseModel, Field

from bailing_flask import Bailing, current_call, tool
from bailing_flask.wire import BailingMiddleware, sign_callback
from bailing_flask.lint import compile_tools, lint_document
from bailing_flask.responses import MAX_ERROR_BODY
from bailing_flask.testing import HubSimulator, canonical_json, idempotency_key, signed_headers
from bailing_flask.wire.middleware import ENVIRON_KEY

from .helpers import STRONG_SECRET, raw_request


def _report(environ, start_response):
    """Echo what the middleware verified."""
    call = environ.get(ENVIRON_KEY)
    body = json.dumps({"subject": call.subject, "job_id": call.job_id} if call else None).encode()
    start_response("200 OK", [("Content-Type", "application/json"),
                              ("Content-Length", str(len(body)))])
    return [body]


@pytest.fixture(params=["werkzeug", "waitress", "wsgiref"])
def report_server(request, wsgi_server):
    return wsgi_server(BailingMiddleware(_report, STRONG_SECRET), request.param)


# --- whitespace around the subject -----------------------------------------------------------------


def test_whitespace_padded_subject_is_stripped_on_the_wire_and_never_verifies(report_server):
    """Header values lose their surrounding whitespace on the wire but were signed with it."""
    padded = " t1:u1 "
    as_signed = signed_headers(STRONG_SECRET, "GET", "/x", subject=padded)
    # the hub's client strips the value before sending; the server would strip it anyway
    as_received = {**as_signed, "X-Bailing-On-Behalf-Of": padded.strip()}
    refused = raw_request(report_server, "GET", "/x", as_received)
    assert refused.status == 401 and json.loads(refused.body)["reason"] == "bad_signature"
    # sent with the spaces anyway, servers strip some or all of them: refused as well
    assert raw_request(report_server, "GET", "/x", as_signed).status == 401


# --- empty versus absent Job-Id ------------------------------------------------------------------------


def test_an_empty_job_id_header_equals_an_absent_one(report_server):
    """The hub's console debug sends Job-Id present but empty; both mean the empty string."""
    headers = signed_headers(STRONG_SECRET, "GET", "/x", subject="t1:u1", job_id=None)
    absent = raw_request(report_server, "GET", "/x", headers)
    empty = raw_request(report_server, "GET", "/x", {**headers, "X-Bailing-Job-Id": ""})
    assert (absent.status, empty.status) == (200, 200), empty.body
    assert json.loads(absent.body) == json.loads(empty.body) == {"subject": "t1:u1", "job_id": ""}


# --- Math.round halves -----------------------------------------------------------------------------------


@pytest.mark.parametrize("count, window, per_minute", [
    (150, "1h", 3),   # 2.5: JavaScript rounds half up, Python's round() gives 2
    (270, "1h", 5),   # 4.5: 5, not 4
    (90, "1h", 2),    # 1.5
    (3600, "1d", 3),  # 2.5 per minute from a daily limit
    (10, "1h", 1),    # never below 1
    (7, "1s", 420),
])
def test_math_round_halves_up_in_the_rate_limit_conversion(count, window, per_minute):
    capability = {"enabled": True, "scope": "order.read",
                  "execution": {"rate_limit": {"count": count, "window": window}}}
    document = {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": {
        "/orders": {"get": {"operationId": "order_list", "summary": "List orders.",
                            "x-agent-capability": capability}}}}
    (compiled,) = compile_tools(document)
    assert compiled.rate_limit_per_min == per_minute


# --- no X-Bailing-Tool ----------------------------------------------------------------------------------


def test_x_bailing_tool_is_never_sent_and_a_forged_one_changes_nothing(hub):
    """The hub names no tool in a header; the tool is the route the method and path reach."""
    request = hub.build_call("order_get", {"order_id": 101}, subject="t1:u1")
    assert not any(name.lower() == "x-bailing-tool" for name in request.headers)
    forged = hub.send(request.method, request.path_with_query,
                      {**request.headers, "X-Bailing-Tool": "refund_create"}, request.body)
    assert forged.status == 200, forged.body
    assert json.loads(forged.body)["order_id"] == 101


# --- canonical JSON key order ----------------------------------------------------------------------------


def test_canonical_json_orders_keys_by_utf16_code_units_not_code_points():
    """U+FF01 sorts after U+1F600 in UTF-16 (0xD83D < 0xFF01), before it by code point."""
    args = {"\uff01": 1, "\U0001f600": 2, "a": 3, "\ue000": 4}
    assert canonical_json(args) == '{"a":3,"\U0001f600":2,"\ue000":4,"\uff01":1}'
    assert sorted(args) != ["a", "\U0001f600", "\ue000", "\uff01"]  # what Python would do
    by_code_point = "{" + ",".join(f'"{k}":{args[k]}' for k in sorted(args)) + "}"
    hub_hash = hashlib.sha256(canonical_json(args).encode()).hexdigest()
    assert hub_hash != hashlib.sha256(by_code_point.encode()).hexdigest()
    key = idempotency_key("t", args, "job-1", "t1:u1")
    assert key == idempotency_key("t", dict(reversed(list(args.items()))), "job-1", "t1:u1")


# --- a body field named like a query argument ----------------------------------------------------------


class NoteQuery(BaseModel):
    note: str | None = Field(None, description="A note (query).")
    dry_run: bool = Field(False, description="Only check.")


class NoteBody(BaseModel):
    note: str = Field(description="A note (body).", max_length=50)


def test_a_body_field_with_the_same_name_as_a_query_argument_travels_in_the_body():
    """The hub lets a body property override a same-named query parameter."""
    app = Flask("shadow")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    bailing = Bailing(app)
    bailing.authorizer(lambda call: True)

    @app.post("/api/notes")
    @tool(scope="note.write", query=NoteQuery, body=NoteBody, repeats="safe")
    def note_create():
        """Create a note."""
        return jsonify(args=dict(current_call.args), query_note=current_call.query.note,
                       body_note=current_call.body.note), 201

    hub = HubSimulator(app, STRONG_SECRET)
    request = hub.build_call("note_create", {"note": "hello", "dry_run": True})
    assert request.path_with_query == "/api/notes?dry_run=true"
    assert request.body == b'{"note":"hello"}'
    answer = hub.replay(request).json()
    assert answer == {"args": {"note": "hello", "dry_run": True}, "query_note": None,
                      "body_note": "hello"}
    codes = {f.code for f in lint_document(hub.document())}
    assert "param_shadowed_by_body" in codes


# --- error bodies the model can read whole ---------------------------------------------------------------


def _long_enum_model() -> type[BaseModel]:
    from typing import Literal

    values = tuple(f"status_value_{i:03d}_" + "x" * 40 for i in range(60))
    fields = {f"filter_parameter_{i:02d}_" + "y" * 60: (Literal[values] | None, None)  # type: ignore[valid-type]
              for i in range(30)}
    from pydantic import create_model

    return create_model("Wide", **fields)  # type: ignore[call-overload,no-any-return]


@pytest.mark.parametrize("kind", ["invalid", "unknown"])
def test_error_bodies_are_bounded_to_what_the_model_reads(kind):
    """The hub shows the model at most 2048 characters of an error body."""
    wide = _long_enum_model()
    app = Flask("wide")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    bailing = Bailing(app)
    bailing.authorizer(lambda call: True)

    @app.get("/api/wide")
    @tool(scope="wide.read", query=wide)
    def wide_search():
        """Many filters."""
        return jsonify(ok=True)

    hub = HubSimulator(app, STRONG_SECRET)
    names = list(wide.model_fields)
    if kind == "invalid":
        args = {name: "nope" for name in names}
    else:
        args = {"unknown_" + name + "z" * 40: 1 for name in names}
    response = hub.call("wide_search", args)
    assert response.status == 422
    units = len(response.text.encode("utf-16-le")) // 2
    assert units <= MAX_ERROR_BODY, units
    body = response.json()  # whole JSON, not cut in the middle
    assert body["truncated"] is True
    assert body["reason"] == ("invalid_parameter" if kind == "invalid" else "unknown_parameter")
    assert body["parameters"] and "nope" not in response.text


# --- callbacks are not a queue -------------------------------------------------------------------------


def test_callbacks_are_not_a_queue_a_large_one_is_accepted_and_handled_once(live_server):
    """A refused callback is lost (the hub stops at any 4xx but 429), a retry must not run twice.

    The job record carries the whole input (up to 100000 characters) and
    result, so a callback is far larger than a tool call's body limit here.
    """
    token = "client-token-0123456789-abcdefghijklmnop"
    app = Flask("callbacks")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_CLIENT_TOKENS=[token],
                      BAILING_STORE="memory://", BAILING_MAX_BODY_SIZE=64 * 1024)
    bailing = Bailing(app)
    seen: list[str] = []
    bailing.job_finished(lambda job: seen.append(job.job_id))
    base = live_server(app)
    record = {"job_id": "job-big", "request_id": "r", "status": "done", "input": "退款" * 50_000,
              "result": {"text": "y" * 100_000}, "updated_at": "2026-11-30T01:00:00.000Z"}
    body = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()
    assert len(body) > 4 * 64 * 1024
    statuses = []
    for _ in range(3):  # three attempts, each freshly signed
        stamp = int(time.time() * 1000)
        headers = {"Content-Type": "application/json", "X-Bailing-Timestamp": str(stamp),
                   "X-Bailing-Signature": sign_callback(token, stamp, body)}
        statuses.append(raw_request(base, "POST", "/.well-known/bailing/callbacks/job",
                                    headers, body).status)
    assert statuses == [200, 200, 200]
    assert seen == ["job-big"]


# --- redirects -----------------------------------------------------------------------------------


def test_redirects_never_answer_a_hub_request(hub):
    """The hub follows a redirect with the same signature: nothing on a hub path redirects."""
    unsigned = hub.send("GET", "/api/orders/101", {})
    assert unsigned.status == 401 and unsigned.json()["reason"] == "missing_signature"
    catalog = hub.fetch_catalog()
    assert catalog.status == 200
    request = hub.build_call("order_get", {"order_id": 101}, subject="t1:u1")
    slashed = hub.send("GET", request.path_with_query + "/", request.headers)
    bad = hub.replay(request, signature="sha256=" + "0" * 64)
    for response in (unsigned, catalog, slashed, bad):
        assert not 300 <= response.status < 400, response.status
        assert "Location" not in response.headers


# --- Latin-1 scopes ------------------------------------------------------------------------------


def test_a_scope_above_latin1_is_refused_when_the_tool_is_declared():
    """Such a scope makes every call fail inside the hub; the declaration fails instead."""
    from bailing_flask.errors import ToolDeclarationError

    with pytest.raises(ToolDeclarationError, match="scope"):
        tool(scope="订单.read")(lambda: None)
    tool(scope="caf\u00e9.read")(lambda: None)  # U+00E9 travels as one Latin-1 byte


# --- what the hub's compiler ignores ---------------------------------------------------------------


class _Line(BaseModel):
    sku: str = Field(description="Stock unit.", max_length=20)
    qty: int = Field(description="Quantity.", ge=1, le=99)


class _Order(BaseModel):
    lines: list[_Line] = Field(description="Order lines.", max_length=10)


def test_the_catalog_inlines_schemas_and_exports_no_head_operation():
    """The hub ignores ``$ref`` and never calls a HEAD tool: neither is in the catalog."""
    app = Flask("compiler_app")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    Bailing(app).authorizer(lambda call: True)

    @app.route("/orders", methods=["GET", "POST"])
    @tool(scope="orders.write", body=_Order, methods=["POST"])
    def order_create():
        """Create an order from nested lines (pydantic refers to the nested model)."""
        return jsonify(ok=True)

    document = HubSimulator(app, STRONG_SECRET).document()
    assert "$ref" not in json.dumps(document) and "$defs" not in json.dumps(document)
    methods = {method for item in document["paths"].values() for method in item}
    assert methods == {"post"}
    schema = document["paths"]["/orders"]["post"]["requestBody"]["content"]["application/json"]
    assert schema["schema"]["properties"]["lines"]["items"]["properties"]["qty"]["maximum"] == 99


# --- {} is not empty -----------------------------------------------------------------------------


def test_the_empty_object_body_of_a_call_is_hashed_as_the_bytes_received(hub):
    """Every non-GET call carries at least ``{}``; its hash is over those two bytes."""
    request = hub.build_call("refund_create", {"order_id": 101, "amount": 5}, subject="t1:u1")
    assert request.body not in (b"", None)
    # signed over "{}", sent without a body: not the request the hub signed
    empty = hub.send("POST", "/api/refunds", signed_headers(
        STRONG_SECRET, "POST", "/api/refunds", b"{}", subject="t1:u1"), b"")
    assert empty.status == 401 and empty.json()["reason"] == "bad_signature"
