"""A mirror of the hub's OpenAPI compiler: which operations become tools, and its diagnostics.

The hub compiles our OpenAPI document into tools step by step; the first
failing step of an operation decides, and its diagnostics only show up in the
hub's console. This module re-derives them from an already normalized JSON
value (see :mod:`._js`), with the same codes, severities and order.

Each step names the hub function it mirrors. They live in three files of the
hub's source, and were checked against hub commit
``c6f1d24911fc47df79bb144b6d8b7ac93b381008``
(:data:`~bailing_flask.lint.codes.HUB_COMMIT`):

``src/core/contracts/openapi-tools.ts``
    ``parseOpenApiSpec`` (:func:`_prepare`), ``compileOpenApiTools``
    (:class:`_Compiler`: :meth:`~_Compiler.run` and the steps of
    :meth:`~_Compiler._operation`), ``parseConfirmWhen``
    (:meth:`~_Compiler._confirm_when`);
``src/core/contracts/tool-annotations.ts``
    ``toolAnnotationsOf`` with ``parseRateLimit`` and ``rateLimitToPerMin``
    (:func:`_read_capability`);
``src/core/contracts/tool-definition.ts``
    ``validateToolDefinition`` (:meth:`~_Compiler._validate`,
    :meth:`~_Compiler._check_condition`), ``schemaTypes``,
    ``valueMatchesSchemaType`` and ``schemaAtPath``.

Nothing of the hub's code is copied: the behaviour is re-derived and pinned
by the tests.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bailing_flask.wire.jsenc import js_property_order, json_stringify
from bailing_flask.wire.jsenc import js_trim as _js_trim
from bailing_flask.wire.jsenc import utf16_slice as _utf16_slice
from bailing_flask.lint._js import (
    _HubCrash,
    _NotJson,
    _Props,
    _describe,
    _dig,
    _entries,
    _is_integer,
    _is_number,
    _js_get,
    _js_round,
    _js_string,
    _label,
    _normalize,
    _or,
    _record,
    _to_number,
    _truthy,
    _unique,
)
from bailing_flask.lint.codes import Finding, finding


@dataclass(frozen=True)
class CompiledTool:
    """What the hub keeps of one operation (the parts a doctor needs)."""

    name: str
    method: str
    path: str
    scope: str
    requires_subject: bool
    readonly: bool
    #: required argument names, de-duplicated, in the hub's order
    required: tuple[str, ...] = ()
    #: argument name -> "query" | "path" | "header" | "body", in JS property order
    param_in: Mapping[str, str] = field(default_factory=dict)
    #: the hub's per-tool limit in calls per minute (``execution.rate_limit``
    #: converted with JavaScript's ``Math.round``); ``None`` without a limit
    rate_limit_per_min: float | None = None


_CAP = "x-agent-capability"
_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
_LOCATIONS = frozenset({"query", "path", "header"})
_CONFIRM_OPS = frozenset({">", ">=", "<", "<=", "==", "!=", "in", "contains", "exists"})
_NUMERIC_OPS = frozenset({">", ">=", "<", "<="})
_RATE_WINDOWS = frozenset({"1s", "1m", "1h", "1d"})
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_PLACEHOLDER_RE = re.compile(r"\{([^{}]+)\}")
_SLUG_RUN_RE = re.compile(r"[^a-zA-Z0-9]+")
_SLUG_EDGE_RE = re.compile(r"^_+|_+$")
_MAX_DESCRIPTION = 500
_MAX_NAME = 64


def _schema_types(schema: Mapping[str, Any]) -> list[str]:
    """The declared JSON types of a schema (``schemaTypes``, tool-definition.ts)."""
    raw = schema.get("type")
    if isinstance(raw, list):
        return [item for item in raw if isinstance(item, str)]
    return [raw] if isinstance(raw, str) else []


def _matches_type(value: object, schema: Mapping[str, Any]) -> bool:
    """The hub's JSON-type check for approval values (no enum/format checks).

    Mirrors ``valueMatchesSchemaType`` in ``src/core/contracts/tool-definition.ts``.
    """
    types = _schema_types(schema)
    if not types:
        return True
    if value is None:
        return "null" in types or schema.get("nullable") is True
    checks: dict[str, Callable[[Any], bool]] = {
        "string": lambda v: isinstance(v, str),
        "boolean": lambda v: isinstance(v, bool),
        "number": lambda v: _is_number(v) and math.isfinite(float(v)),
        "integer": _is_integer,
        "array": lambda v: isinstance(v, list),
        "object": lambda v: isinstance(v, dict),
    }
    return any(t in checks and checks[t](value) for t in types)


def _slug(method: str, path: str) -> str:
    """The tool name ``compileOpenApiTools`` derives from method and path without an operationId."""
    return _SLUG_EDGE_RE.sub("", _SLUG_RUN_RE.sub("_", f"{method}_{path}"))


@dataclass
class _Capability:
    """The ``x-agent-capability`` fields as the hub reads them."""

    enabled: bool
    scope: str
    risk_level: object
    approval_when: object
    rate_per_min: float | None
    requires_subject: bool
    readonly: bool
    timeout_present: bool
    timeout_raw: object
    when_to_use: str
    returns: str
    examples: list[Any]
    context: list[str]


def _read_capability(cap: dict[str, Any]) -> _Capability:
    """Mirror the hub's annotation reader; it runs even for disabled operations,
    so a ``String()`` that throws here breaks the compile regardless of ``enabled``.

    Mirrors ``toolAnnotationsOf`` (with ``parseRateLimit`` and
    ``rateLimitToPerMin``) in ``src/core/contracts/tool-annotations.ts``.
    """
    execution = _record(cap.get("execution")) or {}
    guidance = _record(cap.get("guidance")) or {}
    approval = _record(cap.get("approval")) or {}
    outcome = _record(cap.get("outcome"))
    rate_per_min: float | None = None
    rate = _record(execution.get("rate_limit"))
    if rate is not None:
        count = _to_number(rate.get("count"), "x-agent-capability.execution.rate_limit.count")
        window = _js_string(
            _or(rate.get("window"), ""), "x-agent-capability.execution.rate_limit.window"
        )
        if _is_integer(count) and count > 0 and window in _RATE_WINDOWS:
            rate_per_min = {
                "1s": count * 60,
                "1m": count,
                "1h": max(1.0, _js_round(count / 60)),
                "1d": max(1.0, _js_round(count / 1440)),
            }[window]
    scope = _js_trim(_js_string(_or(cap.get("scope"), ""), "x-agent-capability.scope"))
    when_to_use = _js_trim(
        _js_string(_or(guidance.get("when_to_use"), ""), "guidance.when_to_use")
    )
    returns = _js_trim(_js_string(_or(guidance.get("returns"), ""), "guidance.returns"))
    _js_string(_or(approval.get("prompt"), ""), "approval.prompt")
    raw_context = guidance.get("context")
    context: list[str] = []
    if isinstance(raw_context, list):
        converted = [_js_string(item, "guidance.context") for item in raw_context]
        context = [item for item in converted if item][:50]
    if outcome is not None:
        _js_string(_or(outcome.get("result"), ""), "outcome.result")
        _js_string(_or(outcome.get("side_effect"), ""), "outcome.side_effect")
    examples = guidance.get("examples")
    return _Capability(
        enabled=cap.get("enabled") is True,
        scope=scope,
        risk_level=_dig(cap, "risk", "level"),
        approval_when=approval.get("when"),
        rate_per_min=rate_per_min,
        requires_subject=_dig(cap, "subject", "required") is True,
        readonly=execution.get("readonly") is True,
        timeout_present="timeout_ms" in execution,
        timeout_raw=execution.get("timeout_ms"),
        when_to_use=when_to_use,
        returns=returns,
        examples=examples if isinstance(examples, list) else [],
        context=context,
    )


@dataclass
class _Condition:
    param: str
    op: str
    value: object


@dataclass
class _Operation:
    """One ``paths[p][method]`` entry and what the hub made of it."""

    path: str
    method: str
    loc: str
    op: dict[str, Any]
    #: "disabled", "deprecated", "crashed", "dropped" or "kept"
    status: str = "disabled"
    cap: dict[str, Any] | None = None
    name: str | None = None
    raw_name: str | None = None
    description: str | None = None
    tool: CompiledTool | None = None


@dataclass
class _Arguments:
    """The arguments the hub's compiler collects for one operation."""

    #: the ``props`` object of the input schema (JS semantics for ``__proto__``)
    props: _Props = field(default_factory=_Props)
    #: argument name -> location
    param_in: dict[str, str] = field(default_factory=dict)
    #: required names as collected (possibly non-strings, possibly repeated)
    required: list[object] = field(default_factory=list)
    #: the ``application/json`` body schema, if it is an object
    body_schema: dict[str, Any] | None = None


_Hook = Callable[[_Operation, object], None]


class _Compiler:
    """Walks a normalized document exactly like the hub's OpenAPI compiler.

    Mirrors ``compileOpenApiTools`` in ``src/core/contracts/openapi-tools.ts``.
    """

    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.operations: list[_Operation] = []

    # helpers -----------------------------------------------------------------------
    def _report(self, code: str, loc: str, variant: str | None = None, **fields: object) -> None:
        self.findings.append(finding(code, loc, variant, **fields))

    # walk --------------------------------------------------------------------------
    def run(self, doc: dict[str, Any], hook: _Hook | None = None) -> None:
        """Compile every operation; ``hook(operation, path_item)`` sees each one.

        The two loops of ``compileOpenApiTools`` over ``paths`` and their methods.
        """
        paths = _or(doc.get("paths"), {})
        for path, item in _entries(paths):
            if item is None:
                self._report("crash_null_path_item", "-", key=path)
                continue
            for method, op in _entries(item):
                if not isinstance(op, dict):
                    continue  # scalars and arrays are never operations
                operation = _Operation(path, method, f"{method.upper()} {path}", op)
                self.operations.append(operation)
                try:
                    self._operation(operation)
                except _HubCrash as crash:
                    operation.status = "crashed"
                    self._report(crash.code, operation.loc, None, **crash.fields)
                if hook is not None:
                    hook(operation, item)

    def _operation(self, o: _Operation) -> None:
        """One operation, in the order of the hub's compile loop (``compileOpenApiTools``).

        Each step returns ``None`` (or reports an error) where the hub's loop
        moves on to the next operation.
        """
        ann = self._annotations(o)
        if ann is None:
            return
        args = self._arguments(o)
        if args is None:
            return
        m = o.method.upper()
        if m != "GET" and not args.props.own and _dig(args.body_schema, "type") != "object":
            self._report("write_without_schema", o.loc, method=m)
            return
        description = self._description(o, ann)
        conditions = self._confirm_when(ann.approval_when, o.loc)
        if conditions is None:
            return
        self._tool(o, ann, args, description, conditions)

    def _annotations(self, o: _Operation) -> _Capability | None:
        """The capability gate of ``compileOpenApiTools``: enabled, not deprecated,
        a scope, a numeric timeout. ``None``: the operation is not a tool."""
        op, loc = o.op, o.loc
        raw_cap = op.get(_CAP)
        cap = _record(raw_cap)
        ann = _read_capability(cap) if cap is not None else None
        if _CAP in op and cap is None:
            self._report("invalid_agent_capability", loc, value=_describe(raw_cap))
            return None
        if ann is None or not ann.enabled:
            return None
        o.cap = cap
        if op.get("deprecated") is True:
            o.status = "deprecated"
            self._report("deprecated", loc)
            return None
        o.status = "dropped"
        if not ann.scope:
            self._report("missing_scope", loc)
            return None
        if ann.timeout_present and not _is_number(ann.timeout_raw):
            self._report("invalid_timeout_type", loc, value=_describe(ann.timeout_raw))
            return None
        return ann

    def _arguments(self, o: _Operation) -> _Arguments | None:
        """The arguments ``compileOpenApiTools`` collects: inline parameters, then the
        properties of the ``application/json`` body. ``None``: an unsupported location."""
        args = _Arguments()
        if self._parameters(o, args):
            return None
        self._body(o, args)
        return args

    def _parameters(self, o: _Operation, args: _Arguments) -> bool:
        """The ``parameters`` loop of ``compileOpenApiTools``; True if a location is unsupported."""
        op, loc = o.op, o.loc
        props, param_in, required = args.props, args.param_in, args.required
        unsupported = False
        raw_params = _or(op.get("parameters"), [])
        if not isinstance(raw_params, (list, str)):
            raise _HubCrash("crash_parameters_not_iterable", value=_describe(raw_params))
        for prm in raw_params if isinstance(raw_params, list) else []:
            if not isinstance(prm, dict) or not _truthy(prm.get("name")):
                continue
            schema = prm.get("schema")
            if not _truthy(schema):
                continue
            where = _js_trim(prm["in"]) if isinstance(prm.get("in"), str) else ""
            name = _js_string(prm["name"], "a parameter name")
            if where not in _LOCATIONS:
                unsupported = True
                shown = json_stringify(where) if where else "(not declared)"
                self._report(
                    "unsupported_param_location", loc, "cookie" if where == "cookie" else None,
                    name=name, where=shown,
                )
                continue
            schema_description = schema.get("description") if isinstance(schema, dict) else None
            description = _or(prm.get("description"), schema_description)
            copied = dict(schema) if isinstance(schema, dict) else {}
            if description is not None:
                copied["description"] = description
            props[name] = copied
            if name != "__proto__":  # assigning a string to __proto__ is a no-op in JS
                param_in[name] = where
            if _truthy(prm.get("required")) or where == "path":
                required.append(prm["name"])
            if not _truthy(prm.get("description")) and not _truthy(schema_description):
                self._report("param_missing_description", loc, name=name)
        return unsupported

    def _body(self, o: _Operation, args: _Arguments) -> None:
        """The request body step of ``compileOpenApiTools``: its properties become arguments."""
        body = _dig(o.op, "requestBody", "content", "application/json", "schema")
        body_schema = args.body_schema = _record(body)
        if body_schema is not None and _truthy(body_schema.get("properties")):
            for key, value in _entries(body_schema["properties"]):
                args.props[key] = value
                if key != "__proto__":
                    args.param_in[key] = "body"
                if not _truthy(_dig(value, "description")):
                    self._report("param_missing_description", o.loc, "body", name=key)
            body_required = _or(body_schema.get("required"), [])
            if isinstance(body_required, str):
                args.required.extend(body_required)  # iterated by code point, like for...of
            elif isinstance(body_required, list):
                args.required.extend(body_required)
            else:
                raise _HubCrash("crash_body_required_not_iterable", value=_describe(body_required))

    def _description(self, o: _Operation, ann: _Capability) -> str:
        """The tool description ``compileOpenApiTools`` composes (summary, guidance, example)."""
        op, loc = o.op, o.loc
        summary, op_description = op.get("summary"), op.get("description")
        composed = _or(summary, _or(op_description, ann.scope))
        description = _js_string(composed, "summary/description")
        if not _truthy(summary) and not _truthy(op_description):
            self._report("missing_summary", loc)
        if not _truthy(op.get("operationId")):
            self._report("missing_operation_id", loc)
        if ann.when_to_use:
            description += "\u3002\u4f55\u65f6\u7528\uff1a" + ann.when_to_use
        if ann.returns:
            description += "\u3002\u8fd4\u56de\uff1a" + ann.returns
        example = ann.examples[0] if ann.examples else None
        if _truthy(example) and isinstance(example, (dict, list)):
            description += "\u3002\u793a\u4f8b\u53c2\u6570\uff1a" + json_stringify(example)
        o.description = description
        return description

    def _tool(
        self,
        o: _Operation,
        ann: _Capability,
        args: _Arguments,
        description: str,
        conditions: list[_Condition],
    ) -> None:
        """The ToolDefinition ``compileOpenApiTools`` builds, kept if it validates."""
        m = o.method.upper()
        op_id = o.op.get("operationId")
        if op_id is not None:
            raw_name = _js_string(op_id, "operationId")
        else:
            raw_name = _slug(o.method, o.path)
        name = _utf16_slice(raw_name, _MAX_NAME)
        o.raw_name, o.name = raw_name, name
        readonly = m == "GET" or ann.readonly
        # An unknown risk level falls back silently (deriveRisk); only its conversion can fail.
        _js_string(_or(ann.risk_level, ""), "risk.level")
        unique_required = _unique(args.required)

        before = len(self.findings)
        self._validate(
            o, m, name, description, ann, args.props, args.param_in, unique_required, conditions
        )
        if any(f.severity == "error" for f in self.findings[before:]):
            return
        o.status = "kept"
        o.tool = CompiledTool(
            name=name,
            method=m,
            path=o.path,
            scope=ann.scope,
            requires_subject=ann.requires_subject,
            readonly=readonly,
            required=tuple(k for k in unique_required if isinstance(k, str)),
            param_in={k: args.param_in[k] for k in js_property_order(args.param_in)},
            rate_limit_per_min=ann.rate_per_min,
        )

    def _confirm_when(self, raw: object, loc: str) -> list[_Condition] | None:
        """Parse approval.when; None means the operation is dropped.

        Mirrors ``parseConfirmWhen`` in ``src/core/contracts/openapi-tools.ts``.
        """
        if raw is None or raw is False:
            return []
        if not isinstance(raw, list):
            self._report("invalid_confirm_when", loc, value=_describe(raw))
            return None
        parsed: list[_Condition] = []
        for index, item in enumerate(raw):
            where = f"x-agent-capability.approval.when[{index}]"
            if not isinstance(item, dict):
                self._report(
                    "invalid_confirm_when",
                    loc,
                    "item",
                    where=where, value=_describe(item),
                )
                return None
            param = _js_trim(_js_string(_or(item.get("param"), ""), f"{where}.param"))
            op = _js_trim(_js_string(_or(item.get("op"), ""), f"{where}.op"))
            if not param:
                self._report("invalid_confirm_when_param", loc, where=where)
                return None
            if op not in _CONFIRM_OPS:
                self._report(
                    "invalid_confirm_when_op",
                    loc,
                    where=where, op=_label(_or(item.get("op"), "")),
                )
                return None
            if op != "exists" and "value" not in item:
                self._report("invalid_confirm_when_value", loc, where=where, op=op)
                return None
            parsed.append(_Condition(param, op, item.get("value")))
        return parsed[:20]

    def _validate(
        self,
        o: _Operation,
        m: str,
        name: str,
        description: str,
        ann: _Capability,
        props: _Props,
        param_in: dict[str, str],
        required: list[object],
        conditions: list[_Condition],
    ) -> None:
        """The hub's ToolDefinition validation, restricted to checks OpenAPI input can fail.

        Mirrors ``validateToolDefinition`` in ``src/core/contracts/tool-definition.ts``.
        """
        loc = o.loc
        if not _NAME_RE.fullmatch(name):
            self._report("invalid_name", loc, name=name)
        if m not in _METHODS:
            self._report("invalid_method", loc, method=m)
        if not o.path.startswith("/"):
            self._report("invalid_path", loc, value=o.path)
        if not _js_trim(_utf16_slice(description, _MAX_DESCRIPTION)):
            self._report("invalid_description", loc)
        if ann.rate_per_min is not None and not math.isfinite(ann.rate_per_min):
            self._report("invalid_rate_limit", loc)
        timeout = ann.timeout_raw if ann.timeout_present else 0
        if not _is_integer(timeout) or not 0 <= float(timeout) <= 600_000:  # type: ignore[arg-type]
            self._report("invalid_timeout", loc, value=_label(timeout))
        if any(not _js_trim(item) for item in ann.context):
            self._report("invalid_context", loc)
        if required:
            if any(not isinstance(k, str) for k in required):
                bad = next(k for k in required if not isinstance(k, str))
                self._report("invalid_input_schema_required", loc, value=_describe(bad))
            else:
                for key in required:
                    assert isinstance(key, str)
                    if key not in props:
                        self._report("required_param_missing_schema", loc, name=key)
        input_schema = {"type": "object", "properties": props}
        for index, cond in enumerate(conditions):
            self._check_condition(loc, index, cond, input_schema)
        placeholders = _PLACEHOLDER_RE.findall(o.path)
        for key in placeholders:
            if param_in.get(key) != "path":
                self._report("path_param_missing", loc, name=key)
        for key in js_property_order(param_in):
            if param_in[key] == "path" and key not in placeholders:
                self._report("path_param_not_in_path", loc, name=key)

    def _check_condition(
        self, loc: str, index: int, cond: _Condition, input_schema: dict[str, Any]
    ) -> None:
        """The checks ``validateToolDefinition`` makes of one approval condition."""
        where = f"approval.when[{index}]"
        schema = _schema_at(input_schema, cond.param)
        if schema is None:
            self._report("confirm_when_param_missing_schema", loc, where=where, param=cond.param)
            return
        types = _schema_types(schema)
        if not types:
            self._report("confirm_when_param_untyped", loc, where=where, param=cond.param)
            return
        op, value = cond.op, cond.value
        if op == "exists":
            return
        if op in _NUMERIC_OPS:
            numeric = "integer" if "integer" in types else "number"
            if not ({"number", "integer"} & set(types)) or not _matches_type(
                value, {"type": numeric}
            ):
                self._report(
                    "confirm_when_numeric_type",
                    loc,
                    where=where, op=op, value=_describe(value), numeric=numeric,
                )
            return
        if op == "in":
            if not isinstance(value, list) or not all(_matches_type(v, schema) for v in value):
                self._report("confirm_when_in_type", loc, where=where, types="/".join(types))
            return
        if op == "contains":
            if "string" in types and not isinstance(value, str):
                self._report("confirm_when_contains_type", loc, where=where)
            elif "string" not in types and "array" not in types:
                self._report("confirm_when_contains_type", loc, "argument", where=where)
            return
        if not _matches_type(value, schema):
            self._report(
                "confirm_when_value_type",
                loc,
                where=where, value=_describe(value), types="/".join(types),
            )


def _schema_at(input_schema: dict[str, Any], dotted: str) -> dict[str, Any] | None:
    """Resolve an approval ``param`` dot path through nested ``properties``.

    Every step is a JS property read, inherited properties included. Mirrors
    ``schemaAtPath`` in ``src/core/contracts/tool-definition.ts``.
    """
    current: object = input_schema
    for part in (p for p in dotted.split(".") if p):
        properties = _js_get(current, "properties")
        if isinstance(properties, _Props):
            current = properties[part]
        elif isinstance(properties, dict):
            current = _js_get(properties, part)
        else:
            return None
        if not isinstance(current, dict):
            return None
    return current if isinstance(current, dict) else None


def _too_deep() -> Finding:
    return finding("document_too_deep", "-")


def _prepare(document: object) -> tuple[dict[str, Any] | None, Finding | None]:
    """Normalize ``document``; on failure return the finding that explains why.

    Stands in for ``parseOpenApiSpec`` (``src/core/contracts/openapi-tools.ts``):
    the document is read as ``JSON.parse`` would have produced it.
    """
    try:
        doc = _normalize(document, set())
    except RecursionError:
        return None, _too_deep()
    except _NotJson as exc:
        reason = f"it contains {exc}"
    except Exception as exc:  # a hostile Mapping may raise anything
        reason = f"reading it failed ({type(exc).__name__})"
    else:
        if isinstance(doc, dict):
            return doc, None
        reason = f"its root is {_describe(doc)}, not an object"
    return None, finding("invalid_spec", "-", reason=reason)


def _compile(doc: dict[str, Any]) -> _Compiler:
    compiler = _Compiler()
    compiler.run(doc)
    return compiler


def compile_tools(document: object) -> list[CompiledTool]:
    """The tools the hub would keep, in document order (duplicates included)."""
    doc, _ = _prepare(document)
    if doc is None:
        return []
    try:
        return [o.tool for o in _compile(doc).operations if o.tool is not None]
    except RecursionError:
        return []


def compile_names(document: object) -> list[tuple[str, str, str]]:
    """``(name, METHOD, path)`` of every tool the hub would keep."""
    return [(t.name, t.method, t.path) for t in compile_tools(document)]
