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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypedDict, TypeVar, cast, overload

from flask import current_app, request

from bailing_flask.errors import ToolDeclarationError

if TYPE_CHECKING:
    from pydantic import BaseModel
    from typing_extensions import Unpack

    from bailing_flask._tool_options import ApprovalCondition, Outcome, Param, RateLimit, ToolOptions

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

#: The option types, with their pydantic models: loaded by the first declaration (or by a use
#: of one of these names), so that ``from bailing_flask import tool`` builds no model.
_OPTION_TYPES = ("ApprovalCondition", "Outcome", "Param", "RateLimit", "ToolOptions")


def _load_option_types() -> None:
    """Put the option types, and the other names this module's annotations use, in its namespace.

    Once loaded, ``dir()``, ``help()``, Sphinx and ``typing.get_type_hints`` (on
    :class:`Declaration`, :class:`ToolKwargs`, the overloads of ``tool``) find them as before.
    """
    if "ToolOptions" in globals():
        return
    from pydantic import BaseModel
    from typing_extensions import Unpack

    from bailing_flask import _tool_options

    globals().update({name: getattr(_tool_options, name) for name in _OPTION_TYPES},
                     BaseModel=BaseModel, Unpack=Unpack)


if not TYPE_CHECKING:  # the type checker reads the imports above
    def __getattr__(name: str) -> object:
        if name in _OPTION_TYPES:
            _load_option_types()
            return globals()[name]
        raise AttributeError(f"module 'bailing_flask.declare' has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*globals(), *_OPTION_TYPES})


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
    _load_option_types()  # pydantic: on the first declaration
    from bailing_flask._tool_options import validate_options

    return validate_options(options, where)


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
        from bailing_flask._state import current_state

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
    from bailing_flask._tool_options import HTTP_METHODS

    setattr(cls, _DEFAULTS_ATTR, options)
    for method in HTTP_METHODS:
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
