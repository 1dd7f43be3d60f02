"""Reliability runs: load, fuzzing and faults, outside the test suite.

``python -m benchmarks.reliability`` runs every part and publishes the
figures (see ``benchmarks/README.md``). Each part is a module of this package
(``load``, ``fuzz``, ``faults``) with one entry point::

    def run(quick: bool = False) -> list[Figure]: ...

``quick`` is a short run (seconds, for a smoke check); the full run is what
the Reliability docs page publishes.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

#: the comparisons a requirement may use, e.g. ``"== 0"``, ``">= 0.4"``, ``"<= 64"``
COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    "==": operator.eq, ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt,
}


@dataclass(frozen=True)
class Figure:
    """One published figure of a reliability run."""

    #: the part that measured it: ``load``, ``fuzz`` or ``faults``
    part: str
    #: a stable dotted identifier, e.g. ``load.sync.false_accepts``
    name: str
    value: float
    #: ``requests``, ``req/s``, ``ms``, ``ratio``, ``MiB``, ``cases``, ``s`` ...
    unit: str
    #: what the figure must satisfy (``"== 0"``, ``">= 0.4"``), or ``""`` for information only
    require: str
    #: one line for the docs: what was measured
    text: str
    #: for a figure that is the median of several rounds: the range around it (e.g. the quartiles)
    low: float | None = None
    high: float | None = None

    def ok(self) -> bool:
        """Whether the figure meets its requirement (always true without one)."""
        if not self.require:
            return True
        op, _, bound = self.require.partition(" ")
        return COMPARISONS[op](self.value, float(bound))

    def as_dict(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items()
                if value is not None or key not in ("low", "high")}
