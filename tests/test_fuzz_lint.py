"""Fuzzing the linter with catalogs and tool declarations: it never crashes (fast version).

See ``tests/_fuzz/lint.py``: any JSON, catalog-shaped documents with fields of
every type, and ``@tool(...)`` declarations with right and wrong options.
"""

from __future__ import annotations

from hypothesis import given

from ._fuzz import fuzz_settings
from ._fuzz import lint


@fuzz_settings(60)
@given(case=lint.cases)
def test_the_linter_returns_findings_for_anything_and_declarations_fail_only_clearly(case):
    with lint.target() as check:
        outcome = check(case)
    assert outcome.ok, str(outcome)
