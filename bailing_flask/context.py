"""The acting subject and the current call, Flask style.

``current_call`` and ``current_subject`` are request-scoped proxies. In a
request the hub did not sign they raise :class:`NotVerifiedError` rather
than return ``None``, which would read as "an anonymous hub call". For
``is None`` checks and for mypy, use the functions, which return real
values: :func:`get_current_call`, :func:`get_current_subject`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar, cast

from flask import has_request_context, request
from werkzeug.local import LocalProxy

from .errors import NotVerifiedError
from .wsgi import ENVIRON_KEY, UnsignedHeaders, VerifiedCall

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

__all__ = [
    "ToolInfo",
    "ToolCall",
    "current_call",
    "current_subject",
    "get_current_call",
    "get_current_subject",
    "require_call",
]

TOOL_CALL_KEY = "bailing.tool_call"


@dataclass(frozen=True)
class ToolInfo:
    """The tool being called, as declared by *our* catalog (never the unsigned scope header)."""

    name: str
    scope: str
    method: str
    path: str
    risk: str
    readonly: bool
    idempotent: bool
    subject_required: bool
    sensitive: bool


@dataclass(frozen=True)
class ToolCall:
    """A verified hub call, as seen by authorizers and views.

    :ivar verified: the signature facts from the middleware.
    :ivar tool: the matched tool; ``None`` for a signed request to a route
        that is not a tool.
    :ivar user: what the subject loader returned (``None`` if anonymous,
        unknown, or no loader is registered).
    :ivar args: the validated arguments (path, query and body together).
    :ivar is_probe: ``True`` when the hub's authorization probe asks whether
        this subject may use the tool at all (no arguments).
    :ivar authorized: ``True`` once the gate admitted the call: code that
        runs after it (decorators, the view, ``after_request``) can rely on
        the subject, the loaded user and the arguments.
    """

    verified: VerifiedCall
    tool: ToolInfo | None = None
    user: Any = None
    args: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    query: BaseModel | None = None
    body: BaseModel | None = None
    is_probe: bool = False
    authorized: bool = False

    def admit(self) -> None:
        """Mark this call as admitted (the gate does, once, after its decision)."""
        object.__setattr__(self, "authorized", True)

    def body_as(self, model: type[M]) -> M:
        """The validated body as ``model`` (typed for mypy; raises if it is another model)."""
        if not isinstance(self.body, model):
            raise TypeError(f"the call's body is {type(self.body).__name__}, not {model.__name__}")
        return self.body

    def query_as(self, model: type[M]) -> M:
        """The validated query as ``model`` (typed for mypy)."""
        if not isinstance(self.query, model):
            raise TypeError(f"the call's query is {type(self.query).__name__}, not {model.__name__}")
        return self.query

    @property
    def subject(self) -> str | None:
        """The signed acting subject, or ``None`` for an anonymous call."""
        return self.verified.subject

    @property
    def job_id(self) -> str:
        return self.verified.job_id

    @property
    def unsigned(self) -> UnsignedHeaders:
        """Headers outside the signature: informational only."""
        return self.verified.unsigned


def get_current_call() -> ToolCall | None:
    """The current verified call, or ``None`` when the request is not signed by the hub."""
    if not has_request_context():
        raise RuntimeError("bailing_flask: current_call needs an active request")
    call = request.environ.get(TOOL_CALL_KEY)
    if call is not None:
        return cast(ToolCall, call)
    verified = request.environ.get(ENVIRON_KEY)
    if verified is None:
        return None
    return ToolCall(verified=verified)


def require_call() -> ToolCall:
    """The current verified call; raises :class:`NotVerifiedError` otherwise."""
    call = get_current_call()
    if call is None:
        raise NotVerifiedError(
            "this request was not signed by BailingHub, so there is no verified call or subject"
        )
    return call


def get_current_subject() -> str | None:
    """The signed subject (``None`` when anonymous); raises if the request is not verified."""
    return require_call().subject


#: The verified call of this request (raises :class:`NotVerifiedError` if unsigned).
current_call: ToolCall = cast(ToolCall, LocalProxy(require_call))
#: The signed On-Behalf-Of of this request, ``None``-like when anonymous.
#: Compare with ``==`` or test truthiness; ``is None`` compares the proxy.
current_subject: str | None = cast("str | None", LocalProxy(get_current_subject))
