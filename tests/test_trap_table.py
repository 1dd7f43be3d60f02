"""Every trap in the security page's trap table names the tests that guard it, and they exist.

The trap table of ``docs/security.rst`` lists the places where a naive
implementation disagrees with the hub, numbered there from 1 to 37, each with
an anchor ``trap-t<n>`` (a row found later about the same trap takes a letter:
``T32b``, anchor ``trap-t32b``). Each row ends with a ``Regression tests:`` line naming tests
as ``path::name``, or with a ``Not checked here:`` line that says why the
trap is not this package's to check. This test reads the table and the
test files (with ``ast``, without importing them) and fails when a row
names nothing, names a test that does not exist, or a trap is missing.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECURITY = ROOT / "docs" / "security.rst"
TRAPS = range(1, 38)

_TRAP_IDS = re.compile(r"\*\*T(\d+[a-z]?)(?:, T(\d+[a-z]?))?\*\*")
_NAMED = re.compile(r"``(tests/[\w/]+\.py)::(\w+)``")


def trap_rows(text: str) -> dict[str, str]:
    """Trap number (``"32"``, ``"32b"``) -> the text of its row, from every list-table of the page."""
    rows: dict[str, str] = {}
    current: list[str] = []

    def close() -> None:
        block = "\n".join(current)
        first_cell = block.split("\n     - ", 1)[0]
        found = _TRAP_IDS.search(first_cell)
        if found:
            for number in filter(None, found.groups()):
                assert number not in rows, f"trap T{number} has two rows"
                rows[number] = block

    for line in text.splitlines():
        if line.startswith("   * - "):
            close()
            current = [line]
        elif current and (not line.strip() or line.startswith("     ")):
            current.append(line)
        elif current:
            close()
            current = []
    close()
    return rows


@cache
def defined_tests(path: str) -> frozenset[str]:
    """Names of the test functions a file defines, at module level or in classes."""
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"), filename=path)
    return frozenset(node.name for node in ast.walk(tree)
                     if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and node.name.startswith("test_"))


def test_every_trap_has_one_row_and_an_anchor():
    text = SECURITY.read_text(encoding="utf-8")
    rows = trap_rows(text)
    assert sorted(int(number) for number in rows if number.isdigit()) == list(TRAPS)
    assert all(int(number.rstrip("abcdefghijklmnopqrstuvwxyz")) in TRAPS for number in rows)
    for number, row in rows.items():
        assert f".. _trap-t{number}:" in row, f"trap T{number} has no anchor trap-t{number}"


def test_every_trap_row_names_its_regression_tests_or_says_why_it_has_none():
    rows = trap_rows(SECURITY.read_text(encoding="utf-8"))
    for number, row in rows.items():
        tests_line = "Regression tests:" in row
        not_ours = re.search(r"Not checked here: \S.{20,}", row, re.S)
        assert tests_line != bool(not_ours), (
            f"trap T{number}: a row names its tests or says why it has none, not both")
        if tests_line:
            named = _NAMED.findall(row.split("Regression tests:", 1)[1])
            assert named, f"trap T{number}: 'Regression tests:' names no test"


def test_every_named_regression_test_exists():
    rows = trap_rows(SECURITY.read_text(encoding="utf-8"))
    missing = [f"T{number}: {path}::{name}" for number, row in sorted(rows.items())
               for path, name in _NAMED.findall(row)
               if not (ROOT / path).is_file() or name not in defined_tests(path)]
    assert missing == []


def test_the_table_reader_sees_what_a_row_says():
    """The reader itself, on a made-up table: a row it misread would pass the checks above."""
    text = "\n".join([
        ".. list-table::",
        "",
        "   * - .. _trap-t1:",
        "       .. _trap-t2:",
        "",
        "       **T1, T2** two in one row",
        "     - what goes wrong",
        "     - the defence",
        "",
        "       Regression tests: ``tests/test_trap_table.py::test_every_named_regression_test_exists``",
        "   * - .. _trap-t3:",
        "",
        "       **T3** not ours",
        "     - what goes wrong",
        "     - Not checked here: the hub alone decides this, nothing reaches the app.",
        "",
        "Text after the table.",
    ])
    rows = trap_rows(text)
    assert sorted(rows) == ["1", "2", "3"]
    assert rows["1"] is rows["2"] and "two in one row" in rows["1"]
    assert _NAMED.findall(rows["1"]) == [("tests/test_trap_table.py",
                                          "test_every_named_regression_test_exists")]
    assert "Not checked here" in rows["3"] and "Text after" not in rows["3"]
    assert sorted(trap_rows(text.replace("**T3**", "**T3b**"))) == ["1", "2", "3b"]
    assert "test_every_named_regression_test_exists" in defined_tests("tests/test_trap_table.py")
