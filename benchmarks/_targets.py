"""The target table of issue 14, in the issue's order: each row names the result that measures it."""

from __future__ import annotations

from typing import Any

from ._harness import Result

#: (measure, figure "today" as the issue reports it, target, "group/name" of the result)
ISSUE_14: tuple[tuple[str, str, str, str], ...] = (
    ("signed tool call ÷ bare Flask view, in-process CPU", "0.59", ">= 0.8", "toolcall/tool_vs_bare_post"),
    ("signed tool call ÷ hand-written integration, same run", "0.74", ">= 1", "toolcall/tool_vs_handwritten_post"),
    ("middleware alone ÷ bare view", "0.86", ">= 0.92", "toolcall/middleware_vs_bare_post"),
    ("memory store ÷ same tool without idempotency", "0.74-0.84", ">= 0.92", "idempotency/memory_vs_off"),
    # The store rows measure the faster mode the issue asked for as an explicit setting
    # (BAILING_IDEMPOTENCY_DEFER_COMPLETION, off by default); the group table has both modes.
    ("Redis store: round trips per call on the request path (deferred completions)", "2",
     "<= 1 /call", "idempotency/redis_round_trips_per_call_deferred"),
    ("Redis store ÷ no idempotency, gunicorn gthread (deferred completions)", "0.47", ">= 0.6",
     "e2e/gthread_redis_deferred_vs_off"),
    ("SQLite store: fsyncs per call on the request path (deferred completions)", "2", "<= 1 /call",
     "idempotency/sqlite_fsyncs_per_call_deferred"),
    ("SQLite store ÷ no idempotency, on tmpfs (deferred completions)", "-", ">= 0.7",
     "idempotency/sqlite_tmpfs_deferred_vs_off"),
    ("end to end, gunicorn gthread: signed tool ÷ same view without the package", "0.905",
     ">= 0.95", "e2e/gthread_tool_vs_bare"),
    ("end to end, gunicorn sync: signed tool ÷ same view without the package", "-",
     ">= 0.9", "e2e/sync_tool_vs_bare"),
    ("`import bailing_flask` ÷ `import flask`, CPU", "1.87", "<= 1.3", "imports/import_vs_flask"),
    ("64 MiB body ÷ (sha256 + spool + read back)", "0.80", ">= 0.9", "bigbody/throughput_vs_floor"),
    ("64 MiB body: peak RSS growth", "-", "<= 8 MiB", "bigbody/rss_growth"),
    ("catalog over a socket ÷ plain view of the same bytes (1000 tools)", "-", ">= 0.95", "catalog/socket_vs_plain"),
    ("catalog over a socket ÷ plain view of the same bytes (20 tools)", "-",
     ">= 0.95", "catalog/socket_vs_plain_small"),
)


def issue_rows(results: list[Result]) -> list[dict[str, Any]]:
    by_key = {f"{r.group}/{r.name}": r for r in results}
    rows = []
    for measure, today, target, key in ISSUE_14:
        r = by_key.get(key)
        rows.append({
            "measure": measure,
            "today": today,
            "result": key,
            "target": target,
            "measured": r.figure() if r else "not run",
            "spread": r.spread_text() if r else "",
            "verdict": r.verdict if r else "not run",
        })
    return rows
