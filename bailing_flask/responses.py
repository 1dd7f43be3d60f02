"""Response shapes: JSON errors with a stable reason, and the workflow result.

The hub shows non-2xx bodies of tool calls to the model (up to 2048
characters, ``CONTRACT.md`` §3.11) and treats every 2xx as success, so
errors use real status codes and carry only a code, an explanation and the
names of offending parameters: never values, secrets or bodies.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from flask import Response

from .errors import REASON_MESSAGES

__all__ = ["ErrorInfo", "tool_result", "REASON_STATUS", "MAX_ERROR_BODY", "REASON_HEADER"]

#: The hub shows the model the first 2048 characters of a non-2xx body.
MAX_ERROR_BODY = 2048

#: Set on every refusal the package itself answers (the middleware's and the
#: gate's, restyled or not), so a checker can tell them from the app's own
#: 401s, redirects and error pages.
REASON_HEADER = "X-Bailing-Reason"

#: Default status of each Flask-level refusal reason.
REASON_STATUS: dict[str, int] = {
    "missing_signature": 401,
    "subject_required": 403,
    "forbidden": 403,
    "no_authorizer": 403,
    "unknown_parameter": 422,
    "invalid_parameter": 422,
    "invalid_body": 422,
    "idempotency_in_progress": 409,
    "idempotency_uncertain": 409,
    "idempotency_store_unavailable": 503,
    "transaction_failed": 503,
    "replayed": 401,
    "request_altered": 401,
    "tool_not_registered": 500,
    "method_not_allowed": 405,
    "catalog_unavailable": 503,
    "login_required": 403,
    "fresh_login_required": 403,
}

_MESSAGES: dict[str, str] = {
    **REASON_MESSAGES,
    "subject_required": "This tool acts on behalf of a user; the call carried no subject.",
    "forbidden": "The acting subject is not allowed to use this tool.",
    "no_authorizer": "This tool has no authorization rule configured, so every call is refused.",
    "unknown_parameter": "The call carried parameters this tool does not declare.",
    "invalid_parameter": "Some parameters do not match the tool's declaration.",
    "invalid_body": "The request body must be a JSON object.",
    "idempotency_in_progress": "The same call is still being processed; retry later.",
    "idempotency_uncertain": (
        "An earlier attempt of this exact call did not finish cleanly; it needs manual "
        "reconciliation before it can be answered."
    ),
    "idempotency_store_unavailable": (
        "The idempotency store is unavailable, so side effects are paused; nothing was executed."
    ),
    "transaction_failed": (
        "The database did not confirm the commit of this call. Either the call and its answer "
        "were committed, or nothing happened; the same call sent again is answered from the "
        "record or runs."
    ),
    "replayed": "This exact signed request was already received.",
    "request_altered": (
        "The request was changed after its signature was verified (a middleware between the "
        "verifier and the app rewrote its method, path, query or body), so it is not the request "
        "the hub signed."
    ),
    "tool_not_registered": (
        "This tool cannot be served: a decorator between its route and @tool hides the "
        "declaration (use functools.wraps in that decorator)."
    ),
    "method_not_allowed": "Method not allowed.",
    "catalog_unavailable": "The tool catalog could not be built; see the server log.",
    "login_required": (
        "This tool's view requires a logged-in user, and the call's subject is anonymous or not "
        "a user of this application."
    ),
    "fresh_login_required": (
        "This tool's view requires a fresh interactive login, which a call through BailingHub "
        "never is; it cannot be used as a tool."
    ),
}

#: The coarse ``error`` code (what the hub's SDKs would answer) per reason.
_COARSE = {
    401: "bad_signature",
    403: "forbidden",
    409: "conflict",
    405: "method not allowed",
    422: "invalid_arguments",
    503: "unavailable",
}


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
        if self.reason in ("timestamp_out_of_window", "malformed_timestamp"):
            return "timestamp_out_of_window"
        if self.reason in ("body_too_large", "malformed_body"):
            return self.reason
        return _COARSE.get(self.status, self.reason)

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
                   _MESSAGES.get(reason, reason), details)


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
