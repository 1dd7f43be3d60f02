"""Lint a tool catalog the way BailingHub compiles it, plus what the hub leaves unsaid.

The hub turns our OpenAPI document into tools with its own compiler (its
``compileOpenApiTools``). It drops operations with diagnostics that only show
up in the hub's console, ignores other mistakes without a word, and a handful
of inputs make it throw so that *no* tool of the source is available. We
cannot run that compiler from Python, so this package re-derives what it would
say (``bailing_flask.lint.compiler``):
the same codes, severities and order, the same early exits (the first failing
step decides), evaluated with JavaScript semantics (``=== true``, ``{}`` is
truthy, ``String()`` of arrays, ``?? ""``, lengths in UTF-16 code units).
Those findings carry ``source="hub"``.

It then adds the hazards the hub accepts silently (unverifiable paths,
unsigned header parameters, colliding tool names, values that lose precision,
probe targets that cannot work, schema limits the compiler does not enforce);
those carry ``source="bailing"``.

Everything works on an already parsed JSON value and never raises: a catalog
is input we do not fully control, and the doctor must be able to lint garbage.

Every finding code, with its severity, message and the hub function it
mirrors, is listed in :data:`bailing_flask.lint.codes.CODES`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from bailing_flask.lint.codes import Finding
from bailing_flask.lint.codes import Origin as Origin
from bailing_flask.lint.codes import Severity as Severity

if TYPE_CHECKING:  # pragma: no cover
    from bailing_flask.lint.compiler import CompiledTool, compile_names, compile_tools
    from bailing_flask.lint.probe import ProbeTarget, authz_probe_target

#: Loaded on first use: the registry needs only the codes table at start-up, and
#: the compiler and hazards are most of this package's import time.
_LAZY = {
    "CompiledTool": ".compiler", "compile_names": ".compiler", "compile_tools": ".compiler",
    "ProbeTarget": ".probe", "authz_probe_target": ".probe",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "Finding",
    "CompiledTool",
    "ProbeTarget",
    "lint_document",
    "compile_tools",
    "compile_names",
    "authz_probe_target",
]


def lint_document(document: object, *, trusted: bool = False) -> list[Finding]:
    """Everything the hub would report for ``document``, then what it would not.

    Document-level hazards come first; then, operation by operation in the
    hub's order, its diagnostics followed by that operation's own hazards;
    cross-operation hazards (duplicate names, the authorization probe) last.
    Never raises, whatever ``document`` is.

    ``trusted=True`` skips re-reading the document as ``JSON.parse`` would
    (key order, number precision, cycles): for a document this package has
    just built from plain JSON values, where it only costs time. Findings
    are the same, possibly in another order.
    """
    from bailing_flask.lint.compiler import _Compiler, _Operation, _prepare, _too_deep
    from bailing_flask.lint.hazards import _Hazards

    doc: dict[str, Any] | None
    invalid: Finding | None
    if trusted and isinstance(document, dict):
        doc, invalid = document, None
    else:
        doc, invalid = _prepare(document)
    if doc is None:
        assert invalid is not None
        return [invalid]
    try:
        compiler = _Compiler()
        hazards = _Hazards(compiler.findings)

        def after_operation(operation: _Operation, path_item: object) -> None:
            if operation.status == "disabled":
                hazards.disabled(operation)
            elif operation.status in ("dropped", "kept"):
                hazards.operation(operation, path_item)

        head = _Hazards([])
        head.document(doc)
        compiler.run(doc, after_operation)
        hazards.duplicates(compiler.operations)
        hazards.probe(doc, compiler.operations)
        if not any(o.tool for o in compiler.operations):
            hazards.add("no_tools", "-")
        return head.findings + compiler.findings
    except RecursionError:
        return [_too_deep()]
