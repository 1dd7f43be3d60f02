"""Validate a call's arguments against the same declaration that built the catalog.

The hub places undeclared arguments in the query (GET) or the body (other
methods), so an unknown parameter means the model invented one: refuse it
by name. Type errors name the parameter and what was expected, never the
submitted value (the model sees error bodies; values may be personal data).

Query values arrive as the hub's ``String(value)``: booleans as ``true`` /
``false``, numbers in JavaScript's shortest form (``9.9``, ``1e+21``), and
an array as its items joined with ``,`` in a single pair (``tags=a%2Cb``).
An array-typed query parameter is therefore split on ``,`` before it is
validated (``tags=`` is the empty array), so ``list[str]``, ``list[int]``,
``list[bool]`` and the like receive what the model sent -- except items
that contain ``,`` themselves, which the linter points out.
"""

from __future__ import annotations

import functools
import io
import json
import operator
from types import MappingProxyType
from typing import Any

from flask import Request, current_app
from werkzeug.datastructures import ImmutableMultiDict, MultiDict
from werkzeug.exceptions import RequestEntityTooLarge
from pydantic import BaseModel, ValidationError

try:
    from pydantic_core import from_json
except ImportError:  # pragma: no cover - pydantic-core before 2.14 (pydantic 2.4): json.loads alone
    from_json = None  # type: ignore[assignment]

from bailing_flask._pipeline.registry import Tool
from bailing_flask._state import current_state
from bailing_flask.wire.middleware import AS_VERIFIED_KEY

__all__ = ["ArgumentError", "ValidatedArguments", "validate_arguments", "validate_call"]

_EXPECTED = {
    "int": "integer",
    "float": "number",
    "decimal": "number",
    "bool": "boolean",
    "string": "string",
    "str": "string",
    "dict": "object",
    "model": "object",
    "list": "array",
    "tuple": "array",
    "uuid": "UUID string",
    "date": "date (YYYY-MM-DD)",
    "datetime": "date-time (ISO 8601)",
    "enum": "one of the declared values",
    "literal": "one of the declared values",
}
#: error types whose message may quote the submitted value
_OPAQUE = {"value_error", "assertion_error", "union_tag_invalid", "url_parsing", "json_invalid"}


class ArgumentError(Exception):
    """Arguments refused; ``reason`` is a stable code, ``errors`` names parameters."""

    def __init__(self, reason: str, errors: list[dict[str, Any]]) -> None:
        super().__init__(reason)
        self.reason = reason
        self.errors = errors


class ValidatedArguments:
    __slots__ = ("args", "query", "body")

    def __init__(self, args: dict[str, Any], query: Any, body: Any) -> None:
        self.args = MappingProxyType(args)
        self.query = query
        self.body = body


def _expected(error_type: str, schema: dict[str, Any] | None) -> str | None:
    if schema and isinstance(schema.get("type"), str):
        if "enum" in schema:
            return "one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
        return str(schema["type"])
    prefix = error_type.split("_", 1)[0]
    return _EXPECTED.get(prefix)


def _describe_errors(
    exc: ValidationError, location: str, properties: dict[str, Any]
) -> list[dict[str, Any]]:
    described = []
    for err in exc.errors(include_url=False, include_input=False):
        loc = [str(part) for part in err["loc"]]
        name = ".".join(loc) if loc else "(body)"
        schema = properties.get(loc[0]) if loc else None
        entry: dict[str, Any] = {"parameter": name, "location": location, "problem": err["type"]}
        expected = _expected(err["type"], schema if len(loc) == 1 else None)
        if err["type"] == "missing":
            entry["message"] = "This parameter is required."
        elif err["type"] in _OPAQUE:
            entry["message"] = "The value is not valid for this parameter."
        else:
            entry["message"] = str(err["msg"])
        if expected:
            entry["expected"] = expected
        described.append(entry)
    return described


@functools.lru_cache(maxsize=1024)
def _allows_extra(model: type[BaseModel]) -> bool:
    return model.model_config.get("extra") in ("allow", "ignore")


@functools.lru_cache(maxsize=1024)
def _field_names(model: type[BaseModel]) -> frozenset[str]:
    """The names a model accepts (computed once per model, not per call)."""
    names = set()
    for name, info in model.model_fields.items():
        names.add(info.validation_alias if isinstance(info.validation_alias, str) else (info.alias or name))
    return frozenset(names)


def _properties(schema: dict[str, Any] | None) -> dict[str, Any]:
    return dict((schema or {}).get("properties") or {})


#: werkzeug's query dicts that keep one list of values per key (its plain ``MultiDict``
#: layout), which the query check reads without a Python call per key
_LIST_PER_KEY = (ImmutableMultiDict, MultiDict)
_first = operator.itemgetter(0)
#: werkzeug's own ``Request.args``: an app whose request class keeps it reads the query as
#: :func:`_plain_query` does
_WERKZEUG_ARGS = Request.args


def _plain_query(request: Request) -> dict[str, str] | None:
    """The query's values as ``request.args`` would hold them, each sent once, without it.

    Only for a query that has nothing to decode (ASCII, no ``%``, no ``+``),
    where Werkzeug's parse (``parse_qsl`` keeping blank values) is a split on
    ``&`` and ``=`` and its MultiDict would cost more than the split. ``None``:
    read ``request.args`` instead (the app's request class reads the query
    its own way, through its own ``args`` or its own ``parameter_storage_class``,
    something parsed it already, a value needs decoding, or a name is
    repeated, which the caller refuses by name).
    """
    raw = request.query_string  # what request.args parses
    cls = request.__class__
    if (cls.args is not _WERKZEUG_ARGS or cls.parameter_storage_class is not ImmutableMultiDict
            or "args" in request.__dict__ or not raw.isascii() or b"%" in raw or b"+" in raw):
        return None
    values: dict[str, str] = {}
    for pair in raw.decode("ascii").split("&"):
        if pair:  # parse_qsl skips the empty pieces of "a=1&&b=2"
            name, _, value = pair.partition("=")  # a bare "flag" is ("flag", "")
            if name in values:
                return None
            values[name] = value
    return values


def _validate_query(tool: Tool, request: Request) -> tuple[Any, dict[str, Any]]:
    model = tool.query_model
    if not request.environ.get("QUERY_STRING"):  # the common POST: nothing to parse
        if model is None:
            return None, {}
        if not isinstance(model, type):  # a marshmallow schema
            return model.validate_query({}, ArgumentError)
        return _checked_query(tool, model, {})
    values = _plain_query(request)
    if values is None:
        values = _args_once(request)
    if model is None:
        if values:
            raise ArgumentError("unknown_parameter", [
                {"parameter": k, "location": "query"} for k in sorted(values)
            ])
        return None, {}
    if not isinstance(model, type):  # a marshmallow schema: it refuses unknown fields itself
        return model.validate_query(values, ArgumentError)
    if not _allows_extra(model):
        names = _field_names(model)
        if not names.issuperset(values):
            raise ArgumentError("unknown_parameter", [
                {"parameter": k, "location": "query"} for k in sorted(set(values) - names)
            ])
    return _checked_query(tool, model, values)


def _args_once(request: Request) -> dict[str, Any]:
    """``request.args`` as a dict; a parameter sent more than once is refused by name."""
    try:
        args = request.args
    except UnicodeDecodeError:  # raw bytes in the request target, not percent-encoded UTF-8
        raise ArgumentError("invalid_parameter", [
            {"parameter": "(query)", "location": "query", "problem": "not_utf8",
             "message": "The query string is not UTF-8; the hub percent-encodes every value."}
        ]) from None
    if args.__class__ in _LIST_PER_KEY:  # the usual storage class: counted and copied in C
        lists = dict.values(args)
        once = sum(map(len, lists)) == len(args)
        values: dict[str, Any] | None = dict(zip(dict.keys(args), map(_first, lists))) if once else None
    else:  # an app's own parameter_storage_class
        once = all(len(args.getlist(k)) == 1 for k in args)
        values = args.to_dict() if once else None
    if values is None:
        raise ArgumentError("invalid_parameter", [
            {"parameter": k, "location": "query", "problem": "repeated",
             "message": "This parameter was sent more than once."}
            for k in sorted(k for k in args if len(args.getlist(k)) > 1)
        ])
    return values


def _checked_query(
    tool: Tool, model: type[BaseModel], values: dict[str, Any]
) -> tuple[BaseModel, dict[str, Any]]:
    for name in tool.query_arrays:  # the hub joins an array's values with commas
        value = values.get(name)
        if isinstance(value, str):
            values[name] = value.split(",") if value else []
    try:
        query = model.model_validate(values)
    except ValidationError as exc:
        raise ArgumentError("invalid_parameter", _describe_errors(exc, "query", tool.query_properties)) from None
    # a plain model's instance holds what a dump would give (strict_body.dumps_as_stored): its
    # own __dict__, not a copy (validate_call copies it into the call's arguments)
    return query, query.__dict__ if tool.query_as_stored else query.model_dump()


_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def _form_data(request: Request) -> dict[str, Any]:
    """A human's HTML form, field by field (a field sent twice is refused like a repeated query)."""
    form = request.form
    repeated = sorted(k for k in form if len(form.getlist(k)) > 1)
    if repeated:
        raise ArgumentError("invalid_parameter", [
            {"parameter": k, "location": "body", "problem": "repeated",
             "message": "This parameter was sent more than once."} for k in repeated
        ])
    data = form.to_dict()
    if "csrf" in current_app.extensions:  # Flask-WTF's token is the form's, not an argument
        data.pop(current_state().config.csrf_field_name, None)
    return data


def _raw_body(request: Request, environ: dict[str, Any]) -> bytes:
    """The body bytes, without a copy through Werkzeug when the verifier holds them in memory.

    The stream handed to the app is left where it is, so the view can still
    read it (``request.get_json()``, ``request.stream``). A body over the
    app's ``MAX_CONTENT_LENGTH`` (``request.max_content_length``) is refused
    with Werkzeug's ``413`` either way, as ``get_data`` refuses it.
    """
    stream = environ.get("wsgi.input")
    seen = environ.get(AS_VERIFIED_KEY)
    if seen is not None and stream is seen.stream and stream.__class__ is io.BytesIO:
        body = stream.getvalue()
        if body:
            limit = request.max_content_length
            if limit is not None and len(body) > limit:
                raise RequestEntityTooLarge()
        return body
    return request.get_data(cache=True)


def _lenient_json(raw: bytes) -> Any:
    """``json.loads`` of a body the strict parser refused (a BOM, UTF-16, a lone surrogate, deep nesting)."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than Python parses
        raise ArgumentError("invalid_body", [
            {"parameter": "(body)", "location": "body", "problem": "json_invalid",
             "message": "The body is not valid JSON."}
        ]) from None


def _validate_body(
    tool: Tool, request: Request, human: bool = False
) -> tuple[Any, dict[str, Any]]:
    if tool.method == "GET":
        return None, {}
    if human and request.mimetype in _FORM_TYPES:
        data: Any = _form_data(request)
    elif (raw := _raw_body(request, request.environ)).strip() == b"":
        data = {}
    elif (plan := tool.body_plan) is not None and (body := plan.validate(raw)) is not None:
        # parsed and validated in one pass; the arguments as in _checked_query
        return body, body.__dict__ if tool.body_as_stored else body.model_dump()
    else:
        try:
            if from_json is None:
                raise ValueError("no pydantic_core.from_json")
            data = from_json(raw)  # strict JSON in one C call (what the hub sends)
        except ValueError:
            data = _lenient_json(raw)  # what it refuses, json.loads decides on, as it always did
    if not isinstance(data, dict):
        raise ArgumentError("invalid_body", [
            {"parameter": "(body)", "location": "body", "problem": "not_an_object",
             "message": "The body must be a JSON object.", "expected": "object"}
        ])
    model = tool.body_model
    if model is None:
        if data:
            raise ArgumentError("unknown_parameter", [
                {"parameter": k, "location": "body"} for k in sorted(data)
            ])
        return None, {}
    if not isinstance(model, type):  # a marshmallow schema
        return model.validate(data, "body", ArgumentError)
    if not _allows_extra(model):
        unknown = sorted(set(data) - _field_names(model))
        if unknown:
            raise ArgumentError("unknown_parameter", [
                {"parameter": k, "location": "body"} for k in unknown
            ])
    try:
        body = model.model_validate(data)
    except ValidationError as exc:
        raise ArgumentError(
            "invalid_parameter", _describe_errors(exc, "body", _properties(tool.body_schema))
        ) from None
    return body, body.__dict__ if tool.body_as_stored else body.model_dump()


def _check_path_bounds(tool: Tool, view_args: dict[str, Any]) -> None:
    """A numeric path value outside the bounds the catalog declares for it is refused.

    The route's converter only checks the digits: ``/orders/99999999999999999999``
    routes, and the catalog says no integer above 2**53 - 1 arrives intact.
    Such a value would otherwise reach the authorizer and the view (where a
    database driver may not hold it).
    """
    errors = []
    for parameter in tool.parameters:
        name = str(parameter.get("name"))
        value = view_args.get(name) if parameter.get("in") == "path" else None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        schema = parameter.get("schema") or {}
        low, high = schema.get("minimum"), schema.get("maximum")
        if (isinstance(low, (int, float)) and value < low) or (isinstance(high, (int, float)) and value > high):
            errors.append({"parameter": name, "location": "path", "problem": "out_of_range",
                           "message": f"The value must be between {low} and {high}."})
    if errors:
        raise ArgumentError("invalid_parameter", errors)


def validate_arguments(
    tool: Tool, request: Request, view_args: dict[str, Any], *, human: bool = False
) -> ValidatedArguments:
    """Validate path, query and body; path values are already typed by the route.

    ``human=True`` validates an unsigned request to a shared route, which may
    also send its body as an HTML form.
    """
    args, query, body = validate_call(tool, request, view_args, human)
    return ValidatedArguments(dict(args), query, body)


def validate_call(
    tool: Tool, request: Request, view_args: dict[str, Any], human: bool = False
) -> tuple[MappingProxyType[str, Any], BaseModel | None, BaseModel | None]:
    """:func:`validate_arguments` for the gate: ``(args, query model, body model)``.

    The steps a tool does not use are skipped (no query model and no query
    string: nothing to parse; a GET: no body).
    """
    if view_args:
        _check_path_bounds(tool, view_args)
    if tool.query_model is None and not request.environ.get("QUERY_STRING"):
        query, query_args = None, None
    else:
        query, query_args = _validate_query(tool, request)
    body, body_args = (None, None) if tool.method == "GET" else _validate_body(tool, request, human)
    args: dict[str, Any] = dict(view_args)
    if query_args:
        args.update(query_args)
    if body_args:
        args.update(body_args)  # like the hub: a body property overrides same-named parameters
    return MappingProxyType(args), query, body
