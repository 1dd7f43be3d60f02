"""Minimal return: ``response=`` and ``result=`` through the gate, as the hub calls the tools."""

from __future__ import annotations

import json
import logging
import sqlite3
from dataclasses import dataclass
from typing import Annotated, Any

import pytest
from flask import Flask, Response, abort, jsonify
from pydantic import AliasPath, BaseModel, Field, SecretStr, StringConstraints

from bailing_flask import Bailing, ToolDeclarationError, current_call, tool, tool_result
from bailing_flask.errors import ConfigurationError
from bailing_flask._pipeline.projection import RETURNS_BUDGET
from bailing_flask.testing import HubSimulator

from .helpers import STRONG_SECRET
from bailing_flask._state import state_of
from bailing_flask._pipeline.idempotency import idempotency_of

PHONE = "+86 138 0000 1001"
NOTE = "called twice, VIP, do not refund without Alice"
TOKEN = "tok-3f9a1c"


class Customer(BaseModel):
    customer_id: int
    name: str
    phone: str | None = Field(None, json_schema_extra={"sensitive": True})


class Line(BaseModel):
    sku: str
    tags: list[str] = Field(default_factory=list, max_length=2)


class Order(BaseModel):
    order_id: int
    status: str
    title: str = Field("", max_length=12)
    customer: Customer
    lines: list[Line] = Field(default_factory=list)
    api_token: SecretStr | None = None
    debug: dict[str, Any] | None = Field(None, exclude=True)


class Hit(BaseModel):
    id: int
    label: Annotated[str, StringConstraints(max_length=5)]


class Page(BaseModel):
    hits: list[Hit] = Field(max_length=3)
    total: int


class Done(BaseModel):
    ok: bool
    status: str
    message: str
    business_id: int


class Aliased(BaseModel):
    order_id: int = Field(alias="orderId")


@dataclass
class OrderRow:
    """What an ORM hands the view: every column, internal ones included."""

    order_id: int
    status: str
    title: str
    internal_note: str
    customer: Any
    lines: list[Any]
    api_token: str


def full_order(**changes: Any) -> dict[str, Any]:
    order = {
        "order_id": 7, "status": "paid", "title": "Blue lamp", "internal_note": NOTE,
        "warehouse_id": 3, "customer": {"customer_id": 1, "name": "Ann", "phone": PHONE, "dob": "1990"},
        "lines": [{"sku": "A-1", "cost_price": 4.2, "tags": ["x"]}], "api_token": TOKEN,
        "debug": {"sql": "SELECT *"},
    }
    order.update(changes)
    return order


def make_app(**config: Any) -> tuple[Flask, list[Any]]:
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://", **config)
    Bailing(app).authorizer(lambda call: True)
    seen: list[Any] = []
    state: dict[str, Any] = {"result": full_order(), "runs": 0}
    app.config["STATE"] = state

    @app.get("/dict")
    @tool(scope="t.read", response=Order)
    def as_dict() -> Any:
        """A dict with more than the shape."""
        return state["result"]

    @app.get("/row")
    @tool(scope="t.read", response=Order)
    def as_row() -> Any:
        """An ORM-like object."""
        customer = type("CustomerRow", (), {})()
        customer.__dict__.update(customer_id=1, name="Ann", phone=PHONE, dob="1990")
        return OrderRow(7, "paid", "Blue lamp", NOTE, customer, [{"sku": "A-1", "tags": []}], TOKEN)

    @app.get("/model")
    @tool(scope="t.read", response=Order)
    def as_model() -> Any:
        """A pydantic model instance."""
        return Order.model_validate(full_order())

    @app.get("/jsonify")
    @tool(scope="t.read", response=Order)
    def as_jsonify() -> Any:
        """jsonify(...) with a status and a header."""
        response = jsonify(full_order())
        response.headers["X-Shop"] = "1"
        return response, 203

    @app.get("/tuple")
    @tool(scope="t.read", response=Order)
    def as_tuple() -> Any:
        """(dict, status, headers)."""
        return full_order(), 201, {"X-Shop": "2"}

    @app.get("/sqlite")
    @tool(scope="t.read", response=Customer)
    def as_sqlite_row() -> Any:
        """A sqlite3.Row."""
        conn = sqlite3.connect(":memory:")
        conn.row_factory = sqlite3.Row
        return conn.execute(f"SELECT 1 AS customer_id, 'Ann' AS name, '{PHONE}' AS phone, 'x' AS extra").fetchone()

    @app.get("/hits")
    @tool(scope="t.read", response=Page)
    def hits() -> Any:
        """A capped list of capped strings."""
        return {"hits": [{"id": i, "label": f"label-{i}", "score": 0.5} for i in range(8)], "total": 8,
                "page": 1}

    @app.get("/list")
    @tool(scope="t.read", response=list[Customer])
    def as_list() -> Any:
        """A top-level list, from a generator."""
        return jsonify([{"customer_id": i, "name": f"c{i}", "phone": PHONE} for i in range(state["n"])])

    @app.get("/invalid")
    @tool(scope="t.read", response=Order)
    def invalid() -> Any:
        """Does not match the shape."""
        return {"order_id": "seven", "status": 3, "customer": {"name": PHONE}, "title": NOTE}

    @app.get("/text")
    @tool(scope="t.read", response=Order)
    def text() -> Any:
        """Text, not JSON."""
        return "order 7 is paid"

    @app.get("/stream")
    @tool(scope="t.read", response=Order)
    def stream() -> Any:
        """A streamed body."""
        return Response(iter([b"{}"]), mimetype="application/json")

    @app.get("/missing")
    @tool(scope="t.read", response=Order)
    def missing() -> Any:
        """Not found: only the error shape leaves."""
        return {"error": "not_found", "internal_note": NOTE}, 404

    @app.get("/abort")
    @tool(scope="t.read", response=Order)
    def aborted() -> Any:
        """abort(404)."""
        abort(404)

    @app.get("/empty")
    @tool(scope="t.read", response=Order)
    def empty() -> Any:
        """204."""
        return "", 204

    @app.post("/write")
    @tool(scope="t.write", response=Done)
    def write() -> Any:
        """A side effect answered with the recommended shape."""
        state["runs"] += 1
        return tool_result("executed", "Done.", business_id=9, data={"secret_margin": 0.31})

    @app.post("/write-invalid")
    @tool(scope="t.write", response=Done)
    def write_invalid() -> Any:
        """A side effect whose answer does not match its shape."""
        state["runs"] += 1
        return {"ok": True, "status": "executed"}

    @app.get("/converted")
    @tool(scope="t.read", response=Page, result=lambda value: (seen.append(value), {
        "hits": [{"id": h["id"], "label": h["name"]} for h in value["rows"]], "total": len(value["rows"]),
    })[1])
    def converted() -> Any:
        """result= before response=."""
        return jsonify(rows=[{"id": 1, "name": "one", "secret": "x"}, {"id": 2, "name": "twotwo"}])

    @app.get("/text-result")
    @tool(scope="t.read", result=lambda value: f"{value['n']} orders, newest {value['newest']}")
    def text_result() -> Any:
        """result= alone: an observation text."""
        return {"n": 3, "newest": 1003, "internal": NOTE}

    @app.get("/broken-result")
    @tool(scope="t.read", result=lambda value: value["no such key"])
    def broken_result() -> Any:
        """A converter that raises."""
        return {"n": 3}

    @app.get("/converted-error")
    @tool(scope="t.read", result=lambda value: seen.append(("error", value)))
    def converted_error() -> Any:
        """Converters never see errors."""
        return {"error": "nope"}, 409

    @app.get("/alias")
    @tool(scope="t.read", response=Aliased)
    def alias() -> Any:
        """Aliases are the keys read and written."""
        return {"orderId": 5, "other": 1}

    @app.get("/shared")
    @tool(scope="t.read", response=Customer, allow_unsigned=True)
    def shared() -> Any:
        """A route humans use too."""
        return {"customer_id": 1, "name": "Ann", "phone": PHONE}

    @app.get("/explicit")
    @tool(scope="t.read", response=Customer, returns="The customer, without contact details.")
    def explicit() -> Any:
        """returns= wins over the generated text."""
        return {"customer_id": 1, "name": "Ann"}

    return app, seen


@pytest.fixture
def shop() -> tuple[Flask, list[Any], HubSimulator]:
    app, seen = make_app()
    return app, seen, HubSimulator(app, STRONG_SECRET)


@pytest.fixture
def hub(shop: tuple[Flask, list[Any], HubSimulator]) -> HubSimulator:
    return shop[2]


def audit_of(caplog: pytest.LogCaptureFixture, tool_name: str) -> dict[str, Any]:
    records = [r.bailing for r in caplog.records if getattr(r, "bailing", {}).get("tool") == tool_name]
    assert records, f"no audit record for {tool_name}"
    return records[-1]


EXPECTED = {"order_id": 7, "status": "paid", "title": "Blue lamp", "customer": {"customer_id": 1, "name": "Ann"},
            "lines": [{"sku": "A-1", "tags": ["x"]}]}


# -- the declared fields leave, nothing else --------------------------------------------------------


def test_extra_fields_are_dropped_and_counted_never_logged(hub: HubSimulator,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="bailing_flask.audit"):
        response = hub.call("as_dict")
    assert response.status == 200
    assert response.json() == EXPECTED
    assert list(response.json()) == ["order_id", "status", "title", "customer", "lines"]  # declared order
    for value in (NOTE, PHONE, TOKEN, "SELECT", "cost_price", "warehouse_id"):
        assert value not in response.text
    # internal_note, warehouse_id, api_token, debug; phone, dob; cost_price
    assert audit_of(caplog, "as_dict")["response"] == {
        "fields_dropped": 7, "sensitive_dropped": 2, "items_dropped": 0, "strings_cut": 0,
    }
    assert all(NOTE not in r.getMessage() and PHONE not in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("name", ["as_row", "as_model", "as_jsonify", "as_tuple"])
def test_every_kind_of_view_result_is_projected(hub: HubSimulator, name: str) -> None:
    response = hub.call(name)
    assert response.json() == (EXPECTED if name != "as_row" else {**EXPECTED, "lines": [{"sku": "A-1", "tags": []}]})
    assert PHONE not in response.text and TOKEN not in response.text


def test_status_and_headers_of_the_view_are_kept(hub: HubSimulator) -> None:
    jsonified = hub.call("as_jsonify")
    assert (jsonified.status, jsonified.headers["X-Shop"]) == (203, "1")
    assert int(jsonified.headers["Content-Length"]) == len(jsonified.body)
    assert jsonified.headers["Content-Type"].startswith("application/json")
    tupled = hub.call("as_tuple")
    assert (tupled.status, tupled.headers["X-Shop"]) == (201, "2")
    assert tupled.headers["Content-Type"].startswith("application/json")


def test_a_sqlite_row_is_read_by_column_name(hub: HubSimulator) -> None:
    response = hub.call("as_sqlite_row")
    assert response.json() == {"customer_id": 1, "name": "Ann"}


def test_aliases_are_the_keys_read_and_written(hub: HubSimulator) -> None:
    assert hub.call("alias").json() == {"orderId": 5}


# -- limits: the model's own, and the default cap on lists -----------------------------------------


def test_lists_and_strings_are_cut_to_the_models_limits_and_the_cut_is_named(
    hub: HubSimulator, caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="bailing_flask.audit"):
        page = hub.call("hits").json()
    assert [hit["id"] for hit in page["hits"]] == [0, 1, 2]
    assert [hit["label"] for hit in page["hits"]] == ["labe…"] * 3
    assert page["truncated"] == {
        "hits": "3 of 8 items shown; more exist",
        "hits[0].label": "cut to 5 of 7 characters",
        "hits[1].label": "cut to 5 of 7 characters",
        "hits[2].label": "cut to 5 of 7 characters",
    }
    assert page["total"] == 8 and "page" not in page
    assert audit_of(caplog, "hits")["response"] == {
        "fields_dropped": 4, "sensitive_dropped": 0, "items_dropped": 5, "strings_cut": 3,
    }


def test_nested_limits_apply_inside_nested_models(shop: tuple[Flask, list[Any], HubSimulator]) -> None:
    app, _, hub = shop
    app.config["STATE"]["result"] = full_order(
        title="A very long title indeed", lines=[{"sku": "A", "tags": ["a", "b", "c"]}],
    )
    order = hub.call("as_dict").json()
    assert order["title"] == "A very long…" and len(order["title"]) == 12
    assert order["lines"] == [{"sku": "A", "tags": ["a", "b"]}]
    assert order["truncated"] == {"title": "cut to 12 of 24 characters",
                                  "lines[0].tags": "2 of 3 items shown; more exist"}


def test_the_default_cap_applies_to_lists_without_their_own(
    shop: tuple[Flask, list[Any], HubSimulator],
) -> None:
    app, _, hub = shop
    app.config["STATE"]["n"] = 60
    customers = hub.call("as_list").json()
    assert len(customers) == 51  # 50, then the marker: a JSON array cannot carry a field
    assert customers[-1] == {"truncated": {"[]": "50 of 60 items shown; more exist"}}
    assert customers[0] == {"customer_id": 0, "name": "c0"}
    app.config["STATE"]["n"] = 3
    assert [c["customer_id"] for c in hub.call("as_list").json()] == [0, 1, 2]


@pytest.mark.parametrize(("setting", "kept"), [(4, 4), (None, 60), (0, 60)])
def test_the_default_cap_is_a_setting(setting: int | None, kept: int) -> None:
    app, _ = make_app(BAILING_RESPONSE_MAX_ITEMS=setting)
    app.config["STATE"]["n"] = 60
    customers = HubSimulator(app, STRONG_SECRET).call("as_list").json()
    assert len([c for c in customers if "customer_id" in c]) == kept


def test_a_tool_may_set_its_own_default_cap() -> None:
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_RESPONSE_MAX_ITEMS=2)
    Bailing(app).authorizer(lambda call: True)

    @app.get("/few")
    @tool(scope="t.read", response=list[Customer], max_items=3)
    def few() -> Any:
        """Three at most."""
        return [{"customer_id": i, "name": "n"} for i in range(10)]

    @app.get("/all")
    @tool(scope="t.read", response=Page, max_items=0)
    def everything() -> Any:
        """No default cap (the model's own max_length still applies)."""
        return {"hits": [{"id": i, "label": "x"} for i in range(10)], "total": 10}

    hub = HubSimulator(app, STRONG_SECRET)
    assert hub.call("few").json()[-1] == {"truncated": {"[]": "3 of 10 items shown; more exist"}}
    assert len(hub.call("everything").json()["hits"]) == 3
    returns = hub.document()["paths"]["/few"]["get"]["x-agent-capability"]["guidance"]["returns"]
    assert returns.startswith("A list (at most 3) of objects")
    with pytest.raises(ToolDeclarationError, match="max_items"):
        tool(scope="t.read", response=Page, max_items=-1)(lambda: None)


def test_a_bad_cap_setting_is_refused_at_start_up() -> None:
    with pytest.raises(ConfigurationError, match="^BAILING_RESPONSE_MAX_ITEMS must be"):
        make_app(BAILING_RESPONSE_MAX_ITEMS="fifty")


# -- sensitive fields --------------------------------------------------------------------------------


def test_sensitive_fields_are_validated_but_never_leave(shop: tuple[Flask, list[Any], HubSimulator]) -> None:
    app, _, hub = shop
    body = hub.call("as_dict").text
    assert PHONE not in body and TOKEN not in body and "api_token" not in body and "phone" not in body
    assert "debug" not in body  # pydantic's exclude=True is honoured too
    # validated all the same: a sensitive field of the wrong type is an invalid result
    app.config["STATE"]["result"] = full_order(api_token=["not", "a", "string"])
    assert hub.call("as_dict").status == 500


# -- invalid results -------------------------------------------------------------------------------------


def test_an_invalid_result_is_withheld_and_logged_by_field_names(
    hub: HubSimulator, caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="bailing_flask"):
        response = hub.call("invalid")
    assert response.status == 500
    assert response.json()["reason"] == "invalid_response"
    assert response.headers["X-Bailing-Reason"] == "invalid_response"
    assert PHONE not in response.text and NOTE not in response.text and "seven" not in response.text
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert "order_id: int_parsing" in errors[0] and "status: string_type" in errors[0]
    assert "customer.customer_id: missing" in errors[0]
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert PHONE not in logged and NOTE not in logged and "seven" not in logged
    assert audit_of(caplog, "invalid")["status"] == 500


@pytest.mark.parametrize("name", ["text", "stream"])
def test_a_shape_declared_tool_must_answer_json(hub: HubSimulator, name: str) -> None:
    response = hub.call(name)
    assert (response.status, response.json()["reason"]) == (500, "invalid_response")


def test_errors_keep_only_the_error_shape_and_empty_answers_pass(hub: HubSimulator) -> None:
    missing = hub.call("missing")
    assert missing.status == 404
    assert missing.json() == {"error": "not_found", "reason": "not_found", "message": "Not Found"}
    aborted = hub.call("aborted")
    assert aborted.status == 404 and aborted.json()["error"] == "not_found"
    empty = hub.call("empty")
    assert (empty.status, empty.body) == (204, b"")


def test_the_idempotency_record_holds_the_projected_answer(shop: tuple[Flask, list[Any], HubSimulator]) -> None:
    app, _, hub = shop
    request = hub.build_call("write", {})
    first = hub.replay(request)
    again = hub.replay(request)
    assert first.status == again.status == 200
    assert first.json() == {"ok": True, "status": "executed", "message": "Done.", "business_id": 9}
    assert again.body == first.body and again.headers["Idempotent-Replayed"] == "true"
    assert app.config["STATE"]["runs"] == 1
    stored = idempotency_of(state_of(app)).store().list()
    assert [entry.response.body for entry in stored] == [first.body]  # type: ignore[union-attr]
    assert b"secret_margin" not in first.body


def test_an_invalid_result_of_a_side_effect_is_never_run_again(
    shop: tuple[Flask, list[Any], HubSimulator],
) -> None:
    app, _, hub = shop
    request = hub.build_call("write_invalid", {})
    assert hub.replay(request).status == 500
    # the view did finish: its effect happened, only the answer was withheld
    repeat = hub.replay(request)
    assert (repeat.status, repeat.json()["reason"]) == (409, "idempotency_uncertain")
    assert app.config["STATE"]["runs"] == 1


# -- result= ---------------------------------------------------------------------------------------------


def test_the_converter_runs_before_the_shape_on_decoded_json(shop: tuple[Flask, list[Any], HubSimulator]) -> None:
    _, seen, hub = shop
    page = hub.call("converted").json()
    assert seen == [{"rows": [{"id": 1, "name": "one", "secret": "x"}, {"id": 2, "name": "twotwo"}]}]
    assert page == {"hits": [{"id": 1, "label": "one"}, {"id": 2, "label": "twot…"}], "total": 2,
                    "truncated": {"hits[1].label": "cut to 5 of 6 characters"}}


def test_a_converter_alone_may_answer_text(hub: HubSimulator) -> None:
    response = hub.call("text_result")
    assert response.text == "3 orders, newest 1003"
    assert response.headers["Content-Type"] == "text/plain; charset=utf-8"


def test_a_converter_never_sees_errors_and_its_failure_withholds_the_answer(
    shop: tuple[Flask, list[Any], HubSimulator], caplog: pytest.LogCaptureFixture,
) -> None:
    _, seen, hub = shop
    assert hub.call("converted_error").status == 409
    assert seen == []
    with caplog.at_level(logging.ERROR, logger="bailing_flask"):
        broken = hub.call("broken_result")
    assert (broken.status, broken.json()["reason"]) == (500, "invalid_response")
    assert any("result= converter of tool 'broken_result' raised KeyError" in r.getMessage()
               for r in caplog.records)


def test_human_requests_to_a_shared_route_are_not_projected(
    shop: tuple[Flask, list[Any], HubSimulator],
) -> None:
    app, _, hub = shop
    assert app.test_client().get("/shared").get_json()["phone"] == PHONE  # the app's own auth applies
    assert "phone" not in hub.call("shared").json()


# -- what the model is told ---------------------------------------------------------------------------


def test_the_catalog_describes_the_declared_shape(hub: HubSimulator) -> None:
    paths = hub.document()["paths"]

    def returns(path: str) -> str | None:
        guidance = paths[path]["get"]["x-agent-capability"].get("guidance") or {}
        return guidance.get("returns")

    assert returns("/dict") == (
        "An object with: order_id, status, title, customer {customer_id, name}, "
        'lines (list, at most 50) {sku, tags (list, at most 2)}. Anything cut is named in "truncated".'
    )
    assert returns("/list") == "A list (at most 50) of objects with: customer_id, name. " \
                               'Anything cut is named in "truncated".'
    assert returns("/explicit") == "The customer, without contact details."
    assert returns("/text-result") is None
    assert "phone" not in returns("/sqlite") and "truncated" not in returns("/sqlite")  # type: ignore[operator]


def test_the_generated_text_stays_short_for_big_shapes() -> None:
    from pydantic import create_model

    from bailing_flask._pipeline.projection import Shaper

    inner = create_model("Inner", **{f"nested_field_{i}": (int, 0) for i in range(30)})  # type: ignore[call-overload]
    big = create_model("Big", **{f"field_number_{i}": (inner, None) for i in range(40)})  # type: ignore[call-overload]
    text = Shaper(big, None, 50).returns
    assert text is not None and len(text.encode("utf-16-le")) // 2 <= RETURNS_BUDGET
    assert text.startswith("An object with: field_number_0, field_number_1") and ", …." in text


# -- declarations ----------------------------------------------------------------------------------------


class Tree(BaseModel):
    name: str
    children: list[Tree] = []


class Marked(BaseModel):
    truncated: bool


class PathAlias(BaseModel):
    city: str = Field(validation_alias=AliasPath("address", "city"))


@pytest.mark.parametrize(("shape", "problem"), [
    (int, "pydantic model class or list"),
    (dict[str, Customer], "pydantic model class or list"),
    (Marked, "has a field 'truncated'"),
    (Tree, "contains itself"),
    (PathAlias, "AliasPath"),
])
def test_bad_shapes_fail_when_declared(shape: Any, problem: str) -> None:
    with pytest.raises(ToolDeclarationError, match=problem):
        tool(scope="x.read", response=shape)(lambda: None)


def test_a_list_of_marked_models_is_fine() -> None:
    tool(scope="x.read", response=list[Marked])(lambda: None)


# -- over a real socket ---------------------------------------------------------------------------------


def test_projection_through_a_real_server(live_server: Any) -> None:
    app, _ = make_app()
    base = live_server(app)
    hub = HubSimulator(base, STRONG_SECRET)
    response = hub.call("as_dict")
    assert response.status == 200 and response.json() == EXPECTED
    assert int(response.headers["Content-Length"]) == len(response.body)
    page = hub.call("hits").json()
    assert page["truncated"]["hits"] == "3 of 8 items shown; more exist"
    assert json.loads(hub.call("invalid").body)["reason"] == "invalid_response"
