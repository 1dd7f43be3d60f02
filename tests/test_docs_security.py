"""The security page's table of defences names code that exists.

Its "Where" column points a reviewer at the function or class that holds
each defence (``wire.middleware.altered_part``, relative to the package).
A rename that leaves the page pointing at nothing fails here, not in a
reader's search.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parent.parent / "docs" / "security.rst"


def _where_cells() -> list[str]:
    """The third cell of each row of the page's list-tables whose third heading is "Where"."""
    cells: list[str] = []
    rows: list[list[str]] = []
    for line in PAGE.read_text(encoding="utf-8").splitlines() + [".. end"]:
        if line.startswith("   * - "):
            rows.append([line[7:]])
        elif line.startswith("     - ") and rows:
            rows[-1].append(line[7:])
        elif line.startswith("       ") and rows:
            rows[-1][-1] += " " + line.strip()
        elif line.strip() and not line.startswith("   "):  # the table ended
            if rows and len(rows[0]) >= 3 and rows[0][2].strip() == "Where":
                cells += [row[2] for row in rows[1:]]
            rows = []
    return cells


NAMES = sorted({name for cell in _where_cells() for name in re.findall(r"``([^`]+)``", cell)})


def test_the_table_of_defences_is_found() -> None:
    assert len(_where_cells()) >= 8
    assert "wire.middleware.altered_part" in NAMES


@pytest.mark.parametrize("name", NAMES)
def test_each_place_the_table_names_exists(name: str) -> None:
    parts = name.split(".")
    for split in range(len(parts), 0, -1):  # the longest module prefix that imports
        try:
            target: object = importlib.import_module("bailing_flask." + ".".join(parts[:split]))
        except ImportError:
            continue
        for attribute in parts[split:]:
            assert hasattr(target, attribute), f"{name}: {target!r} has no {attribute!r}"
            target = getattr(target, attribute)
        return
    pytest.fail(f"{name}: no module of bailing_flask by that name")
