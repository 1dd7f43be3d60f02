"""Target ``lint``: catalogs and tool declarations through the linter.

Three kinds of case:

* ``json``: any JSON value as a catalog;
* ``openapi``: documents shaped like catalogs (paths, methods, parameters,
  bodies, ``x-agent-capability``), every field sometimes of the wrong type;
* ``declaration``: a Flask route with a ``@tool(...)`` declaration whose
  options are drawn from the documented option names with right and wrong
  values, built into the app's catalog.

Oracle: :func:`bailing_flask.lint.lint_document` (and the compiler and probe
helpers) never raise and return findings; a declaration either is refused at
once with :class:`~bailing_flask.errors.ToolDeclarationError` (or
:class:`~bailing_flask.errors.ConfigurationError`) or builds a catalog whose
findings are :class:`~bailing_flask.lint.codes.Finding` objects and whose
served document lints without errors.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from . import Outcome
from .callbacks import json_values
from bailing_flask._state import state_of
from bailing_flask._pipeline.catalog import catalog_of

__all__ = ["LintCase", "cases", "target"]


@dataclass
class LintCase:
    kind: str  # json, openapi, declaration
    data: Any

    def __repr__(self) -> str:
        return f"LintCase({self.kind}, {self.data!r:.1500})"


_names = st.one_of(st.sampled_from(["id", "order_id", "q", "tenant_id", "user", "callback_url", "a.b",
                                    "", " ", "__proto__", "constructor", "toString", "x" * 200]),
                   st.text(max_size=12))
_types = st.sampled_from(["string", "integer", "number", "boolean", "object", "array", "null", "file",
                          ["string", "null"], 1, None])
_schemas = st.recursive(
    st.fixed_dictionaries({}, optional={
        "type": _types, "maximum": json_values, "minimum": json_values, "enum": json_values,
        "format": st.sampled_from(["int64", "date-time", "uri", "password", "x"]),
        "maxLength": json_values, "pattern": st.sampled_from(["^a$", "[", "(?P<x>", "\\d+"]),
        "default": json_values, "$ref": st.just("#/components/schemas/X"),
    }),
    lambda inner: st.fixed_dictionaries({"type": st.sampled_from(["object", "array"])}, optional={
        "properties": st.dictionaries(_names, inner, max_size=3), "items": inner,
        "required": st.lists(_names, max_size=3), "additionalProperties": st.booleans() | inner,
        "oneOf": st.lists(inner, max_size=2), "allOf": st.lists(inner, max_size=2),
    }),
    max_leaves=6,
)
_parameter = st.fixed_dictionaries(
    {"name": _names, "in": st.sampled_from(["query", "path", "header", "cookie", "body", "", 3])},
    optional={"required": json_values, "schema": _schemas | json_values, "description": json_values},
)
_capability = st.fixed_dictionaries({}, optional={
    "version": json_values, "enabled": st.sampled_from([True, False, "true", 0, None]),
    "scope": st.one_of(st.sampled_from(["order.read", "", " ", "é", "x" * 200, "a b"]), json_values),
    "risk": st.one_of(st.fixed_dictionaries({"level": st.sampled_from(["low", "medium", "high", "HIGH",
                                                                       "", 1])}), json_values),
    "subject": st.one_of(st.fixed_dictionaries({"required": json_values}), json_values),
    "execution": st.one_of(st.fixed_dictionaries({}, optional={
        "readonly": json_values, "idempotent": json_values, "timeout_ms": json_values,
        "rate_limit": st.one_of(st.fixed_dictionaries({"count": json_values, "window": json_values}),
                                json_values)}), json_values),
    "approval": st.one_of(st.fixed_dictionaries({}, optional={
        "required": json_values, "prompt": json_values,
        "when": st.lists(st.fixed_dictionaries({"param": _names, "op": st.sampled_from(
            [">", "in", "exists", "~", ""]), "value": json_values}), max_size=3)}), json_values),
    "guidance": st.one_of(st.fixed_dictionaries({}, optional={
        "when_to_use": json_values, "returns": json_values, "examples": json_values,
        "context": json_values}), json_values),
    "audit": json_values, "outcome": json_values,
})
_operation = st.fixed_dictionaries({}, optional={
    "operationId": st.one_of(_names, json_values), "summary": json_values, "description": json_values,
    "parameters": st.one_of(st.lists(_parameter, max_size=4), json_values),
    "requestBody": st.one_of(st.fixed_dictionaries({"content": st.fixed_dictionaries({
        "application/json": st.fixed_dictionaries({"schema": _schemas | json_values})})},
        optional={"required": json_values}), json_values),
    "x-agent-capability": st.one_of(_capability, _capability, json_values),
    "deprecated": json_values, "responses": json_values,
})
_paths = st.one_of(st.sampled_from(["/orders", "/orders/{id}", "/a/{id}/{id}", "/{x}", "orders",
                                    "/a b", "/é", "", "/.well-known/bailing/authz-probe", "/o/{"]),
                   st.text(max_size=15).map(lambda t: "/" + t))
_methods = st.sampled_from(["get", "post", "put", "patch", "delete", "head", "options", "trace", "GET",
                            "parameters", "x-foo"])
_documents = st.fixed_dictionaries(
    {"paths": st.one_of(st.dictionaries(_paths, st.one_of(st.dictionaries(_methods, _operation,
                                                                          max_size=3), json_values),
                                        max_size=4), json_values),
     "openapi": st.sampled_from(["3.0.3"] * 8 + ["3.1.0", "2.0", 3, None]),
     "info": st.one_of(st.just({"title": "t", "version": "1"}), json_values)},
    optional={
              "x-bailing-authz-probe": st.one_of(st.fixed_dictionaries(
                  {"path": _paths, "method": _methods}), json_values),
              "swagger": json_values, "components": json_values},
)

#: Option values to draw from: a right one first, then wrong ones.
_OPTIONS: dict[str, st.SearchStrategy[Any]] = {
    "name": st.sampled_from(["order_get", "Bad-Name", "", "x" * 70, "_ok", 1]),
    "description": st.one_of(st.text(max_size=600), json_values),
    "scope": st.sampled_from(["order.read", "", "  ", "é", "中文", "x" * 200, 5]),
    "risk": st.sampled_from(["low", "medium", "high", "HIGH", "", None]),
    "approval_required": st.sampled_from([True, False, "yes"]),
    "approval_when": st.sampled_from(["amount > 500", "amount >", "currency in [\"USD\"]", "x exists",
                                      ["a > 1", "b < 2"], {"param": "a", "op": ">"}, 3]),
    "approval_prompt": st.one_of(st.text(max_size=220), st.just("{amount} refund")),
    "subject_required": st.sampled_from([True, False, None, "no"]),
    "sensitive": st.booleans(), "readonly": st.sampled_from([True, False, 1]),
    "rate_limit": st.sampled_from(["30/min", "5/s", "0/s", "x/min", "1/fortnight", {"count": 3, "window": "1m"}]),
    "timeout_ms": st.sampled_from([1, 600_000, 0, -5, 600_001, 1.5, "100"]),
    "when_to_use": st.one_of(st.text(max_size=520), json_values),
    "returns": st.one_of(st.text(max_size=520), json_values),
    "examples": st.one_of(st.lists(st.dictionaries(st.text(max_size=5), json_values, max_size=3),
                                   max_size=6), json_values),
    "context": st.one_of(st.lists(st.text(max_size=110), max_size=3), json_values),
    "tags": st.one_of(st.lists(st.text(max_size=10), max_size=3), json_values),
    "deprecated": st.booleans(),
    "outcome": st.sampled_from([{"result": "done", "side_effect": "write"}, {"result": ""}, "x"]),
    "extensions": st.sampled_from([{"x-business-owner": "crm"}, {"x-other": 1},
                                   {"x-bailing-authz-probe": {}}, {"x-business-n": float("nan")}]),
    "methods": st.sampled_from([["GET"], ["get", "post"], ["FETCH"], "GET"]),
    "allow_unsigned": st.booleans(), "validate_unsigned": st.booleans(),
    "repeats": st.sampled_from(["replay", "transaction", "safe", "SAFE", True, None]),
    "idempotent": st.booleans(),  # removed: refused, naming repeats=
    "business_approval": st.booleans(),
    "max_items": st.sampled_from([0, 5, -1, 2_000_000, True]),
    "model_chooses": st.sampled_from([{"user_id": "the admin picks the user, checked by the authorizer"},
                                      {"user_id": "short"}, ["user_id"], {"": "x" * 20}]),
    "params": st.sampled_from(["params-query", "params-path", "params-header", "params-bad"]),
    "query": st.sampled_from(["model", "not-a-model"]),
    "body": st.sampled_from(["model", "not-a-model"]),
    "response": st.sampled_from(["model", "list-model", "not-a-model"]),
    "unknown_option": st.just(1),
}
_rules = st.sampled_from([
    ("GET", "/orders"), ("GET", "/orders/<int:order_id>"), ("POST", "/orders"),
    ("PUT", "/orders/<order_id>/note"), ("DELETE", "/orders/<path:rest>"),
    ("GET", "/users/<user_id>"), ("POST", "/hooks/<uuid:token>"), ("GET", "/a/<float:x>/<int:y>"),
    ("PATCH", "/tenant/<tenant_id>/config"), ("GET", "/.well-known/bailing/authz-probe"),
])


@st.composite
def _declarations(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(sorted(_OPTIONS)), max_size=6, unique=True))
    options = {name: draw(_OPTIONS[name]) for name in names}
    return {"rules": draw(st.lists(_rules, min_size=1, max_size=3)), "options": options,
            "docstring": draw(st.one_of(st.none(), st.text(max_size=80)))}


cases = st.one_of(
    st.builds(LintCase, st.just("json"), json_values),
    st.builds(LintCase, st.just("openapi"), _documents),
    st.builds(LintCase, st.just("openapi"), _documents),
    st.builds(LintCase, st.just("openapi"), _documents),
    st.builds(LintCase, st.just("declaration"), _declarations()),
)


# -- the oracle ------------------------------------------------------------------------------------


def _lint(document: Any, outcome: Outcome, what: str) -> list[Any] | None:
    from bailing_flask.lint import authz_probe_target, compile_names, compile_tools, lint_document
    from bailing_flask.lint.codes import Finding

    pristine = copy.deepcopy(document)
    findings = None
    for name, function in (("lint_document", lint_document), ("compile_tools", compile_tools),
                           ("compile_names", compile_names), ("authz_probe_target", authz_probe_target)):
        try:
            result = function(document)
        except Exception as exc:
            outcome.add("exception", f"{name}({what}) raised {type(exc).__name__}: {exc}")
            continue
        if name == "lint_document":
            findings = result
            if not isinstance(result, list) or not all(isinstance(f, Finding) for f in result):
                outcome.add("malformed", f"lint_document returned {type(result).__name__}")
                findings = None
            else:
                for f in result:
                    if f.severity not in ("error", "warning", "info") or not f.code or not f.message:
                        outcome.add("malformed", f"an incomplete finding {f!r}")
    if document != pristine:
        outcome.add("malformed", f"linting changed the {what}")
    return findings


def _model(kind: str) -> Any:
    from pydantic import BaseModel, Field

    class Query(BaseModel):
        q: str | None = Field(None, description="Words.")
        limit: int = Field(10, ge=1, le=50, description="At most.")

    class Body(BaseModel):
        amount: float = Field(gt=0, description="Amount.")
        user_id: str | None = Field(None, description="Whose.")

    class Shape(BaseModel):
        id: int
        name: str = Field(max_length=20)

    return {"model": Query, "body": Body, "list-model": list[Shape], "shape": Shape}.get(kind, kind)


def _options(raw: dict[str, Any]) -> dict[str, Any]:
    from bailing_flask import Param

    options = dict(raw)
    params = options.get("params")
    if params is not None:
        options["params"] = {
            "params-query": [Param("q", description="Words.")],
            "params-path": [Param("order_id", location="path", description="Which.")],
            "params-header": [Param("X-Tenant", location="header", required=True)],
            "params-bad": [Param("", location="query")],
        }[params]
    if options.get("query") is not None:
        options["query"] = _model(options["query"])
    if options.get("body") is not None:
        options["body"] = _model("body" if options["body"] == "model" else options["body"])
    if options.get("response") is not None:
        options["response"] = _model("shape" if options["response"] == "model" else options["response"])
    return options


def _check_declaration(data: dict[str, Any], outcome: Outcome) -> None:
    from flask import Flask

    from bailing_flask import Bailing, tool
    from bailing_flask.config_check import check_all
    from bailing_flask.errors import ConfigurationError, ToolDeclarationError
    from bailing_flask.lint.codes import Finding

    app = Flask("fuzz_declarations")
    app.config.update(BAILING_SECRETS=["fuzz-provider-secret-0123456789abcdefghijklmnop"],
                      BAILING_STORE="memory://")
    options = _options(data["options"])
    try:
        for index, (method, rule) in enumerate(data["rules"]):
            def view(**kwargs: Any) -> Any:
                return {"ok": True}

            view.__name__ = f"view_{index}"
            view.__doc__ = data["docstring"]
            app.add_url_rule(rule, f"view_{index}", tool(**options)(view), methods=[method])
        bailing = Bailing(app)
        state = state_of(app)
        catalog = catalog_of(state)
        problems = check_all(state)
    except (ToolDeclarationError, ConfigurationError) as exc:
        outcome.label = type(exc).__name__
        if not str(exc):
            outcome.add("malformed", f"{type(exc).__name__} without a message")
        return
    except Exception as exc:
        outcome.add("exception", f"{type(exc).__name__}: {exc}")
        return
    outcome.label = "errors" if catalog.errors else ("findings" if catalog.findings else "clean")
    if not all(isinstance(f, Finding) for f in catalog.findings):
        outcome.add("malformed", "a catalog finding is not a Finding")
    if not all(p.message for p in problems):
        outcome.add("malformed", "a configuration problem without a message")
    try:
        served = json.loads(catalog.served_bytes)
    except ValueError as exc:
        outcome.add("malformed", f"the served catalog is not JSON: {exc}")
        return
    served_findings = _lint(served, outcome, "served catalog") or []
    errors = [f for f in served_findings if f.severity == "error"]
    if errors:
        outcome.add("malformed", f"the served catalog still has errors: {errors[:2]}")


def check_case(case: LintCase) -> Outcome:
    outcome = Outcome()
    if case.kind == "declaration":
        _check_declaration(case.data, outcome)
        return outcome
    findings = _lint(case.data, outcome, case.kind)
    if findings is not None:
        outcome.label = "clean" if not findings else findings[0].code
    return outcome


@contextmanager
def target() -> Iterator[Callable[[LintCase], Outcome]]:
    import logging
    import warnings

    logger = logging.getLogger("bailing_flask")
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield check_case
    finally:
        logger.setLevel(level)
