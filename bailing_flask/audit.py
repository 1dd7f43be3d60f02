"""The audit record: one JSON object per tool call, and per refused signature.

Every tool call that reaches the gate leaves exactly one record, whether it
was refused, ran, answered an error or raised; so does every signed request
the middleware refuses before Flask routes it, and every hub callback whose
signature is refused. A record is

* logged as one line of JSON on the logger ``bailing_flask.audit`` at
  ``INFO`` (and attached to the log record as ``record.bailing``);
* sent as the :data:`~bailing_flask.signals.audit_record` signal;
* written by a :class:`JsonLinesSink` when ``BAILING_AUDIT_SINK`` names one
  (a file, a stream or a callable, written by a background thread);
* handed to OpenTelemetry when :mod:`bailing_flask.otel` is enabled.

The field names are stable (:data:`AUDIT_FIELDS`); every record has all of
them. Argument *values* appear only with ``BAILING_AUDIT_ARGUMENT_VALUES``
and never for ``sensitive`` tools; an exception is recorded by its class,
never its message (which may quote data); a request body never appears.
When nobody reads records (no handler would take an ``INFO`` record of the
logger, no receiver, no sink, no telemetry) none is built: not one field.

A record can hold text a caller chose (the subject, ``X-Bailing-Client``,
the method of a refused request, argument values), so before it is handed
to anyone every string in it is bounded (:data:`MAX_FIELD_CHARS`; a longer
one keeps its start and ends with ``…[cut: N characters]``), and its line
(:func:`audit_line`: the logger's message and the sink's line alike)
escapes every character a line-based reader could take for a line break
(``U+0085``, ``U+2028``, ``U+2029`` and the other C1 controls; JSON itself
escapes the C0 ones), so one record is always exactly one line.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from flask import current_app, request
from werkzeug.exceptions import HTTPException

from bailing_flask._audit_sink import (JsonLinesSink, _built_line, _json_default, audit_line,
                                       configured_sink)
from bailing_flask.signals import audit_record, signature_refused
from bailing_flask._pipeline.registry import registry_of
from bailing_flask._state import BailingState, Cache

if TYPE_CHECKING:  # pragma: no cover
    from bailing_flask.context import ToolCall
    from bailing_flask.errors import SignatureError
    from bailing_flask._pipeline.registry import Tool
    from bailing_flask.wire.middleware import VerifiedCall

__all__ = [
    "AUDIT_FIELDS",
    "AUDIT_FIELD_DOCS",
    "AUDIT_LOGGER",
    "AuditNeeds",
    "MAX_FIELD_CHARS",
    "JsonLinesSink",
    "TelemetryHook",
    "audit_line",
    "exception_status",
    "gate_record",
    "emit",
    "signature_refusal",
    "callback_refusal",
]

#: The logger audit records are written to, one JSON object per line.
AUDIT_LOGGER = "bailing_flask.audit"
audit_logger = logging.getLogger(AUDIT_LOGGER)
logger = logging.getLogger("bailing_flask")

#: What each field of a record means; every record has all of them, in this
#: order (``null`` when not known). Event-specific extras follow them:
#: ``expected`` on ``signature_refused`` (the hub's own negative probe of a
#: catalog refresh, refused on purpose) and ``callback`` on
#: ``callback_refused`` (``job``, ``delivery`` or ``approval``).
AUDIT_FIELD_DOCS: dict[str, str] = {
    "event": "`tool_call` (reached the gate), `signature_refused` (refused by the middleware) "
             "or `callback_refused` (a hub POST whose signature or size was refused).",
    "time": "When the record was written: UTC, ISO 8601 with milliseconds.",
    "tool": "The tool name; null when the request matched no tool.",
    "scope": "The tool's scope from this app's declaration (never the unsigned header).",
    "method": "The HTTP method.",
    "path": "The tool's path template (`/api/orders/{order_id}`), else the request path; "
            "never the query.",
    "job_id": "The signed job id; for refusals the claimed one, cut at 64 characters.",
    "subject": "The signed acting subject; null when anonymous or not verified.",
    "client": "`X-Bailing-Client` as sent (unsigned: informational only).",
    "key_label": "Label of the secret that verified the call (never the secret).",
    "verified": "Whether the signature was verified.",
    "status": "The HTTP status answered (for a view that raised: what the app's error "
              "handler answered, else 500).",
    "reason": "The refusal reason code; `view_status` when the view answered 400 or more; "
              "`view_raised` when it raised; null for a success.",
    "error": "The exception's class (`module.Class`) when the view raised; never its message.",
    "duration_ms": "Milliseconds from the gate to the answer.",
    "replayed": "Answered from the idempotency store (a repeated side effect).",
    "approval_id": "The business approval that admitted the call (`business_approval` tools).",
    "response": "What `response=` left out of the answer, as counts only (`fields_dropped`, "
                "`sensitive_dropped`, `items_dropped`, `strings_cut`); null for tools without a "
                "declared shape and for answers it does not touch.",
    "arguments": "The argument names, sorted; a name -> value object instead with "
                 "`BAILING_AUDIT_ARGUMENT_VALUES` for tools that are not `sensitive`; null when "
                 "the call was refused before its arguments were validated.",
}
AUDIT_FIELDS: tuple[str, ...] = tuple(AUDIT_FIELD_DOCS)

#: Where the gate keeps the telemetry handle of the call in flight.
SPAN_KEY = "bailing.span"
#: Where the gate keeps the time it started deciding on the call.
STARTED_KEY = "bailing.started"
#: Where the gate leaves the record of a view that raised, until the answer is known.
FAILED_KEY = "bailing.failed"
#: Where the approval check notes the approval that admitted a call.
APPROVAL_KEY = "bailing.approval_id"
_MAX_CLAIMED = 64
_MAX_PATH = 200
#: The longest string any field of a record holds (argument values and names included).
MAX_FIELD_CHARS = 256
#: The most items a list in a record keeps (argument values with ``BAILING_AUDIT_ARGUMENT_VALUES``).
_MAX_ITEMS = 50


class TelemetryHook(Protocol):
    """What the gate needs from a telemetry backend (see :mod:`bailing_flask.otel`)."""

    def start(self, tool: Tool, verified: VerifiedCall | None) -> Any:
        """Begin the call's span; the result is handed back to :meth:`finish`."""

    def finish(self, handle: Any, record: Mapping[str, Any]) -> None:
        """End the call's span with what the record says, and count the call."""

    def refused(self, record: Mapping[str, Any]) -> None:
        """Record a refusal that never reached the gate."""


#: the app's telemetry hook, once :func:`bailing_flask.otel.instrument` put one
TELEMETRY: Cache[TelemetryHook] = Cache("telemetry")


def telemetry_of(state: BailingState) -> TelemetryHook | None:
    """The app's telemetry hook, ``None`` when OpenTelemetry is not on."""
    return TELEMETRY.get(state)


_second: tuple[int, str] = (0, "")


def _now() -> str:
    """UTC now, ISO 8601 with milliseconds (``2026-05-01T12:00:00.123Z``)."""
    return _time_text(time.time())


def _time_text(now: float) -> str:
    """The Unix time ``now`` as :func:`_now` writes it; each second is formatted once."""
    global _second
    second = int(now)
    cached = _second
    if cached[0] != second:
        cached = _second = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return f"{cached[1]}.{int((now - second) * 1000):03d}Z"


def _cut(text: str) -> str:
    return f"{text[:MAX_FIELD_CHARS]}…[cut: {len(text)} characters]"


def _bounded(value: Any) -> Any:
    """``value`` with every string at most :data:`MAX_FIELD_CHARS` and every list at most 50 items."""
    if isinstance(value, str):
        return value if len(value) <= MAX_FIELD_CHARS else _cut(value)
    if isinstance(value, dict):
        return {_bounded(k) if isinstance(k, str) else k: _bounded(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [_bounded(item) for item in value[:_MAX_ITEMS]]
        if len(value) > _MAX_ITEMS:
            items.append(f"…[cut: {len(value)} items]")
        return items
    return value


_SCALARS = frozenset((bool, int, float, type(None)))


def _short_strings(value: list[Any]) -> bool:
    """Whether ``value`` is already bounded: a few short strings (argument names, usually)."""
    if len(value) > _MAX_ITEMS:
        return False
    for item in value:
        if item.__class__ is not str or len(item) > MAX_FIELD_CHARS:
            return False
    return True


def _bound_record(record: dict[str, Any]) -> None:
    """Bound every string of ``record`` in place (most fields are short: one check each)."""
    for key, value in record.items():
        cls = value.__class__
        if cls is str:
            if len(value) > MAX_FIELD_CHARS:
                record[key] = _cut(value)
        elif cls in _SCALARS or (cls is list and _short_strings(value)):
            continue
        elif isinstance(value, (dict, list)):
            record[key] = _bounded(value)


def logger_emits() -> bool:
    """Whether an ``INFO`` record of the audit logger would reach a handler.

    What ``logging`` itself would do with it: the logger enabled for
    ``INFO`` (a lookup ``logging`` caches per logger), then the first handler
    on the way up its propagation chain that takes ``INFO``, else Python's
    last-resort handler (``WARNING`` and up: not ``INFO``, unless replaced).
    Handlers are looked at on every call, since an app may add or remove them
    at any time; with a handler on the audit logger itself that is one look.
    A filter is not run: a record a filter would drop is still built.
    """
    if not audit_logger.isEnabledFor(logging.INFO):
        return False
    node: logging.Logger | None = audit_logger
    while node is not None:
        for handler in node.handlers:
            if handler.level <= logging.INFO:
                return True
        if not node.propagate:
            return False
        node = node.parent
    last = logging.lastResort
    return last is not None and last.level <= logging.INFO


def wanted(state: BailingState) -> bool:
    """Whether anybody reads audit records of ``state``'s app (else none is built)."""
    return (
        state.audit_sink is not None
        or state.caches.get(TELEMETRY) is not None
        or (bool(audit_record.receivers) and audit_record.has_receivers_for(state.app))
        or logger_emits()
    )


class AuditNeeds:
    """What one tool's calls need from the audit, worked out once when the tool compiles.

    Fixed for the app's life, so decided here: whether the record holds
    argument values (``BAILING_AUDIT_ARGUMENT_VALUES``, never for a
    ``sensitive`` tool) and the direct sink (set by ``init_app``, before any
    tool compiles; with one, every call builds its record and nothing more is
    asked). What an app may change while it runs is asked per call, cheaply:
    telemetry (:func:`bailing_flask.otel.instrument` may come later), a signal
    receiver connected later (one dictionary's truth value), and the logger,
    whose level ``logging`` itself caches (``setLevel`` and
    ``logging.basicConfig(level=...)`` clear that cache) and whose handlers
    are looked at only when it is enabled for ``INFO`` (a handler added at run
    time, by ``basicConfig`` or ``addHandler``, is seen by the next call).
    """

    __slots__ = ("state", "sensitive", "sink", "_config", "_values")

    def __init__(self, state: BailingState, tool: Tool) -> None:
        self.state = state
        self.sensitive = tool.sensitive
        self.sink = state.audit_sink
        self._config = state.config
        self._values = bool(state.config.audit_argument_values) and not tool.sensitive

    @property
    def values(self) -> bool:
        """Whether the record holds argument values, not only names.

        Decided once per configuration object: a test (or the fake hub
        fixture) that swaps the app's configuration is seen by one
        identity check.
        """
        config = self.state.config
        if config is not self._config:
            self._config = config
            self._values = bool(config.audit_argument_values) and not self.sensitive
        return self._values

    def wanted(self) -> bool:
        """Whether anybody reads this call's record (else not one field of it is built)."""
        if self.sink is not None:
            return True
        state = self.state
        return (
            state.caches.get(TELEMETRY) is not None  # a dictionary's own get: no Python call
            or (bool(audit_record.receivers) and audit_record.has_receivers_for(state.app))
            # logger_emits' first question asked here: off for INFO (Python's default), one call
            or (audit_logger.isEnabledFor(logging.INFO) and logger_emits())
        )


def exception_status(exc: BaseException) -> int:
    """The status Flask answers for an exception raised by a view."""
    if isinstance(exc, HTTPException) and exc.code is not None:
        return int(exc.code)
    return 500


def exception_name(exc: BaseException) -> str:
    """``module.Class`` of an exception: its class, never its message."""
    cls = type(exc)
    module = cls.__module__
    return cls.__qualname__ if module in ("builtins", "__main__") else f"{module}.{cls.__qualname__}"


def gate_record(
    tool: Tool,
    verified: VerifiedCall | None,
    status: int,
    duration_ms: float | None,
    reason: str | None,
    call: ToolCall | None,
    *,
    values: bool = False,
    error: str | None = None,
    replayed: bool = False,
    response: dict[str, int] | None = None,
    environ: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The record of one call that reached the gate (``environ``: the request's, if at hand)."""
    if environ is None:
        environ = request.environ
    return _gate_fields(*_gate_values(tool, verified, status, duration_ms, reason, call, values,
                                      error, replayed, response, environ))


#: what :func:`_gate_values` takes from the request, in the order :func:`_gate_fields` reads it
_GateValues = tuple[float, "Tool", "VerifiedCall | None", str, int, "str | None", "str | None",
                    "float | None", bool, Any, "dict[str, int] | None", Any]


def _gate_values(
    tool: Tool, verified: VerifiedCall | None, status: int, duration_ms: float | None,
    reason: str | None, call: ToolCall | None, values: bool, error: str | None, replayed: bool,
    response: dict[str, int] | None, environ: Mapping[str, Any],
) -> _GateValues:
    """What a gate record holds, read from the call now (the record itself may be built later).

    Immutable values or copies only: the time, the compiled tool, the verified
    call, the argument names (or a JSON copy of the values).
    """
    arguments: Any = None
    if call is not None:
        if values:
            arguments = json.loads(json.dumps(dict(call.args), default=_json_default))
        else:
            arguments = sorted(call.args)
    return (time.time(), tool, verified,
            str(environ.get("REQUEST_METHOD", "GET")).upper(),  # what request.method says
            status, reason, error, duration_ms, replayed, environ.get(APPROVAL_KEY), response,
            arguments)


def _gate_fields(
    now: float, tool: Tool, verified: VerifiedCall | None, method: str, status: int,
    reason: str | None, error: str | None, duration_ms: float | None, replayed: bool,
    approval_id: Any, response: dict[str, int] | None, arguments: Any,
) -> dict[str, Any]:
    """The record of :func:`_gate_values` (the fields in :data:`AUDIT_FIELDS` order)."""
    return {
        "event": "tool_call",
        "time": _time_text(now),
        "tool": tool.name,
        "scope": tool.scope,
        "method": method,
        "path": tool.path,
        "job_id": verified.job_id if verified else None,
        "subject": verified.subject if verified else None,
        "client": verified.unsigned.client if verified else None,
        "key_label": verified.key_label if verified else None,
        "verified": verified is not None,
        "status": status,
        "reason": reason,
        "error": error,
        "duration_ms": None if duration_ms is None else round(duration_ms, 2),
        "replayed": replayed,
        "approval_id": approval_id,
        "response": response,
        "arguments": arguments,
    }


def _bounded_gate_fields(*values: Any) -> dict[str, Any]:
    """:func:`_gate_fields`, bounded as :func:`emit` bounds a record (the sink's thread runs it)."""
    record = _gate_fields(*values)
    _bound_record(record)
    return record


def emit_gate_record(
    state: BailingState, tool: Tool, verified: VerifiedCall | None, status: int,
    duration_ms: float | None, reason: str | None, call: ToolCall | None, *, values: bool,
    error: str | None, replayed: bool, response: dict[str, int] | None,
    environ: Mapping[str, Any], span: Any,
) -> None:
    """Hand out the record of a call that reached the gate (someone listens).

    When the direct sink is the only reader, the request only reads what the
    record holds and queues it: the sink's thread builds, bounds and writes
    the record, the same line as :func:`gate_record` and :func:`emit` make.
    """
    sink = state.audit_sink
    if (sink is not None and state.caches.get(TELEMETRY) is None and not audit_record.receivers
            and not (audit_logger.isEnabledFor(logging.INFO) and logger_emits())):
        sink._emit_later(_bounded_gate_fields, _gate_values(
            tool, verified, status, duration_ms, reason, call, values, error, replayed, response,
            environ))
        return
    emit(state, gate_record(tool, verified, status, duration_ms, reason, call, values=values,
                            error=error, replayed=replayed, response=response, environ=environ),
         span=span)


def _log_record(line: str, record: dict[str, Any], depth: int = 1) -> logging.LogRecord:
    """What ``Logger.info`` would hand the handlers, without its look up the stack for the caller.

    The same record from the app's record factory, made as if logged from
    :func:`emit` (``depth`` frames up).
    """
    frame = sys._getframe(depth)
    code = frame.f_code
    return audit_logger.makeRecord(AUDIT_LOGGER, logging.INFO, code.co_filename, frame.f_lineno,
                                   "%s", (line,), None, code.co_name, {"bailing": record}, None)


#: handlers whose ``emit`` of a record formatted as its bare message only writes that message
#: and their terminator to their stream and flushes it (subclasses may do anything)
_PLAIN_HANDLER_CLASSES = (logging.StreamHandler, logging.FileHandler)


def _plain_handlers() -> tuple[logging.StreamHandler[Any], ...] | None:
    """The audit logger's handlers, when all that ``logging`` would do is write the line to each.

    The configuration the operating docs show: ``propagate`` off, no filter,
    Python's own record factory, and every handler a plain ``StreamHandler``
    or ``FileHandler`` (open, no filter, taking ``INFO``) whose formatter
    writes the message alone. Then the line is written to their streams
    directly: the same bytes, under each handler's lock, without a
    ``LogRecord`` nobody would read. Anything else goes through ``logging``
    as before (``None``). The handlers are returned as they are now: one
    added, removed or closed meanwhile by another thread counts from the
    next record, as once ``logging`` has begun handing a record out.
    """
    logger = audit_logger
    handlers = logger.handlers
    if (not handlers or logger.propagate or logger.filters
            or logging.getLogRecordFactory() is not logging.LogRecord):
        return None
    for handler in handlers:
        cls = handler.__class__
        if (cls not in _PLAIN_HANDLER_CLASSES or handler.filters or handler.level > logging.INFO
                or getattr(handler, "stream", None) is None):  # a FileHandler not open yet
            return None
        formatter = handler.formatter
        if formatter is not None and (
            formatter.__class__ is not logging.Formatter
            or formatter._fmt != "%(message)s"
            or formatter._style.__class__ is not logging.PercentStyle
        ):
            return None
    return tuple(handlers)  # type: ignore[arg-type]  # each one's class is checked above


def _write_plainly(handlers: tuple[logging.StreamHandler[Any], ...], line: str,
                   record: dict[str, Any]) -> None:
    """Write ``line`` as each of :func:`_plain_handlers` would, and report a failure as it would.

    A stream that fails to write goes to the handler's ``handleError``
    (with ``logging.raiseExceptions``, a "--- Logging error ---" on
    ``stderr``), with the record ``logging`` would have made; the call goes on.
    A handler closed since it was looked at gets that record through its own
    ``emit`` (a ``FileHandler`` opens its file again).
    """
    for handler in handlers:
        with handler.lock:  # type: ignore[union-attr]  # every Handler makes its lock
            stream = handler.stream
            if stream is None:  # closed meanwhile, by another thread
                handler.emit(_log_record(line, record, depth=2))
                continue
            try:
                stream.write(line + handler.terminator)
                if hasattr(stream, "flush"):
                    stream.flush()
            except RecursionError:  # as StreamHandler.emit: never swallowed
                raise
            except Exception:
                handler.handleError(_log_record(line, record, depth=2))


def emit(state: BailingState, record: dict[str, Any], *, span: Any = None, gate: bool = True) -> None:
    """Log, signal and trace one record. Never raises into the request."""
    _bound_record(record)
    if logger_emits():
        line = _built_line(record)  # bounded: every dict and list in it is a new copy
        if audit_logger.__class__ is logging.Logger:
            plain = _plain_handlers()
            if plain is not None:
                _write_plainly(plain, line, record)
            else:
                audit_logger.handle(_log_record(line, record))
        else:  # a logger class of the app's own (logging.setLoggerClass): its info() decides
            audit_logger.info("%s", line, extra={"bailing": record})
    sink = state.audit_sink
    if sink is not None:
        sink.emit(record)
    if audit_record.receivers:
        audit_record.send(state.app, record=record)
    telemetry: TelemetryHook | None = state.caches.get(TELEMETRY)
    if telemetry is not None:
        try:
            if gate:
                telemetry.finish(span, record)
            else:
                telemetry.refused(record)
        except Exception:  # telemetry must never break a call
            state.warn_once("telemetry_failed", "bailing: recording telemetry failed",
                            level=logging.ERROR, exc_info=True)


def finish_failed(environ: dict[str, Any], status: int | None) -> None:
    """Write the record of a view that raised, with the status finally answered.

    Called after the app's error handler produced a response (``status``),
    or at teardown when none was produced (``None``: the default status).
    """
    pending = environ.pop(FAILED_KEY, None)
    if pending is not None:
        pending(status)


# --- refusals that never reach the gate ------------------------------------------------


def _tool_for(state: BailingState, environ: Mapping[str, Any]) -> Tool | None:
    """The tool a refused request was addressed to, if its method and path name one."""
    try:
        adapter = state.app.url_map.bind_to_environ(environ)  # type: ignore[arg-type]
        rule, _ = adapter.match(return_rule=True)
    except HTTPException:
        return None
    return registry_of(state).lookup(rule.endpoint, str(environ.get("REQUEST_METHOD", "GET")).upper())


def _claimed(environ: Mapping[str, Any], key: str) -> str | None:
    value = environ.get(key)
    return None if value is None else str(value)[:_MAX_CLAIMED]


def signature_refusal(
    state: BailingState, error: SignatureError, environ: Mapping[str, Any], path: str
) -> None:
    """Audit and signal a request the middleware refused (called by the middleware)."""
    if not (wanted(state) or signature_refused.receivers):
        return
    with state.app.app_context():
        tool = _tool_for(state, environ)
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        tool_info = None
        if tool is not None:
            from bailing_flask._pipeline.authz import tool_info as _info

            tool_info = _info(tool)
        if signature_refused.receivers:
            signature_refused.send(state.app, kind="tool", reason=error.reason, status=error.status,
                                   method=method, path=path[:_MAX_PATH], tool=tool_info)
        if wanted(state):
            record: dict[str, Any] = {
                "event": "signature_refused",
                "time": _now(),
                "tool": tool.name if tool else None,
                "scope": tool.scope if tool else None,
                "method": method,
                "path": tool.path if tool else path[:_MAX_PATH],
                "job_id": _claimed(environ, "HTTP_X_BAILING_JOB_ID"),
                "subject": None,
                "client": _claimed(environ, "HTTP_X_BAILING_CLIENT"),
                "key_label": None,
                "verified": False,
                "status": error.status,
                "reason": error.reason,
                "error": None,
                "duration_ms": None,
                "replayed": False,
                "approval_id": None,
                "response": None,
                "arguments": None,
                # the hub's own negative probe of every catalog refresh: refused on purpose
                "expected": path == state.middleware.catalog_path
                and environ.get("HTTP_X_BAILING_SIGNATURE") == "sha256=" + "0" * 64,
            }
            emit(state, record, gate=False)


def callback_refusal(state: BailingState, kind: str, error: SignatureError) -> None:
    """Audit and signal a hub callback whose signature (or size) was refused."""
    if signature_refused.receivers:
        signature_refused.send(current_app._get_current_object(),  # type: ignore[attr-defined]
                               kind="callback", reason=error.reason, status=error.status,
                               method=request.method, path=request.path[:_MAX_PATH], tool=None)
    if wanted(state):
        emit(state, {
            "event": "callback_refused",
            "time": _now(),
            "tool": None,
            "scope": None,
            "method": request.method,
            "path": request.path[:_MAX_PATH],
            "job_id": None,
            "subject": None,
            "client": None,
            "key_label": None,
            "verified": False,
            "status": error.status,
            "reason": error.reason,
            "error": None,
            "duration_ms": None,
            "replayed": False,
            "approval_id": None,
            "response": None,
            "arguments": None,
            "callback": kind,
        }, gate=False)

