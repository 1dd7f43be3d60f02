"""A tool's JSON body is parsed and validated in one pass, and decides exactly as before.

The registry compiles each tool's body model into a strict twin (unknown
keys forbidden) that validates the raw bytes; whenever it refuses, the
two-step way (parse, unknown keys, validate) decides, so refusals keep their
reason and message. Where pydantic's JSON mode would decide differently,
the tool keeps the two-step way.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import from_json

from bailing_flask._pipeline.strict_body import compile_body
from bailing_flask.testing import signed_headers

from .apps import one_pass_app
from .apps.one_pass_app import SECRET, Aliased, Note, Price


@pytest.fixture
def client():
    return one_pass_app.create_app().test_client()


def post(client: Any, path: str, body: bytes) -> Any:
    headers = signed_headers(SECRET, "POST", path, body, subject="u1", job_id="job-1")
    headers["Content-Type"] = "application/json"
    return client.post(path, data=body, headers=headers)


def test_a_declared_body_is_validated_from_the_raw_bytes_in_one_pass(client):
    one_pass_app.MODES.clear()
    response = post(client, "/notes", b'{"text": "hello", "count": 2}')
    assert response.status_code == 200, response.json
    assert one_pass_app.MODES == ["json"]  # pydantic read the JSON itself: no parsed copy first


def test_the_view_gets_an_instance_of_the_declared_model_and_its_values_as_arguments(client):
    response = post(client, "/notes", b'{"text": "hello", "tags": ["a", "b"]}')
    assert response.json == {"model": "Note", "args": {
        "text": "'hello'", "count": "0", "ratio": "0.0", "tags": "['a', 'b']", "extra": "{}"}}


@pytest.mark.parametrize("spool_threshold", [1024 * 1024, 0], ids=["in memory", "in a file"])
def test_a_body_over_the_apps_max_content_length_is_refused_as_flask_refuses_it(spool_threshold):
    """The gate reads the bytes the verifier holds in memory without ``request.get_data()``; the
    app's ``MAX_CONTENT_LENGTH`` still applies, with Werkzeug's 413, wherever the body is held,
    before the authorizer or the view run."""
    app = one_pass_app.create_app(spool_threshold=spool_threshold)
    app.config["MAX_CONTENT_LENGTH"] = 100
    one_pass_app.MODES.clear()
    at_limit = json.dumps({"text": "x" * 88}).encode()
    assert len(at_limit) == 100
    assert post(app.test_client(), "/notes", at_limit).status_code == 200
    over = json.dumps({"text": "x" * 89}).encode()
    refused = post(app.test_client(), "/notes", over)
    assert refused.status_code == 413
    assert b"Request Entity Too Large" in refused.data
    assert len(one_pass_app.MODES) == 1  # only the call at the limit was validated


def test_an_unknown_key_is_refused_by_name_even_beside_a_wrong_type(client):
    response = post(client, "/notes", b'{"text": 5, "count": "x", "approve_myself": true}')
    assert response.status_code == 422
    assert response.json["reason"] == "unknown_parameter"
    assert response.json["parameters"] == ["approve_myself"]


def test_a_wrong_type_keeps_its_message_naming_the_parameter_not_the_value(client):
    response = post(client, "/notes", b'{"text": "hi", "count": "twelve-thousand"}')
    assert response.status_code == 422
    assert response.json["reason"] == "invalid_parameter"
    (error,) = response.json["errors"]
    assert error["parameter"] == "count" and error["expected"] == "integer"
    assert "twelve-thousand" not in response.text


@pytest.mark.parametrize("raw, args", [
    (b'{"text": "a", "text": "b"}', {"text": "'b'"}),  # a repeated key: the last wins, as json.loads
    (b'{"text": "a", "count": 123456789012345678901234567890}', {"count": "123456789012345678901234567890"}),
    (b'{"text": "a", "ratio": NaN}', {"ratio": "nan"}),
    (b'{"text": "a", "ratio": 1e400}', {"ratio": "inf"}),
    (b'{"text": "a", "count": "7", "ratio": "2.5"}', {"count": "7", "ratio": "2.5"}),
    (b'{"text": "a", "extra": {"k": 1, "k": 2}}', {"extra": "{'k': 2}"}),
])
def test_json_edge_cases_decide_as_the_two_step_way_did(client, raw, args):
    response = post(client, "/notes", raw)
    assert response.status_code == 200, response.json
    for name, value in args.items():
        assert response.json["args"][name] == value


def test_a_number_beyond_a_floats_range_is_still_refused_for_a_float(client):
    response = post(client, "/notes", b'{"text": "a", "ratio": ' + b"9" * 400 + b"}")
    assert response.status_code == 422
    assert response.json["errors"][0]["parameter"] == "ratio"


def test_a_body_the_strict_parser_refuses_is_still_decided_by_json_loads(client):
    one_pass_app.MODES.clear()
    response = post(client, "/notes", b'\xef\xbb\xbf{"text": "with a BOM"}')
    assert response.status_code == 200, response.json  # json.loads reads a UTF-8 BOM, as before
    assert one_pass_app.MODES[-1] == "python"


def test_a_decimal_keeps_the_number_the_parser_read(client):
    assert compile_body(Price) is None  # the JSON mode would read the digits instead
    response = post(client, "/prices", b'{"amount": 0.1000000000000000055511151231257827}')
    assert response.status_code == 200
    assert response.json["args"]["amount"] == repr(Decimal("0.1"))


def test_a_populate_by_name_field_name_is_still_an_unknown_key(client):
    assert compile_body(Aliased) is None
    assert post(client, "/aliased", b'{"orderId": 5}').status_code == 200
    refused = post(client, "/aliased", b'{"order_id": 5}')
    assert refused.status_code == 422 and refused.json["parameters"] == ["order_id"]


def _two_step(model: type[BaseModel], raw: bytes) -> BaseModel | None:
    """What argument validation did before: parse, refuse unknown keys, validate."""
    data = from_json(raw)
    if not isinstance(data, dict) or set(data) - set(model.model_fields):
        return None
    try:
        return model.model_validate(data)
    except ValidationError:
        return None


_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["text", "count", "ratio", "tags", "extra", "other"]), _values))
def test_the_one_pass_accepts_exactly_what_the_two_step_way_accepts(body):
    one_pass = compile_body(Note)
    assert one_pass is not None
    raw = json.dumps(body, allow_nan=True).encode()
    expected = _two_step(Note, raw)
    got = one_pass.validate(raw)
    if expected is None:
        assert got is None
    else:
        assert got is not None and type(got) is Note
        assert repr(got.model_dump()) == repr(expected.model_dump())


# -- what a review found: the one pass must never decide differently ---------------------------------


class ReferenceField(BaseModel):
    account: str = Field(coerce_numbers_to_str=True)


class ReferenceConfig(BaseModel):
    model_config = ConfigDict(coerce_numbers_to_str=True)
    account: str


class ReferenceNested(BaseModel):
    inner: ReferenceConfig


@pytest.mark.parametrize("model", [ReferenceField, ReferenceConfig, ReferenceNested])
def test_numbers_coerced_to_strings_keep_the_two_step_way_that_writes_1_0_as_1_0(model: Any) -> None:
    """pydantic's JSON mode would make ``1.0`` the string ``"1"``: another account number."""
    assert compile_body(model) is None


class Guarded(BaseModel):
    amount: int

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in type(self).model_fields:
            raise AttributeError(f"no field {name!r}")
        super().__setattr__(name, value)


ACCOUNTS = {"acc-1": "alice"}


class Payout(BaseModel):
    account: str

    @field_validator("account")
    @classmethod
    def known(cls, value: str) -> str:
        ACCOUNTS[value]  # the app's lookup: a KeyError for an unknown account
        return value


def test_a_model_with_its_own_setattr_is_handed_out_as_declared() -> None:
    compiled = compile_body(Guarded)
    assert compiled is not None
    instance = compiled.validate(b'{"amount": 5}')
    assert type(instance) is Guarded and instance.amount == 5


def test_a_validator_that_raises_lets_the_two_step_way_refuse_the_unknown_key_first() -> None:
    compiled = compile_body(Payout)
    assert compiled is not None
    assert compiled.validate(b'{"account": "ghost", "approve": true}') is None
    assert compiled.validate(b'{"account": "acc-1"}') == Payout(account="acc-1")


def test_over_a_real_call_the_review_cases_answer_as_before(live_server: Any) -> None:
    from flask import Flask, jsonify

    from bailing_flask import Bailing, get_current_call, tool
    from bailing_flask.testing import HubSimulator

    app = Flask(__name__)
    Bailing(app, secrets=[SECRET], store="memory://")

    @app.post("/guarded")
    @tool(scope="g.write", body=Guarded, authorizer=lambda call: True)
    def guarded() -> Any:
        """Guarded."""
        return jsonify(type=type(get_current_call().body).__name__)

    @app.post("/payouts")
    @tool(scope="p.write", body=Payout, authorizer=lambda call: True)
    def payouts() -> Any:
        """Payouts."""
        return jsonify(ok=True)

    @app.post("/references")
    @tool(scope="r.write", body=ReferenceField, authorizer=lambda call: True)
    def references() -> Any:
        """References."""
        return jsonify(args=dict(get_current_call().args))

    hub = HubSimulator(live_server(app), SECRET)
    assert hub.call("guarded", {"amount": 5}, subject="u1").json() == {"type": "Guarded"}
    refused = hub.call("payouts", {"account": "ghost", "approve": True}, subject="u1")
    assert refused.status == 422 and refused.json()["reason"] == "unknown_parameter"
    # the hub writes numbers as JavaScript does (1.0 is "1"); another signed client may send "1.0"
    raw = b'{"account": 1.0}'
    headers = signed_headers(SECRET, "POST", "/references", raw, subject="u1", job_id="job-ref")
    answer = app.test_client().post("/references", data=raw,
                                    headers={**headers, "Content-Type": "application/json"})
    assert answer.json == {"args": {"account": "1.0"}}
