"""JavaScript semantics for the lint: what the hub's TypeScript sees in a JSON value.

``JSON.parse`` key order and number precision, truthiness, ``String()`` and
``Number()`` conversions (including the ones that throw), ``??``, property
reads that find inherited ``Object.prototype`` members, and ``new Set()``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from bailing_flask.wire.jsenc import js_property_order, js_string, json_stringify
from bailing_flask.wire.jsenc import js_trim as _js_trim


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
_MAX_EXACT_INTEGER = 2**53


class _NotJson(Exception):
    """The value cannot have come out of ``JSON.parse``."""


class _HubCrash(Exception):
    """The hub's compiler would throw here, which aborts the whole compile.

    ``code`` names the finding in :data:`~bailing_flask.lint.codes.CODES`;
    ``fields`` fill in its message.
    """

    def __init__(self, code: str, **fields: object) -> None:
        super().__init__(code)
        self.code = code
        self.fields = fields


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
            raise _HubCrash("crash_to_string_key", what=what)
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
    """``[...new Set(values)]``: SameValueZero, objects by identity.

    The hub de-duplicates the required names this way in ``compileOpenApiTools``.
    """
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
