"""Content-Type is not signed: a signed body sent as a form must not reach the app as one.

The hub sends every body as ``application/json``. A view that lets its
framework read the body by content type (webargs' ``location="json_or_form"``,
``request.form``, ``request.values``) reads the same signed bytes as a form
once a proxy or a replayer changes that unsigned header: a model-filled
string such as ``"x&amount=100000&z="`` then becomes an argument the
authorizer never saw. The verifying middleware refuses such a request
(``415 body_not_json``) before any app code, Flask or not.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from flask import Flask
from marshmallow import EXCLUDE, Schema, fields
from webargs.flaskparser import use_args

from bailing_flask import Bailing, tool
from bailing_flask.testing import signed_headers

from .helpers import STRONG_SECRET


class Refund(Schema):
    class Meta:
        unknown = EXCLUDE

    amount = fields.Integer(required=True)
    note = fields.String()


def make_app() -> tuple[Flask, list[int]]:
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    bailing = Bailing(app)
    bailing.subject_loader(lambda subject: subject)
    bailing.authorizer(lambda call: call.args.get("amount", 0) <= 100)
    refunded: list[int] = []

    @app.post("/refunds")
    @tool(scope="refund.write")
    @use_args(Refund(), location="json_or_form")
    def refund(args: dict[str, Any]) -> Any:
        refunded.append(args["amount"])
        return {"refunded": args["amount"]}, 201

    return app, refunded


BODY = json.dumps({"amount": 5, "note": "x&amount=100000&z="}, separators=(",", ":")).encode()


def test_the_signed_json_call_runs_with_the_amount_the_authorizer_saw() -> None:
    app, refunded = make_app()
    headers = signed_headers(STRONG_SECRET, "POST", "/refunds", BODY, subject="t1:alice", job_id="j1")
    response = app.test_client().post("/refunds", data=BODY, headers={**headers, "Content-Type": "application/json"})
    assert response.status_code == 201
    assert refunded == [5]


def test_a_signed_body_relabelled_as_a_form_is_refused_before_the_view() -> None:
    app, refunded = make_app()
    headers = signed_headers(STRONG_SECRET, "POST", "/refunds", BODY, subject="t1:alice", job_id="j1")
    headers["Content-Type"] = "application/x-www-form-urlencoded"  # not covered by the signature
    response = app.test_client().post("/refunds", data=BODY, headers=headers)
    assert refunded == []
    assert (response.status_code, response.get_json()["reason"]) == (415, "body_not_json")



@pytest.mark.parametrize("content_type", [
    "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/html",
    "application/json-patch+json",
])
def test_any_other_label_on_a_signed_body_is_refused(content_type: str) -> None:
    app, refunded = make_app()
    headers = signed_headers(STRONG_SECRET, "POST", "/refunds", BODY, subject="t1:alice", job_id="j1")
    headers["Content-Type"] = content_type
    response = app.test_client().post("/refunds", data=BODY, headers=headers)
    assert (response.status_code, refunded) == (415, [])
    assert response.get_json()["reason"] == "body_not_json"


@pytest.mark.parametrize("content_type", [
    "application/json", "application/json; charset=utf-8", "Application/JSON",
], ids=["the-hub's", "with-charset", "other-case"])
def test_json_with_or_without_parameters_is_read_as_json(content_type: str) -> None:
    app, refunded = make_app()
    headers = signed_headers(STRONG_SECRET, "POST", "/refunds", BODY, subject="t1:alice", job_id="j1")
    headers["Content-Type"] = content_type
    response = app.test_client().post("/refunds", data=BODY, headers=headers)
    assert (response.status_code, refunded) == (201, [5])


@pytest.mark.parametrize("content_type", [None, "text/plain"], ids=["none", "wsgiref's-for-none"])
def test_an_unlabelled_signed_body_is_not_refused_and_never_read_as_a_form(
        content_type: str | None) -> None:
    """No type (or the ``text/plain`` wsgiref puts for none): not refused; a form parser reads
    nothing from it (webargs finds no amount, and says so itself)."""
    app, refunded = make_app()
    headers = signed_headers(STRONG_SECRET, "POST", "/refunds", BODY, subject="t1:alice", job_id="j1")
    headers.pop("Content-Type", None)  # signed_headers sends none
    if content_type is not None:
        headers["Content-Type"] = content_type
    response = app.test_client().post("/refunds", data=BODY, headers=headers)
    answer = response.get_json()
    assert [error["problem"] for error in answer["errors"]] == ["missing"]  # webargs' own
    assert refunded == []


def test_a_wsgi_app_that_is_not_flask_behind_the_middleware_alone_is_covered_too() -> None:
    from urllib.parse import parse_qs

    from werkzeug.test import Client

    from bailing_flask.wire import BailingMiddleware

    seen: list[dict[str, list[str]]] = []

    def legacy_wsgi(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        seen.append(parse_qs(environ["wsgi.input"].read(length).decode()))  # a form parser
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]

    client = Client(BailingMiddleware(legacy_wsgi, STRONG_SECRET))
    headers = signed_headers(STRONG_SECRET, "POST", "/refunds", BODY, subject="t1:alice", job_id="j1")
    relabelled = client.post("/refunds", data=BODY, headers={
        **headers, "Content-Type": "application/x-www-form-urlencoded"})
    assert (relabelled.status_code, relabelled.headers["X-Bailing-Reason"]) == (415, "body_not_json")
    assert seen == []
    as_sent = client.post("/refunds", data=BODY, headers={**headers, "Content-Type": "application/json"})
    assert as_sent.status_code == 200 and len(seen) == 1
