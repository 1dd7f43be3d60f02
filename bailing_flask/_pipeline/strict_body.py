"""A tool's body model, compiled once to validate the raw body in one pass.

Argument validation (:mod:`bailing_flask._pipeline.arguments`) refuses a
body key the model does not declare, which pydantic by default ignores. So
that a call does not parse the body, look at its keys and validate it as
three steps, the registry compiles for each tool a *strict twin* of its
body model: a subclass that only adds ``extra="forbid"``, whose
``model_validate_json`` parses and validates the raw bytes in one C call.
The instance it builds is handed out as an instance of the declared model
itself (its class is set back), so a view sees exactly what it declared.

The twin only decides *acceptance*. Whenever it refuses a body, the call
goes the two-step way it always went (parse, unknown keys, validate), so
every refusal keeps its reason code and message; a refusal costs the one
pass more. So the twin must accept exactly what the two-step way accepts,
with the same values, and it is not compiled for a model where pydantic's
JSON mode decides differently from its Python mode on parsed JSON:

* a ``Decimal`` anywhere (the JSON mode reads the number's digits, the
  two-step way the float the parser made of them);
* a smart ``Union`` (in JSON mode a string may be taken for a ``UUID``, a
  date or an enum member before ``str``), ``bytes`` (the JSON mode may read
  base64), a type with its own JSON validation, or anything ``strict``
  (strict JSON accepts strings for dates and UUIDs, strict Python does not);
* aliases pydantic would accept beyond the one name each field declares
  (``populate_by_name``, ``AliasChoices``, ``AliasPath``), a validator of
  the whole model, a root model, a generic model, or a model class whose
  subclasses run code of their own (``__init_subclass__``, another
  metaclass such as SQLModel's): the twin must not be a surprise to it.

* ``coerce_numbers_to_str`` anywhere (a field's, a model's or a nested
  model's): the JSON mode writes ``1.0`` as ``"1"``, the two-step way as
  ``"1.0"``.

A validator of the app's that raises something other than a validation
error (a lookup's ``KeyError``) makes the twin step aside too: the two-step
way then refuses an unknown key first, as before, or raises the same error.
A model's validators run on its twin's class during the one pass (``cls``
is the twin, a subclass of the declared model, which the registry makes
once per tool).

Two differences are in the body itself, and the twin leaves them to the
two-step way: an integer literal of 309 digits or more (beyond a float's
range: the JSON mode makes it ``inf`` for a ``float``, the two-step way
refuses it), and anything the strict parser refuses (a BOM, a lone
surrogate, a number out of range), which ``json.loads`` then decides on.
Duplicate keys (the last wins), integers beyond 2**53 (kept exact),
``NaN``/``Infinity`` and numbers sent as strings decide the same both ways.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

__all__ = ["StrictBody", "compile_body", "dumps_as_stored"]

#: core schema types pydantic's JSON mode validates differently from its Python mode
_JSON_DIFFERS = frozenset(("decimal", "union", "bytes", "json-or-python"))
#: an integer literal a float cannot hold (more than 308 digits)
_HUGE_NUMBER = re.compile(rb"[0-9]{309}")
_FLOATS = frozenset(("float",))
#: pydantic's own metaclass (a model with another one is left alone)
_METACLASS = type(BaseModel)


class StrictBody:
    """One tool's body model compiled for a one-pass validation of the raw bytes."""

    __slots__ = ("model", "twin", "floats")

    def __init__(self, model: type[BaseModel], twin: type[BaseModel], floats: bool) -> None:
        self.model = model
        #: the model itself when it decides on unknown keys already, else its ``extra="forbid"`` twin
        self.twin = twin
        #: the model has a ``float`` somewhere (a 309-digit number goes the two-step way)
        self.floats = floats

    def validate(self, raw: bytes) -> BaseModel | None:
        """The declared model's instance, or ``None``: let the two-step way decide (and refuse)."""
        if self.floats and len(raw) > 308 and _HUGE_NUMBER.search(raw) is not None:
            return None
        try:
            instance = self.twin.model_validate_json(raw)
        except Exception:  # noqa: BLE001 - a refusal, or a validator of the app's that raised:
            return None  # the two-step way decides (an unknown key first), as it always did
        if self.twin is not self.model:
            # same layout (the twin adds no slot); past the model's own __setattr__, if it has one
            object.__setattr__(instance, "__class__", self.model)
        return instance


def _types(schema: Any) -> Iterator[str]:
    """Every core schema ``type`` in ``schema``, and ``"strict"`` for a strict one."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            kind = node.get("type")
            if isinstance(kind, str):
                yield kind
            if node.get("strict") is True or node.get("coerce_numbers_to_str") is True:
                yield "strict"  # (the JSON mode writes a number's string its own way)
            for key, value in node.items():
                if key not in ("cls", "metadata", "function", "serialization") and isinstance(
                        value, (dict, list, tuple)):
                    stack.append(value)
        elif isinstance(node, (list, tuple)):
            stack.extend(node)


def _plain_names(model: type[BaseModel]) -> bool:
    """Whether pydantic accepts exactly one name per field (the one the unknown-key check knows)."""
    config = model.model_config
    for name, info in model.model_fields.items():
        alias = info.validation_alias
        if alias is not None and not isinstance(alias, str):
            return False
        accepted = alias or info.alias or name
        if accepted != name and (config.get("populate_by_name") or config.get("validate_by_name")):
            return False
    return config.get("validate_by_alias", True) is not False


def _subclass_is_plain(model: type[BaseModel]) -> bool:
    """Whether subclassing ``model`` runs nothing but pydantic's own class building."""
    if type(model) is not _METACLASS:
        return False
    if getattr(model, "__pydantic_root_model__", False):
        return False
    generic = getattr(model, "__pydantic_generic_metadata__", None) or {}
    if generic.get("origin") is not None or generic.get("parameters"):
        return False
    for base in model.__mro__:
        if base is BaseModel:
            break
        if "__init_subclass__" in base.__dict__ or "__pydantic_init_subclass__" in base.__dict__:
            return False
    return True


def compile_body(model: Any) -> StrictBody | None:
    """``model``'s one-pass validation, or ``None`` when only the two-step way decides right."""
    if not isinstance(model, type) or not issubclass(model, BaseModel):
        return None  # a marshmallow schema, or nothing
    if not _subclass_is_plain(model) or not _plain_names(model):
        return None
    try:
        schema = model.__pydantic_core_schema__
        types = set(_types(schema))
    except Exception:  # a model pydantic could not complete: the two-step way reports it
        return None
    config = model.model_config
    if types & _JSON_DIFFERS or "strict" in types or config.get("strict") or config.get("coerce_numbers_to_str"):
        return None
    inner = schema.get("schema") if isinstance(schema, dict) else None
    if schema.get("type") != "model" or not isinstance(inner, dict) or inner.get("type") != "model-fields":
        return None  # a validator of the whole model (or a schema of definitions) wraps the fields
    floats = bool(types & _FLOATS)
    if model.model_config.get("extra") in ("allow", "ignore", "forbid"):
        return StrictBody(model, model, floats)  # the model decides on unknown keys itself
    try:
        metaclass: Any = type(model)
        twin: type[BaseModel] = metaclass(
            model.__name__, (model,),
            {"__slots__": (), "__module__": model.__module__, "__qualname__": model.__qualname__,
             "model_config": {**model.model_config, "extra": "forbid"}},
        )
    except Exception:  # pragma: no cover - a model pydantic will not subclass: the two-step way
        return None
    return StrictBody(model, twin, floats)


#: core schema types whose value ``model_dump()`` hands back as the very object validation
#: stored (immutable scalars), and the wrappers around them that change nothing in a dump
_AS_STORED = frozenset((
    "model", "model-fields", "model-field", "str", "int", "float", "bool", "none", "literal",
    "nullable", "default",
))


def dumps_as_stored(model: Any) -> bool:
    """Whether ``instance.model_dump()`` is ``instance.__dict__``, key for key, object for object.

    True for a plain pydantic model of immutable scalars (``str``, ``int``,
    ``float``, ``bool``, ``None``, a ``Literal``, with defaults): a call's
    arguments are then read off the instance without a dump. Anything a dump
    could change keeps the dump: a nested model or a collection (a dump
    copies them), a validator or serializer of the app's, a computed or an
    excluded field, extra fields kept (``extra="allow"``), aliases in dumps
    (``serialize_by_alias``), a root model, an overridden ``model_dump``.
    """
    if not isinstance(model, type) or not issubclass(model, BaseModel):
        return False
    if getattr(model, "__pydantic_root_model__", False) or model.model_dump is not BaseModel.model_dump:
        return False
    config = model.model_config
    if config.get("extra") == "allow" or config.get("serialize_by_alias"):
        return False
    try:
        fields = model.model_fields
        computed = model.model_computed_fields
        schema = model.__pydantic_core_schema__
    except Exception:  # a model pydantic could not complete: the dump reports it
        return False
    if computed or any(info.exclude for info in fields.values()):
        return False
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            kind = node.get("type")
            if not isinstance(kind, str) or kind not in _AS_STORED or "serialization" in node:
                return False
            if kind == "model" and node is not schema:
                return False  # a nested model: the dump makes a dict of it
            if kind == "model-fields" and node.get("computed_fields"):
                return False
            if kind == "model-fields":
                stack.extend(node.get("fields", {}).values())
            elif kind == "literal":
                continue  # its expected values are data, not schemas
            else:
                inner = node.get("schema")
                if inner is not None:
                    stack.append(inner)
        else:
            return False
    return True
