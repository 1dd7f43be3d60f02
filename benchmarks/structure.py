"""Structure figures of the package (not timings): cycles, configuration reads, layers, lines.

Run from a checkout's root: ``python -m benchmarks.structure [PACKAGE_DIR]``.
It prints, for the ``bailing_flask`` package found there (default: the
one next to this directory):

* import cycles (strongly connected components of more than one module),
  with and without type-only imports (``grimp``);
* places that read configuration: ``app.config`` reads and reads of the
  per-app frozen configuration (``state.config``, ``state_of(app).config``,
  ``current_state().config``, ``self.state.config``), by file;
* modules that import ``bailing_flask.extension`` (counting type-only ones);
* the package's non-blank lines, split into what a production request can
  touch and the tooling (lint, doctor, exercise, testing, CLI, status,
  pytest plugin).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import grimp

TOOLING = ("lint", "doctor", "exercise", "testing", "cli", "status", "pytest_plugin")
_CONFIG_READ = re.compile(
    r"\bapp\.config\b|\bstate\.config\b|\bstate_of\([^()]*\)\.config\b|current_state\(\)\.config\b"
)


def import_cycles(graph: grimp.ImportGraph) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component: set[str] = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(component)

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def _lines(path: Path) -> int:
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def main(argv: list[str]) -> int:
    root = Path(argv[0]).resolve() if argv else Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))
    package = root / "bailing_flask"
    sys.setrecursionlimit(10000)
    for types in (False, True):
        graph = grimp.build_graph("bailing_flask", exclude_type_checking_imports=not types, cache_dir=None)
        cycles = import_cycles(graph)
        label = "with type-only imports   " if types else "without type-only imports"
        print(f"import cycles {label}: {len(cycles)} cycle(s), "
              f"{sum(len(c) for c in cycles)} module(s) in them")
    importers = sorted(graph.find_modules_that_directly_import("bailing_flask.extension") - {"bailing_flask"})
    print(f"modules importing bailing_flask.extension (besides the package's __init__): {len(importers)}")
    for name in importers:
        print(f"    {name}")
    reads: dict[str, int] = {}
    production = tooling = 0
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        text = path.read_text(encoding="utf-8")
        count = len(_CONFIG_READ.findall(text))
        if count:
            reads[rel] = count
        top = rel.split("/")[0].removesuffix(".py")
        if top in TOOLING:
            tooling += _lines(path)
        else:
            production += _lines(path)
    print(f"configuration reads: {sum(reads.values())} in {len(reads)} file(s)")
    for rel, count in sorted(reads.items(), key=lambda item: (-item[1], item[0])):
        print(f"    {count:3d}  {rel}")
    print(f"lines (non-blank): production request side {production}, tooling {tooling} "
          f"({', '.join(TOOLING)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
