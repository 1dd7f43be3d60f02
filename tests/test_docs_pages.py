"""The built documentation, looked at in a real headless Chromium: no page shows a build error.

``sphinx -W`` turns warnings into errors, but a theme can still paint an
error over a page the build accepted: furo draws ``ERROR: Adding a table of
contents ...`` in a red box over every ``.. contents::`` block, from its
CSS. Only a browser that applies the styles sees it.

The docs are built once per session into a temporary folder (or taken
from ``BAILING_DOCS_HTML``, the folder CI has just built). Needs the
``docs`` extra (Sphinx, furo) and Debian's ``chromium`` and
``chromium-driver``; without them the tests skip and say which is
missing (with ``CI`` set, a missing browser fails them instead).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from . import _browser

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def _need_sphinx() -> None:
    try:
        import furo  # noqa: F401
        import sphinx  # noqa: F401
    except ImportError:
        pytest.skip("the docs extra is not installed: pip install -e '.[docs]'")


@pytest.fixture(scope="module")
def browser():
    missing = _browser.available()
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    with _browser.Browser() as opened:
        yield opened


def sphinx_build(source: Path, out: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sphinx", "-q", *options, "-b", "html", str(source), str(out)],
                          capture_output=True, text=True, timeout=1800, cwd=ROOT)


@pytest.fixture(scope="module")
def built_docs(tmp_path_factory) -> Path:
    given = os.environ.get("BAILING_DOCS_HTML")
    if given:
        return Path(given)
    _need_sphinx()
    out = tmp_path_factory.mktemp("docs-html")
    result = sphinx_build(ROOT / "docs", out, "-W", "--keep-going")
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def test_the_check_sees_the_box_furo_paints_over_a_table_of_contents(tmp_path, browser):
    _need_sphinx()
    source = tmp_path / "src"
    source.mkdir()
    (source / "conf.py").write_text('html_theme = "furo"\n')
    (source / "index.rst").write_text(
        "Page\n====\n\n.. contents::\n   :local:\n\nA section\n---------\n\n"
        "Text with an :unknown-role:`x`.\n")
    result = sphinx_build(source, tmp_path / "out")  # accepted: no -W here
    assert result.returncode == 0, result.stderr
    problems = _browser.page_problems(browser, tmp_path / "out" / "index.html")
    assert any("ERROR: Adding a table of contents" in p for p in problems), problems
    assert any(p.startswith("build error problematic") for p in problems), problems


def test_no_page_of_the_documentation_shows_a_build_error(built_docs, browser):
    pages = sorted(p for p in built_docs.rglob("*.html") if "_modules" not in p.parts)
    assert len(pages) > 10, pages
    problems = {str(page.relative_to(built_docs)): found for page in pages
                if (found := _browser.page_problems(browser, page))}
    assert problems == {}


def test_the_contributing_pages_sphinx_command_builds_after_installing_only_the_docs_extra(tmp_path):
    """A contributor who installed ``.[docs]`` alone runs the command the page shows, as shown."""
    import shlex

    _need_sphinx()  # where the docs extra is not wanted, neither is this (slow) test
    line = next(line for line in (ROOT / "docs" / "contributing.rst").read_text().splitlines()
                if "python -m sphinx" in line)
    words = shlex.split(line.split("#", 1)[0])
    assert words[:3] == ["python", "-m", "sphinx"] and words[-1] == "docs/_build/html", line
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=600)
    python = str(venv / "bin" / "python")
    install = subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                              "-e", ".[docs]"], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if install.returncode != 0 and "No matching distribution" in install.stderr:
        pytest.skip("the package index cannot be reached")
    assert install.returncode == 0, install.stderr[-3000:]
    built = subprocess.run([python, *words[1:-1], str(tmp_path / "html")], cwd=ROOT, capture_output=True,
                           text=True, timeout=1800)
    assert built.returncode == 0, (built.stdout + built.stderr)[-5000:]
