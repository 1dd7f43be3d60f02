"""Subject loading and the authorization decision, fail-closed.

A valid signature only proves the hub sent the request. Whether *this
subject* may use *this tool* is the app's decision, made by an authorizer
that must exist and must return exactly ``True``: ``False``, ``None``, a
truthy non-bool or an exception all deny. The probe runs the very same
functions for the hub's synthetic subject, so what the hub measures is what
the app enforces.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bailing_flask._sync import call_sync
from bailing_flask.context import ToolCall, ToolInfo
from bailing_flask.wire.middleware import VerifiedCall

if TYPE_CHECKING:  # pragma: no cover
    from bailing_flask._pipeline.registry import Registry, Tool

__all__ = ["Decision", "load_user", "loader_failed", "decide", "probe_authorized", "tool_info"]

logger = logging.getLogger("bailing_flask")

SubjectLoader = Callable[[str], Any]
Authorizer = Callable[[ToolCall], Any]


class Decision:
    """The outcome of :func:`decide`: ``allowed`` and, when denied, a reason code."""

    __slots__ = ("allowed", "reason")

    def __init__(self, allowed: bool, reason: str | None = None) -> None:
        self.allowed = allowed
        self.reason = reason


#: The one allowing decision (a decision is never changed once made).
_ALLOWED = Decision(True)


def tool_info(tool: Tool) -> ToolInfo:
    """What authorizers and views see of ``tool`` (built once per compiled tool)."""
    return tool.info


class SubjectLoadError(Exception):
    """The subject loader raised; the call is denied."""


def load_user(loader: SubjectLoader | None, subject: str | None) -> Any:
    """Map the raw subject to the app's user object (``None`` if unknown or anonymous).

    An ``async def`` loader is awaited (``flask[async]``).
    """
    if loader is None or not subject:
        return None
    try:
        return call_sync(loader, subject)
    except Exception as exc:
        loader_failed(exc, subject)
        raise SubjectLoadError() from exc


def loader_failed(exc: Exception, subject: str) -> None:
    """Log a subject loader that raised (the call is then denied)."""
    logger.error("bailing: subject loader raised %s for subject %r; denying", type(exc).__name__,
                 subject, exc_info=exc)


def decide(tool: Tool, call: ToolCall, app_authorizer: Authorizer | None) -> Decision:
    """Run the tool's authorizer (or the app-wide one); only ``True`` allows.

    An ``async def`` authorizer is awaited (``flask[async]``): its coroutine
    object is never mistaken for a verdict.
    """
    if tool.subject_required and not call.subject:
        return Decision(False, "subject_required")
    authorizer = tool.options.authorizer or app_authorizer
    if authorizer is None:
        logger.error("bailing: tool %r has no authorizer; refusing (register @bailing.authorizer)",
                     tool.name)
        return Decision(False, "no_authorizer")
    try:
        verdict = call_sync(authorizer, call)
    except Exception as exc:
        logger.error("bailing: authorizer raised %s for tool %r, subject %r; denying",
                     type(exc).__name__, tool.name, call.subject, exc_info=not tool.sensitive)
        return Decision(False, "forbidden")
    if verdict is True:
        return _ALLOWED
    if verdict not in (False, None):
        logger.warning("bailing: authorizer for tool %r returned %s, not True; denying",
                       tool.name, type(verdict).__name__)
    return Decision(False, "forbidden")


def probe_authorized(
    registry: Registry,
    verified: VerifiedCall,
    subject: str | None,
    loader: SubjectLoader | None,
    app_authorizer: Authorizer | None,
) -> bool:
    """Would ``subject`` be allowed to use any exported tool at all?

    Each authorizer sees a :class:`ToolCall` with ``is_probe=True`` and no
    arguments; exceptions count as deny. A loader failure denies everything.
    """
    try:
        user = load_user(loader, subject)
    except SubjectLoadError:
        return False
    probe_verified = verified if subject == verified.subject else verified._replace(subject=subject)
    for tool in registry.tools:
        if tool.options.deprecated:
            continue
        call = ToolCall(verified=probe_verified, tool=tool_info(tool), user=user, is_probe=True)
        if decide(tool, call, app_authorizer).allowed:
            return True
    return False

