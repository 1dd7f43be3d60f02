"""Diagrams of the package drawn from the code: the layers and one request's path.

``.. bailing-layers::`` draws the layers of the import-linter ``layers``
contract in ``setup.cfg`` (the contract CI enforces), each part with the
first line of its docstring as a tooltip, so the picture cannot drift from
the tree. ``.. bailing-request-path::`` draws the steps a tool call passes,
each naming the module that does it; a module that no longer exists fails
the build. Both are inline SVG, no external tool needed.
"""

from __future__ import annotations

import ast
import configparser
import html
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "bailing_flask"

#: One hub tool call, in the order the package handles it: (step, module path, what happens).
REQUEST_PATH: list[tuple[str, str, str]] = [
    ("WSGI server", "", "gunicorn, waitress, uWSGI...: the raw request target and body stream"),
    ("verify", "wire/middleware.py", "signature, timestamp window, one reading of the signed string, body hashed while read and labelled JSON"),
    ("route", "", "Flask routes the request; the app's before_request hooks run (is_tool_call() is true)"),
    ("gate", "_pipeline/gate.py", "the routed method, path, query and body are the verified ones"),
    ("subject", "_pipeline/authz.py", "the signed subject, loaded by the app's subject_loader"),
    ("arguments", "_pipeline/arguments.py", "validated against the declaration that built the catalog"),
    ("authorize", "_pipeline/authz.py", "the app's authorizer: only True admits"),
    ("de-duplicate", "_pipeline/idempotency.py", "a side effect runs once per call identity (or in the app's transaction)"),
    ("view", "declare.py", "the view's own decorators, then the view"),
    ("project", "_pipeline/projection.py", "only the declared answer leaves, within the model's limits"),
    ("audit", "audit.py", "one JSON record, signals, an OpenTelemetry span"),
]

_FONT = "font-family:var(--font-stack--monospace, monospace);"
#: an arrow head along the line's direction
_ARROW = ('<marker id="{id}" markerWidth="10" markerHeight="10" refX="9" refY="5" orient="auto">'
          '<path d="M0,0 L9,5 L0,10 z" fill="currentColor"/></marker>')


def _layers() -> list[tuple[bool, list[str]]]:
    """The contract's rows, top first: (whether its members may import each other, modules)."""
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg", encoding="utf-8")
    text = parser.get("importlinter:contract:layers", "layers")
    rows = []
    for line in text.strip().splitlines():
        separator = ":" if ":" in line else "|"
        rows.append((separator == ":", [part.strip() for part in line.split(separator) if part.strip()]))
    return rows


def _path_of(module: str) -> Path:
    relative = Path(*module.split(".")[1:])
    package = PACKAGE / relative / "__init__.py"
    return package if package.exists() else (PACKAGE / relative).with_suffix(".py")


def _summary(module: str) -> str:
    path = _path_of(module)
    if not path.exists():
        raise ExtensionError(f"bailing-layers: {module} is in the layers contract but not in the tree")
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def _label(module: str) -> str:
    name = module.split(".", 1)[1]
    return name + ("/" if _path_of(module).name == "__init__.py" else ".py")


def _box(x: float, y: float, w: float, h: float, label: str, tip: str, fill: str,
         dashed: bool = False) -> str:
    dash = ' stroke-dasharray="5 3"' if dashed else ""
    return (f'<g><title>{html.escape(tip)}</title>'
            f'<rect x="{x:.0f}" y="{y:.0f}" width="{w:.0f}" height="{h:.0f}" rx="6" '
            f'fill="{fill}" stroke="currentColor" stroke-opacity="0.6"{dash}/>'
            f'<text x="{x + w / 2:.0f}" y="{y + h / 2 + 5:.0f}" text-anchor="middle" '
            f'style="{_FONT}font-size:13px" fill="currentColor">{html.escape(label)}</text></g>')


def layers_svg() -> str:
    rows = _layers()
    width, row_h, gap, left = 820, 44, 14, 40
    height = len(rows) * (row_h + gap) + 10
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
             f'role="img" aria-label="The layers of bailing_flask" style="max-width:100%;height:auto">',
             f'<defs>{_ARROW.format(id="down")}</defs>',
             f'<line x1="14" y1="8" x2="14" y2="{height - 12}" stroke="currentColor" stroke-width="2" '
             f'marker-end="url(#down)"/>',
             f'<text x="24" y="{height / 2:.0f}" transform="rotate(90 24 {height / 2:.0f})" '
             f'text-anchor="middle" style="{_FONT}font-size:12px" fill="currentColor">imports point down</text>']
    for index, (shared, row) in enumerate(rows):
        y = 6 + index * (row_h + gap)
        span = (width - left - 10) / len(row)
        for column, module in enumerate(row):
            fill = "rgba(80,130,200,0.18)" if module.startswith(("bailing_flask.wire", "bailing_flask._pipeline")) \
                else "rgba(128,128,128,0.12)"
            parts.append(_box(left + column * span + 4, y, span - 8, row_h, _label(module),
                              f"{module}: {_summary(module)}", fill, dashed=shared))
    parts.append("</svg>")
    return "".join(parts)


def request_path_svg() -> str:
    width, row_h, gap = 820, 40, 10
    height = len(REQUEST_PATH) * (row_h + gap) + 4
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" '
             f'aria-label="One tool call through bailing_flask" style="max-width:100%;height:auto">',
             f'<defs>{_ARROW.format(id="step")}</defs>']
    for index, (step, module, what) in enumerate(REQUEST_PATH):
        if module and not (PACKAGE / module).exists():
            raise ExtensionError(f"bailing-request-path: bailing_flask/{module} does not exist")
        y = 2 + index * (row_h + gap)
        fill = "rgba(80,130,200,0.18)" if module else "rgba(128,128,128,0.12)"
        parts.append(_box(4, y, 150, row_h, step, what, fill))
        parts.append(f'<text x="170" y="{y + 17}" style="{_FONT}font-size:12px" fill="currentColor">'
                     f'{html.escape(module and "bailing_flask/" + module or "(not the package)")}</text>')
        parts.append(f'<text x="170" y="{y + 33}" style="font-size:12px" fill="currentColor">'
                     f'{html.escape(what)}</text>')
        if index:
            parts.append(f'<line x1="79" y1="{y - gap}" x2="79" y2="{y - 1}" stroke="currentColor" '
                         f'marker-end="url(#step)"/>')
    parts.append("</svg>")
    return "".join(parts)


class _SvgDirective(SphinxDirective):
    has_content = False

    def svg(self) -> str:
        raise NotImplementedError

    def run(self) -> list[nodes.Node]:
        self.env.note_dependency(str(ROOT / "setup.cfg"))
        return [nodes.raw("", f'<div class="bailing-diagram">{self.svg()}</div>', format="html")]


class LayersDirective(_SvgDirective):
    def svg(self) -> str:
        return layers_svg()


class RequestPathDirective(_SvgDirective):
    def svg(self) -> str:
        return request_path_svg()


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("bailing-layers", LayersDirective)
    app.add_directive("bailing-request-path", RequestPathDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
