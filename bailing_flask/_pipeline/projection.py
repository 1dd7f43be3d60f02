"""Minimal return: what a tool answers is cut down to its declared shape.

A successful tool answer goes verbatim into the model's next prompt and
into the hub's audit. ``@tool(response=Model)`` (or ``list[Model]``)
declares what may go there; the gate runs :func:`finish` on whatever the
view returned, *inside* the de-duplicated part of the call, so the record an
idempotent replay answers from holds the projected bytes, never the full
row. Per call:

1. the view's return value is taken apart the way Flask does (a ``(body,
   status, headers)`` tuple, a ``Response``/``jsonify(...)``, a dict or
   list, a pydantic model, any object with attributes such as an ORM row);
   only a 2xx answer with a body is touched, every other answer passes
   unchanged;
2. ``result=`` (a converter) gets the body -- decoded JSON for a JSON
   ``Response``, the text for a text one -- and returns the new body;
3. ``response=``: only the declared fields are kept (read from keys or
   attributes), strings and lists longer than the model's ``max_length``
   are cut, and so is every list beyond ``BAILING_RESPONSE_MAX_ITEMS``
   when the model sets no ``max_length`` of its own; each cut is named in
   a ``truncated`` field (an object: the path -> what was kept). The
   result is validated against the model and serialised with pydantic;
   sensitive fields (``SecretStr``/``SecretBytes``/``Secret[...]``, a
   field with ``json_schema_extra={"sensitive": True}``, or pydantic's
   ``exclude=True``) are validated but never serialised.

A result that does not validate is withheld: the call answers ``500 invalid_response`` and the
log names the fields and the error types, never a value.

The model reads failed calls' bodies too: with ``response=`` a non-2xx answer (returned,
``abort()``-ed, or an error page rendered for an exception) carries only the package's bounded
error shape (:func:`~bailing_flask._pipeline.answers.error_shape`), or ``error_response=Model``
projected like ``response=``. :func:`finish` does it inside the de-duplicated run (a stored answer
is the projected one); :func:`guard_answer` shapes the pages Flask renders outside it. Everything
that depends only on the declaration (which fields, which limits, what to exclude, the pydantic
adapter, the catalog's ``returns`` text) is compiled once per model or tool at registry build. A
marshmallow schema is compiled by :mod:`~bailing_flask._pipeline.marshmallow_models` instead.
"""

from __future__ import annotations

import json
import logging
import types
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

from flask import Response, after_this_request, current_app, request
from pydantic import BaseModel, SecretBytes, SecretStr, TypeAdapter, ValidationError

import pydantic as _pydantic

#: pydantic's generic ``Secret[...]`` (pydantic 2.7 and newer; ``None`` before).
_GenericSecret: Any = getattr(_pydantic, "Secret", None)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticSerializationError
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response as BaseResponse

from bailing_flask._pipeline.answers import (
    EMPTY as _EMPTY,
    MISSING as _MISSING,
    Invalid as _Invalid,
    decoded as _decoded,
    error_body as _error_body,
    error_shape as _error_shape,
    is_data as _is_data,
    serialised as _serialised,
    split as _split,
    status_code as _status_code,
)
from bailing_flask._pipeline.foreign import is_marshmallow, marshmallow_shape
from bailing_flask._pipeline.schema import subclass_of
from bailing_flask._sync import call_sync
from bailing_flask.responses import MAX_ERROR_BODY, ErrorInfo

from bailing_flask._pipeline.tool_view import ToolView as Tool
from bailing_flask._state import BailingState

__all__ = [
    "MARKER",
    "PROJECTION_KEY",
    "Shaper",
    "check_response_shape",
    "finish",
    "guard_answer",
    "make_shaper",
]

logger = logging.getLogger("bailing_flask")
_R = TypeVar("_R", bound=BaseResponse)

#: The field that names what was cut (an object: path -> what was kept).
MARKER = "truncated"
#: The environ key holding the projection counts of the current call (for the audit).
PROJECTION_KEY = "bailing.projection"
#: Longest generated ``returns`` text, in UTF-16 units (the hub cuts the whole description at 500).
RETURNS_BUDGET = 300
_MAX_MARKS = 10
_MAX_PROBLEMS = 10
#: Where the gate keeps the answer it produced itself, for :func:`guard_answer`.
DECLARED_KEY = "bailing.declared_answer"
_SECRETS: tuple[type, ...] = (SecretStr, SecretBytes) + (
    (_GenericSecret,) if _GenericSecret is not None else ()
)


# -- the compiled shape --------------------------------------------------------------------------


class _Ctx:
    """What one projection dropped and cut (counts and paths, never values)."""

    __slots__ = ("default_cap", "fields", "sensitive", "items", "strings", "marks")

    def __init__(self, default_cap: int | None) -> None:
        self.default_cap = default_cap
        self.fields = 0
        self.sensitive = 0
        self.items = 0
        self.strings = 0
        self.marks: dict[str, str] | None = None

    def mark(self, path: Any, text: str) -> None:
        if self.marks is None:
            self.marks = {}
        if len(self.marks) < _MAX_MARKS:
            self.marks[_path_text(path)] = text
        else:
            self.marks["..."] = "more values were cut"

    def counts(self) -> dict[str, int]:
        return {"fields_dropped": self.fields, "sensitive_dropped": self.sensitive,
                "items_dropped": self.items, "strings_cut": self.strings}


def _path_text(path: Any) -> str:
    """``(parent, key)`` chains to ``orders[2].note``; the root list itself is ``[]``."""
    parts: list[str] = []
    while path is not None:
        path, key = path
        parts.append(f"[{key}]" if isinstance(key, int) else f".{key}")
    text = "".join(reversed(parts))
    return text[1:] if text.startswith(".") else (text or "[]")


class _StrNode:
    __slots__ = ("max_length",)

    def __init__(self, max_length: int) -> None:
        self.max_length = max_length

    def walk(self, value: Any, ctx: _Ctx, path: Any) -> Any:
        limit = self.max_length
        if isinstance(value, str) and len(value) > limit:
            ctx.strings += 1
            ctx.mark(path, f"cut to {limit} of {len(value)} characters")
            return value[: limit - 1] + "…" if limit >= 2 else value[:limit]
        return value

    def describe(self, depth: int, default_cap: int | None) -> str:
        return ""


class _ListNode:
    __slots__ = ("cap", "item")

    def __init__(self, cap: int | None, item: _Node | None) -> None:
        self.cap = cap
        self.item = item

    def walk(self, value: Any, ctx: _Ctx, path: Any) -> Any:
        if value is None or isinstance(value, (str, bytes, bytearray, Mapping)):
            return value  # not a list: validation says so
        if not isinstance(value, (list, tuple)):
            try:
                value = list(value)  # a query result, a generator, a set
            except TypeError:
                return value
        cap = self.cap if self.cap is not None else ctx.default_cap
        count = len(value)
        if cap is not None and count > cap:
            value = value[:cap]
            ctx.items += count - cap
            ctx.mark(path, f"{cap} of {count} items shown; more exist")
        item = self.item
        if item is None:
            return value
        return [item.walk(entry, ctx, (path, index)) for index, entry in enumerate(value)]

    def describe(self, depth: int, default_cap: int | None) -> str:
        cap = self.cap if self.cap is not None else default_cap
        text = " (list)" if cap is None else f" (list, at most {cap})"
        inner = self.item.describe(depth, default_cap) if self.item is not None else ""
        return text + inner


class _DictNode:
    __slots__ = ("value",)

    def __init__(self, value: _Node) -> None:
        self.value = value

    def walk(self, value: Any, ctx: _Ctx, path: Any) -> Any:
        if not isinstance(value, Mapping):
            return value
        node = self.value
        return {key: node.walk(entry, ctx, (path, "<key>")) for key, entry in value.items()}

    def describe(self, depth: int, default_cap: int | None) -> str:
        return " (map)"


class _Field:
    __slots__ = ("name", "key_in", "key_out", "read", "node", "hidden", "sensitive")

    def __init__(self, name: str, info: FieldInfo, node: _Node | None, sensitive: bool) -> None:
        alias = info.alias if isinstance(info.alias, str) else None
        validation = info.validation_alias if isinstance(info.validation_alias, str) else None
        serialization = info.serialization_alias if isinstance(info.serialization_alias, str) else None
        self.name = name
        #: the key validation reads
        self.key_in = validation or alias or name
        #: the key the answer carries
        self.key_out = serialization or alias or name
        #: the keys tried on the view's dict, in order
        self.read = tuple(dict.fromkeys(k for k in (self.key_in, alias, name, self.key_out) if k))
        self.node = node
        self.sensitive = sensitive
        self.hidden = sensitive or bool(info.exclude)


class _ModelNode:
    __slots__ = ("model", "fields", "names", "exclude", "plan")

    def __init__(self, model: type[BaseModel]) -> None:
        self.model = model
        self.fields: tuple[_Field, ...] = ()
        self.names: frozenset[str] = frozenset()
        #: pydantic's ``exclude`` for the hidden fields below this model (``None``: nothing)
        self.exclude: dict[str, Any] | None = None
        #: per field: ``(key_in, first key read, other keys read, node, key_out, field if hidden)``
        self.plan: tuple[tuple[str, str, tuple[str, ...], Any, str, _Field | None], ...] = ()

    def finish(self, fields: list[_Field]) -> None:
        self.fields = tuple(fields)
        self.names = frozenset(n for f in fields for n in (f.name, *f.read))
        self.plan = tuple(
            (f.key_in, f.read[0], f.read[1:], f.node, f.key_out, f if f.hidden else None) for f in fields
        )

    def walk(self, value: Any, ctx: _Ctx, path: Any) -> Any:
        if value is None:
            return None
        if type(value) is not dict and not isinstance(value, Mapping):
            if hasattr(value, "keys") and hasattr(value, "__getitem__"):
                value = {key: value[key] for key in value.keys()}  # sqlite3.Row and the like
            else:
                return self._walk_object(value, ctx, path)
        out: dict[str, Any] = {}
        get = value.get
        consumed = 0
        for key_in, first, others, node, key_out, hidden in self.plan:
            found = get(first, _MISSING)
            if found is _MISSING:
                for key in others:
                    found = get(key, _MISSING)
                    if found is not _MISSING:
                        break
                else:
                    continue
            consumed += 1
            if hidden is not None:
                out[key_in] = _walk_hidden(hidden, found, ctx)
            elif node is None:
                out[key_in] = found
            else:
                out[key_in] = node.walk(found, ctx, (path, key_out))
        if len(value) > consumed:
            ctx.fields += len(value) - consumed
        return out

    def _walk_object(self, value: Any, ctx: _Ctx, path: Any) -> Any:
        if isinstance(value, (str, bytes, bytearray, list, tuple, int, float)):
            return value  # not an object: validation says so
        out: dict[str, Any] = {}
        for field in self.fields:
            found = getattr(value, field.name, _MISSING)
            if found is _MISSING and field.key_in != field.name:
                found = getattr(value, field.key_in, _MISSING)
            if found is _MISSING:
                continue
            if field.hidden:
                out[field.key_in] = _walk_hidden(field, found, ctx)
            elif field.node is None:
                out[field.key_in] = found
            else:
                out[field.key_in] = field.node.walk(found, ctx, (path, field.key_out))
        ctx.fields += _other_attributes(value, self.names)
        return out

    def describe(self, depth: int, default_cap: int | None) -> str:
        if depth <= 0:
            return ""
        return " {" + _field_list(self, depth - 1, default_cap) + "}"


_Node = Union[_StrNode, _ListNode, _DictNode, _ModelNode]


def _walk_hidden(field: _Field, value: Any, ctx: _Ctx) -> Any:
    """A sensitive or excluded field: validated like the rest, never serialised, never named."""
    ctx.fields += 1
    if field.sensitive:
        ctx.sensitive += 1
    return field.node.walk(value, _Ctx(ctx.default_cap), None) if field.node is not None else value


def _other_attributes(value: Any, names: frozenset[str]) -> int:
    """How many fields an object has beyond the declared ones (public instance attributes)."""
    if isinstance(value, BaseModel):
        present = set(type(value).model_fields) | set(value.model_extra or ())
        return len(present - names)
    attributes = getattr(value, "__dict__", None)
    if not isinstance(attributes, dict):
        return 0
    return sum(1 for key in attributes if not key.startswith("_") and key not in names)


def _field_list(node: _ModelNode, depth: int, default_cap: int | None) -> str:
    return ", ".join(
        field.key_out + (field.node.describe(depth, default_cap) if field.node is not None else "")
        for field in node.fields if not field.hidden
    )


def _max_length(metadata: Any) -> int | None:
    found: int | None = None
    for item in metadata:
        if isinstance(item, FieldInfo):
            inner = _max_length(item.metadata)
        else:
            inner = getattr(item, "max_length", None)
        if isinstance(inner, int) and not isinstance(inner, bool):
            found = inner if found is None else min(found, inner)
    return found


def _unwrap(annotation: Any, metadata: list[Any]) -> tuple[Any, list[Any]]:
    """Strip ``Annotated`` (collecting its metadata) and ``X | None``."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            args = get_args(annotation)
            annotation, metadata = args[0], [*metadata, *args[1:]]
            continue
        if origin in (Union, types.UnionType):
            members = [a for a in get_args(annotation) if a is not type(None)]
            if len(members) == 1:
                annotation = members[0]
                continue
        return annotation, metadata


def _is_secret(annotation: Any) -> bool:
    annotation, _ = _unwrap(annotation, [])
    if subclass_of(annotation, _SECRETS):
        return True
    origin = get_origin(annotation)
    if _GenericSecret is not None and origin is _GenericSecret:
        return True
    if origin in (list, tuple, set, frozenset, Union, types.UnionType):
        return any(_is_secret(arg) for arg in get_args(annotation) if arg is not Ellipsis)
    return False


def _node(annotation: Any, metadata: list[Any], stack: tuple[type[BaseModel], ...]) -> _Node | None:
    annotation, metadata = _unwrap(annotation, metadata)
    if subclass_of(annotation, BaseModel):
        return _model_node(annotation, stack)
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin in (list, set, frozenset, tuple, Sequence):
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            return None  # a fixed tuple: validated as it comes
        item = _node(args[0], [], stack) if args else None
        return _ListNode(_max_length(metadata), item)
    if annotation in (list, set, frozenset, tuple):
        return _ListNode(_max_length(metadata), None)
    if origin in (dict, Mapping) and len(args) == 2:
        value = _node(args[1], [], stack)
        return _DictNode(value) if value is not None else None
    if annotation is str:
        limit = _max_length(metadata)
        return _StrNode(limit) if limit is not None else None
    return None  # scalars and unions of several types: validated as they come


_MODEL_NODES: weakref.WeakKeyDictionary[type[BaseModel], _ModelNode] = weakref.WeakKeyDictionary()


def _model_node(model: type[BaseModel], stack: tuple[type[BaseModel], ...] = ()) -> _ModelNode:
    cached = _MODEL_NODES.get(model)
    if cached is not None:
        return cached
    if model in stack:
        raise ValueError(
            f"response model {model.__name__!r} contains itself; a recursive shape has no bound "
            "(declare a flat model for the answer)"
        )
    node = _ModelNode(model)
    fields: list[_Field] = []
    exclude: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        for what, alias in (("validation_alias", info.validation_alias),
                            ("serialization_alias", info.serialization_alias), ("alias", info.alias)):
            if alias is not None and not isinstance(alias, str):
                raise ValueError(
                    f"{model.__name__}.{name}: a response field's {what} must be a plain string "
                    "(AliasPath and AliasChoices are not supported)"
                )
        extra = info.json_schema_extra
        sensitive = _is_secret(info.annotation) or (
            isinstance(extra, dict) and extra.get("sensitive") is True
        )
        child = _node(info.annotation, list(info.metadata), stack + (model,))
        field = _Field(name, info, child, sensitive)
        fields.append(field)
        if field.hidden:
            exclude[name] = True
        else:
            below = _exclusions(child)
            if below is not None:
                exclude[name] = below
    node.finish(fields)
    node.exclude = exclude or None
    _MODEL_NODES[model] = node
    return node


def _can_cut(node: _Node | None, default_cap: int | None, seen: frozenset[int] = frozenset()) -> bool:
    """Whether a projection of this shape can cut anything (so the answer may carry the marker)."""
    if isinstance(node, _StrNode):
        return True
    if isinstance(node, _ListNode):
        return (node.cap if node.cap is not None else default_cap) is not None or _can_cut(
            node.item, default_cap, seen)
    if isinstance(node, _DictNode):
        return _can_cut(node.value, default_cap, seen)
    if isinstance(node, _ModelNode) and id(node) not in seen:
        return any(_can_cut(f.node, default_cap, seen | {id(node)}) for f in node.fields if not f.hidden)
    return False


def _exclusions(node: _Node | None) -> Any:
    if isinstance(node, _ModelNode):
        return node.exclude
    if isinstance(node, _ListNode):
        below = _exclusions(node.item)
        return None if below is None else {"__all__": below}
    if isinstance(node, _DictNode):
        below = _exclusions(node.value)
        return None if below is None else {"__all__": below}
    return None


def _unpack(shape: Any) -> tuple[type[BaseModel], bool]:
    if subclass_of(shape, BaseModel):
        return shape, False
    args = get_args(shape)
    if get_origin(shape) is list and len(args) == 1 and subclass_of(args[0], BaseModel):
        return args[0], True
    raise ValueError(f"response= takes a pydantic model class or list[Model] (or a marshmallow Schema), not {shape!r}")


class _Shape:
    """One compiled ``response=`` declaration."""

    def __init__(self, declared: Any) -> None:
        model, many = _unpack(declared)
        self.model = model
        self.many = many
        self.label = f"list[{model.__name__}]" if many else model.__name__
        top = _model_node(model)
        if not many:
            clash = [f.name for f in top.fields if f.key_out == MARKER]
            if clash:
                raise ValueError(
                    f"response model {model.__name__!r} has a field {MARKER!r}, which bailing_flask "
                    "adds to name what it cut; rename that field"
                )
        self.top: _ModelNode = top
        self.node: _Node = _ListNode(None, top) if many else top
        self.exclude = _exclusions(self.node)
        self.adapter: TypeAdapter[Any] = TypeAdapter(declared)

    def project(self, value: Any, default_cap: int | None) -> tuple[bytes, _Ctx]:
        """The answer's bytes; raises ``ValidationError``/``ValueError`` for an invalid result."""
        ctx = _Ctx(default_cap)
        walked = self.node.walk(value, ctx, None)
        validated = self.adapter.validate_python(walked, from_attributes=True)
        body = self.adapter.dump_json(validated, by_alias=True, exclude=self.exclude, warnings=False)
        if ctx.marks:
            marker = json.dumps(ctx.marks, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            if self.many and body.startswith(b"[") and body.endswith(b"]"):
                body = body[:-1] + (b"," if len(body) > 2 else b"") + b'{"truncated":' + marker + b"}]"
            elif body.startswith(b"{") and body.endswith(b"}"):
                body = body[:-1] + (b"," if len(body) > 2 else b"") + b'"truncated":' + marker + b"}"
        return body, ctx

    def returns(self, default_cap: int | None) -> str:
        """A short text of what comes back, for the catalog's ``guidance.returns``.

        Nested fields are shown two levels deep, then one, then not at all,
        and at last the field list is cut, so the text stays within
        :data:`RETURNS_BUDGET` UTF-16 units.
        """
        cut_note = f' Anything cut is named in "{MARKER}".' if _can_cut(self.node, default_cap) else ""
        lead = self._lead(default_cap)
        for depth in (2, 1, 0):
            text = lead + _field_list(self.top, depth, default_cap) + "." + cut_note
            if _units(text) <= RETURNS_BUDGET:
                return text
        room = RETURNS_BUDGET - _units(lead) - _units(cut_note) - 4
        names = _field_list(self.top, 0, default_cap)
        while ", " in names and _units(names) > room:
            names = names.rsplit(", ", 1)[0]
        while names and _units(names) > room:
            names = names[:-1]
        return lead + names + ", …." + cut_note

    def _lead(self, default_cap: int | None) -> str:
        if self.many:
            return "A list" + (f" (at most {default_cap})" if default_cap else "") + " of objects with: "
        return "An object with: "

    def safe_location(self, loc: tuple[Any, ...]) -> str:
        """A validation error's location with only declared names and indexes in it."""
        node: Any = self.node
        parts: list[str] = []
        for item in loc:
            if isinstance(node, _ListNode) and isinstance(item, int):
                parts.append(f"[{item}]")
                node = node.item
            elif isinstance(node, _ModelNode) and isinstance(item, str):
                field = next((f for f in node.fields if item in (f.key_in, f.name)), None)
                if field is None:
                    parts.append(".<field>")
                    node = None
                else:
                    parts.append("." + field.name)
                    node = field.node
            elif isinstance(node, _DictNode):
                parts.append("[<key>]")
                node = node.value
            else:
                parts.append("…")
                break
        text = "".join(parts)
        return (text[1:] if text.startswith(".") else text) or "(the result)"


_SHAPES: weakref.WeakKeyDictionary[type[BaseModel], dict[bool, _Shape]] = weakref.WeakKeyDictionary()


def _shape(declared: Any) -> _Shape:
    if is_marshmallow(declared):  # the same interface
        return marshmallow_shape(declared, _Ctx, RETURNS_BUDGET)  # type: ignore[no-any-return]
    model, many = _unpack(declared)
    per_model = _SHAPES.setdefault(model, {})
    shape = per_model.get(many)
    if shape is None:
        shape = per_model[many] = _Shape(declared)
    return shape


def check_response_shape(declared: Any) -> None:
    """Compile a ``response=`` value once; raises ``ValueError`` naming what is wrong."""
    _shape(declared)


def _units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


# -- per tool ----------------------------------------------------------------------------------


class Shaper:
    """What one tool does to its answers: ``result=`` then ``response=`` on a 2xx, the error shape
    (or ``error_response=``) on every other status once a shape is declared."""

    def __init__(self, response: Any, result: Callable[..., Any] | None, default_cap: int | None,
                 error_response: Any = None) -> None:
        self.shape = _shape(response) if response is not None else None
        self.error_shape = _shape(error_response) if error_response is not None else None
        self.result = result
        self.default_cap = default_cap
        #: non-2xx answers are declared too (``response=`` or ``error_response=``)
        self.guards_errors = self.shape is not None or self.error_shape is not None
        #: the generated ``guidance.returns`` (``None`` without ``response=``)
        self.returns = self.shape.returns(default_cap) if self.shape is not None else None

    def respond(self, state: BailingState, tool: Tool, rv: Any) -> Response:
        body, status, headers = _split(rv)
        source: BaseResponse | None = None
        try:
            if _is_data(body) and (code := _status_code(status)) is not None:
                if not 200 <= code < 300:
                    if not self.guards_errors:
                        return current_app.make_response(rv)  # errors pass unchanged
                    response = current_app.response_class(
                        self._error_payload(tool, code, body, None), status=status,
                        mimetype="application/json")
                    if headers:
                        response.headers.update(headers)
                    return response
                if self.shape is None and self.result is None:
                    return current_app.make_response(rv)
                value = body
            else:
                source = current_app.make_response(rv)
                code = source.status_code
                if not 200 <= code < 300:
                    return self.error_answer(tool, source) if self.guards_errors else source
                if code in (204, 205) or (self.shape is None and self.result is None):
                    return source
                if source.is_streamed:
                    if self.shape is None:
                        return source  # a stream is not read here
                    raise _Invalid(["the answer is streamed, not a JSON body"])
                data = source.get_data()
                if not data:
                    return source
                value = _decoded(source, data)
            if self.result is not None:
                value = self._convert(tool, value)
                if isinstance(value, BaseResponse):  # the converter answered itself
                    source, status, headers = value, None, None
                    value = _decoded(source, source.get_data())
            if self.shape is not None:
                payload, mimetype = self._project(value), "application/json"
            else:
                payload, mimetype = _serialised(value)
        except _Invalid as exc:
            return self._invalid(state, tool, exc.problems)
        if source is not None:
            source.set_data(payload)
            if source.mimetype != mimetype:
                source.mimetype = mimetype
            return source  # type: ignore[return-value]
        response = current_app.response_class(payload, status=status if status is not None else 200,
                                              mimetype=mimetype)
        if headers:
            response.headers.update(headers)
        return response

    def error_answer(self, tool: Tool, response: _R, exc: HTTPException | None = None) -> _R:
        """A non-2xx answer with only the declared error shape in its body (status, headers kept).

        An empty body stays empty; a streamed one is not read (nor kept)."""
        value = _error_body(response)
        if value is _EMPTY:
            return response
        description = exc.description if exc is not None else None
        response.set_data(self._error_payload(tool, response.status_code, value, description))
        response.mimetype = "application/json"
        return response

    def _error_payload(self, tool: Tool, code: int, value: Any, description: Any) -> bytes:
        shape = self.error_shape
        if shape is not None and value is not _MISSING and not isinstance(value, (str, bytes)):
            try:
                payload, _ = shape.project(value, self.default_cap)
            except ValidationError as exc:
                problems = [f"{shape.safe_location(tuple(e['loc']))}: {e['type']}"
                            for e in exc.errors(include_url=False, include_input=False)[:_MAX_PROBLEMS]]
            except (PydanticSerializationError, ValueError, TypeError) as exc:
                problems = [f"it cannot be serialised ({type(exc).__name__})"]
            else:
                if _units(payload.decode("utf-8")) <= MAX_ERROR_BODY:
                    return payload
                problems = [f"it is longer than the {MAX_ERROR_BODY} characters the hub shows"]
            logger.error(
                "bailing: tool %r answered HTTP %d with a body that does not match its declared "
                "error_response=%s, so the package's error shape was sent instead: %s",
                tool.name, code, shape.label, "; ".join(problems),
            )
        return _error_shape(code, value, description)

    def _convert(self, tool: Tool, value: Any) -> Any:
        assert self.result is not None
        try:
            return call_sync(self.result, value)
        except Exception as exc:
            # the view has finished (and had its effect): a failed converter withholds the answer
            logger.error("bailing: the result= converter of tool %r raised %s", tool.name,
                         type(exc).__name__, exc_info=not tool.sensitive)
            raise _Invalid([f"the result= converter raised {type(exc).__name__}"]) from None

    def _project(self, value: Any) -> bytes:
        shape = self.shape
        assert shape is not None
        if isinstance(value, (str, bytes, bytearray)):
            raise _Invalid(["the answer is text, not JSON"])
        try:
            payload, ctx = shape.project(value, self.default_cap)
        except ValidationError as exc:
            errors = exc.errors(include_url=False, include_context=False, include_input=False)
            problems = [f"{shape.safe_location(tuple(e['loc']))}: {e['type']}" for e in errors[:_MAX_PROBLEMS]]
            if len(errors) > _MAX_PROBLEMS:
                problems.append(f"and {len(errors) - _MAX_PROBLEMS} more")
            raise _Invalid(problems) from None
        except (PydanticSerializationError, ValueError, TypeError) as exc:
            raise _Invalid([f"it cannot be serialised ({type(exc).__name__})"]) from None
        request.environ[PROJECTION_KEY] = ctx.counts()
        return payload

    def _invalid(self, state: BailingState, tool: Tool, problems: list[str]) -> Response:
        what = (f"does not match its declared response={self.shape.label}" if self.shape is not None
                else "cannot be sent after its result= converter")
        logger.error(
            "bailing: tool %r answered a result that %s, so the answer was withheld (500 "
            "invalid_response): %s", tool.name, what, "; ".join(problems),
        )
        return state.error_response(ErrorInfo.make("invalid_response"))


def make_shaper(options: Any, default_cap: int | None) -> Shaper | None:
    """The tool's :class:`Shaper`, or ``None`` when it declares none of ``response=``,
    ``error_response=`` and ``result=``.

    ``default_cap`` is ``BAILING_RESPONSE_MAX_ITEMS``; the tool's ``max_items=`` wins.
    """
    if options.response is None and options.result is None and options.error_response is None:
        return None
    if options.max_items is not None:
        default_cap = options.max_items or None
    return Shaper(options.response, options.result, default_cap, options.error_response)


def finish(state: BailingState, tool: Tool, call_view: Callable[[], Any]) -> Response:
    """The gate's last step inside the de-duplicated run: run the view, its value -> the answer.

    With declared errors ``abort(4xx)`` is rendered here by the app's handlers
    and shaped, so a de-duplicated call's record holds what the model may see.
    """
    shaper: Shaper | None = tool.shaper
    if shaper is None:
        return state.app.make_response(call_view())
    if not shaper.guards_errors:
        return shaper.respond(state, tool, call_view())
    try:
        rv = call_view()
    except HTTPException as exc:
        if exc.code is None or exc.code >= 500:
            raise
        rendered = current_app.make_response(current_app.handle_user_exception(exc))
        return shaper.error_answer(tool, rendered, exc)
    return shaper.respond(state, tool, rv)


def guard_answer(state: BailingState, tool: Tool) -> bool:
    """Shape the answer Flask finally sends, unless it is the one the gate produced (``DECLARED_KEY``).

    That is a page rendered for an exception the view raised (even a 2xx).
    Installed only for tools with a declared shape; returns whether it was.
    """
    shaper = tool.shaper
    if shaper is None or not shaper.guards_errors:
        return False
    environ = request.environ
    guard: Shaper = shaper

    def check(response: Response) -> Response:
        declared: object = environ.get(DECLARED_KEY)
        if declared is not response:
            if not 200 <= response.status_code < 300:
                return guard.error_answer(tool, response)
            if guard.shape is not None:
                return guard.respond(state, tool, response)
        return response

    after_this_request(check)
    return True
