"""What the modules below the registry read of a compiled tool.

:class:`~bailing_flask._pipeline.registry.Tool` lives in the registry,
above projection and the parameter hazards, which take a tool; they type it
with this protocol instead of importing the registry (not even for a type).
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["ToolView"]


class ToolView(Protocol):
    """The read-only attributes of a compiled tool that lower modules use."""

    @property
    def name(self) -> str: ...
    @property
    def sensitive(self) -> bool: ...
    @property
    def shaper(self) -> Any: ...  # a projection.Shaper, or None
    @property
    def operation_key(self) -> str: ...
    @property
    def options(self) -> Any: ...  # the tool's declare.ToolOptions
    @property
    def readonly(self) -> bool: ...
    @property
    def parameters(self) -> tuple[dict[str, Any], ...]: ...
    @property
    def body_schema(self) -> dict[str, Any] | None: ...
