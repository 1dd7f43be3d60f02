"""Response shapes: JSON errors with a stable reason, and the workflow result.

The hub shows non-2xx bodies of tool calls to the model (up to 2048
characters) and treats every 2xx as success, so
errors use real status codes and carry only a code, an explanation and the
names of offending parameters: never values, secrets or bodies.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from flask import Response

from bailing_flask.errors import REASON_MESSAGES
from bailing_flask.reasons import REASONS

__all__ = [
    "ErrorInfo", "tool_result", "REASON_STATUS", "MAX_ERROR_BODY", "REASON_HEADER", "REPLAY_HEADER",
    "reason_response",
]

#: The hub shows the model the first 2048 characters of a non-2xx body.
MAX_ERROR_BODY = 2048

#: Set on every refusal the package itself answers (the middleware's and the
#: gate's, restyled or not), so a checker can tell them from the app's own
#: 401s, redirects and error pages.
REASON_HEADER = "X-Bailing-Reason"

#: Set to ``true`` on an answer given from the idempotency record instead of running the view
#: again (a repeat of a de-duplicated call, in the store or the transaction mode).
REPLAY_HEADER = "Idempotent-Replayed"

#: Default status of each refusal reason, from the one table in :mod:`bailing_flask.reasons`.
REASON_STATUS: Mapping[str, int] = MappingProxyType({r.code: r.status for r in REASONS.values()})


@dataclass(frozen=True)
class ErrorInfo:
    """A refusal, as handed to the app's ``@bailing.error_handler``.

    :param status: the HTTP status.
    :param reason: the stable reason code.
    :param details: extra JSON-safe data (e.g. the offending parameter
        names); never request values.
    """

    status: int
    reason: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def error(self) -> str:
        """The coarse code the hub's SDKs would answer (the table's, else the reason)."""
        entry = REASONS.get(self.reason)
        return entry.sdk_error if entry is not None else self.reason

    def payload(self) -> dict[str, Any]:
        """The JSON body, at most :data:`MAX_ERROR_BODY` characters long.

        The hub shows the model only the first 2048 characters of an error
        body; a longer one would reach it cut in the middle of the JSON. So
        the last ``errors`` entries, then the last ``parameters``, are left
        out until it fits, and ``"truncated": true`` says so.
        """
        data = {"error": self.error, "reason": self.reason, "message": self.message, **self.details}
        return _bounded(data)

    @classmethod
    def make(cls, reason: str, status: int | None = None, **details: Any) -> ErrorInfo:
        return cls(status or REASON_STATUS.get(reason, 400), reason,
                   REASON_MESSAGES.get(reason, reason), details)


def _units(payload: dict[str, Any]) -> int:
    """Length of the body :func:`json_response` makes, in UTF-16 code units (JS ``length``)."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _bounded(data: dict[str, Any], limit: int | None = None) -> dict[str, Any]:
    limit = MAX_ERROR_BODY if limit is None else limit
    if _units(data) <= limit:
        return data
    data = dict(data)
    for key in ("errors", "parameters"):
        if isinstance(data.get(key), list):
            data[key] = list(data[key])
    data["truncated"] = True
    for key in ("errors", "parameters"):
        items = data.get(key)
        while isinstance(items, list) and items and _units(data) > limit:
            items.pop()
    return data


def json_response(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """A compact UTF-8 JSON response that does not depend on app JSON settings."""
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    response = Response(body, status=status, mimetype="application/json")
    response.headers["Content-Type"] = "application/json; charset=utf-8"
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def reason_response(code: str, *, message: str | None = None,
                    headers: dict[str, str] | None = None) -> Response:
    """A refusal of the package's own endpoints, from the reason table: status, coarse code, message.

    ``message`` replaces the table's (say what exactly was wrong; never echo request data).
    """
    info = ErrorInfo.make(code)
    if message is not None:
        info = ErrorInfo(info.status, info.reason, message, info.details)
    return json_response(info.payload(), info.status, {REASON_HEADER: code, **(headers or {})})


WorkflowStatus = Literal["executed", "submitted", "pending_approval", "drafted", "rejected"]


def tool_result(
    status: WorkflowStatus = "executed",
    message: str | None = None,
    *,
    ok: bool | None = None,
    business_id: str | int | None = None,
    url: str | None = None,
    http_status: int | None = None,
    data: Mapping[str, Any] | None = None,
    **extra: Any,
) -> Response:
    """The result shape the hub recommends for workflow tools.

    ``{"ok": true, "status": "pending_approval", "message": ..., "business_id": ..., "url": ...}``
    tells the agent whether an action was executed, submitted, drafted or
    rejected. ``rejected`` answers 422 by default: the hub treats every 2xx
    as success, so a refusal must not be a 200. More fields go in ``data``
    (any keys) or as keyword arguments (other than the named ones).
    """
    if ok is None:
        ok = status != "rejected"
    payload: dict[str, Any] = {"ok": ok, "status": status}
    if message is not None:
        payload["message"] = message
    if business_id is not None:
        payload["business_id"] = business_id
    if url is not None:
        payload["url"] = url
    if data:
        payload.update(data)
    payload.update(extra)
    return json_response(payload, http_status or (422 if status == "rejected" else 200))
