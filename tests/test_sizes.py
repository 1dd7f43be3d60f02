"""Every module of the package stays readable: at most 800 lines, no function over 100 lines of code.

Lines of code leave out blank lines, comments and docstrings. The tables
that are data (the finding codes, the refusal reasons, the settings) are
modules of their own and count like any other; none is over the limit.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "bailing_flask"
MAX_MODULE_LINES = 800
MAX_FUNCTION_CODE_LINES = 100
MODULES = sorted(PACKAGE.rglob("*.py"))


def code_lines(source: str, node: ast.AST) -> int:
    """Lines of ``node`` that are code: not blank, not a comment, not a docstring."""
    docstrings: set[int] = set()
    for inner in ast.walk(node):
        body = getattr(inner, "body", None)
        if (isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            docstrings.update(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    lines = source.splitlines()[node.lineno - 1:node.end_lineno]  # type: ignore[attr-defined]
    return sum(1 for number, line in enumerate(lines, start=node.lineno)  # type: ignore[attr-defined]
               if line.strip() and not line.strip().startswith("#") and number not in docstrings)


def test_the_measure_counts_code_only() -> None:
    source = 'def f():\n    """Doc\n    string."""\n\n    # a comment\n    x = 1\n    return x\n'
    assert code_lines(source, ast.parse(source).body[0]) == 3


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_size(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    assert len(source.splitlines()) <= MAX_MODULE_LINES, "split this module by job"
    too_long = [
        f"{node.name} (line {node.lineno}): {code_lines(source, node)} lines of code"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and code_lines(source, node) > MAX_FUNCTION_CODE_LINES
    ]
    assert too_long == []
