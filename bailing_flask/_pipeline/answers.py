"""A view's answer taken apart the way Flask does, and the package's error shape.

Used by :mod:`bailing_flask._pipeline.projection`: a view returns a
``(body, status, headers)`` tuple, a ``Response``, a dict, a list, a
pydantic model or any object with attributes (an ORM row); these helpers
tell them apart without reading more than they must. :func:`error_shape`
is what a non-2xx answer of a tool with a declared shape carries.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel
from werkzeug.http import HTTP_STATUS_CODES
from werkzeug.wrappers import Response as BaseResponse

__all__ = ["EMPTY", "MISSING", "Invalid", "split", "is_data", "status_code", "decoded",
           "serialised", "error_body", "error_shape"]

#: A value that is not there (``None`` is a value).
MISSING: Any = object()
#: An answer with no body to shape.
EMPTY: Any = object()
#: Statuses that carry no body.
_NO_BODY = frozenset((204, 205, 304))
#: The longest ``error``/``reason`` and ``message`` of the error shape, in characters.
MAX_ERROR_CODE = 100
MAX_ERROR_MESSAGE = 1000
#: ``tool_result``'s statuses: the only ``status`` values the error shape keeps.
_WORKFLOW_STATUSES = frozenset(("executed", "submitted", "pending_approval", "drafted", "rejected"))


class Invalid(Exception):
    """An answer that cannot be sent as declared; ``problems`` name fields and error types only."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def split(rv: Any) -> tuple[Any, Any, Any]:
    """``(body, status, headers)`` the way Flask reads a view's return value."""
    if not isinstance(rv, tuple):
        return rv, None, None
    if len(rv) == 3:
        return rv
    if len(rv) == 2:
        body, second = rv
        if isinstance(second, (dict, list, tuple)) or hasattr(second, "items"):
            return body, None, second
        return body, second, None
    return rv, None, None  # Flask refuses it; make_response says why


def is_data(body: Any) -> bool:
    """A body the package serialises itself (Flask could not, or would jsonify it)."""
    if isinstance(body, (dict, list, BaseModel)):
        return True
    if body is None or isinstance(body, (str, bytes, bytearray, tuple, Iterator, BaseResponse)):
        return False
    return not callable(body)  # a WSGI app is Flask's; an ORM row or a dataclass is data


def status_code(status: Any) -> int | None:
    if status is None:
        return 200
    if isinstance(status, int):
        return int(status)
    text = str(status).strip().split(" ", 1)[0]
    return int(text) if text.isdigit() else None


def decoded(response: BaseResponse, data: bytes) -> Any:
    """A JSON body decoded; any other body as its text."""
    if response.is_json:
        try:
            return json.loads(data)
        except ValueError:
            raise Invalid(["the answer says JSON but is not"]) from None
    return data.decode(response.mimetype_params.get("charset", "utf-8"), "replace")


def serialised(value: Any) -> tuple[bytes, str]:
    """A converter's new body, without ``response=``: JSON, or text for a ``str``."""
    if isinstance(value, str):
        return value.encode("utf-8"), "text/plain"
    if isinstance(value, BaseModel):
        return value.model_dump_json(by_alias=True).encode("utf-8"), "application/json"
    if isinstance(value, (dict, list)):
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise Invalid([f"the converted result cannot be serialised ({type(exc).__name__})"]) from None
        return text.encode("utf-8"), "application/json"
    raise Invalid([f"the converter returned a {type(value).__name__}, not JSON data or text"])


def error_body(response: BaseResponse) -> Any:
    """What a non-2xx answer says: its decoded JSON, :data:`MISSING` (not JSON), or :data:`EMPTY`.

    A streamed body is not read: its iterable is closed, as none of it will be
    sent (the response's own close callbacks still run once, when it is sent).
    """
    if response.status_code in _NO_BODY:
        return EMPTY
    if response.is_streamed:
        close = getattr(response.response, "close", None)
        if callable(close):
            close()
        return MISSING
    data = response.get_data()
    if not data:
        return EMPTY
    if response.is_json:
        try:
            return json.loads(data)
        except ValueError:
            pass
    return MISSING


def _text(value: Any, limit: int) -> str | None:
    """A string field of an error body, cut to ``limit`` characters (ending in ``…``)."""
    if not isinstance(value, str) or not value:
        return None
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _error_fields(value: Any) -> Mapping[str, Any]:
    """The keys or attributes an error body has (nothing else is read)."""
    if isinstance(value, Mapping):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump()
    if value is MISSING or isinstance(value, (str, bytes, bytearray, list, tuple)):
        return {}
    return {key: getattr(value, key) for key in ("error", "reason", "message", "ok", "status")
            if not key.startswith("_") and hasattr(value, key)}


def error_shape(code: int, value: Any, description: Any) -> bytes:
    """The package's error shape for a non-2xx answer: ``error``, ``reason``, ``message``.

    Taken from the body's own string fields when it has them (bounded), else
    from the status (``409`` -> ``conflict``); a ``tool_result(...)`` body
    also keeps ``ok`` and ``status``. Nothing else of the body leaves.
    """
    fields = _error_fields(value)
    phrase = HTTP_STATUS_CODES.get(code, "Error")
    slug = "".join(ch if ch.isalnum() else "_" for ch in phrase.lower()).strip("_") or "error"
    error = _text(fields.get("error"), MAX_ERROR_CODE) or slug
    payload: dict[str, Any] = {
        "error": error,
        "reason": _text(fields.get("reason"), MAX_ERROR_CODE) or error,
        "message": (_text(fields.get("message"), MAX_ERROR_MESSAGE)
                    or _text(description, MAX_ERROR_MESSAGE) or phrase),
    }
    ok, status = fields.get("ok"), fields.get("status")
    if isinstance(ok, bool) and isinstance(status, str) and status in _WORKFLOW_STATUSES:
        payload["ok"], payload["status"] = ok, status
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
