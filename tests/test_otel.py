"""OpenTelemetry spans and metrics, read back with the SDK's in-memory exporters."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from flask import Flask

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

from bailing_flask import Bailing, tool  # noqa: E402
from bailing_flask.errors import ConfigurationError  # noqa: E402
from bailing_flask.otel import instrument  # noqa: E402
from bailing_flask.testing import HubSimulator  # noqa: E402

from .helpers import STRONG_SECRET  # noqa: E402
from .test_audit import create_app  # noqa: E402
from bailing_flask._state import state_of
from bailing_flask.audit import telemetry_of


class Telemetry:
    def __init__(self, app: Flask) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        instrument(app, tracer_provider=self.tracer_provider, meter_provider=self.meter_provider)

    def finished(self) -> list[Any]:
        return list(self.spans.get_finished_spans())

    def points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        data = self.reader.get_metrics_data()
        found = []
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        for point in metric.data.data_points:
                            value = getattr(point, "value", None)
                            if value is None:
                                value = point.count
                            found.append((dict(point.attributes), value))
        return sorted(found, key=lambda item: sorted(item[0].items()))


@pytest.fixture
def app() -> Flask:
    app = create_app()
    app.config["PROPAGATE_EXCEPTIONS"] = False
    return app


@pytest.fixture
def telemetry(app: Flask) -> Telemetry:
    return Telemetry(app)


@pytest.fixture
def hub(app: Flask) -> HubSimulator:
    return HubSimulator(app, STRONG_SECRET)


def test_one_span_per_call_with_its_attributes_and_nothing_else(
    telemetry: Telemetry, hub: HubSimulator,
) -> None:
    hub.call("ok", subject="t1:u1", job_id="job-1")
    hub.call("ok", subject="t9:u9", job_id="job-2")
    hub.call("note", {"text": "never in a span"}, subject="t1:u1", job_id="job-3")
    hub.call("boom", subject="t1:u1", job_id="job-4")
    spans = telemetry.finished()
    assert [span.name for span in spans] == ["tool ok", "tool ok", "tool note", "tool boom"]
    ok = dict(spans[0].attributes)
    assert ok == {
        "bailing.tool": "ok", "bailing.scope": "ok.read", "bailing.job_id": "job-1",
        "bailing.subject": "t1:u1", "http.response.status_code": 200, "bailing.replayed": False,
    }
    assert spans[0].status.status_code == StatusCode.UNSET
    assert dict(spans[1].attributes)["bailing.reason"] == "forbidden"
    boom = dict(spans[3].attributes)
    assert boom["error.type"] == "ValueError" and boom["http.response.status_code"] == 500
    assert spans[3].status.status_code == StatusCode.ERROR
    everything = repr([dict(s.attributes) for s in spans]) + repr([s.events for s in spans])
    assert "never in a span" not in everything and "4111" not in everything


def test_the_view_runs_inside_the_calls_span(app: Flask, telemetry: Telemetry) -> None:
    seen: list[Any] = []

    @app.get("/traced")
    @tool(scope="ok.read")
    def traced() -> Any:
        seen.append(trace.get_current_span().get_span_context())
        return {"ok": True}

    HubSimulator(app, STRONG_SECRET).call("traced", subject="t1:u1")
    (span,) = telemetry.finished()
    assert seen == [span.get_span_context()]
    assert trace.get_current_span().get_span_context().is_valid is False  # detached afterwards


def test_metrics_count_calls_durations_and_refusals(
    telemetry: Telemetry, hub: HubSimulator,
) -> None:
    hub.call("ok", subject="t1:u1")
    hub.call("ok", subject="t1:u1")
    hub.call("ok", subject="t9:u9")
    hub.replay(hub.build_call("ok", subject="t1:u1"), on_behalf_of="t1:admin")
    hub.fetch_catalog(signature="zeros")  # the hub's own negative probe: not a refusal to count
    calls = telemetry.points("bailing.tool.calls")
    assert calls == [
        ({"bailing.tool": "ok", "http.response.status_code": 200, "bailing.reason": ""}, 2),
        ({"bailing.tool": "ok", "http.response.status_code": 403, "bailing.reason": "forbidden"}, 1),
    ]
    durations = telemetry.points("bailing.tool.duration")
    assert durations == [
        ({"bailing.tool": "ok", "http.response.status_code": 200}, 2),
        ({"bailing.tool": "ok", "http.response.status_code": 403}, 1),
    ]
    assert telemetry.points("bailing.refusals") == [
        ({"bailing.reason": "bad_signature", "bailing.tool": "ok",
          "bailing.refused_by": "signature"}, 1),
        ({"bailing.reason": "forbidden", "bailing.tool": "ok", "bailing.refused_by": "gate"}, 1),
    ]
    names = [span.name for span in telemetry.finished()]
    assert names.count("refused bad_signature") == 2 and names.count("tool ok") == 3


def test_the_setting_instruments_with_the_global_providers() -> None:
    app = create_app(BAILING_OTEL=True)
    from bailing_flask.otel import Telemetry as Hook

    assert isinstance(telemetry_of(state_of(app)), Hook)
    assert telemetry_of(state_of(create_app())) is None


def test_without_opentelemetry_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in sys.modules if n == "opentelemetry" or n.startswith("opentelemetry.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(ConfigurationError, match=r"bailing_flask\[otel\]"):
        instrument(create_app())
