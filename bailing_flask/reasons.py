"""Every refusal reason in one table: code, HTTP status, the SDK's coarse code, message.

The codes are public API: the hub shows error bodies of tool calls to the
model, operators grep logs for them, apps restyle responses by them, and the
documentation's reason table is generated from :data:`REASONS`. Refusals of
the middleware (:class:`~bailing_flask.errors.SignatureError`) and of the
gate (:class:`~bailing_flask.responses.ErrorInfo`) both take their status,
coarse code and message from here. Messages say what is wrong and how to fix
it, and never contain request data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Reason", "REASONS", "reason"]


@dataclass(frozen=True)
class Reason:
    """One refusal reason."""

    code: str
    #: The HTTP status the refusal is answered with.
    status: int
    #: The coarse ``error`` code the hub's own SDKs would answer (the precise
    #: code stays in ``reason``): they only know ``timestamp_out_of_window``
    #: and ``bad_signature`` for signature problems.
    sdk_error: str
    #: The explanation shown to the caller.
    message: str


def _r(code: str, status: int, sdk_error: str, message: str) -> Reason:
    return Reason(code, status, sdk_error, message)


_TABLE: tuple[Reason, ...] = (
    _r("missing_signature", 401, "bad_signature",
       (
           "This endpoint only answers requests signed by BailingHub (the "
           "X-Bailing-Signature header is missing)."
       )),
    _r("malformed_signature", 401, "bad_signature",
       (
           "X-Bailing-Signature must be 'sha256=' followed by 64 lowercase hex digits, "
           "sent once."
       )),
    _r("malformed_timestamp", 401, "timestamp_out_of_window",
       "X-Bailing-Timestamp must be a Unix time made of ASCII digits only, sent once."),
    _r("timestamp_out_of_window", 401, "timestamp_out_of_window",
       (
           "X-Bailing-Timestamp is outside the accepted window; check that the clocks of "
           "the hub and this server are synchronised (NTP)."
       )),
    _r("bad_signature", 401, "bad_signature",
       (
           "The signature does not match this request; check the shared secret and that no"
           " proxy rewrites the path, the query or the body."
       )),
    _r("malformed_job_id", 401, "bad_signature",
       "X-Bailing-Job-Id must not contain '.'."),
    _r("ambiguous_signature", 401, "bad_signature",
       (
           "The signed fields of this request could be read as another request (64 "
           "lowercase hex digits between dots in the subject, or the empty body's sha256 "
           "between dots in a GET's path or query), so the signature cannot tell which one "
           "the hub signed. Build subjects without such a run; send such a GET value without "
           "the dots around it."
       )),
    _r("unexpected_body", 401, "bad_signature",
       "A GET or HEAD request signed by the hub never carries a body."),
    _r("body_not_json", 415, "invalid_arguments",
       (
           "A signed request body must be sent as Content-Type: application/json, as the hub "
           "sends it: the header is not signed, and another type would be read otherwise."
       )),
    _r("missing_path_argument", 422, "invalid_arguments",
       (
           "A path parameter of this tool was left out: the hub signed the path template "
           "with its {placeholder} (and its URL parser sent it as %7B...%7D). Call the tool "
           "again with every path argument."
       )),
    _r("body_too_large", 413, "body_too_large",
       "The request body is larger than this endpoint accepts."),
    _r("malformed_body", 400, "malformed_body",
       (
           "The request body could not be read completely (bad Content-Length or an "
           "interrupted upload)."
       )),
    _r("body_timeout", 408, "malformed_body",
       (
           "The request body did not arrive within the time this server allows for it; "
           "the connection was closed. Send the body without pauses, or retry."
       )),
    _r("not_configured", 503, "bad_signature",
       (
           "This server has no BailingHub secret configured yet, so it cannot verify any "
           "hub request; the operator must set the tool source's provider secret."
       )),
    _r("wrong_key", 401, "bad_signature",
       (
           "The signature was made with a different key than the one expected here (tool "
           "calls use the provider secret; callbacks, approvals and tickets use the client"
           " token)."
       )),
    _r("subject_required", 403, "forbidden",
       "This tool acts on behalf of a user; the call carried no subject."),
    _r("forbidden", 403, "forbidden",
       "The acting subject is not allowed to use this tool."),
    _r("no_authorizer", 403, "forbidden",
       "This tool has no authorization rule configured, so every call is refused."),
    _r("unknown_parameter", 422, "invalid_arguments",
       "The call carried parameters this tool does not declare."),
    _r("invalid_parameter", 422, "invalid_arguments",
       "Some parameters do not match the tool's declaration."),
    _r("invalid_body", 422, "invalid_arguments",
       "The request body must be a JSON object."),
    _r("idempotency_in_progress", 409, "conflict",
       "The same call is still being processed; its outcome is not known yet."),
    _r("idempotency_other_subject", 409, "conflict",
       "The same call was already made on behalf of another user; it was not run again, and "
       "its answer is theirs."),
    _r("idempotency_uncertain", 409, "conflict",
       (
           "An earlier attempt of this exact call did not finish cleanly; it needs manual "
           "reconciliation before it can be answered."
       )),
    _r("idempotency_store_unavailable", 503, "unavailable",
       (
           "The idempotency store is unavailable, so side effects are paused; nothing was "
           "executed."
       )),
    _r("transaction_failed", 503, "unavailable",
       (
           "The database did not confirm the commit of this call. Either the call and its "
           "answer were committed, or nothing happened; the same call sent again is answered "
           "from the record or runs."
       )),
    _r("transaction_ended_by_view", 500, "conflict",
       (
           "The tool's code committed or ended the database transaction this call runs in, "
           "so its answer could not be recorded with its changes: the changes may have "
           "happened. The call is left uncertain until an operator reconciles it; do not "
           "retry it as a new request."
       )),
    _r("idempotency_store_busy", 503, "unavailable",
       (
           "The idempotency store is locked by another process right now, so side effects "
           "are paused; nothing was executed."
       )),
    _r("replayed", 401, "bad_signature",
       "This exact signed request was already received."),
    _r("request_altered", 401, "bad_signature",
       (
           "The request was changed after its signature was verified (a middleware between"
           " the verifier and the app rewrote its method, path, query or body), so it is "
           "not the request the hub signed."
       )),
    _r("tool_not_registered", 500, "tool_not_registered",
       (
           "This tool cannot be served: it was reached without the gate of its own route (another "
           "view or an error handler calls its function, or a decorator between its route and @tool "
           "hides the declaration: use functools.wraps in that decorator)."
       )),
    _r("invalid_response", 500, "invalid_response",
       (
           "This tool's result did not match the return shape it declares, so it was "
           "withheld; the tool's operator has to fix the tool (the server log names the "
           "fields)."
       )),
    _r("no_such_tool", 404, "not_found",
       (
           "No tool is served at this path: the call does not match the catalog (for one, a "
           "path parameter of the wrong type, such as text where a number is declared, "
           "matches no route)."
       )),
    _r("method_not_allowed", 405, "method not allowed",
       "Method not allowed."),
    _r("catalog_unavailable", 503, "unavailable",
       "The tool catalog could not be built; see the server log."),
    _r("login_required", 403, "forbidden",
       (
           "This tool's view requires a logged-in user, and the call's subject is "
           "anonymous or not a user of this application."
       )),
    _r("role_required", 403, "forbidden",
       (
           "This tool's view requires a role the acting user does not have in this "
           "application."
       )),
    _r("login_user_invalid", 500, "login_user_invalid",
       (
           "This tool's view uses Flask-Login, but the app's subject loader returned an "
           "object Flask-Login cannot use as the current user; the tool's operator has to "
           "fix the subject loader (the server log names it)."
       )),
    _r("fresh_login_required", 403, "forbidden",
       (
           "This tool's view requires a fresh interactive login, which a call through "
           "BailingHub never is; it cannot be used as a tool."
       )),
    _r("business_approval_required", 403, "forbidden",
       (
           "This tool runs only after the business approved this exact call (same job, "
           "subject and arguments) in its own approval flow, and each approval admits one "
           "call; no unspent approval of this call is on record here."
       )),
    # hub callbacks (job finished, delivery webhook, approval request): the hub retries a 5xx only
    _r("no_handler", 404, "not_found",
       "This app registered no handler for this kind of hub callback."),
    _r("invalid_payload", 400, "bad_request",
       "The signed callback's JSON is not the payload the hub sends for this kind of event."),
    _r("in_progress", 503, "unavailable",
       "The same callback is being handled right now; the hub retries it later."),
    _r("handler_failed", 500, "handler_failed",
       "The app's callback handler failed; the hub retries the callback."),
)

#: Every reason by code, in the documentation's order.
REASONS: Mapping[str, Reason] = {entry.code: entry for entry in _TABLE}
assert len(REASONS) == len(_TABLE), "a reason is listed twice"


def reason(code: str) -> Reason | None:
    """The table's entry for ``code`` (``None`` for a code outside the table)."""
    return REASONS.get(code)
