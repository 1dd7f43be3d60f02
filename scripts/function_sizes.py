"""List the functions of a tree with more lines of code than a limit (default 100).

Lines of code: non-blank, non-comment, non-docstring lines, counted with
``tokenize`` over each function's own lines (a nested function counts in its
parent too). Usage: ``python scripts/function_sizes.py bailing_flask [LIMIT]``.
"""

from __future__ import annotations

import ast
import io
import pathlib
import sys
import tokenize

_SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENDMARKER}
_Def = (ast.FunctionDef, ast.AsyncFunctionDef)


def _docstring_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (*_Def, ast.ClassDef, ast.Module)) and node.body:
            first = node.body[0]
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def _code_lines(source: str) -> set[int]:
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in _SKIPPED:
            lines.update(range(token.start[0], token.end[0] + 1))
    return lines


def sizes(path: pathlib.Path) -> list[tuple[int, str]]:
    """``(lines of code, "path:line name")`` of every function in ``path``."""
    source = path.read_text()
    tree = ast.parse(source)
    code = _code_lines(source) - _docstring_lines(tree)
    return [
        (sum(1 for line in code if node.lineno <= line <= (node.end_lineno or node.lineno)),
         f"{path}:{node.lineno} {node.name}")
        for node in ast.walk(tree) if isinstance(node, _Def)
    ]


def main(root: str, limit: int) -> None:
    found = [row for path in sorted(pathlib.Path(root).rglob("*.py")) for row in sizes(path)]
    for count, where in sorted((row for row in found if row[0] > limit), reverse=True):
        print(count, where)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 100)
