"""OpenTelemetry for tool calls: a span per call, and call and refusal metrics.

Optional: ``pip install 'bailing_flask[otel]'`` (the API and SDK), then
either set ``BAILING_OTEL = True`` (global tracer and meter providers) or
call :func:`instrument` with the providers of your choice::

    from bailing_flask.otel import instrument

    instrument(app, tracer_provider=provider, meter_provider=meter_provider)

What is emitted, from the same audit records the log gets:

* a span ``tool <name>`` per call that reaches the gate, current while the
  view runs (so the view's own spans are its children), with the attributes
  ``bailing.tool``, ``bailing.scope``, ``bailing.job_id``,
  ``bailing.subject``, ``http.response.status_code``, ``bailing.reason``,
  ``bailing.replayed``, ``bailing.approval_id`` and, when the view raised,
  ``error.type`` (the exception's class); status ``ERROR`` for 5xx and
  raised views. Never arguments, bodies or exception messages.
* a short span ``refused <reason>`` for each signed request the middleware
  refused and each refused hub callback;
* ``bailing.tool.calls`` (counter; ``bailing.tool``,
  ``http.response.status_code``, ``bailing.reason``),
  ``bailing.tool.duration`` (histogram, ms; ``bailing.tool``,
  ``http.response.status_code``) and ``bailing.refusals`` (counter;
  ``bailing.reason``, ``bailing.tool``, ``bailing.refused_by`` = ``gate``,
  ``signature`` or ``callback``). The hub's own negative catalog probe
  (a refusal it expects) is not counted.

Without it nothing of OpenTelemetry is imported and the gate does no work
for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from flask import Flask, request

from bailing_flask.audit import SPAN_KEY, TELEMETRY, finish_failed
from bailing_flask.errors import ConfigurationError

if TYPE_CHECKING:  # pragma: no cover
    from bailing_flask._state import BailingState
    from bailing_flask._pipeline.registry import Tool
    from bailing_flask.wire.middleware import VerifiedCall

__all__ = ["Telemetry", "instrument", "INSTRUMENTATION_NAME"]

INSTRUMENTATION_NAME = "bailing_flask"
#: Reasons that are not refusals: the view ran and answered an error, or raised.
_VIEW_REASONS = frozenset({"view_status", "view_raised"})


def _import() -> tuple[Any, Any, Any]:
    try:
        from opentelemetry import context, metrics, trace
    except ImportError:
        raise ConfigurationError(
            "OpenTelemetry is not installed: pip install 'bailing_flask[otel]' "
            "(or set BAILING_OTEL = False)."
        ) from None
    return context, metrics, trace


def _version() -> str:
    from bailing_flask._version import __version__

    return __version__


class Telemetry:
    """The spans and instruments of one app (see :func:`instrument`)."""

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        context, metrics, trace = _import()
        self._context = context
        self._trace = trace
        self.tracer = trace.get_tracer(INSTRUMENTATION_NAME, _version(),
                                       tracer_provider=tracer_provider)
        meter = metrics.get_meter(INSTRUMENTATION_NAME, _version(), meter_provider=meter_provider)
        self.calls = meter.create_counter(
            "bailing.tool.calls", unit="{call}",
            description="Tool calls that reached the gate, by tool, status and reason.",
        )
        self.duration = meter.create_histogram(
            "bailing.tool.duration", unit="ms",
            description="Time from the gate to the answer of a tool call.",
        )
        self.refusals = meter.create_counter(
            "bailing.refusals", unit="{refusal}",
            description="Refused tool calls and hub callbacks, by reason.",
        )

    # -- the TelemetryHook protocol -----------------------------------------------------

    def start(self, tool: Tool, verified: VerifiedCall | None) -> Any:
        attributes: dict[str, Any] = {"bailing.tool": tool.name, "bailing.scope": tool.scope}
        if verified is not None:
            attributes["bailing.job_id"] = verified.job_id
            if verified.subject:
                attributes["bailing.subject"] = verified.subject
        span = self.tracer.start_span(f"tool {tool.name}", kind=self._trace.SpanKind.INTERNAL,
                                      attributes=attributes)
        token = self._context.attach(self._trace.set_span_in_context(span))
        return span, token

    def finish(self, handle: Any, record: Mapping[str, Any]) -> None:
        if handle is not None:
            span, token = handle
            try:
                self._describe(span, record)
                span.end()
            finally:
                self._context.detach(token)
        self._count(record, "gate")

    def refused(self, record: Mapping[str, Any]) -> None:
        refused_by = "callback" if record.get("event") == "callback_refused" else "signature"
        span = self.tracer.start_span(f"refused {record.get('reason')}",
                                      kind=self._trace.SpanKind.INTERNAL)
        self._describe(span, record)
        span.end()
        if not record.get("expected"):
            self._count(record, refused_by)

    # -- helpers ----------------------------------------------------------------------------

    def _describe(self, span: Any, record: Mapping[str, Any]) -> None:
        for attribute, key in (
            ("bailing.tool", "tool"), ("bailing.scope", "scope"), ("bailing.job_id", "job_id"),
            ("bailing.subject", "subject"), ("http.response.status_code", "status"),
            ("bailing.reason", "reason"), ("bailing.approval_id", "approval_id"),
            ("error.type", "error"),
        ):
            value = record.get(key)
            if value is not None:
                span.set_attribute(attribute, value)
        if record.get("event") == "tool_call":
            span.set_attribute("bailing.replayed", bool(record.get("replayed")))
        status = record.get("status") or 0
        if record.get("error") is not None or status >= 500:
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR,
                                               str(record.get("reason") or status)))

    def _count(self, record: Mapping[str, Any], refused_by: str) -> None:
        tool = record.get("tool") or ""
        status = int(record.get("status") or 0)
        reason = record.get("reason") or ""
        if refused_by == "gate":
            self.calls.add(1, {"bailing.tool": tool, "http.response.status_code": status,
                               "bailing.reason": reason})
            duration = record.get("duration_ms")
            if duration is not None:
                self.duration.record(duration, {"bailing.tool": tool,
                                                "http.response.status_code": status})
        if reason and reason not in _VIEW_REASONS:
            self.refusals.add(1, {"bailing.reason": reason, "bailing.tool": tool,
                                  "bailing.refused_by": refused_by})

    def abandon(self, handle: Any) -> None:
        """End a span the gate started but never finished (a bug path: never left open)."""
        span, token = handle
        try:
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, "unfinished"))
            span.end()
        finally:
            self._context.detach(token)


def instrument(app: Flask, *, tracer_provider: Any = None, meter_provider: Any = None) -> Telemetry:
    """Emit spans and metrics for ``app``'s tool calls (after ``Bailing(app)``).

    :param tracer_provider: default: the global one (``opentelemetry.trace``).
    :param meter_provider: default: the global one (``opentelemetry.metrics``).
    :raises ConfigurationError: OpenTelemetry is not installed.
    """
    from bailing_flask._state import state_of

    state: BailingState = state_of(app)
    telemetry = Telemetry(tracer_provider, meter_provider)
    first = TELEMETRY.get(state) is None
    TELEMETRY.put(state, telemetry)
    if first:

        @app.teardown_request
        def _bailing_close_span(exc: BaseException | None = None) -> None:
            finish_failed(request.environ, None)
            handle = request.environ.pop(SPAN_KEY, None)
            current = TELEMETRY.get(state)
            if handle is not None and isinstance(current, Telemetry):
                current.abandon(handle)

    return telemetry
