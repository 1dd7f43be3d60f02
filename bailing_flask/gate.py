"""The gate every tool call passes before (and after) the view runs.

Order matters and is fixed: signature (already verified by the middleware)
-> subject present if required -> subject loaded -> arguments validated ->
authorized -> side effect de-duplicated -> view -> audit. Every refusal is
a JSON error with a stable reason; every call leaves one audit record.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flask import Response, current_app, request

from .arguments import ArgumentError, validate_arguments
from .authz import SubjectLoadError, decide, load_user, tool_info
from .context import TOOL_CALL_KEY, ToolCall
from .responses import ErrorInfo
from .signals import tool_called, tool_denied
from .wsgi import ENVIRON_KEY, VerifiedCall

if TYPE_CHECKING:  # pragma: no cover
    from .extension import BailingState
    from .registry import Tool
    from .tools import Declaration

__all__ = ["run_tool_view"]

logger = logging.getLogger("bailing_flask")
audit_logger = logging.getLogger("bailing_flask.audit")

_MAX_NAMES = 20


def _state() -> BailingState:
    state = current_app.extensions.get("bailing")
    if state is None:
        raise RuntimeError(
            "bailing_flask: a @tool view was called but Bailing(app) was not initialised for this app"
        )
    return state  # type: ignore[no-any-return]


def _names(errors: list[dict[str, Any]]) -> list[str]:
    return [str(e.get("parameter", ""))[:100] for e in errors[:_MAX_NAMES]]


def run_tool_view(
    declaration: Declaration, view: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """Called by every ``@tool`` wrapper instead of the view itself."""
    state = _state()
    endpoint = request.url_rule.endpoint if request.url_rule is not None else None
    tool = state.registry().lookup(endpoint, request.method)
    verified: VerifiedCall | None = request.environ.get(ENVIRON_KEY)
    if tool is None:
        # this method was explicitly opted out (enabled=False / methods=): a plain route
        return view(*args, **kwargs)
    if verified is None:
        if tool.options.allow_unsigned:
            return view(*args, **kwargs)
        return _refuse(state, tool, None, ErrorInfo.make("missing_signature"))
    started = time.perf_counter()
    if tool.subject_required and not verified.subject:
        return _refuse(state, tool, verified, ErrorInfo.make("subject_required"))
    try:
        user = load_user(state.ext.subject_loader_func, verified.subject)
    except SubjectLoadError:
        return _refuse(state, tool, verified, ErrorInfo.make("forbidden"))
    try:
        validated = validate_arguments(tool, request, dict(kwargs))
    except ArgumentError as exc:
        details: dict[str, Any] = {"parameters": _names(exc.errors)}
        if exc.reason != "unknown_parameter":
            details["errors"] = exc.errors[:_MAX_NAMES]
        return _refuse(state, tool, verified, ErrorInfo.make(exc.reason, **details))
    call = ToolCall(
        verified=verified, tool=tool_info(tool), user=user, args=validated.args,
        query=validated.query, body=validated.body,
    )
    request.environ[TOOL_CALL_KEY] = call
    decision = decide(tool, call, state.ext.authorizer_func)
    if not decision.allowed:
        return _refuse(state, tool, verified, ErrorInfo.make(decision.reason or "forbidden"), call)
    replayed = state.idempotency.check_replay(tool, call)
    if replayed is not None:
        return _refuse(state, tool, verified, replayed, call)

    def execute() -> Response:
        return current_app.make_response(view(*args, **kwargs))

    response = state.run_side_effect(tool, call, execute)
    _after(state, tool, call, response, started)
    return response


def _refuse(
    state: BailingState, tool: Tool, verified: VerifiedCall | None, info: ErrorInfo,
    call: ToolCall | None = None,
) -> Response:
    response = state.error_response(info)
    _audit(tool, verified, response.status_code, None, info.reason, call)
    tool_denied.send(current_app._get_current_object(), tool=tool_info(tool),  # type: ignore[attr-defined]
                     call=call, reason=info.reason, status=response.status_code)
    return response


def _after(state: BailingState, tool: Tool, call: ToolCall, response: Response, started: float) -> None:
    duration_ms = (time.perf_counter() - started) * 1000
    reason = None if response.status_code < 400 else "view_status"
    _audit(tool, call.verified, response.status_code, duration_ms, reason, call,
           values=state.config("BAILING_AUDIT_ARGUMENT_VALUES") and not tool.sensitive)
    limit = state.config("BAILING_RESPONSE_SIZE_WARNING")
    if limit and 200 <= response.status_code < 300 and not response.is_streamed:
        data = response.get_data()
        if len(data) > limit:  # UTF-16 units never exceed UTF-8 bytes
            units = len(data.decode("utf-8", "replace").encode("utf-16-le")) // 2
            if units > limit:
                state.warn_once(
                    ("size", tool.name),
                    "bailing: tool %r answered %d UTF-16 units; the model only reads the first %d",
                    tool.name, units, limit,
                )
    tool_called.send(current_app._get_current_object(), call=call,  # type: ignore[attr-defined]
                     response=response, duration_ms=duration_ms)


def _audit(
    tool: Tool, verified: VerifiedCall | None, status: int, duration_ms: float | None,
    reason: str | None, call: ToolCall | None, values: bool = False,
) -> None:
    if not audit_logger.isEnabledFor(logging.INFO):
        return
    record: dict[str, Any] = {
        "tool": tool.name,
        "job_id": verified.job_id if verified else None,
        "subject": verified.subject if verified else None,
        "client": verified.unsigned.client if verified else None,
        "status": status,
        "duration_ms": None if duration_ms is None else round(duration_ms, 2),
        "reason": reason,
    }
    if call is not None:
        record["arguments"] = dict(call.args) if values else sorted(call.args)
    audit_logger.info("bailing tool call %s", record, extra={"bailing": record})
