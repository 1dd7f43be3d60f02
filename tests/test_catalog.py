"""The catalog: golden output, OpenAPI validity, determinism, freshness."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from flask import Flask
from openapi_spec_validator import validate

from bailing_flask import Bailing, tool
from bailing_flask._pipeline.catalog import serialize

from .apps.catalog_app import create_app
from .helpers import STRONG_SECRET
from bailing_flask._state import state_of
from bailing_flask._pipeline.registry import registry_of
from bailing_flask._pipeline.catalog import catalog_of

GOLDEN = Path(__file__).parent / "golden" / "catalog.json"


def document(app: Flask) -> dict:
    return catalog_of(state_of(app)).document


def test_catalog_matches_the_golden_file():
    rendered = json.dumps(document(create_app()), ensure_ascii=False, indent=2) + "\n"
    if os.environ.get("BAILING_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(rendered, encoding="utf-8")
    assert rendered == GOLDEN.read_text(encoding="utf-8")


def test_catalog_is_valid_openapi_3_0():
    validate(document(create_app()))


def test_catalog_has_no_findings_beyond_expected_ones():
    catalog = catalog_of(state_of(create_app()))
    assert catalog.errors == []
    assert catalog.excluded == []


def test_same_app_same_bytes():
    first = catalog_of(state_of(create_app())).served_bytes
    second = catalog_of(state_of(create_app())).served_bytes
    assert first == second


def test_every_operation_carries_the_capability_fields():
    doc = document(create_app())
    assert doc["openapi"].startswith("3.0")
    assert doc["info"] == {"title": "Shop tools", "version": "2.1.0"}
    assert doc["x-bailing-authz-probe"] == {"path": "/.well-known/bailing/authz-probe",
                                            "method": "POST", "operationId": "authz_probe"}
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            capability = operation["x-agent-capability"]
            assert capability["version"] == 1
            assert capability["scope"].startswith("shop."), (method, path)
            assert "$ref" not in json.dumps(operation)


def test_routes_added_before_first_request_are_not_missed():
    app = create_app()
    state = state_of(app)
    before = {t.name for t in registry_of(state).tools}

    @app.get("/late")
    @tool(scope="late.read")
    def late():
        return "x"

    after = {t.name for t in registry_of(state).tools}
    assert after - before == {"late"}
    assert "/late" in catalog_of(state).document["paths"]


def test_duplicate_names_are_errors_naming_both_and_are_not_served():
    app = Flask(__name__)
    app.config["BAILING_SECRETS"] = STRONG_SECRET
    bailing = Bailing(app)
    bailing.authorizer(lambda call: True)

    @app.get("/a")
    @tool(name="same", scope="x.read")
    def first():
        return "a"

    @app.get("/b")
    @tool(name="same", scope="x.read")
    def second():
        return "b"

    @app.get("/c")
    @tool(scope="x.read")
    def fine():
        return "c"

    catalog = catalog_of(state_of(app))
    (error,) = catalog.errors
    assert (error.code, error.path) == ("duplicate_tool_name", "GET /b")
    assert "first" in error.message and "second" in error.message
    # the first keeps working; the hub never sees two tools with one name
    assert set(catalog.served["paths"]) == {"/a", "/c"}


def test_tool_without_authorizer_is_an_error_and_not_served():
    app = Flask(__name__)
    app.config["BAILING_SECRETS"] = STRONG_SECRET
    Bailing(app)

    @app.get("/a")
    @tool(scope="x.read")
    def first():
        return "a"

    catalog = catalog_of(state_of(app))
    assert [f.code for f in catalog.errors] == ["no_authorizer"]
    assert catalog.served["paths"] == {}


def test_serialization_is_compact_utf8():
    assert serialize({"a": "张三", "b": [1, 2]}) == '{"a":"张三","b":[1,2]}'.encode()


@pytest.mark.parametrize("field", ["subject", "audit", "execution", "risk"])
def test_governance_is_explicit_not_left_to_hub_defaults(field):
    doc = document(create_app())
    for item in doc["paths"].values():
        for operation in item.values():
            assert field in operation["x-agent-capability"]


def test_trusted_lint_of_our_own_document_finds_the_same_problems():
    from bailing_flask.lint import lint_document

    app = create_app()

    @app.get("/api/bad/<path:rest>")
    @tool(scope="bad.read", name="shop_order_get")  # free-text path parameter, duplicate name
    def bad(rest):
        return "x"

    document = catalog_of(state_of(app)).document
    def key(finding):
        return (finding.severity, finding.code, finding.path, finding.message)

    trusted = sorted(map(key, lint_document(document, trusted=True)))
    assert trusted == sorted(map(key, lint_document(document)))
    assert any(code == "duplicate_tool_name" for _, code, _, _ in trusted)
