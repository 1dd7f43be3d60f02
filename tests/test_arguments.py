"""Arguments are validated against the declaration before the view runs."""

from __future__ import annotations

import datetime
from typing import Annotated, Any, Literal

import pytest
from flask import Flask
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, RootModel, computed_field,
                      field_serializer, field_validator)
from werkzeug.datastructures import ImmutableMultiDict

from bailing_flask import Bailing, current_call, tool
from bailing_flask._pipeline.strict_body import dumps_as_stored
from bailing_flask.signals import tool_called
from bailing_flask.testing import HubSimulator, signed_headers

from .helpers import STRONG_SECRET


def test_valid_query_is_parsed_into_the_model(hub):
    response = hub.call("order_search", {"keyword": "lamp", "page": 2}, subject="t1:u1")
    assert response.status == 200, response.text
    assert response.json() == {"keyword": "lamp", "page": 2,
                               "args": {"keyword": "lamp", "page": 2}}


def test_extra_query_parameter_is_refused_by_name(hub):
    # undeclared arguments of a GET tool go to the query (CONTRACT.md §3.3)
    response = hub.call("order_search", {"keyword": "lamp", "limit": 10}, subject="t1:u1")
    assert response.status == 422
    body = response.json()
    assert body["reason"] == "unknown_parameter"
    assert body["parameters"] == ["limit"]
    assert "10" not in response.text


def test_wrong_type_names_parameter_and_expected_type_without_the_value(hub):
    response = hub.call("order_search", {"page": "two-hundred-thousand"}, subject="t1:u1")
    assert response.status == 422
    body = response.json()
    assert body["reason"] == "invalid_parameter"
    (error,) = body["errors"]
    assert error["parameter"] == "page" and error["location"] == "query"
    assert error["expected"] == "integer"
    assert "two-hundred-thousand" not in response.text


def test_oversized_values_are_refused(hub):
    response = hub.call("order_search", {"keyword": "x" * 5000}, subject="t1:u1")
    assert response.status == 422
    assert response.json()["errors"][0]["parameter"] == "keyword"
    assert "xxxxx" not in response.text
    too_much = hub.call("refund_create", {"order_id": 101, "amount": 10**6, "reason": "r"},
                        subject="t1:u1")
    assert too_much.status == 422
    assert too_much.json()["errors"][0]["parameter"] == "amount"


def test_extra_body_property_is_refused(hub):
    args = {"order_id": 101, "amount": 5, "reason": "broken", "approve_myself": True}
    response = hub.call("refund_create", args, subject="t1:u1")
    assert response.status == 422
    assert response.json()["parameters"] == ["approve_myself"]


def test_missing_required_body_property(hub):
    response = hub.call("refund_create", {"order_id": 101, "amount": 5}, subject="t1:u1")
    assert response.status == 422
    assert response.json()["errors"] == [{"parameter": "reason", "location": "body",
                                          "problem": "missing", "expected": "string",
                                          "message": "This parameter is required."}]


def test_body_that_is_not_an_object(authz_app):
    body = b"[1,2]"
    headers = signed_headers(STRONG_SECRET, "POST", "/api/refunds", body, subject="t1:u1")
    headers["Content-Type"] = "application/json"
    response = authz_app.test_client().post("/api/refunds", data=body, headers=headers)
    assert response.status_code == 422
    assert response.json["reason"] == "invalid_body"


def test_invalid_json_body(authz_app):
    body = b'{"order_id": 1,'
    headers = signed_headers(STRONG_SECRET, "POST", "/api/refunds", body, subject="t1:u1")
    response = authz_app.test_client().post("/api/refunds", data=body, headers=headers)
    assert response.status_code == 422
    assert response.json["reason"] == "invalid_body"


def test_write_tool_without_arguments_accepts_only_an_empty_object(authz_app):
    from flask import jsonify

    from bailing_flask import tool

    @authz_app.post("/api/noop")
    @tool(scope="order.write", authorizer=lambda call: True)
    def noop():
        return jsonify(ok=True)

    client = authz_app.test_client()
    for body, status in [(b"{}", 200), (b"", 200), (b'{"x":1}', 422)]:
        headers = signed_headers(STRONG_SECRET, "POST", "/api/noop", body)
        assert client.post("/api/noop", data=body, headers=headers).status_code == status, body


def test_validation_happens_before_authorization(hub):
    # a cross-tenant subject with bad arguments learns nothing about the data
    response = hub.call("order_search", {"page": 0}, subject="t2:u9")
    assert response.status == 422


class AppsOwnArgs(ImmutableMultiDict):
    """An app's own ``parameter_storage_class``: the gate reads it key by key."""


def own_args_reader(request_class):
    """A request class that reads ``request.args`` its own way: the gate asks it, never splits."""
    werkzeugs = request_class.args

    def args(self):
        return werkzeugs.__get__(self, type(self))

    return type("Request", (request_class,), {"args": property(args)})


def signed_get(app, target):
    headers = signed_headers(STRONG_SECRET, "GET", target, b"", subject="t1:u1")
    return app.test_client().get(target, headers=headers)


@pytest.mark.parametrize("storage", [None, AppsOwnArgs], ids=["werkzeug's", "the app's own"])
def test_a_query_is_checked_alike_whatever_the_apps_parameter_storage_class(authz_app, storage):
    if storage is not None:
        authz_app.request_class = type("Request", (authz_app.request_class,),
                                       {"parameter_storage_class": storage})
    once = signed_get(authz_app, "/api/orders?keyword=lamp&page=2")
    assert once.status_code == 200, once.text
    assert once.json["args"] == {"keyword": "lamp", "page": 2}
    twice = signed_get(authz_app, "/api/orders?page=2&keyword=lamp&keyword=desk")
    assert twice.status_code == 422
    assert twice.json["reason"] == "invalid_parameter"
    assert [(e["parameter"], e["problem"]) for e in twice.json["errors"]] == [("keyword", "repeated")]
    unknown = signed_get(authz_app, "/api/orders?limit=10&keyword=lamp&all=1")
    assert unknown.status_code == 422
    assert (unknown.json["reason"], unknown.json["parameters"]) == ("unknown_parameter", ["all", "limit"])
    empty = signed_get(authz_app, "/api/orders?&")  # a query string with no parameter in it
    assert empty.status_code == 200, empty.text


class LowerCaseArgs(ImmutableMultiDict):
    """An app's own ``parameter_storage_class`` that reads names case-insensitively."""

    def __init__(self, mapping=None):
        super().__init__([(key.lower(), value) for key, value in (mapping or [])])


@pytest.mark.parametrize("target", ["/api/orders?Page=2&keyword=lamp", "/api/orders?Page=2&keyword=a%20b"],
                         ids=["nothing to decode", "a value to decode"])
def test_a_query_is_read_through_the_apps_own_storage_class_whatever_it_holds(authz_app, target):
    """The gate validates what the view's ``request.args`` holds: an app whose storage class
    changes the names (here to lower case) has its query read through it, whether or not a
    value needs decoding, so the same call is not admitted or refused by a ``%`` in it."""
    authz_app.request_class = type("Request", (authz_app.request_class,),
                                   {"parameter_storage_class": LowerCaseArgs})
    response = signed_get(authz_app, target)
    assert response.status_code == 200, response.text
    assert response.json["args"]["page"] == 2


KEYS = ["keyword", "page", "all", "limit", "", "a%20b", "k+y", "%C3%A9", "%26", "page%00"]
VALUES = ["", "lamp", "2", "-1", "x%2Cy", "%C3%A9", "%FF", "a=b"]
PIECES = st.one_of(
    st.just(""),  # "?&", "?a&&b": an empty piece
    st.sampled_from(KEYS),  # "?a": a key without "="
    st.builds("{}={}".format, st.sampled_from(KEYS), st.sampled_from(VALUES)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(PIECES, max_size=6), path=st.sampled_from(["/api/orders", "/api/whoami"]))
def test_any_query_is_answered_alike_by_werkzeugs_storage_and_an_apps_own(authz_app, pieces, path):
    # the app's own parameter_storage_class is read key by key, werkzeug's without a call per key:
    # for any query string (repeats, unknown and blank keys, empty values, odd bytes) the answers agree
    target = f"{path}?{'&'.join(pieces)}" if pieces else path
    # a query with nothing to decode is split by the gate itself, any other read through
    # request.args: an app's own args reader is always asked, and answers the same
    werkzeugs = authz_app.request_class
    answers = []
    for request_class in (werkzeugs, type("Request", (werkzeugs,), {"parameter_storage_class": AppsOwnArgs}),
                          own_args_reader(werkzeugs)):
        authz_app.request_class = request_class
        try:
            response = signed_get(authz_app, target)
        finally:
            authz_app.request_class = werkzeugs
        answers.append((response.status_code, response.get_json(silent=True)))
    assert answers[0] == answers[1] == answers[2], target


@settings(max_examples=400, deadline=None)
@given(query=st.text(alphabet="ab=&;,.-_~!*'()[]:@/?", max_size=24))
def test_a_query_with_nothing_to_decode_is_split_as_werkzeug_parses_it(query):
    from werkzeug.wrappers import Request

    from bailing_flask._pipeline.arguments import _plain_query

    request = Request.from_values(query_string=query)
    split = _plain_query(request)
    parsed = request.args  # after the split: it reads request.args only when that is unparsed
    repeated = any(len(values) > 1 for values in parsed.listvalues())
    if repeated:
        assert split is None, query
    else:
        assert split == parsed.to_dict(), query


def test_the_gate_reads_request_args_once_something_parsed_them(authz_app):
    seen = []

    @authz_app.before_request
    def read_args():  # a hook that parsed the query first: the gate reads the same object
        from flask import request
        seen.append(request.args.get("page"))

    response = signed_get(authz_app, "/api/orders?keyword=lamp&page=2")
    assert response.status_code == 200, response.text
    assert response.json["args"] == {"keyword": "lamp", "page": 2}
    assert seen == ["2"]


# -- a plain model's arguments are read off the instance -------------------------------------------


class _Item(BaseModel):
    sku: str


class _Plain(BaseModel):
    sku: str = Field(min_length=1)
    quantity: int = 1
    price: float | None = None
    gift: bool = False
    colour: Literal["red", "blue"] = "red"


class _Nested(BaseModel):
    item: _Item


class _Listed(BaseModel):
    skus: list[str] = []


class _Validated(BaseModel):
    sku: str

    @field_validator("sku")
    @classmethod
    def _upper(cls, value: str) -> str:
        return value.upper()


class _Serialised(BaseModel):
    sku: str

    @field_serializer("sku")
    def _lower(self, value: str) -> str:
        return value.lower()


class _Computed(BaseModel):
    quantity: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def double(self) -> int:
        return 2 * self.quantity


class _Excluded(BaseModel):
    sku: str
    internal: str = Field("x", exclude=True)


class _Extra(BaseModel):
    model_config = ConfigDict(extra="allow")
    sku: str


class _Annotated(BaseModel):
    sku: Annotated[str, AfterValidator(str.strip)]


class _Dated(BaseModel):
    day: datetime.date


class _Union(BaseModel):
    ref: int | str


class _OwnDump(_Plain):
    def model_dump(self, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        return {"sku": "always this"}


@pytest.mark.parametrize("model", [_Plain, _Item])
def test_a_plain_models_instance_holds_exactly_what_its_dump_gives(model):
    instance = model.model_validate({"sku": "A-1", "quantity": "3", "price": 2, "gift": "true"}
                                    if model is _Plain else {"sku": "A-1"})
    assert dumps_as_stored(model)
    dumped = instance.model_dump()
    assert list(dumped) == list(instance.__dict__)
    assert all(dumped[k] is instance.__dict__[k] for k in dumped)


@pytest.mark.parametrize("model", [
    _Nested, _Listed, _Validated, _Serialised, _Computed, _Excluded, _Extra, _Annotated, _Dated,
    _Union, _OwnDump, RootModel[int], None, dict,
], ids=lambda m: getattr(m, "__name__", str(m)))
def test_a_model_whose_dump_could_differ_from_its_instance_keeps_the_dump(model):
    assert not dumps_as_stored(model)


def _shop_with(model: type[BaseModel], seen: dict[str, Any]) -> Flask:
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=STRONG_SECRET, BAILING_STORE="memory://")
    bailing = Bailing(app)

    @bailing.authorizer
    def authorize(call: Any) -> bool:
        seen["authorizer"] = dict(call.args)
        return True

    @app.post("/orders")
    @tool(scope="orders.write", body=model, repeats="safe")
    def order_create() -> Any:
        body = current_call.body
        seen["view"] = dict(current_call.args)
        body.sku = "changed by the view"  # a view may assign to its model: the arguments stay
        return {"ok": True}

    @app.get("/orders")
    @tool(scope="orders.read", query=model)
    def order_search() -> Any:
        current_call.query.sku = "changed by the view"
        return {"ok": True}

    def on_called(sender: Any, call: Any, **extra: Any) -> None:
        seen["after"] = dict(call.args)

    tool_called.connect(on_called, app, weak=False)
    return app


@pytest.mark.parametrize("model", [_Plain, _Validated, _Serialised, _Excluded],
                         ids=lambda m: m.__name__)
@pytest.mark.parametrize("tool_name", ["order_create", "order_search"])
def test_the_calls_arguments_are_the_dump_of_the_validated_model_and_stay_as_called(model, tool_name):
    seen: dict[str, Any] = {}
    app = _shop_with(model, seen)
    response = HubSimulator(app, STRONG_SECRET).call(tool_name, {"sku": " A-1 "}, subject="t1:u1")
    assert response.status == 200, response.text
    expected = model.model_validate({"sku": " A-1 "}).model_dump()
    assert seen["authorizer"] == expected
    assert seen["after"] == expected  # read after the view assigned to the model
    if tool_name == "order_create":
        assert seen["view"] == expected
