"""marshmallow schemas and webargs on tool views: the app's own rules, for the hub too.

A legacy app validates with marshmallow (``Schema``) and webargs
(``@use_args`` / ``@use_kwargs``). Before, ``@tool`` took only pydantic
models, so the app re-wrote its schemas and the two copies disagreed (a
refund of ``12.345``: refused by the copy, ``201 "12.34"`` for the web
client), and an output schema could not be ``response=`` (the customer's
e-mail address reached the model). Now a marshmallow schema (class or
instance) goes wherever a pydantic model does, is published in the catalog
through apispec's marshmallow plugin, and marshmallow itself loads the
arguments and dumps the answer; webargs' decorators under ``@tool`` give
the tool its parameters.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from flask import Flask
from marshmallow import Schema, fields
from webargs.flaskparser import use_args

from bailing_flask import Bailing, tool
from bailing_flask._pipeline.registry import registry_of
from bailing_flask._state import state_of
from bailing_flask.approvals import approvals_of
from bailing_flask.errors import ToolDeclarationError
from bailing_flask.lint import lint_document
from bailing_flask.testing import HubSimulator

from .apps.marshmallow_app import NOTES, REFUNDS, create_app
from .helpers import STRONG_SECRET, raw_request


@pytest.fixture(autouse=True)
def fresh_books() -> Iterator[None]:
    REFUNDS.clear()
    NOTES.clear()
    yield
    REFUNDS.clear()
    NOTES.clear()


@pytest.fixture()
def base_url(live_server: Any) -> str:
    url: str = live_server(create_app())
    return url


@pytest.fixture()
def hub(base_url: str) -> HubSimulator:
    return HubSimulator(base_url, STRONG_SECRET)


def refused(response: Any, reason: str) -> dict[str, Any]:
    assert response.status == 422, response.text
    assert response.headers["Content-Type"].startswith("application/json")
    body: dict[str, Any] = response.json()
    assert body["reason"] == reason, body
    return body


# -- the hub's calls, over a socket ----------------------------------------------------------


def test_two_subjects_of_two_tenants_call_marshmallow_and_webargs_tools(hub):
    assert sorted(hub.document()["paths"]) == [
        "/api/orders", "/api/orders/{order_id}/notes", "/api/payouts", "/api/refunds", "/api/search"]
    assert hub.probe().json() == {"authorized": False}
    assert hub.call("orders", subject="t1:alice").json() == [
        {"id": 1, "status": "paid", "total": "40.00"}, {"id": 3, "status": "open", "total": "9.99"}]
    assert hub.call("orders", {"status": "paid"}, subject="t2:bob").json() == [
        {"id": 2, "status": "paid", "total": "15.50"}]
    # an array query parameter arrives comma-joined: a List field gets the items
    assert hub.call("orders", {"ids": [3, 2]}, subject="t1:alice").json() == [
        {"id": 3, "status": "open", "total": "9.99"}]
    assert hub.call("search", {"q": "pa", "ids": [1, 3]}, subject="t1:alice").json() == {
        "q": "pa", "limit": 5, "ids": [1]}
    assert hub.call("search", {"q": "pa"}, subject="t2:bob").json() == {"q": "pa", "limit": 5, "ids": [2]}
    noted = hub.call("add_note", {"order_id": 2, "text": "called back"}, subject="t2:bob")
    assert (noted.status, noted.json()) == (201, {"order_id": 2, "text": "called back"})
    assert NOTES == [{"order_id": 2, "text": "called back", "pinned": False}]
    # another tenant's order is not found, in the package's error shape
    other = hub.call("add_note", {"order_id": 2, "text": "mine now"}, subject="t1:alice")
    assert other.status == 404 and other.json()["reason"] == "not_found", other.text


def test_a_refund_of_12_345_gets_the_same_answer_from_the_hub_and_the_token_client(hub, base_url):
    by_hub = hub.call("refund", {"order_id": 1, "amount": 12.345}, subject="t1:alice")
    assert by_hub.status == 201, by_hub.text
    assert by_hub.json()["amount"] == "12.34"
    by_client = raw_request(base_url, "POST", "/api/refunds", {
        "Authorization": "Bearer tok-alice", "Content-Type": "application/json",
    }, json.dumps({"order_id": 1, "amount": 12.345}).encode())
    assert by_client.status == 201, by_client.body
    assert json.loads(by_client.body)["amount"] == "12.34"
    assert [r["amount"] for r in REFUNDS] == [Decimal("12.34"), Decimal("12.34")]


def test_the_response_schema_keeps_the_customers_email_and_secret_fields_from_the_model(hub):
    refund = hub.call("refund", {"order_id": 1, "amount": 5}, subject="t1:alice")
    assert refund.json() == {"id": 1, "order_id": 1, "amount": "5.00", "status": "pending",
                             "customer": {"name": "Buyer 1"}}  # its e-mail is sensitive
    for text in (refund.text, hub.call("orders", subject="t1:alice").text):
        assert "customer_email" not in text and "@t1.example" not in text
        assert "chargeback" not in text  # metadata={"sensitive": True}
        assert "hunter2" not in text  # load_only=True
    # every status is declared: a refused refund carries the error shape only
    missing = hub.call("refund", {"order_id": 2, "amount": 5}, subject="t1:alice")
    assert missing.status == 404 and set(missing.json()) >= {"error", "reason"}
    assert "<" not in missing.text


def test_error_response_schema_shapes_a_refused_note(hub):
    locked = hub.call("add_note", {"order_id": 3, "text": "ship it"}, subject="t1:alice")
    assert locked.status == 409
    assert locked.json() == {"error": "locked", "reason": "order_open", "message": "Notes wait for payment."}


def test_a_list_response_is_cut_to_the_default_cap(live_server):
    hub = HubSimulator(live_server(create_app(BAILING_RESPONSE_MAX_ITEMS=1)), STRONG_SECRET)
    body = hub.call("orders", subject="t1:alice").json()
    assert body[0] == {"id": 1, "status": "paid", "total": "40.00"}
    assert body[-1] == {"truncated": {"[]": "kept 1 of 2 items"}}
    assert "A list (at most 1) of objects" in hub.document()["paths"]["/api/orders"]["get"]["x-agent-capability"]["guidance"]["returns"]


CLIENT_TOKEN = "client-token-marshmallow-approvals-0123456789"
JOB = "6f1c2b1e-8d0a-4c7e-9a53-2f4b8c1d9e02"


@pytest.fixture
def app() -> Flask:
    return create_app(BAILING_CLIENT_TOKENS=CLIENT_TOKEN)


def test_a_business_approval_compares_the_arguments_the_schema_loaded(app, bailing_hub, bailing_fake_hub):
    args = {"order_id": 1, "amount": 12.345}
    sent = bailing_hub.send_approval_request("payout", args, subject="t1:alice", job_id=JOB,
                                             approval_id=701)
    assert sent.status == 200, sent.text
    with app.app_context():
        approvals_of(state_of(app)).decide(701, "approved", approver="finance-1")
    other = bailing_hub.call("payout", {"order_id": 1, "amount": 99}, subject="t1:alice", job_id=JOB)
    assert other.status == 403 and other.json()["approval"] == "arguments_differ", other.text
    paid = bailing_hub.call("payout", args, subject="t1:alice", job_id=JOB)
    assert (paid.status, paid.json()) == (201, {"paid": "12.34"})
    assert REFUNDS == [{"order_id": 1, "amount": Decimal("12.34")}]


# -- the catalog --------------------------------------------------------------------------------


def test_the_catalog_publishes_each_schema_as_json_schema_the_hub_accepts(hub):
    document = hub.document()
    text = json.dumps(document)
    assert "$ref" not in text and "readOnly" not in text and "writeOnly" not in text
    refund = document["paths"]["/api/refunds"]["post"]["requestBody"]["content"]["application/json"]
    assert refund["schema"] == {
        "type": "object", "additionalProperties": False, "required": ["amount", "order_id"],
        "properties": {"order_id": {"type": "integer", "description": "The order to refund."},
                       # marshmallow rounds to the places, so no multipleOf would be true
                       "amount": {"type": "number", "minimum": 0.01},
                       "reason": {"type": "string", "maxLength": 200}}}
    note = document["paths"]["/api/orders/{order_id}/notes"]["post"]["requestBody"]
    attachments = note["content"]["application/json"]["schema"]["properties"]["attachments"]
    assert attachments["items"] == {  # a nested schema is inlined
        "type": "object", "additionalProperties": False, "required": ["name"],
        "properties": {"name": {"type": "string", "maxLength": 80},
                       "size": {"type": "integer", "minimum": 0, "maximum": 10_000_000}}}
    orders = {p["name"]: p for p in document["paths"]["/api/orders"]["get"]["parameters"]}
    assert orders["status"]["schema"] == {"type": "string", "enum": ["open", "paid"]}
    assert orders["limit"]["schema"] == {"type": "integer", "default": 10, "minimum": 1, "maximum": 50}
    search = {p["name"]: p for p in document["paths"]["/api/search"]["get"]["parameters"]}
    assert search["q"]["required"] is True and search["limit"]["required"] is False
    assert (search["ids"]["style"], search["ids"]["explode"]) == ("form", False)
    assert [f for f in lint_document(document) if f.severity == "error"] == []
    assert "id, order_id, amount, status, customer" in document["paths"]["/api/refunds"]["post"][
        "x-agent-capability"]["guidance"]["returns"]


# -- refusals -----------------------------------------------------------------------------------


def test_a_refusal_names_the_field_in_the_packages_error_shape(hub):
    body = refused(hub.call("refund", {"order_id": 1, "amount": "lots"}, subject="t1:alice"),
                   "invalid_parameter")
    assert body["errors"] == [{"parameter": "amount", "location": "body", "problem": "invalid",
                               "message": "Not a valid number."}]
    body = refused(hub.call("refund", {"amount": 1}, subject="t1:alice"), "invalid_parameter")
    assert body["errors"][0]["parameter"] == "order_id" and body["errors"][0]["problem"] == "missing"
    assert refused(hub.call("orders", {"status": "lost"}, subject="t1:alice"),
                   "invalid_parameter")["errors"][0]["location"] == "query"
    assert REFUNDS == []


def test_an_argument_the_schema_does_not_know_is_refused_by_name(hub):
    body = refused(hub.call("refund", {"order_id": 1, "amount": 1, "refund_all": True},
                            subject="t1:alice"), "unknown_parameter")
    assert body["parameters"] == ["refund_all"]
    body = refused(hub.call("search", {"q": "pa", "tenant": "t2"}, subject="t1:alice"),
                   "unknown_parameter")
    assert body["parameters"] == ["tenant"]
    assert REFUNDS == []


def test_a_validator_message_quoting_the_value_is_not_echoed_to_the_model(hub):
    card = "4111 1111 1111 1111"
    response = hub.call("add_note", {"order_id": 1, "text": card}, subject="t1:alice")
    body = refused(response, "invalid_parameter")
    assert card not in response.text
    assert body["errors"][0]["parameter"] == "text"
    # nested too: an attachment named like a card number
    nested = hub.call("add_note", {"order_id": 1, "text": "see file",
                                   "attachments": [{"name": card}]}, subject="t1:alice")
    assert refused(nested, "invalid_parameter")["errors"][0]["parameter"] == "attachments.0.name"
    assert card not in nested.text


def test_webargs_missing_argument_answers_the_hub_in_the_packages_shape(hub):
    body = refused(hub.call("search", {"limit": 2}, subject="t2:bob"), "invalid_parameter")
    assert body["errors"] == [{"parameter": "q", "location": "query", "problem": "missing",
                               "message": "This parameter is required."}]
    assert "messages" not in body  # not webargs' own 422 body


def test_a_refusal_of_webargs_own_answers_the_hub_as_the_gate_does(hub, base_url):
    # use_kwargs(validate=...) runs after the schema, so webargs itself refuses in the view
    body = refused(hub.call("search", {"q": "pa", "limit": 30}, subject="t2:bob"), "invalid_parameter")
    assert body["errors"] == [{"parameter": "(query)", "location": "query", "problem": "invalid",
                               "message": "Invalid value."}]
    # the app's own clients keep webargs' answer (the package shapes hub calls only)
    own = raw_request(base_url, "GET", "/api/search?q=pa&limit=30", {"Authorization": "Bearer tok-alice"})
    assert own.status == 422 and b"invalid_parameter" not in own.body


# -- declarations -------------------------------------------------------------------------------


class _Item(Schema):
    sku = fields.String(required=True)


def _app() -> Flask:
    app = Flask("declare_app")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    Bailing(app).authorizer(lambda call: True)
    return app


def test_use_args_from_the_json_body_of_a_get_tool_is_refused_naming_the_fix():
    app = _app()

    @app.get("/items")
    @tool(scope="item.read")
    @use_args(_Item, location="json")
    def items(args: Any) -> Any:
        return {}

    with pytest.raises(ToolDeclarationError, match="location='query'"):
        registry_of(state_of(app))


def test_list_of_a_schema_class_is_a_list_response():
    app = _app()

    @app.get("/items")
    @tool(scope="item.read", response=list[_Item])
    def items() -> Any:
        return [{"sku": "a1", "cost": 3}, {"sku": "b2", "cost": 4}]

    hub = HubSimulator(app, STRONG_SECRET)
    assert hub.call("items").json() == [{"sku": "a1"}, {"sku": "b2"}]


def test_use_args_above_tool_is_refused_rather_than_publishing_no_parameters():
    app = _app()

    @app.get("/items")
    @use_args(_Item, location="query")
    @tool(scope="item.read")
    def items(args: Any) -> Any:
        return {}

    with pytest.raises(ToolDeclarationError, match="put it below @tool"):
        registry_of(state_of(app))


def test_query_must_be_a_pydantic_model_or_a_marshmallow_schema():
    with pytest.raises(ToolDeclarationError, match="marshmallow Schema"):
        tool(scope="x.read", query=dict)(lambda: None)  # type: ignore[arg-type]
