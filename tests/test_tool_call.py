"""``ToolCall``: what authorizers and views get, typed."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from bailing_flask.context import ToolCall
from bailing_flask.wire.middleware import UnsignedHeaders, VerifiedCall


class Body(BaseModel):
    amount: int


class Query(BaseModel):
    page: int = 1


class Other(BaseModel):
    x: int = 0


def make_call(**fields: object) -> ToolCall:
    verified = VerifiedCall("tool", "t1:u1", "job-1", "0", "1718000000", "POST", "/x", "e3b0",
                            "sha256=" + "0" * 64, UnsignedHeaders(client="crm"))
    return ToolCall(verified=verified, **fields)  # type: ignore[arg-type]


def test_body_as_and_query_as_return_the_validated_models_typed():
    call = make_call(body=Body(amount=3), query=Query(page=2))
    assert call.body_as(Body).amount == 3
    assert call.query_as(Query).page == 2


def test_body_as_and_query_as_refuse_another_model_by_name():
    call = make_call(body=Body(amount=3))
    with pytest.raises(TypeError, match="Body, not Other"):
        call.body_as(Other)
    with pytest.raises(TypeError, match="NoneType, not Query"):
        call.query_as(Query)


def test_signed_fields_and_unsigned_headers_are_apart():
    call = make_call()
    assert (call.subject, call.job_id, call.unsigned.client) == ("t1:u1", "job-1", "crm")
    assert call.authorized is False


def test_the_gates_unchecked_constructor_builds_an_equal_frozen_call():
    from dataclasses import FrozenInstanceError, fields
    from types import MappingProxyType

    from bailing_flask.context import ToolInfo, _admitted_call

    info = ToolInfo(name="refund", scope="orders.write", method="POST", path="/refunds", risk="high",
                    readonly=False, idempotent=False, subject_required=True, sensitive=False)
    args = MappingProxyType({"amount": 3})
    body = Body(amount=3)
    regular = make_call(tool=info, user={"id": 1}, args=args, body=body)
    fast = _admitted_call(regular.verified, info, {"id": 1}, args, None, body)
    assert fast == regular
    assert vars(fast) == vars(regular)
    assert list(vars(fast)) == [f.name for f in fields(ToolCall)]  # a new field fails here first
    with pytest.raises(FrozenInstanceError):
        fast.user = None  # type: ignore[misc]
