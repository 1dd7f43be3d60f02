"""The catalog linter says what the hub's compiler would say, and what it would not.

Each code gets a minimal document that makes it fire: a valid baseline
catalog (which lints clean) with one change. Changes are written as
``{"dotted.key": value}`` applied to the baseline's one operation; keys
starting with ``$.`` apply to the document root, ``@method``/``@path`` move
the operation, and :data:`DROP` deletes a key. The expected severities and
behaviours come from CONTRACT.md §6 and the hub's compiler source.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bailing_flask.lint import (
    Finding,
    ProbeTarget,
    authz_probe_target,
    compile_names,
    compile_tools,
    lint_document,
)

DROP = object()
BODY = "requestBody.content.application/json.schema"
CAP = "x-agent-capability"


def baseline() -> dict[str, Any]:
    """A catalog with one POST tool that produces no finding at all."""
    return {
        "openapi": "3.0.3",
        "info": {"title": "Shop", "version": "1.0.0"},
        "x-bailing-authz-probe": {"path": "/bailing/authz-probe", "method": "POST"},
        "paths": {
            "/items": {
                "post": {
                    "operationId": "item_create",
                    "summary": "Create an item",
                    "requestBody": {
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["title"],
                                    "properties": {
                                        "title": {"type": "string", "description": "Title"},
                                        "amount": {"type": "number", "description": "Price"},
                                    },
                                }
                            }
                        }
                    },
                    CAP: {"version": 1, "enabled": True, "scope": "item.write"},
                }
            }
        },
    }


def _set(target: Any, dotted: str, value: object) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        target = target.setdefault(key, {})
    if value is DROP:
        target.pop(last, None)
    else:
        target[last] = value


def build(changes: dict[str, object] | None = None) -> dict[str, Any]:
    doc = baseline()
    op = doc["paths"]["/items"].pop("post")
    changes = dict(changes or {})
    method = str(changes.pop("@method", "post"))
    path = str(changes.pop("@path", "/items"))
    doc["paths"] = {path: {method: op}}
    for key, value in changes.items():
        if key.startswith("$."):
            _set(doc, key[2:], value)
        else:
            _set(op, key, value)
    return doc


def codes(document: object) -> list[str]:
    return [f.code for f in lint_document(document)]


def hub_view(document: object) -> list[tuple[str, str, str]]:
    """(severity, code, path) of the findings the hub itself would emit."""
    return [(f.severity, f.code, f.path) for f in lint_document(document) if f.source == "hub"]


def one(document: object, code: str) -> Finding:
    found = [f for f in lint_document(document) if f.code == code]
    assert len(found) == 1, (code, lint_document(document))
    return found[0]


def param(
    name: object, where: str = "query", *, required: object = DROP, **schema: object
) -> dict[str, Any]:
    """A documented parameter; the default schema is a closed enum (no hazards)."""
    built = {
        "name": name,
        "in": where,
        "description": f"the {name}",
        "schema": schema or {"type": "string", "enum": ["a", "b"]},
    }
    if required is not DROP:
        built["required"] = required
    return built


def when(*conditions: dict[str, object]) -> dict[str, object]:
    return {f"{CAP}.approval.when": list(conditions)}


# --- baseline ------------------------------------------------------------------------


def test_clean_document_has_no_findings() -> None:
    assert lint_document(build()) == []


def test_richer_clean_document_has_no_findings() -> None:
    doc = build(
        {
            "parameters": [param("dry_run", "query", type="boolean")],
            f"{BODY}.properties.qty": {"type": "integer", "maximum": 1000, "description": "n"},
            f"{CAP}.execution": {"timeout_ms": 5000, "rate_limit": {"count": 10, "window": "1m"}},
            f"{CAP}.guidance": {
                "when_to_use": "When stock arrives",
                "returns": "The item",
                "examples": [{"title": "pen"}],
                "context": ["inventory"],
            },
            f"{CAP}.approval": {
                "prompt": "Create {title}?",
                "when": [{"param": "amount", "op": ">", "value": 1000, "label": "expensive"}],
            },
            f"{CAP}.risk": {"level": "HIGH"},
            f"{CAP}.outcome": {"result": "item created", "side_effect": "write"},
        }
    )
    doc["paths"]["/items/{id}"] = {
        "get": {
            "operationId": "item_get",
            "summary": "Read an item",
            "parameters": [param("id", "path", type="string", format="uuid")],
            CAP: {"version": 1, "enabled": True, "scope": "item.read"},
        }
    }
    assert lint_document(doc) == []


# --- every hub diagnostic --------------------------------------------------------------

HUB_CASES: list[Any] = [
    pytest.param("invalid_agent_capability", "error", {CAP: True}),
    pytest.param("deprecated", "error", {"deprecated": True}),
    pytest.param("missing_scope", "error", {f"{CAP}.scope": " \u3000 "}),
    pytest.param("invalid_timeout_type", "error", {f"{CAP}.execution.timeout_ms": "5000"}),
    pytest.param(
        "unsupported_param_location",
        "error",
        {"parameters": [param("sid", "cookie")]},
    ),
    pytest.param("param_missing_description", "warning", {f"{BODY}.properties.title": {}}),
    pytest.param("write_without_schema", "error", {"requestBody": DROP}),
    pytest.param("missing_summary", "warning", {"summary": DROP}),
    pytest.param("missing_operation_id", "warning", {"operationId": DROP}),
    pytest.param("invalid_confirm_when", "error", {f"{CAP}.approval.when": {"param": "amount"}}),
    pytest.param("invalid_confirm_when_param", "error", when({"param": " ", "op": "exists"})),
    pytest.param(
        "invalid_confirm_when_op", "error", when({"param": "amount", "op": "=", "value": 1})
    ),
    pytest.param("invalid_confirm_when_value", "error", when({"param": "amount", "op": ">"})),
    pytest.param("invalid_name", "error", {"operationId": "item.create"}),
    pytest.param("invalid_method", "error", {"@method": "trace"}),
    pytest.param("invalid_path", "error", {"@path": "items"}),
    pytest.param("invalid_description", "error", {"summary": ""}),
    pytest.param("invalid_timeout", "error", {f"{CAP}.execution.timeout_ms": 1.5}),
    pytest.param(
        "invalid_rate_limit",
        "error",
        {f"{CAP}.execution.rate_limit": {"count": 1e307, "window": "1s"}},
    ),
    pytest.param("invalid_context", "error", {f"{CAP}.guidance.context": ["ok", " "]}),
    pytest.param("invalid_input_schema_required", "error", {f"{BODY}.required": [1]}),
    pytest.param("required_param_missing_schema", "error", {f"{BODY}.required": ["nope"]}),
    pytest.param(
        "confirm_when_param_missing_schema", "error", when({"param": "nope", "op": "exists"})
    ),
    pytest.param(
        "confirm_when_param_untyped",
        "error",
        {
            f"{BODY}.properties.note": {"description": "free"},
            **when({"param": "note", "op": "exists"}),
        },
    ),
    pytest.param(
        "confirm_when_numeric_type", "error", when({"param": "title", "op": ">", "value": 1})
    ),
    pytest.param(
        "confirm_when_in_type", "error", when({"param": "amount", "op": "in", "value": ["1"]})
    ),
    pytest.param(
        "confirm_when_contains_type",
        "error",
        when({"param": "amount", "op": "contains", "value": 1}),
    ),
    pytest.param(
        "confirm_when_value_type",
        "error",
        when({"param": "amount", "op": "==", "value": "1000"}),
    ),
    pytest.param("path_param_missing", "error", {"@path": "/items/{id}"}),
    pytest.param(
        "path_param_not_in_path",
        "warning",
        {"parameters": [param("id", "path", type="integer", maximum=10)]},
    ),
]


@pytest.mark.parametrize(("code", "severity", "changes"), HUB_CASES)
def test_hub_diagnostic_fires(code: str, severity: str, changes: dict[str, object]) -> None:
    finding = one(build(changes), code)
    assert (finding.severity, finding.source) == (severity, "hub")
    assert finding.path.endswith(" " + changes.get("@path", "/items"))  # type: ignore[operator]
    assert finding.message and finding.suggestion


@pytest.mark.parametrize("garbage", [None, [], [{"paths": {}}], "openapi: 3.0.0", 42, True])
def test_garbage_is_invalid_spec(garbage: object) -> None:
    assert hub_view(garbage) == [("error", "invalid_spec", "-")]


def test_non_json_values_are_invalid_spec_without_raising() -> None:
    cyclic: dict[str, Any] = {"paths": {}}
    cyclic["paths"]["/loop"] = cyclic
    assert codes(cyclic) == ["invalid_spec"]
    assert codes({"paths": {"/a": {"get": {1, 2}}}}) == ["invalid_spec"]


# --- the hub's evaluation order and JS semantics -----------------------------------------


def test_first_failing_step_decides() -> None:
    doc = build({f"{CAP}.scope": "", "parameters": [param("sid", "cookie")], "summary": DROP})
    assert hub_view(doc) == [("error", "missing_scope", "POST /items")]


def test_warnings_before_the_failing_step_are_kept() -> None:
    undocumented = {"name": "q", "in": "query", "schema": {"type": "string"}}
    doc = build({"parameters": [undocumented, param("sid", "cookie")]})
    assert [c for _, c, _ in hub_view(doc)] == [
        "param_missing_description",
        "unsupported_param_location",
    ]


def test_only_boolean_true_enables_an_operation() -> None:
    for enabled in ("true", 1, None, {}):
        doc = build({f"{CAP}.enabled": enabled})
        assert hub_view(doc) == []
        assert compile_names(doc) == []
    assert hub_view(build({f"{CAP}.enabled": True, "deprecated": "yes"})) == []


def test_operations_without_capability_are_ignored() -> None:
    assert hub_view(build({CAP: DROP, "operationId": "bad.name", "summary": DROP})) == []


def test_js_truthiness_and_string_conversion() -> None:
    # {} is truthy: no missing_summary, and String({}) is a valid description
    assert hub_view(build({"summary": {}})) == []
    # 0 is falsy (missing_summary) but "0" is a fine description
    assert [c for _, c, _ in hub_view(build({"summary": 0}))] == ["missing_summary"]
    # String(["a","b"]) == "a,b" is a scope; String([]) == "" is not
    assert compile_tools(build({f"{CAP}.scope": ["a", "b"]}))[0].scope == "a,b"
    assert "missing_scope" in codes(build({f"{CAP}.scope": []}))
    # String(true) is a valid tool name, and false is falsy: warning but still a name
    assert compile_names(build({"operationId": True}))[0][0] == "true"
    assert compile_names(build({"operationId": False}))[0][0] == "false"
    assert "missing_operation_id" in codes(build({"operationId": False}))


def test_trim_follows_javascript() -> None:
    assert "missing_scope" in codes(build({f"{CAP}.scope": "\ufeff\u3000\u2028"}))
    # U+001C is whitespace for Python's strip() but not for JS trim()
    assert "missing_scope" not in codes(build({f"{CAP}.scope": "\x1c"}))


def test_timeout_must_be_a_json_number_and_an_integer() -> None:
    assert hub_view(build({f"{CAP}.execution.timeout_ms": 5000.0})) == []
    assert hub_view(build({f"{CAP}.execution.timeout_ms": 0})) == []  # 0 = inherit
    assert "invalid_timeout" in codes(build({f"{CAP}.execution.timeout_ms": 600_001}))
    assert "invalid_timeout_type" in codes(build({f"{CAP}.execution.timeout_ms": None}))
    assert "invalid_timeout_type" in codes(build({f"{CAP}.execution.timeout_ms": True}))


def test_names_are_cut_to_64_utf16_units_before_validation() -> None:
    long_valid = "a" * 64 + ".tail"
    assert compile_names(build({"operationId": long_valid}))[0][0] == "a" * 64
    assert "invalid_name" in codes(build({"operationId": "9lives"}))
    # slug: every run of non-alphanumerics becomes "_", edges trimmed
    doc = build({"operationId": DROP, "@path": "/staff/list"})
    assert compile_names(doc) == [("post_staff_list", "POST", "/staff/list")]


def test_description_is_cut_at_500_utf16_units() -> None:
    # 250 emoji are 500 UTF-16 units: exactly at the limit, not truncated
    assert "description_truncated" not in codes(build({"summary": "\U0001f600" * 250}))
    assert "description_truncated" in codes(build({"summary": "\U0001f600" * 251}))
    # a blank summary of 500 units hides the guidance appended after it
    doc = build({"summary": " " * 500, f"{CAP}.guidance.when_to_use": "when needed"})
    assert "invalid_description" in codes(doc)
    doc = build({"summary": " " * 499, f"{CAP}.guidance.when_to_use": "when needed"})
    assert "invalid_description" not in codes(doc)


def test_required_names_come_from_path_params_and_required_flags() -> None:
    doc = build(
        {
            "@path": "/items/{id}",
            "parameters": [param("id", "path", type="integer", maximum=10), param("q", required=1)],
        }
    )
    assert compile_tools(doc)[0].required == ("id", "q", "title")
    # a non-string parameter name that is required breaks the required list
    doc = build({"parameters": [param(5, required=True)]})
    assert "invalid_input_schema_required" in codes(doc)
    # names found on Object.prototype pass the hub's `in` check
    assert "required_param_missing_schema" not in codes(build({f"{BODY}.required": ["toString"]}))


def with_property(name: str, schema: dict[str, object], *conditions: dict[str, object]) -> Any:
    return build({f"{BODY}.properties.{name}": schema, **when(*conditions)})


def test_approval_param_is_a_dot_path_through_properties() -> None:
    order = {"type": "object", "description": "o", "properties": {"total": {"type": "number"}}}
    ok = with_property("order", order, {"param": "order.total", "op": ">", "value": 9})
    assert hub_view(ok) == []
    empty_parts_skipped = with_property("order", order, {"param": "order..total", "op": "exists"})
    assert hub_view(empty_parts_skipped) == []
    missing = with_property("order", order, {"param": "order.sum", "op": "exists"})
    assert "confirm_when_param_missing_schema" in codes(missing)


def test_approval_value_types_are_strict() -> None:
    is_null = {"param": "title", "op": "==", "value": None}
    nullable = {"type": "string", "nullable": True, "description": "n"}
    assert hub_view(with_property("title", nullable, is_null)) == []
    assert "confirm_when_value_type" in codes(build(when(is_null)))
    counted = {"type": "integer", "maximum": 10, "description": "n"}
    fraction = with_property("n", counted, {"param": "n", "op": ">", "value": 1.5})
    assert "confirm_when_numeric_type" in codes(fraction)
    assert hub_view(with_property("n", counted, {"param": "n", "op": ">", "value": 2.0})) == []


def test_only_the_first_20_conditions_are_type_checked() -> None:
    fine = [{"param": "amount", "op": "exists"}] * 20
    bad = {"param": "nope", "op": "exists"}
    assert "confirm_when_param_missing_schema" not in codes(build(when(*fine, bad)))
    assert "confirm_when_param_missing_schema" in codes(build(when(*fine[:19], bad)))


def test_path_param_declared_only_at_path_level_is_missing() -> None:
    doc = build({"@path": "/items/{id}"})
    doc["paths"]["/items/{id}"]["parameters"] = [param("id", "path", type="integer", maximum=9)]
    assert codes(doc).count("path_param_missing") == 1
    assert "path_level_parameters_ignored" in codes(doc)


# --- hazards the hub does not report ------------------------------------------------------

PROBE = "$.x-bailing-authz-probe"
EXISTS = {"param": "title", "op": "exists"}


def header(name: str) -> dict[str, object]:
    return {"parameters": [param(name, "header")]}


def guidance(**fields: object) -> dict[str, object]:
    return {f"{CAP}.guidance.{key}": value for key, value in fields.items()}


OURS_CASES: list[Any] = [
    pytest.param("crash_null_path_item", "error", {"$.paths./gone": None}),
    pytest.param("crash_parameters_not_iterable", "error", {"parameters": {"q": {}}}),
    pytest.param("crash_body_required_not_iterable", "error", {f"{BODY}.required": {"a": 1}}),
    pytest.param("crash_to_string_key", "error", {"summary": {"toString": "Create"}}),
    pytest.param("enabled_not_boolean", "warning", {f"{CAP}.enabled": "true"}),
    pytest.param("head_operation", "error", {"@method": "head"}),
    pytest.param("scope_not_latin1", "error", {f"{CAP}.scope": "订单.write"}),
    pytest.param("scope_invalid_header_value", "error", {f"{CAP}.scope": "item\nwrite"}),
    pytest.param("scope_too_long", "warning", {f"{CAP}.scope": "s" * 192}),
    pytest.param("path_template_rewritten", "error", {"@path": "/items list"}),
    pytest.param("path_template_fragile", "warning", {"@path": "/items//all"}),
    pytest.param(
        "path_level_parameters_ignored", "warning", {"$.paths./items.parameters": [param("q")]}
    ),
    pytest.param("parameters_ignored", "warning", {"parameters": "q"}),
    pytest.param("param_ignored", "warning", {"parameters": [{"$ref": "#/components/x"}]}),
    pytest.param("reserved_param_name", "error", {f"{BODY}.properties.__proto__": {"type": "x"}}),
    pytest.param(
        "param_required_not_boolean", "warning", {"parameters": [param("q", required="false")]}
    ),
    pytest.param("non_scalar_param", "warning", {"parameters": [param("ids", type="array")]}),
    pytest.param(
        "array_query_item_comma",
        "warning",
        {"parameters": [param("tags", type="array", items={"type": "string"})]},
    ),
    pytest.param(
        "non_scalar_param",
        "warning",
        {"parameters": [param("tags", type="array", items={"type": "array"})]},
        id="non_scalar_param-nested-query-array",
    ),
    pytest.param(
        "non_scalar_param",
        "warning",
        {"@path": "/items/{ids}",
         "parameters": [param("ids", "path", type="array", items={"type": "integer",
                                                                   "maximum": 9})]},
        id="non_scalar_param-path-array",
    ),
    pytest.param(
        "unsafe_integer_param",
        "warning",
        {f"{BODY}.properties.order_id": {"type": "integer", "description": "id"}},
    ),
    pytest.param("header_param_reserved", "error", header("X-Bailing-On-Behalf-Of")),
    pytest.param("header_param_invalid_name", "error", header("X Tenant")),
    pytest.param("header_param_underscore", "warning", header("X_Tenant")),
    pytest.param("header_param_unsigned", "warning", header("X-Tenant")),
    pytest.param(
        "free_text_path_param",
        "warning",
        {"@path": "/items/{name}", "parameters": [param("name", "path", type="string")]},
    ),
    pytest.param("hash_run_param", "warning", {"parameters": [param("tag", type="string")]}),
    pytest.param(
        "hash_run_param",
        "warning",
        {"@path": "/files/{name}", "parameters": [param("name", "path", type="string")]},
        id="hash_run_param-last-path-segment",
    ),
    pytest.param(
        "request_body_ignored",
        "warning",
        {"requestBody.content": {"application/json; charset=utf-8": {"schema": {}}}},
    ),
    pytest.param("body_required_string", "warning", {f"{BODY}.required": "title"}),
    pytest.param("get_request_body_ignored", "warning", {"@method": "get"}),
    pytest.param("param_shadowed_by_body", "warning", {"parameters": [param("title")]}),
    pytest.param("capability_version", "warning", {f"{CAP}.version": DROP}),
    pytest.param("timeout_ms_zero", "warning", {f"{CAP}.execution.timeout_ms": 0}),
    pytest.param(
        "rate_limit_ignored",
        "warning",
        {f"{CAP}.execution.rate_limit": {"count": 0, "window": "1m"}},
    ),
    pytest.param("risk_level_ignored", "warning", {f"{CAP}.risk.level": "critical"}),
    pytest.param(
        "outcome_ignored", "warning", {f"{CAP}.outcome": {"result": " ", "side_effect": "write"}}
    ),
    pytest.param("guidance_when_to_use_too_long", "warning", guidance(when_to_use="w" * 501)),
    pytest.param("guidance_returns_too_long", "warning", guidance(returns="r" * 501)),
    pytest.param("guidance_too_many_examples", "warning", guidance(examples=[{}] * 6)),
    pytest.param("guidance_context_truncated", "warning", guidance(context=["c"] * 51)),
    pytest.param("guidance_context_item_length", "warning", guidance(context=["c" * 101])),
    pytest.param("approval_prompt_truncated", "warning", {f"{CAP}.approval.prompt": "p" * 201}),
    pytest.param("approval_when_truncated", "warning", when(*[EXISTS] * 21)),
    pytest.param(
        "approval_when_param_too_long", "warning", when({"param": "p" * 192, "op": "exists"})
    ),
    pytest.param("approval_when_label_length", "warning", when({**EXISTS, "label": ""})),
    pytest.param("name_truncated", "warning", {"operationId": "n" * 65}),
    pytest.param("description_truncated", "warning", {"summary": "s" * 501}),
    pytest.param("openapi_field_missing", "warning", {"$.info": DROP}),
    pytest.param("servers_ignored", "info", {"$.servers": [{"url": "https://api.example.com"}]}),
    pytest.param("authz_probe_root_invalid", "warning", {f"{PROBE}": {"path": "probe"}}),
    pytest.param("authz_probe_method", "warning", {f"{PROBE}.method": "DELETE"}),
    pytest.param("authz_probe_flag_ignored", "warning", {"x-bailing-authz-probe": "true"}),
    pytest.param("authz_probe_shadowed", "info", {"x-bailing-authz-probe": True}),
    pytest.param("authz_probe_path_rewritten", "warning", {f"{PROBE}.path": "/probe/{who}"}),
    pytest.param("authz_probe_unavailable", "info", {PROBE: DROP}),
    pytest.param("no_tools", "warning", {f"{CAP}.enabled": False}),
]


@pytest.mark.parametrize(("code", "severity", "changes"), OURS_CASES)
def test_bailing_hazard_fires(code: str, severity: str, changes: dict[str, object]) -> None:
    finding = one(build(changes), code)
    assert (finding.severity, finding.source) == (severity, "bailing")
    assert finding.message


@pytest.mark.parametrize("items", [
    {"type": "integer", "maximum": 9},
    {"type": "number"},
    {"type": "boolean"},
    {"type": "string", "enum": ["paid", "open"]},
    {"type": "string", "format": "uuid"},
])
def test_query_arrays_whose_items_cannot_hold_a_comma_are_fine(items: dict[str, object]) -> None:
    assert codes(build({"parameters": [param("tags", type="array", items=items)]})) == []


def test_query_array_findings_say_what_is_sent_and_what_arrives() -> None:
    comma = one(build({"parameters": [param("tags", type="array", items={"type": "string"})]}),
                "array_query_item_comma")
    assert "tags=a%2Cb%2Cc" in comma.message and "'a,b,c'" in comma.message
    nested = one(build({"parameters": [param("tags", type="array",
                                             items={"type": "array"})]}), "non_scalar_param")
    assert "flattened" in nested.message and "[object Object]" in nested.message
    enum_with_comma = build({"parameters": [param("tags", type="array",
                                                  items={"type": "string", "enum": ["a,b"]})]})
    assert codes(enum_with_comma) == ["array_query_item_comma"]


def test_crashes_do_not_stop_the_lint() -> None:
    doc = build({"parameters": 5})
    doc["paths"]["/other"] = {"post": copy.deepcopy(baseline()["paths"]["/items"]["post"])}
    doc["paths"]["/other"]["post"]["operationId"] = "other_create"
    assert codes(doc) == ["crash_parameters_not_iterable"]
    assert compile_names(doc) == [("other_create", "POST", "/other")]


def test_to_string_crash_fires_even_for_disabled_operations() -> None:
    doc = build({f"{CAP}.enabled": False, f"{CAP}.guidance.context": [{"toString": 1}]})
    assert "crash_to_string_key" in codes(doc)


def test_duplicate_names_after_truncation_and_from_slugs() -> None:
    doc = build({"operationId": "x" * 64 + "_a"})
    twin = copy.deepcopy(doc["paths"]["/items"]["post"])
    twin["operationId"] = "x" * 64 + "_b"
    doc["paths"]["/items2"] = {"post": twin}
    found = one(doc, "duplicate_tool_name")
    assert (found.severity, found.source, found.path) == ("error", "bailing", "POST /items2")
    assert "64" in found.message

    slugs = build({"operationId": DROP, "@path": "/a-b"})
    slugs["paths"]["/a_b"] = copy.deepcopy(slugs["paths"]["/a-b"])
    assert one(slugs, "duplicate_tool_name").path == "POST /a_b"


def test_header_parameters_get_one_finding_per_problem() -> None:
    doc = build({"parameters": [param("X_Tenant", "header"), param("Host", "header")]})
    assert [c for c in codes(doc) if c.startswith("header_")] == [
        "header_param_underscore",
        "header_param_unsigned",
        "header_param_reserved",
        "header_param_unsigned",
    ]


@pytest.mark.parametrize(
    "path",
    ["/商品/list", '/a"b', "/a<b>", "/a`b", "/a^b", "/a\\b", "/a/{id", "/a/./b", "/a/%2e%2e/b"]
    + ["/a#b", "/a b"],
)
def test_url_rewritten_paths_are_unverifiable(path: str) -> None:
    assert "path_template_rewritten" in codes(build({"@path": path}))


def test_placeholders_themselves_are_fine() -> None:
    doc = build(
        {"@path": "/items/{id}", "parameters": [param("id", "path", type="integer", maximum=9)]}
    )
    assert lint_document(doc) == []


def test_safe_integer_bounds_silence_the_precision_warning() -> None:
    bounded = {"type": "integer", "maximum": 2**53, "description": "id"}
    assert "unsafe_integer_param" not in codes(build({f"{BODY}.properties.n": bounded}))
    nested = {"type": "object", "description": "o", "properties": {"id": {"type": "integer"}}}
    assert "'o.id'" in one(build({f"{BODY}.properties.o": nested}), "unsafe_integer_param").message


def test_probe_flag_on_a_put_operation_is_probed_with_post() -> None:
    doc = build({"$.x-bailing-authz-probe": DROP, "@method": "put", "x-bailing-authz-probe": True})
    assert one(doc, "authz_probe_method").path == "PUT /items"
    assert authz_probe_target(doc) == ProbeTarget("dedicated", "POST", "/items", "item_create")


# --- helpers for the doctor ---------------------------------------------------------------


def test_compile_tools_reports_what_the_hub_keeps() -> None:
    doc = build()
    doc["paths"]["/broken"] = {"post": {CAP: {"enabled": True, "scope": "x"}}}
    (tool,) = compile_tools(doc)
    assert (tool.name, tool.method, tool.path, tool.scope) == (
        "item_create",
        "POST",
        "/items",
        "item.write",
    )
    assert tool.required == ("title",)
    assert dict(tool.param_in) == {"title": "body", "amount": "body"}
    assert compile_names("garbage") == []


def test_authz_probe_target_follows_the_hubs_order() -> None:
    assert authz_probe_target(build()) == ProbeTarget(
        "dedicated", "POST", "/bailing/authz-probe", "authz_probe"
    )
    doc = build({"$.x-bailing-authz-probe": DROP})
    assert authz_probe_target(doc) is None
    doc["paths"]["/me"] = {
        "get": {
            "operationId": "me",
            "summary": "Who am I",
            CAP: {"version": 1, "enabled": True, "scope": "me.read", "subject": {"required": True}},
        }
    }
    assert authz_probe_target(doc) == ProbeTarget("tool", "GET", "/me", "me")


# --- robustness ---------------------------------------------------------------------------

# Arbitrary JSON, plus JSON shaped like a catalog so the deep code paths run too.
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)
catalog_keys = st.sampled_from(
    "enabled scope parameters requestBody summary operationId approval when param op value "
    "name in schema type properties required execution timeout_ms guidance context examples "
    "toString __proto__".split()
)
shaped = st.recursive(
    json_values,
    lambda inner: st.dictionaries(catalog_keys, inner, max_size=5) | st.lists(inner, max_size=3),
    max_leaves=40,
)
capabilities = st.fixed_dictionaries(
    {"enabled": st.just(True)},
    optional={k: shaped for k in ("scope", "approval", "execution", "guidance")},
)
operations = st.dictionaries(
    st.sampled_from(["get", "post", "head", "trace", "x"]),
    st.fixed_dictionaries(
        {CAP: capabilities},
        optional={k: shaped for k in ("parameters", "requestBody", "summary", "operationId")},
    ),
    max_size=3,
)
path_keys = st.sampled_from(["/a", "/a/{id}", "b", "/é"])
documents = st.fixed_dictionaries(
    {"paths": st.dictionaries(path_keys, operations | shaped, max_size=3)},
    optional={"x-bailing-authz-probe": shaped},
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(json_values, documents))
def test_lint_never_raises(document: object) -> None:
    findings = lint_document(document)
    assert all(isinstance(f, Finding) for f in findings)
    json.dumps([f.__dict__ for f in findings])  # plain, serializable data
    compile_tools(document)
    authz_probe_target(document)
