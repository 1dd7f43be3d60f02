"""Hazards the hub accepts without a word: findings with ``source="bailing"``.

Unverifiable paths, unsigned header parameters, colliding tool names, values
that lose precision, probe targets that cannot work, schema limits the
compiler does not enforce. Where a hazard predicts what a hub function will do
with the input, :data:`~bailing_flask.lint.codes.CODES` names that function.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from bailing_flask.wire.jsenc import js_trim as _js_trim
from bailing_flask.wire.jsenc import utf16_len as _utf16_len
from bailing_flask.lint._js import (
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
from bailing_flask.lint.codes import Finding, finding
from bailing_flask.lint.compiler import (
    _CAP,
    _LOCATIONS,
    _MAX_DESCRIPTION,
    _MAX_NAME,
    _PLACEHOLDER_RE,
    _RATE_WINDOWS,
    _Operation,
    _schema_types,
)
from bailing_flask.lint.probe import _MAX_PROBE_PATH, _PROBE, _valid_root_probe


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
    it, so any rewrite makes the call unverifiable: the path the app verifies is
    not the one the hub signed.
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


def _carries_hash_run(o: _Operation, where: str, name: str, schema: Mapping[str, Any]) -> bool:
    """Whether a write's value could end in ``.<64 hex>.<text>`` appended by a forger.

    The signed bytes of a call to a write tool can be re-read with a longer
    path and query when the hub signed a subject holding ``.<64 hex>.`` (see
    :func:`bailing_flask.wire.signing.other_reading`); the extra text lands at
    the end of the path and query: in a query value, or in the last path
    segment when the call had no query.
    """
    items = schema.get("items")
    if "array" in _schema_types(schema) and isinstance(items, dict):
        schema = items  # sent as the items joined with ',': the text lands in the last one
    if o.method.upper() in ("GET", "HEAD") or not _is_free_text(schema):
        return False
    return where == "query" or (
        where == "path" and "{" + name + "}" in o.path.rsplit("/", 1)[-1])


class _Hazards:
    """Hazards the hub accepts silently, per operation and per document."""

    def __init__(self, findings: list[Finding]) -> None:
        self.findings = findings

    def add(self, code: str, loc: str, variant: str | None = None, **fields: object) -> None:
        self.findings.append(finding(code, loc, variant, **fields))

    # per operation -------------------------------------------------------------------
    def disabled(self, o: _Operation) -> None:
        cap = _record(o.op.get(_CAP))
        if cap is not None and "enabled" in cap and not isinstance(cap["enabled"], bool):
            self.add("enabled_not_boolean", o.loc, value=_describe(cap["enabled"]))

    def operation(self, o: _Operation, path_item: object) -> None:
        loc, m = o.loc, o.method.upper()
        cap = o.cap or {}
        if m == "HEAD":
            self.add("head_operation", loc)
        self._scope(loc, cap.get("scope"))
        self._path(o)
        if isinstance(path_item, dict) and path_item.get("parameters"):
            self.add("path_level_parameters_ignored", loc)
        declared = self._parameters(o)
        self._body(o, m, declared)
        self._capability(o, cap)
        if o.raw_name is not None and _utf16_len(o.raw_name) > _MAX_NAME:
            self.add("name_truncated", loc, length=_utf16_len(o.raw_name), name=o.name)
        if o.description is not None and _utf16_len(o.description) > _MAX_DESCRIPTION:
            self.add("description_truncated", loc, length=_utf16_len(o.description))

    def _scope(self, loc: str, raw: object) -> None:
        scope = _js_trim(_label(_or(raw, "")))
        wide = sorted({ch for ch in scope if ord(ch) > 0xFF})
        if wide:
            self.add("scope_not_latin1", loc, chars="".join(wide[:5]))
        if any(ch in scope for ch in "\r\n\0"):
            self.add("scope_invalid_header_value", loc)
        if len(scope) > 191:
            self.add("scope_too_long", loc, length=len(scope))

    def _path(self, o: _Operation) -> None:
        errors, warnings = _url_problems(o.path)
        if errors:
            self.add("path_template_rewritten", o.loc, problems="; ".join(errors))
        if warnings:
            self.add("path_template_fragile", o.loc, problems="; ".join(warnings))

    def _parameters(self, o: _Operation) -> dict[str, str]:
        """Check declared parameters; returns name -> location of the usable ones."""
        loc = o.loc
        raw = o.op.get("parameters")
        declared: dict[str, str] = {}
        carriers: list[str] = []
        if isinstance(raw, str) and raw:
            self.add("parameters_ignored", loc)
        for index, prm in enumerate(raw if isinstance(raw, list) else []):
            reason = self._ignored_reason(prm)
            if reason:
                self.add("param_ignored", loc, index=index, reason=reason)
                continue
            name = _label(prm["name"])
            where = _js_trim(prm["in"]) if isinstance(prm.get("in"), str) else ""
            schema = prm["schema"] if isinstance(prm["schema"], dict) else {}
            if name == "__proto__":
                self.add("reserved_param_name", loc)
            if "required" in prm and not isinstance(prm["required"], bool):
                self.add(
                    "param_required_not_boolean",
                    loc,
                    name=name, value=_describe(prm["required"]),
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
                self.add("free_text_path_param", loc, name=name)
            if _carries_hash_run(o, where, name, schema):
                carriers.append(name)
        if carriers:
            self.add("hash_run_param", loc, names=", ".join(repr(n) for n in carriers))
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
                self.add("array_query_item_comma", loc, name=name)
            return
        if "array" in types and where in ("query", "path"):
            shape = "/".join(item_types) if item_types else "untyped"
            if scalar_items:  # a path parameter
                self.add("non_scalar_param", loc, "path", name=name, shape=shape)
            elif where == "query":
                self.add("non_scalar_param", loc, "nested", name=name, shape=shape)
            else:
                self.add("non_scalar_param", loc, "nestedpath", name=name, shape=shape)
            return
        self.add("non_scalar_param", loc, where=where, name=name, types="/".join(types))

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
        self.add("unsafe_integer_param", loc, name=name)

    def _header(self, loc: str, name: str) -> None:
        lower = name.lower()
        if lower.startswith("x-bailing-") or lower in _CLIENT_HEADERS:
            self.add("header_param_reserved", loc, name=name)
        elif not _HTTP_TOKEN_RE.fullmatch(name):
            self.add("header_param_invalid_name", loc, name=name)
        elif "_" in name:
            self.add("header_param_underscore", loc, name=name)
        self.add("header_param_unsigned", loc, name=name)

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

            self.add("request_body_ignored", loc, why=why)
            return
        required = schema.get("required")
        properties = schema.get("properties")
        if isinstance(required, str) and _truthy(properties):
            self.add("body_required_string", loc, value=required)
        names = [k for k, _ in _entries(properties)] if _truthy(properties) else []
        if m == "GET" and names:
            self.add("get_request_body_ignored", loc, names=", ".join(names[:5]))
        for key in names:
            if key in declared:
                self.add("param_shadowed_by_body", loc, name=key, where=declared[key])
            if key == "__proto__":
                self.add("reserved_param_name", loc, "body")
        if isinstance(properties, dict):
            for key, sub in properties.items():
                for field_name in _walk_integers(sub, key):
                    self._unsafe_integer(loc, field_name)

    def _capability(self, o: _Operation, cap: dict[str, Any]) -> None:
        loc = o.loc
        if cap.get("version") != 1 or isinstance(cap.get("version"), bool):
            self.add("capability_version", loc)
        execution = _record(cap.get("execution")) or {}
        guidance = _record(cap.get("guidance")) or {}
        approval = _record(cap.get("approval")) or {}
        if "timeout_ms" in execution and _is_number(execution["timeout_ms"]) and float(
            execution["timeout_ms"]
        ) == 0:
            self.add("timeout_ms_zero", loc)
        if "rate_limit" in execution and self._rate_limit_invalid(execution["rate_limit"]):
            self.add("rate_limit_ignored", loc, value=_describe(execution["rate_limit"]))
        level = _dig(cap, "risk", "level")
        if level is not None and _label(level).lower() not in _RISKS:
            self.add("risk_level_ignored", loc, value=_describe(level))
        if "outcome" in cap and self._outcome_invalid(cap["outcome"]):
            self.add("outcome_ignored", loc)
        for key in ("when_to_use", "returns"):
            value = guidance.get(key)
            if isinstance(value, str) and len(value) > 500:
                self.add(f"guidance_{key}_too_long", loc, key=key, length=len(value))
        examples = guidance.get("examples")
        if isinstance(examples, list) and len(examples) > 5:
            self.add("guidance_too_many_examples", loc, count=len(examples))
        context = guidance.get("context")
        if isinstance(context, list):
            if len(context) > 50:
                self.add("guidance_context_truncated", loc, count=len(context))
            if any(not isinstance(c, str) or not 1 <= len(c) <= 100 for c in context):
                self.add("guidance_context_item_length", loc)
        prompt = approval.get("prompt")
        if prompt is not None and _utf16_len(_label(prompt)) > 200:
            self.add("approval_prompt_truncated", loc)
        when = approval.get("when")
        if isinstance(when, list):
            if len(when) > 20:
                self.add("approval_when_truncated", loc, count=len(when))
            for index, cond in enumerate(when):
                if not isinstance(cond, dict):
                    continue
                param = cond.get("param")
                if isinstance(param, str) and len(param) > 191:
                    self.add("approval_when_param_too_long", loc, index=index, length=len(param))
                if "label" in cond:
                    label = cond["label"]
                    if not isinstance(label, str) or not 1 <= len(label) <= 120:
                        self.add("approval_when_label_length", loc, index=index)

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
            self.add("openapi_field_missing", "-", missing=", ".join(missing))
        if "servers" in doc:
            self.add("servers_ignored", "-")

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
            self.add("duplicate_tool_name", o.loc, name=o.tool.name, other=other.loc, how=how)

    def probe(self, doc: dict[str, Any], operations: list[_Operation]) -> None:
        root = doc.get(_PROBE)
        root_valid = _valid_root_probe(root)
        if _PROBE in doc and not root_valid and root is not None and root is not False:
            self.add("authz_probe_root_invalid", "-")
        if root_valid:
            assert isinstance(root, dict)
            method = root.get("method")
            if method is not None and _label(method).upper() not in {"GET", "POST"}:
                self.add("authz_probe_method", "-", method=_label(method))
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
                        self.add("authz_probe_flag_ignored", loc, value=_describe(flag))
                    continue
                if not (path.startswith("/") and _utf16_len(path) <= _MAX_PROBE_PATH):
                    self.add("authz_probe_flag_ignored", loc, "path")
                    continue
                if method.upper() not in {"GET", "POST"}:
                    self.add("authz_probe_method", loc, "operation", method=method.upper())
                if chosen:
                    self.add("authz_probe_shadowed", loc)
                    continue
                chosen = True
                self._probe_path(loc, path)
        if not chosen and not any(
            o.tool and o.tool.method == "GET" and not o.tool.required for o in operations
        ):
            self.add("authz_probe_unavailable", "-")

    def _probe_path(self, loc: str, path: str) -> None:
        errors, _ = _url_problems(path)
        if _PLACEHOLDER_RE.search(path):
            errors.append("a {placeholder}, which the probe sends literally")
        if errors:
            self.add("authz_probe_path_rewritten", loc, problems="; ".join(errors))
