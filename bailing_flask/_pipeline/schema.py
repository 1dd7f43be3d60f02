"""JSON schemas for tool parameters, in the dialect the hub can read.

Pydantic emits JSON Schema 2020-12 with ``$defs``/``$ref``; the hub never
resolves ``$ref`` and the catalog is OpenAPI 3.0.
So references are inlined, ``Optional[X]`` collapses to ``X`` (the hub
drops ``null`` arguments before sending anything), and the few 2020-12
keywords 3.0 lacks are translated.
"""

from __future__ import annotations

import copy
import re
import types
import weakref
from typing import Any

from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from bailing_flask.errors import ToolDeclarationError

__all__ = ["model_schema", "type_schema", "converter_schema", "openapi_schema", "subclass_of"]


def subclass_of(value: Any, classes: type | tuple[type, ...]) -> bool:
    """``issubclass`` for anything a declaration or an annotation can be.

    On Python 3.10 ``isinstance(list[int], type)`` is true, and ``issubclass``
    then raises on it; a parametrised generic is never a subclass here.
    """
    if not isinstance(value, type) or isinstance(value, types.GenericAlias):
        return False
    try:
        return issubclass(value, classes)
    except TypeError:
        return False

_DROP_KEYS = {"title", "$defs", "definitions"}
MAX_SAFE_INTEGER = 2**53 - 1
_NUMERIC_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")


class _HubSchema(GenerateJsonSchema):
    """Pydantic's schema, except that a ``Decimal`` is published as a JSON ``number``.

    Pydantic describes a ``Decimal`` for validation as ``anyOf [number,
    string]`` (or a ``string`` with a pattern). The hub needs a ``type`` to
    compare ``approval_when`` values against, and refuses the whole tool
    otherwise; the model always sends amounts as JSON numbers anyway. The
    app still receives a ``Decimal``: pydantic turns the number into one.
    """

    def decimal_schema(self, schema: core_schema.DecimalSchema) -> JsonSchemaValue:
        def bound(key: str) -> float | None:
            value: Any = schema.get(key)  # type: ignore[misc,unused-ignore]
            return None if value is None else float(value)

        return self.float_schema(core_schema.float_schema(
            allow_inf_nan=schema.get("allow_inf_nan"), multiple_of=bound("multiple_of"),
            le=bound("le"), ge=bound("ge"), lt=bound("lt"), gt=bound("gt"),
        ))


def _resolve(ref: str, defs: dict[str, Any], where: str) -> dict[str, Any]:
    name = ref.rsplit("/", 1)[-1]
    if not (ref.startswith("#/$defs/") or ref.startswith("#/definitions/")) or name not in defs:
        raise ToolDeclarationError(f"{where}: cannot inline schema reference {ref!r}")
    resolved: dict[str, Any] = defs[name]
    return resolved


def _convert(node: Any, defs: dict[str, Any], where: str, stack: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_convert(item, defs, where, stack) for item in node]
    if not isinstance(node, dict):
        return node
    node = dict(node)
    ref = node.pop("$ref", None)
    if ref is not None:
        if ref in stack:
            raise ToolDeclarationError(
                f"{where}: recursive model {ref.rsplit('/', 1)[-1]!r} cannot be inlined "
                "(the hub does not resolve $ref)"
            )
        target = _convert(_resolve(ref, defs, where), defs, where, stack + (ref,))
        node = {**target, **{k: v for k, v in node.items()}}
    for key in ("anyOf", "oneOf"):
        variants = node.get(key)
        if isinstance(variants, list):
            non_null = [v for v in variants if v != {"type": "null"}]
            if len(non_null) == 1 and len(non_null) < len(variants):
                del node[key]
                node = {**_convert(non_null[0], defs, where, stack), **node}
                if node.get("default", 0) is None:
                    del node["default"]
    if "const" in node:
        node["enum"] = [node.pop("const")]
    for keyword in _NUMERIC_KEYWORDS:
        value = node.get(keyword)
        if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
            # pydantic versions differ (0 vs 0.0); the same app must give the same bytes
            node[keyword] = int(value)
    for bound, flag in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        value = node.get(bound)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            node[flag] = value
            node[bound] = True
    examples = node.pop("examples", None)
    if isinstance(examples, list) and examples and "example" not in node:
        node["example"] = examples[0]
    result = {}
    for key, value in node.items():
        if key in _DROP_KEYS:
            continue
        if key == "properties" and isinstance(value, dict):
            result[key] = {name: _convert(sub, defs, where, stack) for name, sub in value.items()}
        else:
            result[key] = _convert(value, defs, where, stack)
    return result


def openapi_schema(schema: dict[str, Any], where: str) -> dict[str, Any]:
    """Translate a pydantic JSON schema into a self-contained OpenAPI 3.0 schema."""
    defs = dict(schema.get("$defs", {}))
    defs.update(schema.get("definitions", {}))
    converted: dict[str, Any] = _convert(schema, defs, where, ())  # new containers throughout
    return converted


_MODEL_SCHEMAS: weakref.WeakKeyDictionary[type[BaseModel], dict[str, Any]] = (
    weakref.WeakKeyDictionary()
)


def model_schema(model: type[BaseModel], where: str) -> dict[str, Any]:
    """The inlined object schema of a pydantic model (computed once per model class).

    The result is shared between the tools that use the model: treat it as
    read-only.
    """
    if not subclass_of(model, BaseModel):
        raise ToolDeclarationError(f"{where}: expected a pydantic model class, got {model!r}")
    cached = _MODEL_SCHEMAS.get(model)
    if cached is None:
        cached = openapi_schema(
            model.model_json_schema(mode="validation", schema_generator=_HubSchema), where
        )
        _MODEL_SCHEMAS[model] = cached
    return cached


def type_schema(tp: Any, where: str) -> dict[str, Any]:
    """The schema of a single Python type (for :class:`~bailing_flask.declare.Param`)."""
    if isinstance(tp, dict):
        return copy.deepcopy(tp)
    try:
        schema = TypeAdapter(tp).json_schema(mode="validation", schema_generator=_HubSchema)
    except Exception as exc:  # pydantic raises several types for unsupported types
        raise ToolDeclarationError(f"{where}: unsupported parameter type {tp!r}: {exc}") from None
    return openapi_schema(schema, where)


_STRING_LENGTHS = re.compile(r"\[\^/\]\{(?P<low>\d+)(?P<comma>,)?(?P<high>\d*)\}")


def _string_lengths(regex: str) -> dict[str, int]:
    """``minLength``/``maxLength`` of ``<string(length=8):x>`` or ``(minlength=3, maxlength=12)``.

    Werkzeug keeps them only in the converter's regex (``[^/]{8}``, ``[^/]{3,12}``);
    the default ``[^/]{1,}`` publishes nothing, as before.
    """
    match = _STRING_LENGTHS.fullmatch(regex or "")
    if match is None:
        return {}
    low = int(match["low"])
    if match["comma"] is None:
        return {"minLength": low, "maxLength": low}
    lengths = {"minLength": low} if low > 1 else {}
    if match["high"]:
        lengths["maxLength"] = int(match["high"])
    return lengths


def converter_schema(converter: Any) -> tuple[dict[str, Any], str]:
    """Map a Werkzeug URL converter to a parameter schema.

    Returns the schema and the converter's kind (``int``, ``float``,
    ``uuid``, ``any``, ``string``, ``path`` or ``custom``), which the linter
    uses to flag free-text and float path parameters.
    """
    name = type(converter).__name__
    if name == "IntegerConverter":
        schema: dict[str, Any] = {"type": "integer"}
        if not getattr(converter, "signed", False):
            schema["minimum"] = 0
        if getattr(converter, "min", None) is not None:
            schema["minimum"] = converter.min
        if getattr(converter, "max", None) is not None:
            schema["maximum"] = converter.max
        else:
            # the hub's arguments are JavaScript numbers: nothing larger arrives intact
            schema["maximum"] = MAX_SAFE_INTEGER
        return schema, "int"
    if name == "FloatConverter":
        schema = {"type": "number"}
        if not getattr(converter, "signed", False):
            schema["minimum"] = 0
        return schema, "float"
    if name == "UUIDConverter":
        return {"type": "string", "format": "uuid"}, "uuid"
    if name == "AnyConverter":
        items = getattr(converter, "items", None)
        if items:
            return {"type": "string", "enum": sorted(items)}, "any"
        return {"type": "string"}, "any"
    if name == "PathConverter":
        return {"type": "string"}, "path"
    if name == "UnicodeConverter":
        return {"type": "string", **_string_lengths(getattr(converter, "regex", ""))}, "string"
    return {"type": "string"}, "custom"
