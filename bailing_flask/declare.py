"""Declaring tools: the ``@tool`` decorator and ``tool_defaults``.

Exposure is opt-in. Only a view (or a MethodView method) that carries a
declaration becomes a tool; a blueprint or class may set defaults, never
expose anything by itself. Options are validated when the decorator runs,
so a typo fails at import time with the view and the field named, not when
the hub first refreshes the catalog.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypedDict, TypeVar, cast, get_origin, overload

from flask import current_app, request
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from typing_extensions import Unpack

from bailing_flask._state import current_state
from bailing_flask.errors import ConfigurationError, ToolDeclarationError

__all__ = [
    "tool",
    "tool_defaults",
    "Param",
    "ToolOptions",
    "ApprovalCondition",
    "RateLimit",
    "Outcome",
    "Declaration",
    "get_declaration",
    "REPEATS",
    "REMOVED_OPTIONS",
    "ToolKwargs",
]

F = TypeVar("F", bound=Callable[..., Any])
#: A view function or a class: ``@tool`` gives it back with its type.
V = TypeVar("V", bound=Callable[..., Any])
#: A blueprint or a class: ``tool_defaults`` gives it back.
D = TypeVar("D")

_DECLARATION_ATTR = "__bailing_tool__"
_WRAPPED_ATTR = "__bailing_wrapped_by__"
#: On a sync ``@tool`` wrapper: ``(the wrapper, the declared view)`` (see :func:`direct_view`).
_DIRECT_ATTR = "__bailing_direct__"
_DEFAULTS_ATTR = "__bailing_defaults__"
_HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
_CONDITION_OPS = (">=", "<=", "==", "!=", ">", "<", "in", "contains", "exists")
_CONDITION_RE = re.compile(
    r"^\s*(?P<param>[A-Za-z_][A-Za-z0-9_.]*)\s*(?P<op>>=|<=|==|!=|>|<|\bin\b|\bcontains\b|\bexists\b)\s*(?P<value>.*?)\s*$"
)
_RATE_UNITS = {
    "s": "1s", "sec": "1s", "second": "1s", "seconds": "1s",
    "m": "1m", "min": "1m", "minute": "1m", "minutes": "1m",
    "h": "1h", "hr": "1h", "hour": "1h", "hours": "1h",
    "d": "1d", "day": "1d", "days": "1d",
}


#: The values of ``repeats=``: what happens to a repeat of the same call.
REPEATS: Mapping[str, str] = {
    "replay": "the first call runs and its answer is recorded; an identical repeat gets the "
              "recorded answer (Idempotent-Replayed: true); a call that failed is uncertain until "
              "an operator resolves it (the default for a write tool)",
    "transaction": "the same, with the record committed in the view's own database transaction "
                   "(BAILING_TRANSACTION): exactly once, a failure rolls back and never leaves a "
                   "call uncertain",
    "safe": "the call is harmless to repeat: the catalog says execution.idempotent, the hub sends "
            "no idempotency key and may retry it, and every call runs",
}
_SAFE_WITH_KEY = (
    "repeats='safe' runs every call, and idempotency_key= says which calls are repeats of each "
    "other to run them once; drop one of them"
)


def _idempotent_removed(value: Any) -> str:
    if value is True:
        return ("write repeats='safe' (the hub may retry it and every call runs; an idempotent "
                "write used to be de-duplicated all the same), or leave it out to have repeats "
                "answered from the record")
    return "leave it out (a write tool is not idempotent unless it says repeats='safe')"


def _deduplicate_removed(value: Any) -> str:
    if value is False:
        return ("write repeats='safe' if running every call is harmless (the hub is then told it "
                "may retry it), or leave it out: a write tool's repeats are answered from the "
                "record by default")
    return "leave it out: every write tool is de-duplicated by default (repeats='replay')"


#: Options that ``@tool`` and ``tool_defaults`` no longer take, each with what to write instead
#: (as a function of the value given). The package is unreleased: no aliases.
REMOVED_OPTIONS: Mapping[str, Callable[[Any], str]] = {
    "idempotent": _idempotent_removed,
    "deduplicate": _deduplicate_removed,
    "idempotency": lambda value: "it was the first name of deduplicate=, also removed: "
                                 + _deduplicate_removed(value),
    "transactional": lambda value: (
        "write repeats='transaction' (the record commits in the view's own database transaction)"
        if value else "leave it out (repeats='replay', the store, is the default)"),
    "rerun_uncertain": lambda value: (
        "write repeats='transaction', which never leaves a call uncertain, or let an operator "
        "release one call with `flask bailing idempotency resolve KEY --rerun --note ...`"),
    "failure_is_atomic": lambda value: (
        "write repeats='transaction': a failure rolls back and the same call runs again; in the "
        "store mode a failed call is uncertain until `flask bailing idempotency resolve` decides"),
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True,
                              protected_namespaces=())


class ApprovalCondition(_Model):
    """One ``approval.when`` condition.

    Also accepted as a string such as ``"amount > 500"`` or
    ``"currency in [\\"USD\\",\\"EUR\\"]"`` (the value is JSON, else text).
    """

    param: str = Field(min_length=1, max_length=191)
    op: Literal[">", ">=", "<", "<=", "==", "!=", "in", "contains", "exists"]
    value: Any = None
    label: str | None = Field(default=None, min_length=1, max_length=120)
    has_value: bool = Field(default=False, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, data: Any) -> Any:
        if isinstance(data, str):
            match = _CONDITION_RE.match(data)
            if match is None:
                raise ValueError(f"cannot parse condition {data!r}; write e.g. 'amount > 500'")
            result: dict[str, Any] = {"param": match["param"], "op": match["op"]}
            if match["value"]:
                try:
                    result["value"] = json.loads(match["value"])
                except ValueError:
                    result["value"] = match["value"]
                result["has_value"] = True
            return result
        if isinstance(data, dict) and "value" in data:
            return {**data, "has_value": True}
        return data

    @model_validator(mode="after")
    def _value_present(self) -> ApprovalCondition:
        if self.op != "exists" and not self.has_value:
            raise ValueError(f"operator {self.op!r} needs a value")
        return self

    def to_capability(self) -> dict[str, Any]:
        """The JSON object the hub reads."""
        data: dict[str, Any] = {"param": self.param, "op": self.op}
        if self.op != "exists" or self.has_value:
            data["value"] = self.value
        if self.label:
            data["label"] = self.label
        return data


class RateLimit(_Model):
    """A hub-side per-tool rate limit: ``count`` calls per one ``window``.

    Accepted as ``"30/min"``, ``"5/s"``, ``"1000/day"`` or
    ``{"count": 30, "window": "1m"}``.
    """

    count: int = Field(gt=0)
    window: Literal["1s", "1m", "1h", "1d"]

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, data: Any) -> Any:
        if isinstance(data, str):
            count, sep, unit = data.strip().partition("/")
            unit = unit.strip().lower()
            if unit.startswith("1") and unit[1:].strip() in _RATE_UNITS:
                unit = unit[1:].strip()
            if not sep or unit not in _RATE_UNITS or not count.strip().isdigit():
                raise ValueError(
                    f"cannot parse rate limit {data!r}; write e.g. '30/min', '5/s', '100/hour'"
                )
            return {"count": int(count), "window": _RATE_UNITS[unit]}
        return data


class Outcome(_Model):
    """What a successful call achieves (``x-agent-capability.outcome``)."""

    result: str = Field(min_length=1, max_length=300)
    side_effect: Literal["none", "read", "write", "notify", "external"]


@dataclass(frozen=True)
class Param:
    """An explicit parameter, for views that read ``request.args`` by hand.

    :param name: the parameter name as sent by the hub.
    :param type: a Python type (``str``, ``int``, ``float``, ``bool``, an
        ``Enum``, ``Literal[...]``) or a JSON schema ``dict``. Left out, a
        query or header parameter is a string and a path parameter keeps the
        schema of its URL converter (so ``Param("order_id", location="path",
        description=...)`` only adds the description).
    :param location: ``"query"``, ``"path"`` (to describe a route
        variable) or ``"header"`` (unsigned: avoid, see the security page's trap T12).
    """

    name: str
    type: Any = None
    location: Literal["query", "path", "header"] = "query"
    required: bool = False
    description: str | None = None


class ToolOptions(_Model):
    """Every option of a tool declaration; see the configuration reference.

    ``None`` means "not set here" so that blueprint and class defaults can
    fill it in.
    """

    name: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
    name_prefix: str | None = Field(default=None, pattern=r"^([A-Za-z_][A-Za-z0-9_]{0,40})?$")
    description: str | None = None
    scope: str | None = Field(default=None, max_length=191)
    scope_prefix: str | None = None
    risk: Literal["low", "medium", "high"] | None = None
    approval_required: bool | None = None
    approval_when: tuple[ApprovalCondition, ...] | None = None
    approval_prompt: str | None = Field(default=None, max_length=200)
    subject_required: bool | None = None
    sensitive: bool | None = None
    readonly: bool | None = None
    rate_limit: RateLimit | None = None
    timeout_ms: int | None = Field(default=None, ge=1, le=600_000)
    when_to_use: str | None = Field(default=None, max_length=500)
    returns: str | None = Field(default=None, max_length=500)
    examples: tuple[dict[str, Any], ...] | None = Field(default=None, max_length=5)
    context: tuple[str, ...] | None = Field(default=None, max_length=50)
    tags: tuple[str, ...] | None = None
    deprecated: bool | None = None
    outcome: Outcome | None = None
    extensions: dict[str, Any] | None = None
    enabled: bool | None = None
    methods: tuple[str, ...] | None = None
    #: A pydantic model class, or a marshmallow ``Schema`` (class or instance).
    query: Any = None
    body: Any = None
    params: tuple[Param, ...] | None = None
    authorizer: Callable[..., Any] | None = None
    allow_unsigned: bool | None = None
    #: What happens to a repeat of the same call (see :data:`REPEATS`). Default: ``"replay"``
    #: for a write tool; a read tool (GET, ``readonly=True``) runs every call.
    repeats: Literal["replay", "transaction", "safe"] | None = None
    #: ``idempotency_key(call) -> str``: which calls are repeats of each other (a domain key).
    #: Default: the signed call (job, tool, arguments, subject).
    idempotency_key: Callable[..., Any] | None = None

    validate_unsigned: bool | None = None
    business_approval: bool | None = None
    #: The declared return shape: a pydantic model class or ``list[Model]``.
    #: Only its fields leave, within its limits (:mod:`bailing_flask._pipeline.projection`).
    response: Any = None
    #: With ``response=``: the most items a list keeps when the model sets no
    #: ``max_length`` (the top-level list of ``list[Model]`` included); ``0``:
    #: no cap. Default: ``BAILING_RESPONSE_MAX_ITEMS``.
    max_items: int | None = Field(default=None, ge=0, le=1_000_000, strict=True)
    #: The declared shape of non-2xx answers (a pydantic model class or ``list[Model]``);
    #: without it, a tool with ``response=`` answers errors in the package's error shape.
    error_response: Any = None
    #: ``result(value) -> value``: shapes a successful result before ``response=``.
    result: Callable[..., Any] | None = None
    #: Parameters the lint flags as identity, credential or infrastructure that
    #: the model may choose all the same, each with the reason why.
    model_chooses: dict[str, str] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ToolOptions:
        if self.repeats == "safe" and self.idempotency_key is not None:
            raise ValueError(_SAFE_WITH_KEY)
        if self.validate_unsigned and self.allow_unsigned is False:
            raise ValueError("validate_unsigned=True needs allow_unsigned=True (it validates unsigned requests)")
        return self

    @field_validator("query", "body")
    @classmethod
    def _input_model(cls, value: Any) -> Any:
        from bailing_flask._pipeline.foreign import is_marshmallow
        from bailing_flask._pipeline.schema import subclass_of

        if value is None or subclass_of(value, BaseModel):
            return value
        if is_marshmallow(value) and not get_origin(value):
            return value
        raise ValueError("expected a pydantic model class or a marshmallow Schema")

    @field_validator("response", "error_response")
    @classmethod
    def _response_shape(cls, value: Any) -> Any:
        if value is None:
            return None
        from bailing_flask._pipeline.projection import check_response_shape

        check_response_shape(value)  # raises ValueError naming the problem
        return value

    @field_validator("model_chooses", mode="before")
    @classmethod
    def _reasons_given(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, Mapping):
            value = dict(value)
        else:
            raise ValueError(
                "model_chooses needs a reason per parameter, e.g. {'user_id': 'the admin picks "
                "the user to unlock; the authorizer checks it is in their tenant'}"
            )
        for name, reason in value.items():
            if not isinstance(name, str) or not name.strip():
                raise ValueError("model_chooses keys are parameter names")
            if not isinstance(reason, str) or len(reason.strip()) < 10:
                raise ValueError(
                    f"model_chooses[{name!r}] needs a reason (at least 10 characters): why the "
                    "model may choose this value, and what checks it"
                )
            if len(reason) > 500:
                raise ValueError(f"model_chooses[{name!r}]: keep the reason under 500 characters")
        return value

    @field_validator("context")
    @classmethod
    def _context_items(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for item in value or ():
            if not item.strip() or len(item) > 100:
                raise ValueError("context entries must be 1-100 characters and not blank")
        return value

    @field_validator("scope")
    @classmethod
    def _scope_text(cls, value: str | None) -> str | None:
        if value is not None:
            if not value.strip():
                raise ValueError("scope must not be blank")
            if any(ord(ch) > 0xFF for ch in value):
                raise ValueError("scope must be ISO-8859-1 (ASCII recommended): the hub sends it in a header")
        return value

    @field_validator("methods")
    @classmethod
    def _methods_known(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is None:
            return None
        upper = tuple(m.upper() for m in value)
        for method in upper:
            if method not in _HTTP_METHODS:
                raise ValueError(f"unknown HTTP method {method!r}")
        return upper

    @field_validator("extensions")
    @classmethod
    def _extension_keys(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        for key in value or {}:
            if not (key.startswith("x-business-") or key.startswith("x-bailing-")):
                raise ValueError(f"extension key {key!r} must start with 'x-business-' or 'x-bailing-'")
            if key == "x-bailing-authz-probe":
                raise ValueError("'x-bailing-authz-probe' is managed by bailing_flask")
        return value

    @field_validator("examples")
    @classmethod
    def _examples_json(cls, value: tuple[dict[str, Any], ...] | None) -> tuple[dict[str, Any], ...] | None:
        for example in value or ():
            try:
                json.dumps(example, allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"examples must be JSON objects: {exc}") from None
        return value

    def explicit(self) -> dict[str, Any]:
        """Only the options that were set (used to layer defaults)."""
        return {name: getattr(self, name) for name in self.model_fields_set}


@dataclass(frozen=True)
class Declaration:
    """What ``@tool`` attached to a view: its options and the undecorated view."""

    options: ToolOptions
    view: Callable[..., Any]
    qualname: str


class ToolKwargs(TypedDict, total=False):
    """The keywords of :func:`~bailing_flask.tool` and :func:`~bailing_flask.tool_defaults`."""

    name: str
    name_prefix: str
    description: str
    scope: str
    scope_prefix: str
    risk: Literal["low", "medium", "high"]
    approval_required: bool
    approval_when: str | ApprovalCondition | Mapping[str, Any] | Sequence[
        str | ApprovalCondition | Mapping[str, Any]
    ]
    approval_prompt: str
    subject_required: bool
    sensitive: bool
    readonly: bool
    rate_limit: str | RateLimit | Mapping[str, Any]
    timeout_ms: int
    when_to_use: str
    returns: str
    examples: Sequence[Mapping[str, Any]]
    context: str | Sequence[str]
    tags: str | Sequence[str]
    deprecated: bool
    outcome: Outcome | Mapping[str, Any]
    extensions: Mapping[str, Any]
    enabled: bool
    methods: str | Sequence[str]
    query: type[BaseModel] | Any  # or a marshmallow Schema (class or instance)
    body: type[BaseModel] | Any  # or a marshmallow Schema (class or instance)
    params: Sequence[Param]
    authorizer: Callable[..., Any]
    allow_unsigned: bool
    repeats: Literal["replay", "transaction", "safe"]
    idempotency_key: Callable[..., Any]
    validate_unsigned: bool
    business_approval: bool
    response: type[BaseModel] | type[list[Any]]
    max_items: int
    error_response: type[BaseModel] | type[list[Any]]
    result: Callable[..., Any]
    model_chooses: Mapping[str, str]


def _describe(target: Any) -> str:
    module = getattr(target, "__module__", "?")
    return f"{module}.{getattr(target, '__qualname__', repr(target))}"


def _removed(options: dict[str, Any], where: str) -> None:
    """An option that is gone is refused with what to write instead (see :data:`REMOVED_OPTIONS`)."""
    for name in options:
        replacement = REMOVED_OPTIONS.get(name)
        if replacement is not None:
            raise ToolDeclarationError(
                f"invalid tool declaration on {where}: {name}= is removed; {replacement(options[name])}"
            )


def _validate(options: dict[str, Any], where: str) -> ToolOptions:
    _removed(options, where)
    for key in ("approval_when", "examples", "context", "tags", "methods", "params"):
        value = options.get(key)
        if isinstance(value, (list, set)):
            options[key] = tuple(value)
        elif isinstance(value, str) and key in ("approval_when", "tags", "methods", "context"):
            options[key] = (value,)
    try:
        validated = ToolOptions(**options)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'options'}: {err['msg']}" for err in exc.errors()
        )
        raise ToolDeclarationError(f"invalid tool declaration on {where}: {problems}") from None
    from bailing_flask._sync import check_async_support

    for option in ("authorizer", "idempotency_key", "result"):
        try:
            check_async_support(getattr(validated, option), f"{option}= of {where}")
        except ConfigurationError as exc:
            raise ToolDeclarationError(str(exc)) from None
    return validated


def effective_repeats(options: ToolOptions, readonly: bool, where: str) -> str | None:
    """What a repeat of a call to this tool gets: ``repeats=``, else ``"replay"`` for a write
    tool; ``None`` for a read tool (it runs every call) unless a domain key makes its repeats
    recognisable. Raises :class:`ToolDeclarationError` for ``"safe"`` with a domain key (one of
    them given through ``tool_defaults``, so the decorator could not see both)."""
    if options.repeats == "safe":
        if options.idempotency_key is not None:
            raise ToolDeclarationError(f"{where}: {_SAFE_WITH_KEY}")
        return "safe"
    if readonly and options.idempotency_key is None:
        return None
    return options.repeats or "replay"


#: Set in the environ by the gate when it admitted the call (the compiled tool): the
#: ``@tool`` wrapper runs its view only behind it.
ADMITTED_KEY = "bailing.gate"
#: The probe of an in-process ``flask bailing check --exercise`` request.
#: Only code in the same process can put it there: no client can set an environ key.
EXERCISE_KEY = "bailing.exercise"


class ExerciseStop(BaseException):
    """Raised where the declared view would run, for an admitted exercise request.

    Caught by the exercise around its own request, outside the app: not by
    the gate (which has no exercise mode), nor by a decorator or an error
    handler that catches ``Exception`` (so a caching decorator on the way
    stores nothing, and no error page is rendered for it). The
    de-duplication runner releases the call's claim for it quietly: the
    view never ran, so nothing of its effect happened.
    """


def get_declaration(view: Any) -> Declaration | None:
    """The declaration carried by a view function or method, if any."""
    return getattr(view, _DECLARATION_ATTR, None)


def direct_view(view: Any) -> Callable[..., Any] | None:
    """The declared view behind ``view`` when ``view`` is exactly a sync ``@tool`` wrapper.

    The gate calls it in the wrapper's place for an admitted call that the
    exercise does not watch: that is all the wrapper would do. ``None`` for
    anything else, a decorator over the wrapper included: ``functools.wraps``
    copies the mark onto it, but the mark names the wrapper it was made for.
    """
    mark = getattr(view, _DIRECT_ATTR, None)
    if mark is not None and mark[0] is view:
        return cast("Callable[..., Any]", mark[1])
    return None


def get_wrapped_by(view: Any) -> Declaration | None:
    """The declaration of the tool wrapper made from this (unguarded) function."""
    return getattr(view, _WRAPPED_ATTR, None)


def get_defaults(target: Any) -> ToolOptions | None:
    """The defaults set with :func:`tool_defaults` on a blueprint or class."""
    return cast("ToolOptions | None", getattr(target, _DEFAULTS_ATTR, None))


def _wrap(view: Callable[..., Any], options: ToolOptions, qualname: str) -> Callable[..., Any]:
    declaration = Declaration(options=options, view=view, qualname=qualname)
    if options.enabled is False:
        # an explicit opt-out: the view stays a plain route, but listings can say why
        setattr(view, _DECLARATION_ATTR, declaration)
        return view

    is_async = inspect.iscoroutinefunction(view)

    @functools.wraps(view)
    def tool_view(*args: Any, **kwargs: Any) -> Any:
        environ = request.environ
        admitted = environ.get(ADMITTED_KEY)
        # the gate admitted a call to *this* tool (not another tool whose view calls this one)
        if admitted is not None and admitted.declaration is declaration and EXERCISE_KEY not in environ:
            return (current_app.ensure_sync(view) if is_async else view)(*args, **kwargs)
        # reached without the gate (or watched by the exercise): never runs ungated
        return current_state().run_declared_view(declaration, view, args, kwargs, is_async)

    setattr(tool_view, _DECLARATION_ATTR, declaration)
    if not is_async:  # the gate may call the view itself once it admitted the call
        setattr(tool_view, _DIRECT_ATTR, (tool_view, view))
    # lets the registry notice a route that registered the unguarded original
    # (``@tool`` placed above ``@app.route``)
    setattr(view, _WRAPPED_ATTR, declaration)
    return tool_view


def _decorate_class(cls: type, options: ToolOptions) -> type:
    """Expose every HTTP method of a MethodView-style class (explicitly, per class)."""
    setattr(cls, _DEFAULTS_ATTR, options)
    for method in _HTTP_METHODS:
        attribute = method.lower()
        function = cls.__dict__.get(attribute)
        if function is None or not callable(function):
            continue
        existing = get_declaration(function)
        if existing is not None:
            continue  # a method-level @tool wins; class options act as its defaults
        wrapped = _wrap(function, options, f"{_describe(cls)}.{attribute}")
        setattr(cls, attribute, wrapped)
    return cls


@overload
def tool(target: V, /, **options: Unpack[ToolKwargs]) -> V: ...
@overload
def tool(target: None = None, /, **options: Unpack[ToolKwargs]) -> Callable[[V], V]: ...
def tool(target: Any = None, /, **options: Any) -> Any:
    """Declare a view as a BailingHub tool.

    The gate runs in front of the route's registered view, before any other
    decorator, so its place in the stack does not matter for safety; below
    the route decorator reads best::

        @app.get("/api/orders/<int:order_id>")
        @tool(scope="order.read", subject_required=True)
        def order_get(order_id): ...

    On a ``MethodView`` subclass it declares every HTTP method the class
    defines (methods may refine or opt out with their own ``@tool``).
    Unknown or invalid options raise :class:`ToolDeclarationError` naming
    the view and the field.
    """

    def decorate(obj: Any) -> Any:
        where = _describe(obj)
        validated = _validate(dict(options), where)
        if inspect.isclass(obj):
            return _decorate_class(obj, validated)
        if not callable(obj):
            raise ToolDeclarationError(f"@tool can only decorate a view function or class, not {where}")
        if get_declaration(obj) is not None:
            raise ToolDeclarationError(f"{where} is declared as a tool twice")
        return _wrap(obj, validated, where)

    if target is not None:
        return decorate(target)
    return decorate


@overload
def tool_defaults(target: None = None, /, **options: Unpack[ToolKwargs]) -> Callable[[D], D]: ...
@overload
def tool_defaults(target: D, /, **options: Unpack[ToolKwargs]) -> D: ...
def tool_defaults(target: Any = None, /, **options: Any) -> Any:
    """Set default options for every tool declared in a blueprint or class.

    ``tool_defaults(bp, scope_prefix="order.", subject_required=True)``
    returns the blueprint; ``@tool_defaults(risk="medium")`` decorates a
    class. Defaults never expose a route: each one still needs ``@tool``.
    """

    def apply(obj: Any) -> Any:
        validated = _validate(dict(options), _describe(obj) if inspect.isclass(obj) else repr(obj))
        if validated.name is not None:
            raise ToolDeclarationError("tool_defaults cannot set a name: names are per tool")
        setattr(obj, _DEFAULTS_ATTR, validated)
        return obj

    if target is not None:
        return apply(target)
    return apply
