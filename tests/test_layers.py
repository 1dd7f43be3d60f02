"""The package's layers hold: the import-linter contracts in setup.cfg, and no import cycle.

The layers are drawn in ``docs/contributing.rst``. A type-only import
(under ``if TYPE_CHECKING:``) obeys them like any other: nothing imports
anything above it, lazily, at run time or for a type.
"""

from __future__ import annotations

import configparser
import subprocess
import sys
from pathlib import Path

import grimp

from benchmarks.structure import import_cycles

ROOT = Path(__file__).resolve().parent.parent


def test_no_module_imports_one_above_it_at_run_time() -> None:
    graph = grimp.build_graph("bailing_flask", exclude_type_checking_imports=True, cache_dir=None)
    assert len(graph.modules) > 60
    assert import_cycles(graph) == []


def test_no_import_cycle_even_counting_type_only_imports() -> None:
    graph = grimp.build_graph("bailing_flask", exclude_type_checking_imports=False, cache_dir=None)
    assert len(graph.modules) > 60
    assert import_cycles(graph) == []


def test_no_module_below_the_extension_imports_it() -> None:
    graph = grimp.build_graph("bailing_flask", exclude_type_checking_imports=False, cache_dir=None)
    importers = graph.find_modules_that_directly_import("bailing_flask.extension")
    assert importers == {"bailing_flask"}  # the package's public names, and nothing else


def test_the_layers_contract_has_no_sibling_row_and_no_type_only_exemption() -> None:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    assert "exclude_type_checking_imports" not in config["importlinter"]
    layers = [row.strip() for row in config["importlinter:contract:layers"]["layers"].splitlines() if row.strip()]
    assert len(layers) > 10
    assert [row for row in layers if ":" in row] == []  # a ':' row would let its members import each other


def test_the_cycle_check_finds_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for module in ("pkg", "pkg.a", "pkg.b", "pkg.c"):
        graph.add_module(module)
    graph.add_import(importer="pkg.a", imported="pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.c")
    graph.add_import(importer="pkg.c", imported="pkg.a")
    assert import_cycles(graph) == [{"pkg.a", "pkg.b", "pkg.c"}]


def test_the_import_linter_contracts_are_kept() -> None:
    lint_imports = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout
    assert result.stdout.count("KEPT") >= 3
