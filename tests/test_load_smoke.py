"""The load run in small: the example app under gunicorn, every class of the hostile mix, checked.

The full run (``python -m benchmarks.reliability --parts load``) sends the
mix for a minute per worker class and publishes its figures on the
Reliability page; this one sends every class of it at least once, then the
mix for a few seconds, on gthread workers, and asserts only correctness
counts: no 5xx, no request served that had to be refused, none refused that
had to be served, each answered as expected, and every side effect exactly
once. Timings are never asserted here.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("gunicorn")

from benchmarks.reliability._load_mix import FULL_WEIGHTS  # noqa: E402
from benchmarks.reliability.load import Settings, run_load  # noqa: E402

pytestmark = pytest.mark.slow


def test_every_request_of_the_load_mix_gets_its_expected_answer_and_effects_happen_once() -> None:
    results = run_load(Settings(worker_classes=("gthread",), mix_seconds=3.0, compare_rounds=0,
                                generators=1, threads=6, gthread_workers=2, warmup_seconds=0.5))
    run = results["runs"][0]
    counts = run["counts"]
    details = json.dumps({"examples": counts["examples"][:10], "effects": run["effects"]["problems"],
                          "log": run["log_lines"]}, indent=1, ensure_ascii=False)
    totals = counts["totals"]
    assert set(counts["outcomes"]) == set(FULL_WEIGHTS), "every class was sent"
    for outcome in ("server_error", "false_accept", "false_reject", "unexpected", "transport_error"):
        assert totals.get(outcome, 0) == 0, f"{outcome}: {totals}\n{details}"
    assert totals["ok"] == counts["requests"]
    effects = run["effects"]
    assert effects["checked"] > 0
    assert effects["not_once"] == 0 and effects["of_refused"] == 0, details
    assert run["log_problems"] == 0, details
