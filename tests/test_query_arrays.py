"""Array, boolean and number arguments in the query arrive as the model sent them.

The hub sends every query argument as ``String(value)`` in one pair:
``["a","b"]`` as ``tags=a%2Cb``, ``true`` as ``flag=true``, ``1e21`` as
``ratio=1e%2B21``. These tests call a tool the way the hub does (the
simulator reproduces its encoding byte for byte) with many argument shapes,
in-process and over a real socket, and compare what the view received.
"""

from __future__ import annotations

from typing import Literal

import pytest
from flask import Flask, jsonify
from pydantic import BaseModel, Field

from bailing_flask import Bailing, Param, current_call, tool
from bailing_flask.lint import lint_document
from bailing_flask.testing import HubSimulator

from .helpers import STRONG_SECRET
from bailing_flask._state import state_of
from bailing_flask._pipeline.catalog import catalog_of


class Filters(BaseModel):
    tags: list[str] | None = Field(None, description="Tags.")
    ids: list[int] | None = Field(None, description="Order ids.", max_length=50)
    ratios: list[float] | None = Field(None, description="Ratios.")
    flags: list[bool] | None = Field(None, description="Flags.")
    statuses: list[Literal["paid", "open"]] | None = Field(None, description="Statuses.")
    flag: bool | None = Field(None, description="A flag.")
    count: int | None = Field(None, description="A count.", ge=0, le=2**53 - 1)
    ratio: float | None = Field(None, description="A ratio.")


def create_app() -> Flask:
    app = Flask("query_arrays")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    bailing = Bailing(app)
    bailing.authorizer(lambda call: True)

    @app.get("/api/search")
    @tool(scope="search.read", query=Filters)
    def search():
        """Search with filters."""
        return jsonify({k: v for k, v in current_call.args.items() if v is not None})

    @app.get("/api/labels")
    @tool(scope="search.read", params=[Param("labels", type=list[str], description="Labels."),
                                       Param("weights", type=list[int], description="Weights.")])
    def labels():
        """A view that declares its query by hand."""
        return jsonify({k: v for k, v in current_call.args.items() if v is not None})

    return app


#: (arguments as the model writes them, what the view must receive)
SHAPES = [
    ({"tags": ["a", "b"]}, None),
    ({"tags": ["solo"]}, None),
    ({"tags": []}, None),
    ({"tags": ["x y", "é", "张三", "😀", "a+b", "~*'()!", "%25", "?&="]}, None),
    ({"tags": ["", "a"]}, None),
    ({"tags": ["a", None]}, {"tags": ["a", ""]}),  # String() turns null items into ""
    ({"tags": ["a,b", "c"]}, {"tags": ["a", "b", "c"]}),  # cannot travel: the linter says so
    ({"tags": [""]}, {"tags": []}),  # indistinguishable from the empty array
    ({"ids": [1, 2, 3]}, None),
    ({"ids": [0]}, None),
    ({"ids": [-5, 10000000000000000]}, None),
    ({"ratios": [9.9, 0.30000000000000004, 1e-7, 1e21, -0.0, 2.0]}, None),
    ({"flags": [True, False, True]}, None),
    ({"statuses": ["paid", "open"]}, None),
    ({"flag": True}, None),
    ({"flag": False}, None),
    ({"count": 0}, None),
    ({"count": 9007199254740991}, None),
    ({"ratio": 1e21}, None),
    ({"ratio": 1e-7}, None),
    ({"ratio": -0.0}, {"ratio": 0.0}),
    ({"ratio": 2.0}, None),
    ({"tags": ["a"], "ids": [1], "flag": True, "ratio": 0.5}, None),
]


def expected(args, received):
    return received if received is not None else args


@pytest.fixture(scope="module")
def app():
    return create_app()


@pytest.mark.parametrize("args, received", SHAPES)
def test_query_arguments_arrive_as_the_model_sent_them(app, args, received):
    response = HubSimulator(app, STRONG_SECRET).call("search", args)
    assert response.status == 200, response.text
    assert response.json() == expected(args, received)


def test_the_wire_form_is_the_hubs_string_conversion(app):
    request = HubSimulator(app, STRONG_SECRET).build_call(
        "search", {"tags": ["a", "b"], "flag": True, "ratio": 1e21, "ids": []})
    assert request.path_with_query == "/api/search?tags=a%2Cb&flag=true&ratio=1e%2B21&ids="


@pytest.mark.parametrize("args", [{"labels": ["a", "b"], "weights": [3, 4]}, {"labels": []}])
def test_params_declared_by_hand_are_split_too(app, args):
    response = HubSimulator(app, STRONG_SECRET).call("labels", args)
    assert response.status == 200, response.text
    assert response.json() == args


def test_a_wrong_item_type_names_the_parameter(app):
    response = HubSimulator(app, STRONG_SECRET).call("search", {"ids": ["one", 2]})
    assert response.status == 422
    body = response.json()
    assert body["reason"] == "invalid_parameter"
    assert body["parameters"] == ["ids.0"]
    assert "one" not in response.text


def test_over_a_real_socket(live_server):
    base = live_server(create_app())
    hub = HubSimulator(base, STRONG_SECRET)
    for args, received in SHAPES:
        response = hub.call("search", args)
        assert response.status == 200, (args, response.text)
        assert response.json() == expected(args, received), args


def test_the_catalog_says_how_arrays_travel_and_the_linter_names_what_cannot(app):
    document = HubSimulator(app, STRONG_SECRET).document()
    parameters = {p["name"]: p for p in document["paths"]["/api/search"]["get"]["parameters"]}
    assert parameters["tags"]["style"] == "form" and parameters["tags"]["explode"] is False
    assert "style" not in parameters["flag"]
    findings = [f for f in lint_document(document) if f.code == "array_query_item_comma"]
    assert {f.path for f in findings} == {"GET /api/search", "GET /api/labels"}
    message = next(f.message for f in findings if f.path == "GET /api/search")
    assert "tags=a%2Cb%2Cc" in message and "'a,b,c'" in message
    # items that cannot contain ',' (an enum, integers, booleans) are fine
    flagged = " ".join(f.message for f in findings)
    assert "'statuses'" not in flagged and "'ids'" not in flagged


def test_an_array_path_parameter_on_a_builtin_converter_is_an_error():
    app = Flask("path_arrays")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    bailing = Bailing(app)
    bailing.authorizer(lambda call: True)

    @app.get("/api/batches/<ids>")
    @tool(scope="batch.read", params=[Param("ids", location="path", type=list[str],
                                            description="Batch ids.")])
    def batches(ids):
        """The view gets one string, whatever the catalog says."""
        return jsonify(ids=ids)

    catalog = catalog_of(state_of(app))
    (finding,) = [f for f in catalog.findings if f.code == "path_array_not_received"]
    assert finding.severity == "error" and "'a,b'" in finding.message
    assert catalog.excluded == ["GET /api/batches/{ids}"]
