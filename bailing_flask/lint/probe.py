"""Where the hub sends its authorization probe, read from a catalog.

Mirrors ``dedicatedAuthzProbeTarget`` and ``pickProbeTarget`` in the hub's
``src/app/tool-specs.ts`` (checked against hub commit
``c6f1d24911fc47df79bb144b6d8b7ac93b381008``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bailing_flask.wire.jsenc import utf16_len as _utf16_len
from bailing_flask.wire.jsenc import utf16_slice as _utf16_slice
from bailing_flask.lint._js import _dig, _entries, _label, _or, _truthy
from bailing_flask.lint.compiler import _MAX_NAME, _prepare, _slug, compile_tools


@dataclass(frozen=True)
class ProbeTarget:
    """Where the hub sends its authorization probe after each catalog refresh.

    ``mode="dedicated"``: an endpoint the catalog declares with
    ``x-bailing-authz-probe``; ``mode="tool"``: a GET tool without required
    arguments, which the hub calls as a synthetic subject.
    """

    mode: Literal["dedicated", "tool"]
    method: str
    path: str
    name: str


_PROBE = "x-bailing-authz-probe"
_MAX_PROBE_PATH = 512


def _valid_root_probe(root: object) -> bool:
    path = _dig(root, "path")
    return (
        isinstance(root, dict)
        and isinstance(path, str)
        and path.startswith("/")
        and _utf16_len(path) <= _MAX_PROBE_PATH
    )


def authz_probe_target(document: object) -> ProbeTarget | None:
    """The request the hub's authorization probe would make.

    A dedicated target first (the root ``x-bailing-authz-probe`` object, else
    the first operation flagged ``x-bailing-authz-probe: true``), as
    ``dedicatedAuthzProbeTarget`` does; else the first subject-bound GET tool
    without required arguments, else the first such GET tool, as
    ``pickProbeTarget`` does. ``None``: the hub skips the probe.
    """
    doc, _ = _prepare(document)
    if doc is None:
        return None
    root = doc.get(_PROBE)
    if _valid_root_probe(root):
        assert isinstance(root, dict)
        method = "GET" if _label(_or(root.get("method"), "POST")).upper() == "GET" else "POST"
        op_id = root.get("operationId")
        name = _label(op_id) if _truthy(op_id) else "authz_probe"
        return ProbeTarget("dedicated", method, root["path"], _utf16_slice(name, _MAX_NAME))
    for path, item in _entries(_or(doc.get("paths"), {})):
        if not (path.startswith("/") and _utf16_len(path) <= _MAX_PROBE_PATH):
            continue
        if not item or not isinstance(item, (dict, list)):
            continue
        for method, op in _entries(item):
            if isinstance(op, dict) and op.get(_PROBE) is True:
                op_id = op.get("operationId")
                name = _label(op_id) if _truthy(op_id) else (_slug(method, path) or "authz_probe")
                verb = "GET" if method.upper() == "GET" else "POST"
                return ProbeTarget("dedicated", verb, path, _utf16_slice(name, _MAX_NAME))
    candidates = [t for t in compile_tools(doc) if t.method == "GET" and not t.required]
    chosen = next((t for t in candidates if t.requires_subject), None) or (
        candidates[0] if candidates else None
    )
    return None if chosen is None else ProbeTarget("tool", "GET", chosen.path, chosen.name)
