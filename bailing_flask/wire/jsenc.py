"""JavaScript's encoders, reproduced byte for byte.

The hub is a Node.js program: it turns arguments into a URL with
``encodeURIComponent`` and ``URLSearchParams``, into header values with
``String()``, and into a body with ``JSON.stringify``; it walks objects in JS
property order. Python's ``urlencode``, ``str()`` and ``json.dumps`` all
differ somewhere (see the security page's traps T6, T13 and T15), and a
signature over different bytes is a failed call. These helpers are used by
the test client (to call tools exactly as the hub does) and by the
middleware's path reconstruction.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

__all__ = [
    "JS_WHITESPACE",
    "js_trim",
    "utf16_len",
    "utf16_slice",
    "encode_uri_component",
    "form_component",
    "url_search_params",
    "js_number",
    "js_string",
    "js_property_order",
    "canonical_json",
    "json_stringify",
    "PATH_ENCODE_SET",
    "QUERY_ENCODE_SET",
    "percent_encode",
    "whatwg_pathname",
    "whatwg_target",
]

_MAX_ARRAY_INDEX = 4294967294

#: The characters ``String.prototype.trim`` removes (the hub trims most fields).
JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def js_trim(text: str) -> str:
    """``text.trim()``: Python's ``strip()`` removes a different set of characters."""
    return text.strip(JS_WHITESPACE)


def utf16_len(text: str) -> int:
    """``text.length``: UTF-16 code units, so astral characters count 2."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def utf16_slice(text: str, units: int) -> str:
    """``text.slice(0, units)``: may cut an astral character in half, like JS."""
    data = text.encode("utf-16-le", "surrogatepass")[: 2 * units]
    return data.decode("utf-16-le", "surrogatepass")


#: What the WHATWG URL parser percent-encodes in an http(s) path (beyond controls and non-ASCII).
PATH_ENCODE_SET = frozenset(' "#<>?`{}')
#: ... and in its query.
QUERY_ENCODE_SET = frozenset(" \"#<>'")


def percent_encode(text: str, encode: frozenset[str]) -> str:
    """``text`` with controls, non-ASCII and the characters of ``encode`` percent-encoded as UTF-8."""
    out = []
    for ch in text:
        if ord(ch) < 0x20 or ord(ch) > 0x7E or ch in encode:
            out.append("".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass")))
        else:
            out.append(ch)
    return "".join(out)


def whatwg_pathname(path: str) -> str:
    """The pathname the WHATWG URL parser (Node's ``new URL``, ``fetch``) makes of an http(s) ``path``.

    Backslashes become slashes, ``.`` and ``..`` segments (also ``%2e``)
    are resolved, and what the parser encodes is percent-encoded: the
    request line the hub sends, which differs from the path it signed
    exactly where these rules change something.
    """
    path = path.replace("\\", "/")
    if not path.startswith("/"):
        path = "/" + path
    segments = path[1:].split("/")
    out: list[str] = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        lowered = segment.lower()
        if lowered in ("..", ".%2e", "%2e.", "%2e%2e"):
            if out:
                out.pop()
            if last:
                out.append("")
        elif lowered in (".", "%2e"):
            if last:
                out.append("")
        else:
            out.append(percent_encode(segment, PATH_ENCODE_SET))
    return "/" + "/".join(out)


def whatwg_target(path_with_query: str) -> str:
    """The request-target the hub's ``fetch`` sends for a signed ``path?query``."""
    path, sep, query = path_with_query.partition("?")
    return whatwg_pathname(path) + (sep + percent_encode(query, QUERY_ENCODE_SET) if query else "")


def _replace_lone_surrogates(value: str) -> str:
    return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def encode_uri_component(value: str) -> str:
    """``encodeURIComponent``: unreserved plus ``!~*'()`` stay, UTF-8 otherwise.

    Raises ``ValueError`` on a lone surrogate, where JS throws ``URIError``.
    """
    try:
        data = value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError("URIError: URI malformed (lone surrogate)") from exc
    return quote(data, safe="!~*'()")


def form_component(value: str) -> str:
    """One name or value of ``application/x-www-form-urlencoded`` (URLSearchParams)."""
    data = _replace_lone_surrogates(value).encode("utf-8")
    return quote_plus(data, safe="*").replace("~", "%7E")


def url_search_params(pairs: Iterable[tuple[str, str]]) -> str:
    """Serialise pairs the way ``URLSearchParams.toString()`` does."""
    return "&".join(form_component(k) + "=" + form_component(v) for k, v in pairs)


def js_number(value: int | float) -> str:
    """``Number.prototype.toString()`` for the double nearest to ``value``."""
    number = float(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    if number == 0:
        return "0"
    sign = "-" if number < 0 else ""
    mantissa, _, exponent = repr(abs(number)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    # position of the decimal point relative to the first significant digit
    point = (0 if whole == "0" else len(whole)) + (int(exponent) if exponent else 0)
    if whole == "0":
        point -= len(fraction) - len(fraction.lstrip("0"))
    digits = digits.rstrip("0") or "0"
    k, n = len(digits), point
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        exp = n - 1
        text = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + ("+" if exp >= 0 else "-") + str(abs(exp))
    return sign + text


def js_string(value: Any) -> str:
    """``String(value)`` for a JSON value (how query, path and header arguments are sent)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return js_number(value)
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return ",".join("" if item is None else js_string(item) for item in value)
    return "[object Object]"


def _is_array_index(key: str) -> bool:
    return key.isascii() and key.isdigit() and (key == "0" or not key.startswith("0")) and int(
        key
    ) <= _MAX_ARRAY_INDEX


def js_property_order(keys: Iterable[str]) -> list[str]:
    """Own-property order: array-index keys ascending, then insertion order."""
    keys = list(keys)
    if not any(k[:1].isdigit() for k in keys):  # the usual case: nothing moves
        return keys
    indexes = sorted((k for k in keys if _is_array_index(k)), key=int)
    return indexes + [k for k in keys if not _is_array_index(k)]


def _stringify_string(value: str) -> str:
    # json.dumps(ensure_ascii=False) matches JSON.stringify (lower-case \u00xx,
    # \b \t \n \f \r) except for lone surrogates, which JS escapes.
    text = json.dumps(value, ensure_ascii=False)
    if any(0xD800 <= ord(ch) <= 0xDFFF for ch in value):
        text = "".join(
            f"\\u{ord(ch):04x}" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in text
        )
    return text


def json_stringify(value: Any) -> str:
    """``JSON.stringify`` with JS number formatting and JS property order."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        number = float(value)
        return "null" if math.isnan(number) or math.isinf(number) else js_number(value)
    if isinstance(value, str):
        return _stringify_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(json_stringify(item) for item in value) + "]"
    if isinstance(value, Mapping):
        return (
            "{"
            + ",".join(
                _stringify_string(str(k)) + ":" + json_stringify(value[k])
                for k in js_property_order(value.keys())
            )
            + "}"
        )
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def canonical_json(value: Any) -> str:
    """The hub's canonical JSON: keys sorted by UTF-16 code units at every depth."""
    if isinstance(value, Mapping):
        keys = sorted(value, key=lambda k: str(k).encode("utf-16-be"))
        return "{" + ",".join(json_stringify(str(k)) + ":" + canonical_json(value[k]) for k in keys) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(canonical_json(item) for item in value) + "]"
    return json_stringify(value)
