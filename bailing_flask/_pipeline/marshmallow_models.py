"""marshmallow schemas where a pydantic model goes (``query=``, ``body=``, ``response=``), and webargs.

Imported only when a declaration names a marshmallow ``Schema`` (class or
instance) or a view carries webargs' ``@use_args`` / ``@use_kwargs``:
:func:`adapt` answers ``None`` without importing anything for everything
else, so an app without marshmallow never loads it.

* The catalog publishes the schema through apispec's marshmallow plugin (the
  converter the marshmallow project maintains itself, emitting OpenAPI 3.0
  like the catalog), nested schemas inlined because the hub resolves no
  ``$ref``.
* Arguments are loaded by marshmallow itself, so a hub call and any other
  caller of the same schema meet the same rules (``Decimal(places=2)``
  rounds ``12.345`` to ``12.34`` for both; the hub checks only JSON types).
  Refusals use the package's reason codes: ``unknown_parameter`` for a
  field the schema does not know, ``invalid_parameter`` otherwise, each
  naming the field and never quoting the value.
* ``response=`` dumps through the schema: only dumped fields leave (never a
  ``load_only`` field, nor one with ``metadata={"sensitive": True}``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, get_args, get_origin

import marshmallow as ma
from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin
from flask import Response, request
from werkzeug.exceptions import HTTPException

from bailing_flask._pipeline.schema import openapi_schema, subclass_of

__all__ = ["MarshmallowModel", "MarshmallowShape", "adapt_schema", "webargs_finish"]

#: how a refusal is raised: ``error(reason, errors)`` (the pipeline's ``ArgumentError``)
Refusal = Callable[[str, list[dict[str, Any]]], Exception]
_REF = "#/components/schemas/"


def _instance(schema: Any, where: str) -> ma.Schema:
    if isinstance(schema, ma.Schema):
        return schema
    if subclass_of(schema, ma.Schema):
        made: ma.Schema = schema()
        return made
    from bailing_flask.errors import ToolDeclarationError

    raise ToolDeclarationError(f"{where}: expected a marshmallow Schema, got {schema!r}")


def _sensitive(field: Any) -> bool:
    return bool(field.metadata.get("sensitive")) or field.load_only


def _secret_paths(schema: ma.Schema, prefix: str = "", depth: int = 0) -> list[str]:
    """The dotted names of every sensitive field, nested schemas included (for ``exclude=``)."""
    paths: list[str] = []
    for name, field in schema.fields.items():
        if _sensitive(field):
            paths.append(prefix + name)
            continue
        inner: Any = field.inner if isinstance(field, ma.fields.List) else field
        if isinstance(inner, ma.fields.Nested) and depth < 8:
            nested = inner.schema
            if isinstance(nested, ma.Schema):
                paths.extend(_secret_paths(nested, f"{prefix}{name}.", depth + 1))
    return paths


class MarshmallowModel:
    """A schema validating ``query=`` or ``body=``: loads what the hub sent, publishes its schema."""

    def __init__(self, schema: Any, where: str) -> None:
        self.schema = _instance(schema, where)
        self.label = type(self.schema).__name__
        self._schema: dict[str, Any] | None = None
        self._where = where
        #: the query's ``List`` fields (webargs' ``DelimitedList`` splits the joined items itself)
        self._joined = [f.data_key or name for name, f in self.schema.load_fields.items()
                        if isinstance(f, ma.fields.List) and not hasattr(f, "delimiter")]

    def json_schema(self) -> dict[str, Any]:
        """The input's OpenAPI 3.0 object schema, references inlined (computed once)."""
        if self._schema is None:
            self._schema = _input_only(_published(self.schema, self._where))
        return self._schema

    def validate_query(self, values: dict[str, str], error: Refusal) -> tuple[Any, dict[str, Any]]:
        """The query as the hub sends it: an array's items joined with ``,`` in one pair.

        A ``List`` field gets the items split; webargs' ``DelimitedList`` splits them itself.
        """
        for name in self._joined:
            value = values.get(name)
            if value is not None:
                values[name] = value.split(",") if value else []  # type: ignore[assignment]
        return self.validate(values, "query", error)

    def validate(self, data: Mapping[str, Any], location: str, error: Refusal) -> tuple[Any, dict[str, Any]]:
        """``(loaded, args)``: what the view receives and the flat arguments of the call.

        A refusal raises ``error(reason, errors)`` (the pipeline's ``ArgumentError``).
        """
        try:
            loaded = self.schema.load(data)
        except ma.ValidationError as exc:
            raise error(*_refusal(exc.messages, data, location, self.schema.error_messages["unknown"])) from None
        if isinstance(loaded, Mapping):
            return Loaded(loaded), dict(loaded)
        names = [f.attribute or name for name, f in self.schema.load_fields.items()]
        return loaded, {n: getattr(loaded, n) for n in names if hasattr(loaded, n)}

    def model_validate(self, data: Mapping[str, Any]) -> Any:
        """What a business approval replays the call's arguments through (pydantic's name)."""
        from pydantic import ValidationError

        try:
            return Loaded(self.validate(data, "body", _Refused)[1])
        except _Refused:
            raise ValidationError.from_exception_data(self.label, []) from None


class Loaded(dict[str, Any]):
    """What a schema loaded, as the view gets it: a ``dict``.

    It also answers ``model_dump()`` like a pydantic model, so a business approval
    compares the approved arguments with the call's the same way for both.
    """

    def model_dump(self, mode: str = "python") -> dict[str, Any]:
        if mode != "json":
            return dict(self)
        values: dict[str, Any] = json.loads(json.dumps(self, default=str))
        return values


def _published(schema: ma.Schema, where: str) -> dict[str, Any]:
    plugin = MarshmallowPlugin()
    spec = APISpec("bailing", "1", "3.0.3", plugins=[plugin])
    converter = plugin.converter
    assert converter is not None
    raw: dict[str, Any] = converter.schema2jsonschema(schema)  # type: ignore[no-untyped-call,unused-ignore]
    defs = (spec.to_dict().get("components") or {}).get("schemas") or {}
    text = json.dumps({**raw, "$defs": defs}, default=_number).replace(f'"{_REF}', '"#/$defs/')
    return openapi_schema(json.loads(text), where)


def _number(value: Any) -> Any:
    """A ``Decimal`` bound (``Range(min=Decimal("0.01"))``) as the JSON number the hub compares."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _input_only(node: Any) -> Any:
    """What a caller may send: ``dump_only`` properties (``readOnly``) are not accepted on load."""
    if isinstance(node, list):
        return [_input_only(item) for item in node]
    if not isinstance(node, dict):
        return node
    result = {}
    for key, value in node.items():
        if key == "properties" and isinstance(value, dict):
            result[key] = {name: _input_only(sub) for name, sub in value.items()
                           if not (isinstance(sub, dict) and sub.get("readOnly"))}
        elif key not in ("readOnly", "writeOnly"):
            result[key] = _input_only(value)
    return result


def _flatten(messages: Any, prefix: str = "") -> list[tuple[str, str]]:
    if isinstance(messages, Mapping):
        pairs = []
        for key, value in messages.items():
            name = "(body)" if key == "_schema" else str(key)
            pairs.extend(_flatten(value, f"{prefix}.{name}" if prefix else name))
        return pairs
    if isinstance(messages, list) and messages and all(isinstance(m, str) for m in messages):
        return [(prefix or "(body)", m) for m in messages]
    if isinstance(messages, list):
        return [pair for item in messages for pair in _flatten(item, prefix)]
    return [(prefix or "(body)", str(messages))]


def _quotes(message: str, sent: Any, depth: int = 0) -> bool:
    """Whether ``message`` contains any value that was sent (nested ones included)."""
    if isinstance(sent, Mapping):
        sent = list(sent.values())
    if isinstance(sent, (list, tuple)):
        return depth < 10 and any(_quotes(message, item, depth + 1) for item in sent[:1000])
    if sent is None or isinstance(sent, bool):
        return False
    return str(sent) in message


def _refusal(
    messages: Any, data: Mapping[str, Any], location: str, unknown_message: str = "Unknown field.",
) -> tuple[str, list[dict[str, Any]]]:
    """``(reason, errors)`` of a refusal, in the package's terms."""
    unknown, errors = [], []
    for name, message in _flatten(messages):
        name = f"({location})" if name == "(body)" else name
        if message == unknown_message:
            unknown.append({"parameter": name, "location": location})
            continue
        problem = "missing" if message == ma.fields.Field.default_error_messages["required"] else "invalid"
        sent = data if name.startswith("(") else data.get(name.split(".", 1)[0])
        if _quotes(message, sent):  # e.g. a validator of the app's: f"{value} is taken"
            message = "The value is not valid for this parameter."
        elif problem == "missing":
            message = "This parameter is required."
        errors.append({"parameter": name, "location": location, "problem": problem, "message": message})
    if unknown and not errors:
        return "unknown_parameter", sorted(unknown, key=lambda e: e["parameter"])
    return "invalid_parameter", errors + [
        {**e, "problem": "unknown", "message": "This parameter is not declared."} for e in unknown
    ]


class MarshmallowShape:
    """``response=`` with a marshmallow schema: the answer is what the schema dumps.

    The interface is the pydantic shape's (:mod:`bailing_flask._pipeline.projection`).
    """

    def __init__(self, declared: Any, counts: Callable[[int | None], Any], budget: int,
                 where: str = "response=") -> None:
        self._counts = counts  # the projection's record of what was cut
        self._budget = budget  # the longest ``returns`` text
        inner, many = declared, False
        if get_origin(declared) is list and len(get_args(declared)) == 1:  # list[Schema]
            inner, many = get_args(declared)[0], True
        schema = _instance(inner, where)
        self.many = many or bool(schema.many)
        secret = _secret_paths(schema)
        # a dump never includes load_only fields; sensitive ones are left out by name as well
        only: Any = schema.only
        self.schema = type(schema)(many=False, only=only, exclude=tuple(schema.exclude) + tuple(secret))
        self.label = type(schema).__name__ + ("(many=True)" if self.many else "")
        self.names = [f.data_key or name for name, f in self.schema.dump_fields.items()]

    def project(self, value: Any, default_cap: int | None) -> tuple[bytes, Any]:
        ctx = self._counts(default_cap)
        if self.many:
            if isinstance(value, (Mapping, str, bytes)) or not hasattr(value, "__iter__"):
                raise TypeError("the answer is not a list")
            items = list(value)
            if default_cap is not None and len(items) > default_cap:
                ctx.items += len(items) - default_cap
                items = items[:default_cap]
                ctx.mark(None, f"kept {default_cap} of {len(items) + ctx.items} items")
        try:  # ValueError and TypeError are the projection's "cannot be serialised"
            dumped = self.schema.dump(items, many=True) if self.many else self.schema.dump(value)
        except (ma.ValidationError, AttributeError, KeyError, InvalidOperation) as exc:
            raise TypeError(type(exc).__name__) from None
        payload = json.dumps(dumped, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        body = payload.encode("utf-8")
        if ctx.marks:
            marker = json.dumps(ctx.marks, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            body = body[:-1] + (b"," if len(body) > 2 else b"") + b'{"truncated":' + marker + b"}]"
        return body, ctx

    def returns(self, default_cap: int | None) -> str:
        """The catalog's ``guidance.returns``: the dumped fields, cut to fit the hub's budget."""
        lead = "An object with: "
        if self.many:
            lead = "A list" + (f" (at most {default_cap})" if default_cap else "") + " of objects with: "
        names = list(self.names)
        text = lead + ", ".join(names) + "."
        while len(names) > 1 and len(text.encode("utf-16-le")) // 2 > self._budget:
            names.pop()
            text = lead + ", ".join(names) + ", …."
        return text

    def safe_location(self, loc: tuple[Any, ...]) -> str:
        return "(the result)"


def adapt_schema(value: Any, where: str) -> MarshmallowModel:
    """``query=`` / ``body=`` given a marshmallow schema."""
    return MarshmallowModel(value, where)


#: webargs' locations, as the package's errors name them
_LOCATIONS = {"query": "query", "querystring": "query", "json": "body", "form": "body",
              "json_or_form": "body"}


class _Refused(Exception):
    def __init__(self, reason: str, errors: list[dict[str, Any]]) -> None:
        super().__init__(reason)
        self.reason = reason
        self.errors = errors


def _webargs_refusal(exc: HTTPException) -> tuple[str, list[dict[str, Any]]] | None:
    """webargs' ``abort(422, exc=ValidationError, messages=...)`` as the gate's refusal."""
    error = getattr(exc, "exc", None)
    if not isinstance(error, ma.ValidationError) or exc.code is None or not 400 <= exc.code < 500:
        return None
    messages: Any = error.messages
    location = "body"
    if isinstance(messages, Mapping) and len(messages) == 1 and next(iter(messages)) in _LOCATIONS:
        where, messages = next(iter(messages.items()))
        location = _LOCATIONS[where]
    data: dict[str, Any] = request.args.to_dict()
    sent = request.get_json(silent=True) if location == "body" else None
    if isinstance(sent, dict):
        data.update(sent)
    return _refusal(messages, data, location)


def webargs_finish(state: Any, tool: Any, call_view: Callable[[], Any], finish: Callable[..., Response],
                   error: Refusal, refusal: Callable[[Any], Any]) -> Response:
    """``finish`` the call; webargs refusing the arguments answers like the gate's refusal.

    The gate loads the same schema first, so this is only reached where webargs reads the
    request otherwise (a ``List`` query field, a ``validate=`` of ``use_args`` itself).
    """
    def view() -> Any:
        try:
            return call_view()
        except HTTPException as exc:
            refused = _webargs_refusal(exc)
            if refused is None:
                raise
            raise _Refused(*refused) from None

    try:
        return finish(state, tool, view)
    except _Refused as refused:
        response: Response = state.error_response(refusal(error(refused.reason, refused.errors)))
        return response
