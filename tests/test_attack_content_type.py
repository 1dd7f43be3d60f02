"""Content-Type is not signed: a signed body sent as a form must not reach the view as one.

The gate validates (and the authorizer judges) a tool call's body as JSON,
whatever ``Content-Type`` says. A view that lets its framework read the body
by content type (webargs' ``location="json_or_form"``, ``request.form``,
``request.values``) reads the same signed bytes as a form once a proxy or a
replayer changes that unsigned header: a model-filled string such as
``"x&amount=100000&z="`` then becomes an argument the authorizer never saw.
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
    assert response.status_code == 422
    assert response.get_json()["reason"] == "invalid_body"



@pytest.mark.parametrize("content_type", [
    "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/plain",
    "application/json-patch+json",
])
def test_any_other_label_on_a_signed_body_is_refused(content_type: str) -> None:
    app, refunded = make_app()
    headers = signed_headers(STRONG_SECRET, "POST", "/refunds", BODY, subject="t1:alice", job_id="j1")
    headers["Content-Type"] = content_type
    response = app.test_client().post("/refunds", data=BODY, headers=headers)
    assert (response.status_code, refunded) == (422, [])
    answer = response.get_json()
    assert (answer["reason"], answer["errors"][0]["problem"]) == ("invalid_body", "not_json")


@pytest.mark.parametrize("content_type", [
    "application/json", "application/json; charset=utf-8", "Application/JSON",
], ids=["the-hub's", "with-charset", "other-case"])
def test_json_with_or_without_parameters_is_read_as_json(content_type: str) -> None:
    app, refunded = make_app()
    headers = signed_headers(STRONG_SECRET, "POST", "/refunds", BODY, subject="t1:alice", job_id="j1")
    headers["Content-Type"] = content_type
    response = app.test_client().post("/refunds", data=BODY, headers=headers)
    assert (response.status_code, refunded) == (201, [5])


def test_an_unlabelled_signed_body_is_not_refused_and_never_read_as_a_form() -> None:
    """No type: the gate validates the JSON; a form parser reads nothing from it (webargs finds no amount)."""
    app, refunded = make_app()
    headers = signed_headers(STRONG_SECRET, "POST", "/refunds", BODY, subject="t1:alice", job_id="j1")
    headers.pop("Content-Type", None)  # signed_headers sends none
    response = app.test_client().post("/refunds", data=BODY, headers=headers)
    answer = response.get_json()
    assert [error["problem"] for error in answer["errors"]] == ["missing"]  # webargs' own, not the gate's
    assert refunded == []
