"""``python -m benchmarks.reliability``: what misses, what regressed, what gets published."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.reliability import Figure
from benchmarks.reliability import __main__ as report


def figure(name: str, value: float, unit: str = "requests", require: str = "== 0") -> Figure:
    return Figure("load", name, value, unit, require, "what it is")


def last(value: float, unit: str = "requests") -> dict[str, Any]:
    return {"value": value, "unit": unit}


def test_a_must_be_zero_figure_regresses_only_when_it_was_zero() -> None:
    assert report.compare(figure("load.x", 1), last(0), same_kind=False) is not None
    assert report.compare(figure("load.x", 1), last(2), same_kind=True) is None  # missed, not regressed
    assert report.compare(figure("load.x", 0), last(0), same_kind=True) is None
    assert report.compare(figure("load.x", 1), None, same_kind=True) is None


def test_a_ratio_regresses_past_the_tolerance_against_a_run_of_the_same_kind() -> None:
    ratio = figure("load.r", 0.7, "ratio", ">= 0.4")
    assert report.compare(ratio, last(1.0, "ratio"), same_kind=True) is not None  # 30 % lower
    assert report.compare(figure("load.r", 0.8, "ratio", ">= 0.4"), last(1.0, "ratio"), True) is None
    assert report.compare(ratio, last(1.0, "ratio"), same_kind=False) is None  # quick against full
    lower_is_better = figure("load.t", 1.3, "ratio", "<= 2")
    assert report.compare(lower_is_better, last(1.0, "ratio"), same_kind=True) is not None
    # absolute figures are never compared
    assert report.compare(figure("load.rate", 10, "req/s", ""), last(1000, "req/s"), True) is None


def _fake_part(monkeypatch: pytest.MonkeyPatch, figures: list[Figure]) -> None:
    def run_part(name: str, quick: bool) -> tuple[str, list[Figure] | None, str, float]:
        if name != "load":
            return "absent", None, f"{name} does not exist yet: skipped", 0.0
        return "ran", figures, "", 1.0

    monkeypatch.setattr(report, "_run_part", run_part)


def test_a_quick_run_publishes_nothing_unless_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record, rst = tmp_path / "last-run.json", tmp_path / "figures.rst"
    paths = ["--record", str(record), "--rst", str(rst)]
    _fake_part(monkeypatch, [figure("load.sync.server_errors", 0)])
    assert report.main(["--quick", *paths]) == 0
    assert not record.exists()
    assert report.main(["--quick", "--publish", *paths]) == 0
    published = json.loads(record.read_text())
    assert published["parts"]["load"]["quick"] is True
    assert "load.sync.server_errors" in rst.read_text()


def test_a_full_run_publishes_when_clean_and_a_regression_fails_the_next(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record, rst = tmp_path / "last-run.json", tmp_path / "figures.rst"
    paths = ["--record", str(record), "--rst", str(rst), "--parts", "load,fuzz"]
    _fake_part(monkeypatch, [figure("load.sync.server_errors", 0)])
    assert report.main(paths) == 0
    entry = json.loads(record.read_text())["parts"]["load"]
    assert entry["command"] == "python -m benchmarks.reliability " + " ".join(paths)
    assert {"cores", "memory_gib", "cpu", "python", "os"} <= set(entry["machine"]) and entry["date"]
    _fake_part(monkeypatch, [figure("load.sync.server_errors", 3)])
    assert report.main(paths) == 1
    assert json.loads(record.read_text())["parts"]["load"]["figures"][0]["value"] == 0  # not published
