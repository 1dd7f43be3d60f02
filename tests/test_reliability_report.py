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


def test_a_ratio_whose_rounds_disagree_is_not_published(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.reliability.load import SPREAD_LIMIT, spread

    record, rst = tmp_path / "last-run.json", tmp_path / "figures.rst"
    paths = ["--record", str(record), "--rst", str(rst), "--parts", "load"]
    noisy = [1.11, 0.78, 0.94, 0.70, 1.14]  # five rounds of a busy machine
    median, low, high, relative = spread(noisy)
    assert (median, relative > SPREAD_LIMIT) == (0.94, True)
    _fake_part(monkeypatch, [
        Figure("load", "load.sync.throughput_ratio", median, "ratio", ">= 0.4", "ratio", low, high),
        Figure("load", "load.sync.throughput_ratio_spread", round(relative, 3), "of the median",
               f"<= {SPREAD_LIMIT}", "spread"),
    ])
    assert report.main(paths) == 1
    out = capsys.readouterr().out
    assert "the rounds disagree" in out and "not published" in out
    assert not record.exists() and not rst.exists()


def test_a_median_is_published_with_its_range(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks.reliability.load import spread

    record, rst = tmp_path / "last-run.json", tmp_path / "figures.rst"
    paths = ["--record", str(record), "--rst", str(rst), "--parts", "load"]
    median, low, high, relative = spread([0.93, 0.95, 0.94, 0.96, 0.92])
    assert relative < 0.05
    _fake_part(monkeypatch, [Figure("load", "load.sync.throughput_ratio", median, "ratio", ">= 0.4",
                                    "ratio", low, high)])
    assert report.main(paths) == 0
    assert "0.94 ratio (0.93–0.95)" in rst.read_text()
    published = json.loads(record.read_text())["parts"]["load"]["figures"][0]
    assert (published["low"], published["high"]) == (0.93, 0.95)


def test_the_comparison_sends_no_duplicate_that_only_the_bare_shop_would_run_again() -> None:
    """The shop without the package runs a repeated call again (a second refund request filed,
    four concurrent copies queueing for the database's write lock) where the package answers it
    from its record: a comparison mix with duplicates compares different database work."""
    from benchmarks.reliability._load_mix import SIGNED_WEIGHTS, Mix

    mix = Mix("s" * 40, "t" * 40, "localhost", index=0, seed=1)
    jobs: list[str] = []
    for name in SIGNED_WEIGHTS:
        for _ in range(20):
            step = mix.step({name: 1})
            assert len(step.reqs) == 1 and not step.burst, name
            job = next(line for line in step.reqs[0].data.split(b"\r\n")
                       if line.startswith(b"X-Bailing-Job-Id:"))
            jobs.append(job.decode())
    assert len(set(jobs)) == len(jobs)


ROOT = Path(__file__).resolve().parent.parent


def _shown_commands() -> list[list[str]]:
    """Every command line of the reliability pages' code blocks, continuation lines joined."""
    import shlex
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from test_docs_blocks import code_blocks, pages
    finally:
        sys.path.remove(str(ROOT / "tests"))
    commands = []
    for page, text in pages().items():
        if page.split("/")[0] == "reliability":
            for _, _, body in code_blocks(text):
                for line in body.replace("\\\n", " ").splitlines():
                    commands.append(shlex.split(line, comments=True))
    return [command for command in commands if command]


def test_every_command_the_reliability_pages_show_is_one_its_program_accepts() -> None:
    """The runs take minutes: the suite checks what it can, that each option, file and extra exists."""
    import configparser
    import subprocess
    import sys

    commands = _shown_commands()
    assert len(commands) >= 10, commands
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(ROOT / "setup.cfg")
    extras = set(parser["options.extras_require"])
    for command in commands:
        if command[:2] == ["pip", "install"]:
            wanted = command[-1].split("[", 1)[1].rstrip("]").split(",")
            assert set(wanted) <= extras, command
        elif command[:3] == ["python", "-m", "pytest"]:
            files = [word for word in command[3:] if not word.startswith("-")]
            assert files and all(list(ROOT.glob(word)) for word in files), command
        else:
            assert command[:2] == ["python", "-m"] and command[2].startswith("benchmarks."), command
            shown = subprocess.run([sys.executable, *command[1:], "--help"], cwd=ROOT, capture_output=True,
                                   text=True, timeout=120)
            assert shown.returncode == 0 and "usage:" in shown.stdout, (command, shown.stdout + shown.stderr)
