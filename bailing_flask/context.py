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
from types import MappingProxyType, SimpleNamespace
from typing import Any, TypeVar, cast

import flask.globals
from flask import has_request_context, request
from werkzeug.local import LocalProxy

from bailing_flask.errors import NotVerifiedError
from bailing_flask.wire.middleware import ENVIRON_KEY, UnsignedHeaders, VerifiedCall, altered_part

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

__all__ = [
    "Arguments",
    "ToolInfo",
    "ToolCall",
    "current_call",
    "current_subject",
    "get_current_call",
    "get_current_subject",
    "require_call",
    "get_arguments",
]

TOOL_CALL_KEY = "bailing.tool_call"
#: Where the validated arguments of an unsigned request to a shared route are kept.
ARGUMENTS_KEY = "bailing.arguments"


def _as(value: BaseModel | None, model: type[M], what: str) -> M:
    if not isinstance(value, model):
        raise TypeError(f"the {what} is {type(value).__name__}, not {model.__name__}")
    return value


@dataclass(frozen=True)
class Arguments:
    """A tool's validated arguments: the same for a hub call and for a human's request.

    :ivar args: path, query and body values together.
    :ivar signed: ``True`` for a verified hub call, ``False`` for an unsigned
        request to a shared route (``allow_unsigned=True, validate_unsigned=True``).
    """

    args: Mapping[str, Any]
    query: BaseModel | None = None
    body: BaseModel | None = None
    signed: bool = False

    def body_as(self, model: type[M]) -> M:
        """The validated body as ``model`` (typed for mypy; raises if it is another model)."""
        return _as(self.body, model, "body")

    def query_as(self, model: type[M]) -> M:
        """The validated query as ``model`` (typed for mypy)."""
        return _as(self.query, model, "query")


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

    @property
    def arguments(self) -> Arguments:
        """The validated arguments, in the form :func:`get_arguments` returns them."""
        return Arguments(self.args, self.query, self.body, signed=True)

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


def _admitted_call(
    verified: VerifiedCall, tool: ToolInfo, user: Any, args: Mapping[str, Any],
    query: BaseModel | None, body: BaseModel | None,
) -> ToolCall:
    """``ToolCall(verified=..., tool=..., user=..., args=..., query=..., body=...)``, built
    without the frozen dataclass's per-field ``object.__setattr__`` (the gate builds one per
    call, before it decides). Equal to it, field for field (a test says so)."""
    call = object.__new__(ToolCall)
    fields = call.__dict__
    fields["verified"] = verified
    fields["tool"] = tool
    fields["user"] = user
    fields["args"] = args
    fields["query"] = query
    fields["body"] = body
    fields["is_probe"] = False
    fields["authorized"] = False
    return call


class _ThroughTheProxy:
    """:data:`_REQUEST_CONTEXT` where ``flask.globals`` has no ``_cv_request``: ``flask.request``."""

    @staticmethod
    def get() -> Any:
        try:
            return SimpleNamespace(request=request._get_current_object())  # type: ignore[attr-defined]
        except RuntimeError:  # outside a request
            raise LookupError from None


#: The context variable behind ``flask.request`` (Flask 2.3 and 3.x name it ``_cv_request``;
#: its value's ``request`` is the request). Read directly, a lookup costs one C call instead of
#: the proxy's two Python calls; where a Flask names it otherwise, the lookup goes through
#: ``flask.request`` as before.
_REQUEST_CONTEXT: Any = getattr(flask.globals, "_cv_request", None) or _ThroughTheProxy()
_OUTSIDE = "bailing_flask: current_call needs an active request"
_UNSIGNED = "this request was not signed by BailingHub, so there is no verified call or subject"


def _not_admitted(environ: dict[str, Any]) -> ToolCall | None:
    """The call of a signed request that no tool admitted (a route that is not a tool).

    ``None`` also when the request as routed is not the one verified (a
    middleware inside the verifier changed its method, path, query or
    body): the signature vouches for another request than this route's.
    """
    verified = environ.get(ENVIRON_KEY)
    if verified is None or altered_part(environ) is not None:
        return None
    return ToolCall(verified=verified)


def get_current_call() -> ToolCall | None:
    """The current verified call, or ``None`` when the request is not signed by the hub."""
    try:
        environ = _REQUEST_CONTEXT.get().request.environ
    except LookupError:  # outside a request
        raise RuntimeError(_OUTSIDE) from None
    call: ToolCall | None = environ.get(TOOL_CALL_KEY)
    return call if call is not None else _not_admitted(environ)


def get_arguments() -> Arguments:
    """The validated arguments of the current tool request, signed or not.

    For an admitted hub call, its arguments; for an unsigned request to a
    tool declared ``allow_unsigned=True, validate_unsigned=True``, the same
    validation applied to the human's request (bad input was already
    answered with a 422). Lets a shared route read its input one way.
    Raises :class:`NotVerifiedError` anywhere else.
    """
    if not has_request_context():
        raise RuntimeError("bailing_flask: get_arguments() needs an active request")
    environ = request.environ
    call = environ.get(TOOL_CALL_KEY)
    if call is not None and call.authorized:
        return cast(ToolCall, call).arguments
    human = environ.get(ARGUMENTS_KEY)
    if human is not None:
        return cast(Arguments, human)
    raise NotVerifiedError(
        "no validated arguments for this request: it is neither an admitted hub call nor an "
        "unsigned request to a tool declared with validate_unsigned=True"
    )


def require_call() -> ToolCall:
    """The current verified call; raises :class:`NotVerifiedError` otherwise."""
    # get_current_call's lookup, not a call of it: every access through current_call comes here
    try:
        environ = _REQUEST_CONTEXT.get().request.environ
    except LookupError:  # outside a request
        raise RuntimeError(_OUTSIDE) from None
    call: ToolCall | None = environ.get(TOOL_CALL_KEY)
    if call is None:
        call = _not_admitted(environ)
        if call is None:
            raise NotVerifiedError(_UNSIGNED)
    return call


def get_current_subject() -> str | None:
    """The signed subject (``None`` when anonymous); raises if the request is not verified."""
    return require_call().subject


#: The verified call of this request (raises :class:`NotVerifiedError` if unsigned).
current_call: ToolCall = cast(ToolCall, LocalProxy(require_call))
#: The signed On-Behalf-Of of this request, ``None``-like when anonymous.
#: Compare with ``==`` or test truthiness; ``is None`` compares the proxy.
current_subject: str | None = cast("str | None", LocalProxy(get_current_subject))
