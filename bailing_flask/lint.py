"""Lint a tool catalog the way BailingHub compiles it, plus what the hub leaves unsaid.

The hub turns our OpenAPI document into tools with its own compiler
(``CONTRACT.md`` §6). It drops operations with diagnostics that only show up
in the hub's console, ignores other mistakes without a word, and a handful of
inputs make it throw so that *no* tool of the source is available. We cannot
run that compiler from Python, so this module re-derives what it would say:
the same codes, severities and order, the same early exits (the first failing
step decides), evaluated with JavaScript semantics (``=== true``, ``{}`` is
truthy, ``String()`` of arrays, ``?? ""``, lengths in UTF-16 code units).
Those findings carry ``source="hub"``.

It then adds the hazards the hub accepts silently (unverifiable paths,
unsigned header parameters, colliding tool names, values that lose precision,
probe targets that cannot work, schema limits the compiler does not enforce);
those carry ``source="bailing"``.

Everything works on an already parsed JSON value and never raises: a catalog
is input we do not fully control, and the doctor must be able to lint garbage.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ._jsenc import js_property_order, js_string, json_stringify
from ._jsenc import js_trim as _js_trim
from ._jsenc import utf16_len as _utf16_len
from ._jsenc import utf16_slice as _utf16_slice

__all__ = [
    "Finding",
    "CompiledTool",
    "ProbeTarget",
    "lint_document",
    "compile_tools",
    "compile_names",
    "authz_probe_target",
]

Severity = Literal["error", "warning", "info"]
Origin = Literal["hub", "bailing"]


@dataclass(frozen=True)
class Finding:
    """One problem in a catalog.

    ``source="hub"`` findings are diagnostics the hub's compiler itself emits
    (``code`` is the hub's code); ``source="bailing"`` findings are hazards the
    hub does not report. ``path`` is ``"<METHOD> <path>"`` like the hub, or
    ``"-"`` for the document as a whole.
    """

    severity: Severity
    code: str
    path: str
    message: str
    suggestion: str | None = None
    source: Origin = "hub"


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


@dataclass(frozen=True)
class ProbeTarget:
    """Where the hub sends its authorization probe (``CONTRACT.md`` §5.2)."""

    mode: Literal["dedicated", "tool"]
    method: str
    path: str
    name: str


# --- constants -----------------------------------------------------------------

_CAP = "x-agent-capability"
_PROBE = "x-bailing-authz-probe"
_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
_LOCATIONS = frozenset({"query", "path", "header"})
_CONFIRM_OPS = frozenset({">", ">=", "<", "<=", "==", "!=", "in", "contains", "exists"})
_NUMERIC_OPS = frozenset({">", ">=", "<", "<="})
_RATE_WINDOWS = frozenset({"1s", "1m", "1h", "1d"})
_SIDE_EFFECTS = frozenset({"none", "read", "write", "notify", "external"})
_RISKS = frozenset({"low", "medium", "high"})
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_PLACEHOLDER_RE = re.compile(r"\{([^{}]+)\}")
_SLUG_RUN_RE = re.compile(r"[^a-zA-Z0-9]+")
_SLUG_EDGE_RE = re.compile(r"^_+|_+$")
_HTTP_TOKEN_RE = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_DECIMAL_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_RADIX_RE = re.compile(r"0(?:[xX][0-9a-fA-F]+|[oO][0-7]+|[bB][01]+)")
#: Names ``k in {}`` finds on every plain object (inherited from Object.prototype).
_INHERITED_NAMES = frozenset(
    {
        "__proto__",
        "__defineGetter__",
        "__defineSetter__",
        "__lookupGetter__",
        "__lookupSetter__",
        "constructor",
        "hasOwnProperty",
        "isPrototypeOf",
        "propertyIsEnumerable",
        "toLocaleString",
        "toString",
        "valueOf",
    }
)
_CLIENT_HEADERS = frozenset(
    {
        "content-type",
        "content-length",
        "host",
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "expect",
    }
)
_FIXED_FORMATS = frozenset({"uuid", "date", "date-time", "int32", "int64"})
_SCALAR_TYPES = frozenset({"integer", "number", "boolean"})
_MAX_EXACT_INTEGER = 2**53
_MAX_DESCRIPTION = 500
_MAX_NAME = 64
_MAX_PROBE_PATH = 512
_MAX_SCHEMA_DEPTH = 32


# --- JavaScript semantics --------------------------------------------------------


class _NotJson(Exception):
    """The value cannot have come out of ``JSON.parse``."""


class _HubCrash(Exception):
    """The hub's compiler would throw here, which aborts the whole compile."""

    def __init__(self, code: str, message: str, suggestion: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.suggestion = suggestion


def _to_double(value: int) -> float:
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _json_key(key: object) -> str:
    """Non-string keys become what ``json.dumps`` would have written (JS spelling)."""
    if isinstance(key, str):
        return key
    if isinstance(key, int) and not isinstance(key, bool):
        return _scalar_string(_to_double(key))
    if key is None or isinstance(key, (bool, float)):
        return _scalar_string(key)
    raise _NotJson(f"a mapping key of type {type(key).__name__}")


def _normalize(value: object, active: set[int]) -> object:
    """Return ``value`` as ``JSON.parse`` would have produced it.

    Objects come back with their keys in JS own-property order (array-index
    keys first), so iterating them matches ``Object.entries``; integers beyond
    2^53 become the double JS would hold. Cycles and non-JSON types raise
    :class:`_NotJson` (the hub reports ``invalid_spec`` for a cycle).
    """
    if value is None or isinstance(value, (bool, str, float)):
        return value
    if isinstance(value, int):
        return value if abs(value) <= _MAX_EXACT_INTEGER else _to_double(value)
    if isinstance(value, (Mapping, list, tuple)):
        ident = id(value)
        if ident in active:
            raise _NotJson("a reference cycle")
        active.add(ident)
        try:
            if isinstance(value, Mapping):
                built: dict[str, object] = {}
                for key, item in value.items():
                    built[_json_key(key)] = _normalize(item, active)
                order = js_property_order(built)
                return built if order == list(built) else {key: built[key] for key in order}
            return [_normalize(item, active) for item in value]
        finally:
            active.discard(ident)
    raise _NotJson(f"a value of type {type(value).__name__}")


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_integer(value: object) -> bool:
    """``Number.isInteger``."""
    if not _is_number(value):
        return False
    number = float(value)  # type: ignore[arg-type]
    return math.isfinite(number) and number.is_integer()


def _truthy(value: object) -> bool:
    """JS truthiness: ``{}`` and ``[]`` are true, ``0``, ``NaN`` and ``""`` false."""
    if value is None or value is False:
        return False
    if _is_number(value):
        number = float(value)  # type: ignore[arg-type]
        return number != 0 and not math.isnan(number)
    if isinstance(value, str):
        return value != ""
    return True


def _scalar_string(value: object) -> str:
    """``String(value)`` of a JSON scalar (arrays and objects are handled by the caller)."""
    return js_string(value)


def _js_string(value: object, what: str) -> str:
    """``String(value)``; raises :class:`_HubCrash` where JS throws.

    A JSON object with its *own* ``toString`` key cannot be converted to a
    primitive (the key is not callable and ``valueOf`` returns the object):
    ``String()`` throws ``TypeError`` and the hub's compile aborts.
    """
    if isinstance(value, dict):
        if "toString" in value:
            raise _HubCrash(
                "crash_to_string_key",
                f"{what} is (or contains) an object with its own \"toString\" key; the "
                "hub converts it with String(), which throws, so the whole catalog "
                "fails to compile and every tool of this source becomes unavailable.",
                "Use a plain string here, or rename the \"toString\" key.",
            )
        return "[object Object]"
    if isinstance(value, list):
        return ",".join("" if item is None else _js_string(item, what) for item in value)
    return _scalar_string(value)


def _label(value: object) -> str:
    """``String(value)`` for messages: never raises."""
    try:
        return _js_string(value, "")
    except _HubCrash:
        return "[object Object]"


def _or(value: object, default: object) -> object:
    """``value ?? default`` (JSON has no ``undefined``; a missing key reads as None)."""
    return default if value is None else value








def _utf16_units(text: str) -> list[str]:
    data = text.encode("utf-16-le", "surrogatepass")
    return [data[i : i + 2].decode("utf-16-le", "surrogatepass") for i in range(0, len(data), 2)]


def _string_to_number(text: str) -> float:
    text = _js_trim(text)
    if text == "":
        return 0.0
    body = text.lstrip("+-")
    if body == "Infinity" and len(text) - len(body) <= 1:
        return -math.inf if text.startswith("-") else math.inf
    if _RADIX_RE.fullmatch(text):
        return _to_double(int(text[2:], {"x": 16, "o": 8, "b": 2}[text[1].lower()]))
    if _DECIMAL_RE.fullmatch(text):
        return float(text)
    return math.nan


def _to_number(value: object, what: str) -> float:
    """``Number(value)``; an object with its own ``toString`` throws as in JS."""
    if value is None or value is False:
        return 0.0
    if value is True:
        return 1.0
    if _is_number(value):
        return float(value)  # type: ignore[arg-type]
    if isinstance(value, str):
        return _string_to_number(value)
    if isinstance(value, list):
        return _string_to_number(_js_string(value, what))
    _js_string(value, what)
    return math.nan


def _js_round(number: float) -> float:
    return math.floor(number + 0.5)


def _record(value: object) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _entries(value: object) -> list[tuple[str, Any]]:
    """``Object.entries`` (the caller handles ``null``, which throws in JS)."""
    if isinstance(value, dict):
        return list(value.items())
    if isinstance(value, list):
        return [(str(index), item) for index, item in enumerate(value)]
    if isinstance(value, str):
        return [(str(index), unit) for index, unit in enumerate(_utf16_units(value))]
    return []


def _dig(value: object, *keys: str) -> object:
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _schema_types(schema: Mapping[str, Any]) -> list[str]:
    raw = schema.get("type")
    if isinstance(raw, list):
        return [item for item in raw if isinstance(item, str)]
    return [raw] if isinstance(raw, str) else []


def _matches_type(value: object, schema: Mapping[str, Any]) -> bool:
    """The hub's JSON-type check for approval values (no enum/format checks)."""
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


def _describe(value: object) -> str:
    """A short, bounded rendering of a JSON value for messages."""
    if isinstance(value, dict):
        return f"an object with {len(value)} key(s)"
    if isinstance(value, list):
        return f"an array of {len(value)} item(s)"
    kind = "boolean" if isinstance(value, bool) else "number" if _is_number(value) else "null"
    if isinstance(value, str):
        kind = "string"
    text = json_stringify(value)
    return f"{kind} {text if len(text) <= 60 else text[:57] + '...'}"


def _slug(method: str, path: str) -> str:
    return _SLUG_EDGE_RE.sub("", _SLUG_RUN_RE.sub("_", f"{method}_{path}"))


# --- the hub's compiler, step by step ------------------------------------------------


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
    so a ``String()`` that throws here breaks the compile regardless of ``enabled``."""
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


_Hook = Callable[[_Operation, object], None]


class _Compiler:
    """Walks a normalized document exactly like the hub's OpenAPI compiler."""

    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.operations: list[_Operation] = []

    # helpers -----------------------------------------------------------------------
    def _hub(
        self, severity: Severity, code: str, loc: str, message: str, suggestion: str | None = None
    ) -> None:
        self.findings.append(Finding(severity, code, loc, message, suggestion, "hub"))

    def _ours(
        self, severity: Severity, code: str, loc: str, message: str, suggestion: str | None = None
    ) -> None:
        self.findings.append(Finding(severity, code, loc, message, suggestion, "bailing"))

    # walk --------------------------------------------------------------------------
    def run(self, doc: dict[str, Any], hook: _Hook | None = None) -> None:
        """Compile every operation; ``hook(operation, path_item)`` sees each one."""
        paths = _or(doc.get("paths"), {})
        for path, item in _entries(paths):
            if item is None:
                self._ours(
                    "error",
                    "crash_null_path_item",
                    "-",
                    f"paths[{path!r}] is null; the hub's compiler throws on it, so the whole "
                    "catalog fails to compile and every tool of this source becomes unavailable.",
                    "Remove the path or give it an object of operations.",
                )
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
                    self._ours("error", crash.code, operation.loc, crash.message, crash.suggestion)
                if hook is not None:
                    hook(operation, item)

    def _operation(self, o: _Operation) -> None:
        op, loc, m = o.op, o.loc, o.method.upper()
        raw_cap = op.get(_CAP)
        cap = _record(raw_cap)
        ann = _read_capability(cap) if cap is not None else None
        if _CAP in op and cap is None:
            self._hub(
                "error",
                "invalid_agent_capability",
                loc,
                f"x-agent-capability must be an object, got {_describe(raw_cap)}; "
                "the operation is not exposed.",
                "Give the operation an x-agent-capability object, or remove the key.",
            )
            return
        if ann is None or not ann.enabled:
            return
        o.cap = cap
        if op.get("deprecated") is True:
            o.status = "deprecated"
            self._hub(
                "error",
                "deprecated",
                loc,
                "The operation is marked deprecated: true, so the hub does not expose it.",
                "Remove deprecated (or set enabled: false) if the tool should be available.",
            )
            return
        o.status = "dropped"
        scope = ann.scope
        if not scope:
            self._hub(
                "error",
                "missing_scope",
                loc,
                "x-agent-capability.scope is missing or blank; the operation is not exposed.",
                "Set a stable permission label, e.g. scope: tenant.staff.read, and allow it "
                "in the route.",
            )
            return
        if ann.timeout_present and not _is_number(ann.timeout_raw):
            self._hub(
                "error",
                "invalid_timeout_type",
                loc,
                "x-agent-capability.execution.timeout_ms must be a JSON number, got "
                f"{_describe(ann.timeout_raw)}; the operation is not exposed.",
                "Write timeout_ms: 5000 without quotes, or remove it to inherit the "
                "source's timeout.",
            )
            return

        props = _Props()
        param_in: dict[str, str] = {}
        required: list[object] = []
        unsupported = False
        raw_params = _or(op.get("parameters"), [])
        if not isinstance(raw_params, (list, str)):
            raise _HubCrash(
                "crash_parameters_not_iterable",
                f"parameters is {_describe(raw_params)}, not an array; the hub iterates it "
                "and throws, so the whole catalog fails to compile.",
                "Make parameters a list of parameter objects.",
            )
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
                self._hub(
                    "error",
                    "unsupported_param_location",
                    loc,
                    f"Parameter {name!r} has in: {shown}; only query, path and header are "
                    "supported, so the operation is not exposed.",
                    "Identity and session data come from the signed headers; put business "
                    "parameters in query/path/header or an application/json requestBody."
                    if where == "cookie"
                    else "Declare in: query, in: path or in: header, or move the value into "
                    "an application/json requestBody.",
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
                self._hub(
                    "warning",
                    "param_missing_description",
                    loc,
                    f"Parameter {name!r} has no description (neither on the parameter nor on "
                    "its schema); the model fills it less reliably.",
                    "Add a description, and an enum, format or default where one applies.",
                )
        if unsupported:
            return

        body = _dig(op, "requestBody", "content", "application/json", "schema")
        body_schema = _record(body)
        if body_schema is not None and _truthy(body_schema.get("properties")):
            for key, value in _entries(body_schema["properties"]):
                props[key] = value
                if key != "__proto__":
                    param_in[key] = "body"
                if not _truthy(_dig(value, "description")):
                    self._hub(
                        "warning",
                        "param_missing_description",
                        loc,
                        f"Request body property {key!r} has no description; the model fills "
                        "it less reliably.",
                        "Add a description, and an enum, format or default where one applies.",
                    )
            body_required = _or(body_schema.get("required"), [])
            if isinstance(body_required, str):
                required.extend(body_required)  # iterated by code point, like for...of
            elif isinstance(body_required, list):
                required.extend(body_required)
            else:
                raise _HubCrash(
                    "crash_body_required_not_iterable",
                    f"The request body schema's required is {_describe(body_required)}, not "
                    "an array; the hub iterates it and throws, so the whole catalog fails to "
                    "compile.",
                    "Make required a list of property names.",
                )
        if m != "GET" and not props.own and _dig(body_schema, "type") != "object":
            self._hub(
                "error",
                "write_without_schema",
                loc,
                f"{m} operation declares no parameters and no application/json body "
                "properties, and its body schema is not type: object; the hub refuses to "
                "expose a write without a schema.",
                "Declare parameters or an application/json requestBody schema (a "
                "zero-argument write may use {\"type\": \"object\"}).",
            )
            return

        summary, op_description = op.get("summary"), op.get("description")
        description = _js_string(_or(summary, _or(op_description, scope)), "summary/description")
        if not _truthy(summary) and not _truthy(op_description):
            self._hub(
                "warning",
                "missing_summary",
                loc,
                "No summary or description; the tool description falls back to the scope.",
                "Add an agent-oriented summary and guidance.when_to_use.",
            )
        if not _truthy(op.get("operationId")):
            self._hub(
                "warning",
                "missing_operation_id",
                loc,
                "No operationId; the tool name is derived from method and path and changes "
                "whenever the path does.",
                "Set a stable operationId; it becomes the tool name.",
            )
        if ann.when_to_use:
            description += "\u3002\u4f55\u65f6\u7528\uff1a" + ann.when_to_use
        if ann.returns:
            description += "\u3002\u8fd4\u56de\uff1a" + ann.returns
        example = ann.examples[0] if ann.examples else None
        if _truthy(example) and isinstance(example, (dict, list)):
            description += "\u3002\u793a\u4f8b\u53c2\u6570\uff1a" + json_stringify(example)
        o.description = description

        conditions = self._confirm_when(ann.approval_when, loc)
        if conditions is None:
            return

        op_id = op.get("operationId")
        if op_id is not None:
            raw_name = _js_string(op_id, "operationId")
        else:
            raw_name = _slug(o.method, o.path)
        name = _utf16_slice(raw_name, _MAX_NAME)
        o.raw_name, o.name = raw_name, name
        readonly = m == "GET" or ann.readonly
        # An unknown risk level falls back silently; only its conversion can fail.
        _js_string(_or(ann.risk_level, ""), "risk.level")
        unique_required = _unique(required)

        before = len(self.findings)
        self._validate(o, m, name, description, ann, props, param_in, unique_required, conditions)
        if any(f.severity == "error" for f in self.findings[before:]):
            return
        o.status = "kept"
        o.tool = CompiledTool(
            name=name,
            method=m,
            path=o.path,
            scope=scope,
            requires_subject=ann.requires_subject,
            readonly=readonly,
            required=tuple(k for k in unique_required if isinstance(k, str)),
            param_in={k: param_in[k] for k in js_property_order(param_in)},
            rate_limit_per_min=ann.rate_per_min,
        )

    def _confirm_when(self, raw: object, loc: str) -> list[_Condition] | None:
        """Parse approval.when; None means the operation is dropped."""
        if raw is None or raw is False:
            return []
        if not isinstance(raw, list):
            self._hub(
                "error",
                "invalid_confirm_when",
                loc,
                f"x-agent-capability.approval.when must be an array, got {_describe(raw)}.",
                'Example: [{"param": "amount", "op": ">", "value": 1000}]',
            )
            return None
        parsed: list[_Condition] = []
        for index, item in enumerate(raw):
            where = f"x-agent-capability.approval.when[{index}]"
            if not isinstance(item, dict):
                self._hub(
                    "error",
                    "invalid_confirm_when",
                    loc,
                    f"{where} must be an object, got {_describe(item)}.",
                    'Example: {"param": "amount", "op": ">", "value": 1000}',
                )
                return None
            param = _js_trim(_js_string(_or(item.get("param"), ""), f"{where}.param"))
            op = _js_trim(_js_string(_or(item.get("op"), ""), f"{where}.op"))
            if not param:
                self._hub(
                    "error",
                    "invalid_confirm_when_param",
                    loc,
                    f"{where}.param is missing or blank.",
                    "Name the argument to test, e.g. \"amount\" or \"order.total\".",
                )
                return None
            if op not in _CONFIRM_OPS:
                self._hub(
                    "error",
                    "invalid_confirm_when_op",
                    loc,
                    f"{where}.op {_label(_or(item.get('op'), ''))!r} is not supported.",
                    "Use one of > >= < <= == != in contains exists.",
                )
                return None
            if op != "exists" and "value" not in item:
                self._hub(
                    "error",
                    "invalid_confirm_when_value",
                    loc,
                    f"{where} uses op {op!r} but has no value.",
                    "Add a value (only op: exists needs none).",
                )
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
        """The hub's ToolDefinition validation, restricted to checks OpenAPI input can fail."""
        loc = o.loc
        if not _NAME_RE.fullmatch(name):
            self._hub(
                "error",
                "invalid_name",
                loc,
                f"Tool name {name!r} (operationId, or the method+path slug, cut to 64 "
                "UTF-16 units) does not match ^[A-Za-z_][A-Za-z0-9_]{0,63}$.",
                "Use an operationId of letters, digits and underscores that starts with a "
                "letter or underscore (no '.' or '-').",
            )
        if m not in _METHODS:
            self._hub(
                "error",
                "invalid_method",
                loc,
                f"{m!r} is not an HTTP method the hub can call.",
                "Use get, post, put, patch, delete or options.",
            )
        if not o.path.startswith("/"):
            self._hub(
                "error",
                "invalid_path",
                loc,
                f"Path {o.path!r} does not start with '/'.",
                "Write the path key as /resource/...",
            )
        if not _js_trim(_utf16_slice(description, _MAX_DESCRIPTION)):
            self._hub(
                "error",
                "invalid_description",
                loc,
                "The composed tool description (summary, else description, else scope, plus "
                "guidance, cut to 500 UTF-16 units) is blank.",
                "Write a one-sentence summary of what the tool does.",
            )
        if ann.rate_per_min is not None and not math.isfinite(ann.rate_per_min):
            self._hub(
                "error",
                "invalid_rate_limit",
                loc,
                "execution.rate_limit.count is so large that the per-minute limit overflows.",
                "Use a realistic count.",
            )
        timeout = ann.timeout_raw if ann.timeout_present else 0
        if not _is_integer(timeout) or not 0 <= float(timeout) <= 600_000:  # type: ignore[arg-type]
            self._hub(
                "error",
                "invalid_timeout",
                loc,
                f"execution.timeout_ms {_label(timeout)} is not an integer between 0 and "
                "600000.",
                "Use whole milliseconds from 1 to 600000 (0 inherits the source's timeout).",
            )
        if any(not _js_trim(item) for item in ann.context):
            self._hub(
                "error",
                "invalid_context",
                loc,
                "guidance.context contains a whitespace-only entry.",
                "Remove blank entries from guidance.context.",
            )
        if required:
            if any(not isinstance(k, str) for k in required):
                bad = next(k for k in required if not isinstance(k, str))
                self._hub(
                    "error",
                    "invalid_input_schema_required",
                    loc,
                    f"The required list contains a non-string ({_describe(bad)}); names in "
                    "required (and parameter names that are required or in: path) must be "
                    "strings.",
                    "List property names as strings.",
                )
            else:
                for key in required:
                    assert isinstance(key, str)
                    if key not in props:
                        self._hub(
                            "error",
                            "required_param_missing_schema",
                            loc,
                            f"Required argument {key!r} is not among the declared "
                            "properties/parameters.",
                            "Declare a schema for every required name, or remove it from "
                            "required.",
                        )
        input_schema = {"type": "object", "properties": props}
        for index, cond in enumerate(conditions):
            self._check_condition(loc, index, cond, input_schema)
        placeholders = _PLACEHOLDER_RE.findall(o.path)
        for key in placeholders:
            if param_in.get(key) != "path":
                self._hub(
                    "error",
                    "path_param_missing",
                    loc,
                    f"Path placeholder {{{key}}} is not declared as an in: path parameter of "
                    "this operation (path-level and $ref parameters are not read).",
                    f"Add {{\"name\": \"{key}\", \"in\": \"path\", \"required\": true, "
                    "\"schema\": {...}} to the operation's parameters.",
                )
        for key in js_property_order(param_in):
            if param_in[key] == "path" and key not in placeholders:
                self._hub(
                    "warning",
                    "path_param_not_in_path",
                    loc,
                    f"Parameter {key!r} is in: path but the path has no {{{key}}} placeholder.",
                    "Fix the placeholder or declare the parameter in query/header/body.",
                )

    def _check_condition(
        self, loc: str, index: int, cond: _Condition, input_schema: dict[str, Any]
    ) -> None:
        where = f"approval.when[{index}]"
        schema = _schema_at(input_schema, cond.param)
        if schema is None:
            self._hub(
                "error",
                "confirm_when_param_missing_schema",
                loc,
                f"{where}.param {cond.param!r} does not resolve to a declared argument "
                "(dot paths follow nested properties).",
                "Point param at a declared parameter or body property.",
            )
            return
        types = _schema_types(schema)
        if not types:
            self._hub(
                "error",
                "confirm_when_param_untyped",
                loc,
                f"{where}.param {cond.param!r} has no JSON Schema type to compare against.",
                "Give the argument an explicit type.",
            )
            return
        op, value = cond.op, cond.value
        if op == "exists":
            return
        if op in _NUMERIC_OPS:
            numeric = "integer" if "integer" in types else "number"
            if not ({"number", "integer"} & set(types)) or not _matches_type(
                value, {"type": numeric}
            ):
                self._hub(
                    "error",
                    "confirm_when_numeric_type",
                    loc,
                    f"{where} uses {op} but the argument is not number/integer or the value "
                    f"({_describe(value)}) is not a finite {numeric}.",
                    "Declare the argument as number or integer and use a JSON number value.",
                )
            return
        if op == "in":
            if not isinstance(value, list) or not all(_matches_type(v, schema) for v in value):
                self._hub(
                    "error",
                    "confirm_when_in_type",
                    loc,
                    f"{where} uses in, but the value is not an array of {'/'.join(types)} "
                    "values.",
                    'E.g. ["pending", "blocked"] for a string argument, [1, 2] for a number.',
                )
            return
        if op == "contains":
            if "string" in types and not isinstance(value, str):
                self._hub(
                    "error",
                    "confirm_when_contains_type",
                    loc,
                    f"{where} uses contains on a string argument, so the value must be a "
                    "string.",
                    'E.g. {"param": "reason", "op": "contains", "value": "refund"}',
                )
            elif "string" not in types and "array" not in types:
                self._hub(
                    "error",
                    "confirm_when_contains_type",
                    loc,
                    f"{where} uses contains, which needs a string or array argument.",
                    "Use == or in, or declare the argument as string or array.",
                )
            return
        if not _matches_type(value, schema):
            self._hub(
                "error",
                "confirm_when_value_type",
                loc,
                f"{where} compares with {_describe(value)}, which does not have the "
                f"argument's type ({'/'.join(types)}); the hub never coerces.",
                "Use a value of the same JSON type as the argument.",
            )


#: Stand-in for Object.prototype: an object with no type and no properties.
_OBJECT_PROTOTYPE: dict[str, Any] = {}
#: A property read that finds nothing (JS ``undefined``).
_ABSENT = object()
#: An inherited method: ``in`` finds it, but it is never a schema.
_METHOD = object()
_ARRAY_METHODS = frozenset(
    "length constructor at concat copyWithin entries every fill filter find findIndex "
    "findLast findLastIndex flat flatMap forEach includes indexOf join keys lastIndexOf map "
    "pop push reduce reduceRight reverse shift slice some sort splice toLocaleString "
    "toReversed toSorted toSpliced toString unshift values with".split()
)


def _is_index(key: str) -> bool:
    return key.isascii() and key.isdigit() and str(int(key)) == key


def _js_get(target: object, key: str) -> object:
    """``target[key]`` on a JSON value, inherited properties included."""
    if target is _OBJECT_PROTOTYPE:
        return None if key == "__proto__" else _METHOD if key in _INHERITED_NAMES else _ABSENT
    if isinstance(target, dict):
        if key in target:
            return target[key]
        if key == "__proto__":
            return _OBJECT_PROTOTYPE
    elif isinstance(target, list):
        if key == "length":
            return len(target)
        if _is_index(key) and int(key) < len(target):
            return target[int(key)]
        if key in _ARRAY_METHODS or key == "__proto__":
            return _METHOD
    else:
        return _ABSENT
    return _METHOD if key in _INHERITED_NAMES else _ABSENT


class _Props:
    """The compiler's ``props`` object, where assigning ``__proto__`` replaces
    the prototype instead of adding an argument (so later lookups and ``in``
    checks see the assigned value's keys)."""

    def __init__(self) -> None:
        self.own: dict[str, Any] = {}
        self.proto: object = _OBJECT_PROTOTYPE

    def __setitem__(self, key: str, value: object) -> None:
        if key != "__proto__":
            self.own[key] = value
        elif value is None or isinstance(value, (dict, list)):
            self.proto = value

    def __getitem__(self, key: str) -> object:
        if key in self.own:
            return self.own[key]
        if self.proto is None:
            return _ABSENT
        if key == "__proto__" and not (isinstance(self.proto, dict) and key in self.proto):
            return self.proto
        return _js_get(self.proto, key)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self[key] is not _ABSENT


def _unique(values: list[object]) -> list[object]:
    """``[...new Set(values)]``: SameValueZero, objects by identity."""
    seen: set[object] = set()
    out: list[object] = []
    for value in values:
        if isinstance(value, bool):
            key: object = ("bool", value)
        elif _is_number(value):
            number = float(value)  # type: ignore[arg-type]
            key = ("nan",) if math.isnan(number) else ("number", number)
        elif isinstance(value, str) or value is None:
            key = ("scalar", value)
        else:
            key = ("object", id(value))
        if key not in seen:
            seen.add(key)
            out.append(value)
    return out


def _schema_at(input_schema: dict[str, Any], dotted: str) -> dict[str, Any] | None:
    """Resolve an approval ``param`` dot path through nested ``properties``.

    Every step is a JS property read, inherited properties included.
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


# --- hazards the hub does not report ------------------------------------------------


def _url_problems(template: str) -> tuple[list[str], list[str]]:
    """(errors, warnings) for a path template the WHATWG URL parser would alter.

    The hub signs the template as written but sends what ``new URL()`` makes of
    it, so any rewrite makes the call unverifiable (``CONTRACT.md`` §3.6, T4).
    """
    errors: list[str] = []
    warnings: list[str] = []
    if "#" in template:
        errors.append("'#' starts a fragment: everything after it is never sent")
    path, has_query, query = template.partition("?")
    bare = _PLACEHOLDER_RE.sub("x", path)
    rewritten = sorted(
        {
            ch
            for ch in bare
            # '^' joined the WHATWG path set in 2025 (whatwg/url#846); newer Node encodes it
            if ord(ch) < 0x20 or ord(ch) > 0x7E or ch in ' "<>^`{}\\'
        }
    )
    if rewritten:
        shown = ", ".join(repr(ch) for ch in rewritten)
        errors.append(f"characters the URL parser percent-encodes, drops or rewrites ({shown})")
    segments = re.split(r"[/\\]", path)
    if any(seg.lower() in {".", "..", "%2e", ".%2e", "%2e.", "%2e%2e"} for seg in segments):
        errors.append("a '.' or '..' segment, which the URL parser removes")
    if has_query:
        bad_query = sorted(
            {ch for ch in query if ord(ch) <= 0x20 or ord(ch) > 0x7E or ch in "\"<>'"}
        )
        if bad_query:
            errors.append(
                "query characters the URL parser percent-encodes ("
                + ", ".join(repr(ch) for ch in bad_query)
                + ")"
            )
        warnings.append("a '?' in the template: the hub appends its own query after it")
    if "%" in path:
        warnings.append("a '%' escape, which servers decode before routing")
    if "//" in path:
        warnings.append("an empty segment ('//'), which proxies often merge")
    return errors, warnings


def _walk_integers(schema: object, where: str, depth: int = 0) -> list[str]:
    """Names of integer schemas (nested properties/items included) with no safe bound."""
    if not isinstance(schema, dict) or depth > _MAX_SCHEMA_DEPTH:
        return []
    found: list[str] = []
    if "integer" in _schema_types(schema):
        maximum = schema.get("maximum")
        if not _is_number(maximum):
            maximum = schema.get("exclusiveMaximum")
        minimum = schema.get("minimum")
        unbounded = not _is_number(maximum) or float(maximum) > _MAX_EXACT_INTEGER  # type: ignore[arg-type]
        if unbounded or (_is_number(minimum) and float(minimum) < -_MAX_EXACT_INTEGER):  # type: ignore[arg-type]
            found.append(where)
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for key, sub in properties.items():
            found += _walk_integers(sub, f"{where}.{key}", depth + 1)
    if isinstance(schema.get("items"), dict):
        found += _walk_integers(schema["items"], f"{where}[]", depth + 1)
    return found


def _comma_free(items: Mapping[str, Any]) -> bool:
    """Whether every string the item schema allows is free of ``,`` (as far as we can tell)."""
    enum = items.get("enum")
    if isinstance(enum, list) and enum:
        return all(not (isinstance(v, str) and "," in v) for v in enum)
    if "const" in items:
        return not (isinstance(items["const"], str) and "," in items["const"])
    return items.get("format") in ("uuid", "date", "date-time")


def _is_free_text(schema: Mapping[str, Any]) -> bool:
    if (isinstance(schema.get("enum"), list) and schema["enum"]) or "const" in schema:
        return False
    types = _schema_types(schema)
    if types and all(t in _SCALAR_TYPES for t in types):
        return False
    return schema.get("format") not in _FIXED_FORMATS and not isinstance(
        schema.get("pattern"), str
    )


class _Hazards:
    """Hazards the hub accepts silently, per operation and per document."""

    def __init__(self, findings: list[Finding]) -> None:
        self.findings = findings

    def add(
        self, severity: Severity, code: str, loc: str, message: str, suggestion: str | None = None
    ) -> None:
        self.findings.append(Finding(severity, code, loc, message, suggestion, "bailing"))

    # per operation -------------------------------------------------------------------
    def disabled(self, o: _Operation) -> None:
        cap = _record(o.op.get(_CAP))
        if cap is not None and "enabled" in cap and not isinstance(cap["enabled"], bool):
            self.add(
                "warning",
                "enabled_not_boolean",
                o.loc,
                f"x-agent-capability.enabled is {_describe(cap['enabled'])}; the hub exposes "
                "an operation only for the JSON boolean true, so this one is silently hidden.",
                "Write enabled: true (or false) without quotes.",
            )

    def operation(self, o: _Operation, path_item: object) -> None:
        loc, m = o.loc, o.method.upper()
        cap = o.cap or {}
        if m == "HEAD":
            self.add(
                "error",
                "head_operation",
                loc,
                "HEAD tools always fail: the hub sends a JSON body on every non-GET call and "
                "its HTTP client refuses a body on HEAD.",
                "Expose a GET operation instead.",
            )
        self._scope(loc, cap.get("scope"))
        self._path(o)
        if isinstance(path_item, dict) and path_item.get("parameters"):
            self.add(
                "warning",
                "path_level_parameters_ignored",
                loc,
                "The path item declares parameters, but the hub never merges path-level "
                "parameters into operations; they are invisible to the tool.",
                "Repeat the parameters in the operation's own parameters list.",
            )
        declared = self._parameters(o)
        self._body(o, m, declared)
        self._capability(o, cap)
        if o.raw_name is not None and _utf16_len(o.raw_name) > _MAX_NAME:
            self.add(
                "warning",
                "name_truncated",
                loc,
                f"The tool name is {_utf16_len(o.raw_name)} UTF-16 units long; the hub cuts "
                f"it to {o.name!r}, which may collide with another tool.",
                "Use an operationId of at most 64 characters.",
            )
        if o.description is not None and _utf16_len(o.description) > _MAX_DESCRIPTION:
            self.add(
                "warning",
                "description_truncated",
                loc,
                f"The composed description is {_utf16_len(o.description)} UTF-16 units; the "
                "hub keeps the first 500, so the end of the guidance or the example is lost.",
                "Shorten summary, guidance.when_to_use, guidance.returns or the first example.",
            )

    def _scope(self, loc: str, raw: object) -> None:
        scope = _js_trim(_label(_or(raw, "")))
        wide = sorted({ch for ch in scope if ord(ch) > 0xFF})
        if wide:
            self.add(
                "error",
                "scope_not_latin1",
                loc,
                f"The scope contains characters above U+00FF ({''.join(wide[:5])}); it is sent "
                "in the X-Bailing-Tool-Scope header, so the hub's HTTP client throws and every "
                "call of this tool fails.",
                "Use an ASCII scope such as order.refund.write.",
            )
        if any(ch in scope for ch in "\r\n\0"):
            self.add(
                "error",
                "scope_invalid_header_value",
                loc,
                "The scope contains CR, LF or NUL; it is not a valid header value, so every "
                "call of this tool fails.",
                "Use an ASCII scope such as order.refund.write.",
            )
        if len(scope) > 191:
            self.add(
                "warning",
                "scope_too_long",
                loc,
                f"The scope is {len(scope)} characters; the capability schema allows 191.",
                "Use a shorter permission label.",
            )

    def _path(self, o: _Operation) -> None:
        errors, warnings = _url_problems(o.path)
        if errors:
            self.add(
                "error",
                "path_template_rewritten",
                o.loc,
                "The path template contains " + "; ".join(errors) + ". The hub signs the "
                "template as written but the URL on the wire differs, so no call can be "
                "verified.",
                "Use only ASCII letters, digits and - _ ~ . in literal path segments.",
            )
        if warnings:
            self.add(
                "warning",
                "path_template_fragile",
                o.loc,
                "The path template contains " + "; ".join(warnings) + ".",
                "Keep path templates to plain ASCII segments and {placeholders}.",
            )

    def _parameters(self, o: _Operation) -> dict[str, str]:
        """Check declared parameters; returns name -> location of the usable ones."""
        loc = o.loc
        raw = o.op.get("parameters")
        declared: dict[str, str] = {}
        if isinstance(raw, str) and raw:
            self.add(
                "warning",
                "parameters_ignored",
                loc,
                "parameters is a string; the hub reads no parameter from it.",
                "Make parameters a list of parameter objects.",
            )
        for index, prm in enumerate(raw if isinstance(raw, list) else []):
            reason = self._ignored_reason(prm)
            if reason:
                self.add(
                    "warning",
                    "param_ignored",
                    loc,
                    f"parameters[{index}] is silently ignored by the hub: {reason}.",
                    "Inline every parameter with a name, an in and a schema.",
                )
                continue
            name = _label(prm["name"])
            where = _js_trim(prm["in"]) if isinstance(prm.get("in"), str) else ""
            schema = prm["schema"] if isinstance(prm["schema"], dict) else {}
            if name == "__proto__":
                self.add(
                    "error",
                    "reserved_param_name",
                    loc,
                    "A parameter named __proto__ is swallowed by the hub's JavaScript objects: "
                    "it never becomes an argument.",
                    "Rename the parameter.",
                )
            if "required" in prm and not isinstance(prm["required"], bool):
                self.add(
                    "warning",
                    "param_required_not_boolean",
                    loc,
                    f"Parameter {name!r} has required: {_describe(prm['required'])}; the hub "
                    "uses JS truthiness, so e.g. \"false\" makes it required.",
                    "Write required: true or false without quotes.",
                )
            if where not in _LOCATIONS:
                continue
            declared[name] = where
            types = _schema_types(schema)
            if {"object", "array"} & set(types):
                self._non_scalar(loc, where, name, schema, types)
            for field_name in _walk_integers(schema, name):
                self._unsafe_integer(loc, field_name)
            if where == "header":
                self._header(loc, name)
            if where == "path" and _is_free_text(schema):
                self.add(
                    "warning",
                    "free_text_path_param",
                    loc,
                    f"Path parameter {name!r} accepts free text; values containing '/', '?' or "
                    "equal to '.'/'..' break routing (%2F is decoded by WSGI) or the signature.",
                    "Give it an enum, a pattern, format: uuid or a numeric type, or move it "
                    "to the query.",
                )
        return declared

    def _non_scalar(
        self, loc: str, where: str, name: str, schema: Mapping[str, Any], types: list[str]
    ) -> None:
        """An array or object outside the body: say what the hub sends and what arrives.

        The hub sends ``String(value)``: the items of an array joined with
        ``,`` (nested arrays flattened, ``null`` items empty), an object as
        ``[object Object]``. An array of scalars in the query works (the app
        splits it on ``,``) unless an item may contain ``,``.
        """
        items = schema.get("items") if "array" in types else None
        item_types = _schema_types(items) if isinstance(items, dict) else []
        scalar_items = "object" not in types and bool(item_types) and all(
            t in _SCALAR_TYPES or t == "string" for t in item_types
        )
        if where == "query" and scalar_items:
            if "string" in item_types and not _comma_free(items):  # type: ignore[arg-type]
                self.add(
                    "warning",
                    "array_query_item_comma",
                    loc,
                    f"Query parameter {name!r} is an array of strings. The hub sends String(value), "
                    f"the items joined with ',' in one pair: [\"a,b\",\"c\"] is sent as "
                    f"{name}=a%2Cb%2Cc and the app receives the text 'a,b,c', which bailing_flask "
                    "splits into [\"a\",\"b\",\"c\"]: an item containing ',' cannot travel. "
                    "[] and [\"\"] both arrive as an empty value (the empty array).",
                    "Give the items an enum (or format uuid/date) without ',', or move the list "
                    "into the JSON body of a non-GET tool.",
                )
            return
        if "array" in types and where in ("query", "path"):
            shape = "/".join(item_types) if item_types else "untyped"
            sent = (f"{name}=a%2Cb%2Cc, and the app receives the text 'a,b,c'" if where == "query"
                    else "the one path segment a%2Cb%2Cc, which the router hands over as the text "
                         "'a,b,c'")
            if scalar_items:  # a path parameter
                detail = (f"[\"a\",\"b\",\"c\"] is sent as {sent}, not a list (an item "
                          "containing ',' cannot be told apart either)")
            else:
                detail = (f"nested arrays are flattened ([[\"a\",\"b\"],[\"c\"]] is sent as "
                          f"{sent}) and objects become [object Object]")
            self.add(
                "warning",
                "non_scalar_param",
                loc,
                f"{where.capitalize()} parameter {name!r} is an array of {shape} items; the hub "
                f"sends String(value): {detail}.",
                "Declare a scalar type (or, in the query, an array of strings, integers, numbers "
                "or booleans), or move the value into the JSON body.",
            )
            return
        self.add(
            "warning",
            "non_scalar_param",
            loc,
            f"{where} parameter {name!r} has type {'/'.join(types)}; the hub sends "
            "String(value): arrays comma-joined, objects as [object Object] (nothing of the "
            "object arrives).",
            "Declare scalar types for query/path/header parameters, or move the value "
            "into the JSON body.",
        )

    @staticmethod
    def _ignored_reason(prm: object) -> str | None:
        if not isinstance(prm, dict):
            return f"it is {_describe(prm)}, not an object"
        if "$ref" in prm:
            return "$ref is never resolved"
        if not _truthy(prm.get("name")):
            return "it has no name"
        if not _truthy(prm.get("schema")):
            return (
                "it uses content instead of schema" if "content" in prm else "it has no schema"
            )
        return None

    def _unsafe_integer(self, loc: str, name: str) -> None:
        self.add(
            "warning",
            "unsafe_integer_param",
            loc,
            f"Integer argument {name!r} has no maximum at or below 2^53; larger values "
            "are rounded by the hub (JavaScript numbers) before they are sent.",
            "Add a maximum, or use a string for large identifiers.",
        )

    def _header(self, loc: str, name: str) -> None:
        lower = name.lower()
        if lower.startswith("x-bailing-") or lower in _CLIENT_HEADERS:
            self.add(
                "error",
                "header_param_reserved",
                loc,
                f"Header parameter {name!r} collides with a header the hub or its HTTP client "
                "controls; the model's value replaces or merges with it and the call fails.",
                "Rename the parameter, or move it to the query or body.",
            )
        elif not _HTTP_TOKEN_RE.fullmatch(name):
            self.add(
                "error",
                "header_param_invalid_name",
                loc,
                f"Header parameter {name!r} is not a valid HTTP header name; the hub's HTTP "
                "client throws and every call fails.",
                "Use letters, digits and '-' only.",
            )
        elif "_" in name:
            self.add(
                "warning",
                "header_param_underscore",
                loc,
                f"Header parameter {name!r} contains '_'; many proxies and servers drop such "
                "headers, and WSGI cannot tell '_' from '-'.",
                "Use '-' instead of '_'.",
            )
        self.add(
            "warning",
            "header_param_unsigned",
            loc,
            f"Header parameter {name!r} is outside the hub's signature: treat it as untrusted "
            "model input, never as identity or authorization.",
            "Prefer query or body parameters; take identity from X-Bailing-On-Behalf-Of.",
        )

    def _body(self, o: _Operation, m: str, declared: dict[str, str]) -> None:
        loc, rb = o.loc, o.op.get("requestBody")
        if rb is None:
            return
        schema = _dig(rb, "content", "application/json", "schema")
        if not isinstance(schema, dict) or "$ref" in schema:
            content = _dig(rb, "content")
            if isinstance(rb, dict) and "$ref" in rb:
                why = "$ref is never resolved"
            elif isinstance(schema, dict):
                why = "its schema is a $ref, which is never resolved"
            elif isinstance(content, dict) and "application/json" not in content:
                why = "only the exact media type application/json is read"
            else:
                why = 'it has no content["application/json"].schema object'

            self.add(
                "warning",
                "request_body_ignored",
                loc,
                f"The requestBody is invisible to the hub: {why}.",
                "Inline the schema under content[\"application/json\"].schema.",
            )
            return
        required = schema.get("required")
        properties = schema.get("properties")
        if isinstance(required, str) and _truthy(properties):
            self.add(
                "warning",
                "body_required_string",
                loc,
                f"The body schema's required is the string {required!r}; the hub treats each "
                "character as a required name.",
                "Make required a list of property names.",
            )
        names = [k for k, _ in _entries(properties)] if _truthy(properties) else []
        if m == "GET" and names:
            self.add(
                "warning",
                "get_request_body_ignored",
                loc,
                f"GET operation declares body properties ({', '.join(names[:5])}); GET calls "
                "carry no body, so these arguments are silently dropped.",
                "Declare them as query parameters, or use POST.",
            )
        for key in names:
            if key in declared:
                self.add(
                    "warning",
                    "param_shadowed_by_body",
                    loc,
                    f"Body property {key!r} has the same name as a {declared[key]} parameter; "
                    "the hub keeps only the body one.",
                    "Rename one of them.",
                )
            if key == "__proto__":
                self.add(
                    "error",
                    "reserved_param_name",
                    loc,
                    "A body property named __proto__ is swallowed by the hub's JavaScript "
                    "objects: it never becomes an argument.",
                    "Rename the property.",
                )
        if isinstance(properties, dict):
            for key, sub in properties.items():
                for field_name in _walk_integers(sub, key):
                    self._unsafe_integer(loc, field_name)

    def _capability(self, o: _Operation, cap: dict[str, Any]) -> None:
        loc = o.loc
        if cap.get("version") != 1 or isinstance(cap.get("version"), bool):
            self.add(
                "warning",
                "capability_version",
                loc,
                "x-agent-capability.version should be 1 (the capability schema requires it; "
                "the compiler ignores it).",
                "Add version: 1.",
            )
        execution = _record(cap.get("execution")) or {}
        guidance = _record(cap.get("guidance")) or {}
        approval = _record(cap.get("approval")) or {}
        if "timeout_ms" in execution and _is_number(execution["timeout_ms"]) and float(
            execution["timeout_ms"]
        ) == 0:
            self.add(
                "warning",
                "timeout_ms_zero",
                loc,
                "execution.timeout_ms is 0: the hub inherits the source's timeout, but the "
                "capability schema requires at least 1.",
                "Remove timeout_ms to inherit, or give a value from 1 to 600000.",
            )
        if "rate_limit" in execution and self._rate_limit_invalid(execution["rate_limit"]):
            self.add(
                "warning",
                "rate_limit_ignored",
                loc,
                f"execution.rate_limit {_describe(execution['rate_limit'])} is not "
                "{count: positive integer, window: 1s|1m|1h|1d}; the hub silently applies no "
                "limit.",
                'E.g. rate_limit: {"count": 10, "window": "1m"}',
            )
        level = _dig(cap, "risk", "level")
        if level is not None and _label(level).lower() not in _RISKS:
            self.add(
                "warning",
                "risk_level_ignored",
                loc,
                f"risk.level {_describe(level)} is not low, medium or high; the hub silently "
                "uses the default (medium for writes, low for reads).",
                "Use low, medium or high.",
            )
        if "outcome" in cap and self._outcome_invalid(cap["outcome"]):
            self.add(
                "warning",
                "outcome_ignored",
                loc,
                "outcome needs a non-empty result and side_effect none|read|write|notify|"
                "external; the hub silently drops it.",
                'E.g. outcome: {"result": "refund created", "side_effect": "write"}',
            )
        for key in ("when_to_use", "returns"):
            value = guidance.get(key)
            if isinstance(value, str) and len(value) > 500:
                self.add(
                    "warning",
                    f"guidance_{key}_too_long",
                    loc,
                    f"guidance.{key} is {len(value)} characters; the capability schema allows "
                    "500 (and the description is cut at 500 UTF-16 units anyway).",
                    "Shorten it.",
                )
        examples = guidance.get("examples")
        if isinstance(examples, list) and len(examples) > 5:
            self.add(
                "warning",
                "guidance_too_many_examples",
                loc,
                f"guidance.examples has {len(examples)} items; the schema allows 5 and the hub "
                "only ever uses the first.",
                "Keep one to five examples, the best first.",
            )
        context = guidance.get("context")
        if isinstance(context, list):
            if len(context) > 50:
                self.add(
                    "warning",
                    "guidance_context_truncated",
                    loc,
                    f"guidance.context has {len(context)} items; the hub keeps the first 50.",
                    "Keep at most 50 entries.",
                )
            if any(not isinstance(c, str) or not 1 <= len(c) <= 100 for c in context):
                self.add(
                    "warning",
                    "guidance_context_item_length",
                    loc,
                    "guidance.context entries must be strings of 1 to 100 characters.",
                    "Split or shorten long entries; remove empty ones.",
                )
        prompt = approval.get("prompt")
        if prompt is not None and _utf16_len(_label(prompt)) > 200:
            self.add(
                "warning",
                "approval_prompt_truncated",
                loc,
                "approval.prompt is longer than 200 characters; the hub keeps the first 200.",
                "Shorten the prompt.",
            )
        when = approval.get("when")
        if isinstance(when, list):
            if len(when) > 20:
                self.add(
                    "warning",
                    "approval_when_truncated",
                    loc,
                    f"approval.when has {len(when)} conditions; the hub evaluates only the first "
                    "20, so the rest never trigger an approval.",
                    "Merge conditions (e.g. with in) to stay within 20.",
                )
            for index, cond in enumerate(when):
                if not isinstance(cond, dict):
                    continue
                param = cond.get("param")
                if isinstance(param, str) and len(param) > 191:
                    self.add(
                        "warning",
                        "approval_when_param_too_long",
                        loc,
                        f"approval.when[{index}].param is {len(param)} characters; the schema "
                        "allows 191.",
                        "Use a shorter argument path.",
                    )
                if "label" in cond:
                    label = cond["label"]
                    if not isinstance(label, str) or not 1 <= len(label) <= 120:
                        self.add(
                            "warning",
                            "approval_when_label_length",
                            loc,
                            f"approval.when[{index}].label must be a string of 1 to 120 "
                            "characters; the hub drops other values and cuts longer ones.",
                            "Write a short label such as \"large refund\".",
                        )

    @staticmethod
    def _rate_limit_invalid(raw: object) -> bool:
        rate = _record(raw)
        if rate is None:
            return True
        try:
            count = _to_number(rate.get("count"), "")
            window = _js_string(_or(rate.get("window"), ""), "")
        except _HubCrash:
            return True
        return not (_is_integer(count) and count > 0 and window in _RATE_WINDOWS)

    @staticmethod
    def _outcome_invalid(raw: object) -> bool:
        outcome = _record(raw)
        if outcome is None:
            return True
        result = _js_trim(_label(_or(outcome.get("result"), "")))
        return not result or _label(_or(outcome.get("side_effect"), "")) not in _SIDE_EFFECTS

    # per document --------------------------------------------------------------------
    def document(self, doc: dict[str, Any]) -> None:
        openapi = doc.get("openapi")
        info = _record(doc.get("info")) or {}
        missing = [
            label
            for label, ok in (
                ("openapi (3.x)", isinstance(openapi, str) and openapi.startswith("3.")),
                ("info.title", isinstance(info.get("title"), str)),
                ("info.version", isinstance(info.get("version"), str)),
                ("paths (an object)", isinstance(doc.get("paths"), dict)),
            )
            if not ok
        ]
        if missing:
            self.add(
                "warning",
                "openapi_field_missing",
                "-",
                "The document lacks " + ", ".join(missing) + ", which the hub's tool-spec "
                "schema requires (its compiler does not check them).",
                "Emit openapi: 3.x, info.title, info.version and paths.",
            )
        if "servers" in doc:
            self.add(
                "info",
                "servers_ignored",
                "-",
                "servers is ignored by the hub: calls always go to the tool source's base_url.",
                None,
            )

    def duplicates(self, operations: list[_Operation]) -> None:
        first: dict[str, _Operation] = {}
        for o in operations:
            if o.tool is None:
                continue
            other = first.setdefault(o.tool.name, o)
            if other is o:
                continue
            how = (
                f" (both names are cut to 64 UTF-16 units: {other.raw_name!r} and {o.raw_name!r})"
                if other.raw_name != o.raw_name
                else " (derived from method and path; set operationId)"
                if o.op.get("operationId") is None
                else ""
            )
            self.add(
                "error",
                "duplicate_tool_name",
                o.loc,
                f"Tool name {o.tool.name!r} is also used by {other.loc}{how}. When both are "
                "allowed for a job the hub cannot assemble its tools and every tool of that "
                "job becomes unavailable.",
                "Give each operation a unique operationId (unique across all sources of a "
                "route).",
            )

    def probe(self, doc: dict[str, Any], operations: list[_Operation]) -> None:
        root = doc.get(_PROBE)
        root_valid = _valid_root_probe(root)
        if _PROBE in doc and not root_valid and root is not None and root is not False:
            self.add(
                "warning",
                "authz_probe_root_invalid",
                "-",
                f"Root {_PROBE} must be an object whose path starts with '/' and has at most "
                "512 characters; the hub ignores this one and falls back.",
                'E.g. {"path": "/bailing/authz-probe", "method": "POST"}',
            )
        if root_valid:
            assert isinstance(root, dict)
            method = root.get("method")
            if method is not None and _label(method).upper() not in {"GET", "POST"}:
                self.add(
                    "warning",
                    "authz_probe_method",
                    "-",
                    f"Root {_PROBE}.method {_label(method)!r} is neither GET nor POST; the hub "
                    "probes with POST.",
                    "Use GET or POST and serve the probe with that method.",
                )
            self._probe_path("-", root["path"])
        chosen = root_valid
        for path, item in _entries(_or(doc.get("paths"), {})):
            if not item or not isinstance(item, (dict, list)):
                continue
            for method, op in _entries(item):
                if not isinstance(op, dict) or _PROBE not in op:
                    continue
                loc, flag = f"{method.upper()} {path}", op[_PROBE]
                if flag is not True:
                    if flag is not None and flag is not False:
                        self.add(
                            "warning",
                            "authz_probe_flag_ignored",
                            loc,
                            f"{_PROBE} is {_describe(flag)}; only the JSON boolean true "
                            "marks the probe endpoint.",
                            f"Write {_PROBE}: true.",
                        )
                    continue
                if not (path.startswith("/") and _utf16_len(path) <= _MAX_PROBE_PATH):
                    self.add(
                        "warning",
                        "authz_probe_flag_ignored",
                        loc,
                        f"{_PROBE} is ignored on a path that does not start with '/' or is "
                        "longer than 512 characters.",
                        "Use a short absolute path for the probe endpoint.",
                    )
                    continue
                if method.upper() not in {"GET", "POST"}:
                    self.add(
                        "warning",
                        "authz_probe_method",
                        loc,
                        f"{_PROBE} is set on a {method.upper()} operation; the hub probes it "
                        "with POST, which this operation does not serve.",
                        "Flag a GET or POST operation.",
                    )
                if chosen:
                    self.add(
                        "info",
                        "authz_probe_shadowed",
                        loc,
                        f"{_PROBE} here is unused: an earlier probe target takes precedence.",
                        None,
                    )
                    continue
                chosen = True
                self._probe_path(loc, path)
        if not chosen and not any(
            o.tool and o.tool.method == "GET" and not o.tool.required for o in operations
        ):
            self.add(
                "info",
                "authz_probe_unavailable",
                "-",
                "The hub will skip its authorization probe: there is no x-bailing-authz-probe "
                "target and no GET tool without required arguments.",
                f"Add a dedicated probe endpoint and declare it with root {_PROBE}.",
            )

    def _probe_path(self, loc: str, path: str) -> None:
        errors, _ = _url_problems(path)
        if _PLACEHOLDER_RE.search(path):
            errors.append("a {placeholder}, which the probe sends literally")
        if errors:
            self.add(
                "warning",
                "authz_probe_path_rewritten",
                loc,
                "The probe is sent to this path verbatim and it contains "
                + "; ".join(errors)
                + ", so its signature cannot be verified and the result is inconclusive.",
                "Use a fixed ASCII path for the probe endpoint.",
            )


def _valid_root_probe(root: object) -> bool:
    path = _dig(root, "path")
    return (
        isinstance(root, dict)
        and isinstance(path, str)
        and path.startswith("/")
        and _utf16_len(path) <= _MAX_PROBE_PATH
    )


# --- public API -----------------------------------------------------------------------


def _too_deep() -> Finding:
    return Finding(
        "error",
        "document_too_deep",
        "-",
        "The catalog is nested too deeply to be linted here (the hub itself may accept it).",
        "Flatten the schemas.",
        "bailing",
    )


def _prepare(document: object) -> tuple[dict[str, Any] | None, Finding | None]:
    """Normalize ``document``; on failure return the finding that explains why."""
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
    return None, Finding(
        "error",
        "invalid_spec",
        "-",
        f"The catalog is not a usable OpenAPI document: {reason}. The hub compiles no tools.",
        "Serve an OpenAPI 3.x JSON object.",
        "hub",
    )


def _compile(doc: dict[str, Any]) -> _Compiler:
    compiler = _Compiler()
    compiler.run(doc)
    return compiler


def lint_document(document: object, *, trusted: bool = False) -> list[Finding]:
    """Everything the hub would report for ``document``, then what it would not.

    Document-level hazards come first; then, operation by operation in the
    hub's order, its diagnostics followed by that operation's own hazards;
    cross-operation hazards (duplicate names, the authorization probe) last.
    Never raises, whatever ``document`` is.

    ``trusted=True`` skips re-reading the document as ``JSON.parse`` would
    (key order, number precision, cycles): for a document this package has
    just built from plain JSON values, where it only costs time. Findings
    are the same, possibly in another order.
    """
    doc: dict[str, Any] | None
    invalid: Finding | None
    if trusted and isinstance(document, dict):
        doc, invalid = document, None
    else:
        doc, invalid = _prepare(document)
    if doc is None:
        assert invalid is not None
        return [invalid]
    try:
        compiler = _Compiler()
        hazards = _Hazards(compiler.findings)

        def after_operation(operation: _Operation, path_item: object) -> None:
            if operation.status == "disabled":
                hazards.disabled(operation)
            elif operation.status in ("dropped", "kept"):
                hazards.operation(operation, path_item)

        head = _Hazards([])
        head.document(doc)
        compiler.run(doc, after_operation)
        hazards.duplicates(compiler.operations)
        hazards.probe(doc, compiler.operations)
        if not any(o.tool for o in compiler.operations):
            hazards.add(
                "warning",
                "no_tools",
                "-",
                "The hub would expose no tool from this catalog.",
                "Mark operations with x-agent-capability: {enabled: true, scope: ...} and fix "
                "the errors reported.",
            )
        return head.findings + compiler.findings
    except RecursionError:
        return [_too_deep()]


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


def authz_probe_target(document: object) -> ProbeTarget | None:
    """The request the hub's authorization probe would make (``CONTRACT.md`` §5.2)."""
    doc, _ = _prepare(document)
    if doc is None:
        return None
    root = doc.get(_PROBE)
    if _valid_root_probe(root):
        assert isinstance(root, dict)
        method = "GET" if _label(_or(root.get("method"), "POST")).upper() == "GET" else "POST"
        op_id = root.get("operationId")
        name = _label(op_id) if _truthy(op_id) else "authz_probe"
        return ProbeTarget("dedicated", method, root["path"], _utf16_slice(name, _MAX_NAME))
    for path, item in _entries(_or(doc.get("paths"), {})):
        if not (path.startswith("/") and _utf16_len(path) <= _MAX_PROBE_PATH):
            continue
        if not item or not isinstance(item, (dict, list)):
            continue
        for method, op in _entries(item):
            if isinstance(op, dict) and op.get(_PROBE) is True:
                op_id = op.get("operationId")
                name = _label(op_id) if _truthy(op_id) else (_slug(method, path) or "authz_probe")
                verb = "GET" if method.upper() == "GET" else "POST"
                return ProbeTarget("dedicated", verb, path, _utf16_slice(name, _MAX_NAME))
    candidates = [t for t in compile_tools(doc) if t.method == "GET" and not t.required]
    chosen = next((t for t in candidates if t.requires_subject), None) or (
        candidates[0] if candidates else None
    )
    return None if chosen is None else ProbeTarget("tool", "GET", chosen.path, chosen.name)
