"""Hazards the hub accepts without a word: findings with ``source="bailing"``.

Unverifiable paths, unsigned header parameters, colliding tool names, values
that lose precision, probe targets that cannot work, schema limits the
compiler does not enforce.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .._jsenc import js_trim as _js_trim
from .._jsenc import utf16_len as _utf16_len
from ._js import (
    _MAX_EXACT_INTEGER,
    _HubCrash,
    _describe,
    _dig,
    _entries,
    _is_integer,
    _is_number,
    _js_string,
    _label,
    _or,
    _record,
    _to_number,
    _truthy,
)
from .codes import Finding, Severity
from .compiler import (
    _CAP,
    _LOCATIONS,
    _MAX_DESCRIPTION,
    _MAX_NAME,
    _PLACEHOLDER_RE,
    _RATE_WINDOWS,
    _Operation,
    _schema_types,
)
from .probe import _MAX_PROBE_PATH, _PROBE, _valid_root_probe


_SIDE_EFFECTS = frozenset({"none", "read", "write", "notify", "external"})
_RISKS = frozenset({"low", "medium", "high"})
_HTTP_TOKEN_RE = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
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
_MAX_SCHEMA_DEPTH = 32


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
                self.add(
                    "warning",
                    "non_scalar_param",
                    loc,
                    f"{where} parameter {name!r} has type {'/'.join(types)}; the hub sends "
                    "String(value): arrays comma-joined, objects as [object Object].",
                    "Declare scalar types for query/path/header parameters, or move the value "
                    "into the JSON body.",
                )
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
