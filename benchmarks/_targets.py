"""The target table of issue 22, in the issue's order: each row names the result that measures it.

Issue 22 (each tool call pays only for what its tool uses) replaced issue 14's
table; the targets of issue 14 that issue 22 did not restate are still the
targets of their rows in the results table (``benchmarks/README.md``, "Targets
of earlier issues").
"""

from __future__ import annotations

from typing import Any

from ._harness import Result

#: (measure, figure "now" as the issue reports it, target, "group/name" of the result)
ISSUE_22: tuple[tuple[str, str, str, str], ...] = (
    ("signed POST tool ÷ bare view, audit logger off", "0.57", ">= 0.9", "toolcall/tool_vs_bare_post"),
    ("same, audit on through the direct sink", "0.43", ">= 0.85", "toolcall/tool_audit_sink_vs_bare_post"),
    ("same, audit on through `logging` with a handler", "0.43", ">= 0.7",
     "toolcall/tool_audit_logging_vs_bare_post"),
    ("signed tool ÷ hand-written integration", "0.62", ">= 1", "toolcall/tool_vs_handwritten_post"),
    ("default POST tool (de-duplication on, memory store) ÷ bare", "-", ">= 0.85",
     "toolcall/default_tool_vs_bare_post"),
    ("ordinary route of a `Bailing` app ÷ plain Flask", "0.86", ">= 0.98", "ordinary/route_vs_plain_flask"),
    ("middleware alone ÷ bare", "0.83", ">= 0.92", "toolcall/middleware_vs_bare_post"),
    ("end to end, gunicorn gthread, signed tool ÷ same view without the package", "0.70", ">= 0.95",
     "e2e/gthread_tool_vs_bare"),
    ("end to end, gunicorn sync, signed tool ÷ same view without the package", "0.69", ">= 0.9",
     "e2e/sync_tool_vs_bare"),
    ("`import bailing_flask` ÷ `import flask, pydantic`, CPU (what an app imports: `Bailing, tool`)",
     "1.67", "<= 1.2", "imports/app_import_vs_flask_pydantic"),
    ("Python calls per signed call", "342", "<= 240 /call", "toolcall/python_calls_per_signed_call"),
)

#: The groups that produce the rows of the table (``python -m benchmarks toolcall ordinary imports e2e``).
ISSUE_22_GROUPS = tuple(dict.fromkeys(key.split("/")[0] for *_rest, key in ISSUE_22))


def issue_rows(results: list[Result]) -> list[dict[str, Any]]:
    by_key = {f"{r.group}/{r.name}": r for r in results}
    rows = []
    for measure, now, target, key in ISSUE_22:
        r = by_key.get(key)
        if r is not None and r.target != target:
            raise AssertionError(f"{key}: the row's target {r.target!r} is not the issue's {target!r}")
        if r is None:
            verdict = "not run"
        elif r.skipped:
            verdict = f"skipped: {r.skipped}"
        else:
            verdict = r.verdict + (" (undecided: target inside the 95% CI)" if r.undecided() else "")
        rows.append({
            "measure": measure,
            "now": now,
            "result": key,
            "target": target,
            "measured": r.figure() if r else "not run",
            "spread": r.spread_text() if r else "",
            "ci": r.ci_text() if r else "",
            "noise": r.noise() if r else "",
            "rounds": r.rounds if r else 0,
            "verdict": verdict,
            "met": bool(r is not None and r.passed and not r.informational),
        })
    return rows
