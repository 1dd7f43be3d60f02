"""Finding codes of the catalog lint and the registry, and the :class:`Finding` they produce."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Finding", "Severity", "Origin"]


Severity = Literal["error", "warning", "info"]
Origin = Literal["hub", "bailing"]


@dataclass(frozen=True)
class Finding:
    """One problem in a catalog.

    ``source="hub"`` findings are diagnostics the hub's compiler itself emits
    (``code`` is the hub's code); ``source="bailing"`` findings are hazards the
    hub does not report. ``path`` is ``"<METHOD> <path>"`` like the hub, or
    ``"-"`` for the document as a whole.
    """

    severity: Severity
    code: str
    path: str
    message: str
    suggestion: str | None = None
    source: Origin = "hub"
