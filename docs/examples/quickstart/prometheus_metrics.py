"""docs/operating.rst: Prometheus metrics for the quickstart's shop, fed by the audit signal."""

from shop import app

# [start:prometheus]
from prometheus_client import Counter, Histogram, make_wsgi_app
from werkzeug.middleware.dispatcher import DispatcherMiddleware

from bailing_flask.signals import audit_record

CALLS = Counter("bailing_tool_calls_total", "Tool calls that reached the gate",
                ["tool", "status", "reason"])
DURATION = Histogram("bailing_tool_duration_seconds", "Gate to answer", ["tool"])
REFUSALS = Counter("bailing_refusals_total", "Refused calls and hub POSTs",
                   ["reason", "event"])

@audit_record.connect_via(app)
def count(app, record):
    if record["event"] == "tool_call":
        CALLS.labels(record["tool"], str(record["status"]), record["reason"] or "").inc()
        if record["duration_ms"] is not None:
            DURATION.labels(record["tool"]).observe(record["duration_ms"] / 1000)
    if record["reason"] and record["reason"] not in ("view_status", "view_raised") \
            and not record.get("expected"):
        REFUSALS.labels(record["reason"], record["event"]).inc()

# /metrics next to the app (protect it like any internal endpoint)
app.wsgi_app = DispatcherMiddleware(app.wsgi_app, {"/metrics": make_wsgi_app()})
# [end:prometheus]
