"""The gate every tool call passes before (and after) the view runs.

The gate owns the endpoint. When the registry is compiled, the view
function Flask dispatches to for each tool endpoint is replaced by
:func:`_gated`, which decides before anything in the view's own stack
runs: decorators between the route and ``@tool`` (caching, login checks),
``MethodView.decorators`` and the view itself all run only after the gate
admitted the call, so where ``@tool`` sits among them does not matter for
safety. The app's ``before_request`` functions run earlier, where Flask runs
them, so what they set up (``g.db``) is there for the subject loader.

Order matters and is fixed: signature (already verified by the middleware)
-> the routed request is the verified one -> subject present if required ->
subject loaded -> arguments validated -> authorized -> approved by the
business (``business_approval`` tools) -> side effect de-duplicated -> view
-> audit. Every refusal is a JSON error with a stable reason; every call
leaves one audit record (:mod:`bailing_flask.audit`), a view that raised
included.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from flask import Response, after_this_request, current_app, request
from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound

import bailing_flask.audit as audit
from bailing_flask.approvals import _ApprovalRefused, check_business_approval
from bailing_flask._pipeline.arguments import ArgumentError, validate_arguments, validate_call
from bailing_flask._pipeline.foreign import webargs_finish
from bailing_flask._pipeline.authz import decide, loader_failed, tool_info
from bailing_flask._sync import call_sync
from bailing_flask.context import ARGUMENTS_KEY, TOOL_CALL_KEY, Arguments, ToolCall, _admitted_call
from bailing_flask._pipeline.unsigned import warn_refused_credentials
from bailing_flask._pipeline.projection import DECLARED_KEY, PROJECTION_KEY, finish, guard_answer
from bailing_flask.responses import ErrorInfo
from bailing_flask.signals import tool_called, tool_denied, tool_failed
from bailing_flask._state import current_state as _state
from bailing_flask.declare import (ADMITTED_KEY, EXERCISE_KEY, ExerciseStop, direct_view, get_declaration,
                                   get_wrapped_by)
from bailing_flask.wire.middleware import AFTER_CALL_KEY, ENVIRON_KEY, VerifiedCall, altered_part
from bailing_flask._pipeline.registry import recompile, registry_of
from bailing_flask._pipeline.idempotency import REPLAYED_KEY, idempotency_of

if TYPE_CHECKING:  # pragma: no cover
    from bailing_flask._state import BailingState
    from bailing_flask._pipeline.registry import Registry, Tool
    from bailing_flask.declare import Declaration

__all__ = ["install_gates", "gate_view_functions", "explain_unrouted", "run_declared_view", "GATE_KEY",
           "EXERCISE_KEY", "ExerciseProbe", "ExerciseStop", "leads_to_declaration", "ToolPlan",
           "take_unsigned_here"]

logger = logging.getLogger("bailing_flask")

#: Set in the environ once the gate admitted a call (the :class:`Tool`): the one decision
#: of the request, which the ``@tool`` wrapper (and a gate the app wrapped) only check.
GATE_KEY = ADMITTED_KEY
_MAX_NAMES = 20

#: The one tool an unsigned request in this context may reach as if it declared
#: ``allow_unsigned=True`` (the exercise's ``unsigned`` check, for its own request).
#: Only code in the process sets it, in a context of its own: no header or environ key
#: can, and no other thread or request sees it.
_UNSIGNED_HERE: contextvars.ContextVar[Tool | None] = contextvars.ContextVar(
    "bailing_flask.unsigned_here", default=None)


def take_unsigned_here(tool: Tool) -> None:
    """Let unsigned requests in the current context reach ``tool`` as if it declared
    ``allow_unsigned=True``. For a context made for one request
    (``contextvars.Context().run(...)``), which ends with it."""
    _UNSIGNED_HERE.set(tool)


class ExerciseProbe:
    """What the exercise saw of one of its requests (:mod:`bailing_flask.exercise`).

    The gate does not read it: every request goes through the same steps.
    The exercise fills it in from outside the gate (its admission hook, the
    ``tool_denied`` signal, the request's teardown) and from the declared
    view, which runs only in ``"subject"`` mode (a real subject on a
    read-only tool). In every other mode (``"probe"``, ``"stack"``,
    ``"unsigned"``) a call the gate admitted stops where the declared view
    would run (:class:`ExerciseStop`): the view's own decorators ran, the
    view never does.
    """

    def __init__(self, mode: str) -> None:
        self.mode = mode
        #: ``"refused"`` or ``"admitted"`` once the gate decided
        self.gate: str | None = None
        self.reason: str | None = None
        self.status: int | None = None
        #: the declared view was reached (outside ``subject`` mode: and not called)
        self.reached_view = False
        #: the registered view does not lead to the declaration (``@tool`` above the route)
        self.unguarded = False
        #: ``(function, exception or None)`` of a ``before_request`` function that answered
        self.hook: tuple[Any, BaseException | None] | None = None
        #: the Flask-Login method that was called (``unauthorized``/``needs_refresh``)
        self.flask_login: str | None = None


def leads_to_declaration(view: Callable[..., Any]) -> bool:
    """Whether calling ``view`` leads through a ``@tool`` wrapper (false for ``@tool`` above the route)."""
    return get_declaration(view) is not None or getattr(view, "view_class", None) is not None


def _names(errors: list[dict[str, Any]]) -> list[str]:
    return [str(e.get("parameter", ""))[:100] for e in errors[:_MAX_NAMES]]


def _argument_refusal(exc: ArgumentError) -> ErrorInfo:
    details: dict[str, Any] = {"parameters": _names(exc.errors)}
    if exc.reason != "unknown_parameter":
        details["errors"] = exc.errors[:_MAX_NAMES]
    return ErrorInfo.make(exc.reason, **details)


def install_gates(state: BailingState, registry: Registry) -> None:
    """Put the gate in front of the registered view of every tool endpoint.

    The gate installed per endpoint is remembered by identity (a wrapper made
    with ``functools.wraps`` copies every attribute, so no mark on the
    function could tell a gate from something wrapped around it): whatever
    stands in ``view_functions`` that is not our gate gets a gate in front.
    Each gate holds the compiled plans of its endpoint's tools, so every
    compile puts new gates in front (around the same views).
    """
    view_functions = state.app.view_functions
    for endpoint in {endpoint for endpoint, _ in registry.by_endpoint}:
        view = view_functions.get(endpoint)
        if view is not None:
            if view is state.gates.get(endpoint):
                view = cast(Any, view).__wrapped__  # our own gate (by identity): the view behind it
            _put_gate(state, view_functions, endpoint, view, registry)


def _put_gate(state: BailingState, view_functions: dict[str, Any], endpoint: str,
              view: Callable[..., Any], registry: Registry) -> None:
    gate = _gated(state, endpoint, view, registry)
    state.gates[endpoint] = gate
    dict.__setitem__(view_functions, endpoint, gate)  # not through GatedViews.__setitem__


class GatedViews(dict[str, Any]):
    """``app.view_functions`` of a Bailing app: a view put on a gated endpoint is gated at once.

    Flask dispatches with a plain dictionary lookup (no per-request check);
    only writing an entry costs more: an app (or a test) that replaces a tool
    endpoint's view after the gates were installed gets the gate in front of
    the new view right there. The new view is written already gated, so a
    request dispatched meanwhile in another thread finds the old gate, never
    the bare view.
    """

    def __init__(self, state: BailingState, views: dict[str, Any]) -> None:
        super().__init__(views)
        self._state = state

    def __setitem__(self, endpoint: str, view: Any) -> None:
        state = self._state
        if endpoint not in state.gates or view is state.gates[endpoint]:
            super().__setitem__(endpoint, view)
            return
        registry = registry_of(state)  # may rebuild (new routes), gating what stands there now
        with state.lock:  # the gate is built first and written once: never a bare view here
            _put_gate(state, self, endpoint, view, registry)
            if leads_to_declaration(view) or get_wrapped_by(view) is not None:
                # a tool view of its own: compiled from its declaration, not admitted under the
                # old one's (until then the gate above fails closed: its plans are not the view's)
                recompile(state)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for endpoint, view in dict(*args, **kwargs).items():
            self[endpoint] = view

    def setdefault(self, endpoint: str, view: Any = None) -> Any:
        if endpoint not in self:
            self[endpoint] = view
        return self[endpoint]

    def __ior__(self, other: Any) -> GatedViews:  # type: ignore[override,misc]
        self.update(other)  # dict's own |= writes past __setitem__
        return self


def gate_view_functions(state: BailingState) -> None:
    """At ``init_app``: make later writes to ``app.view_functions`` keep the gates in place."""
    app = state.app
    if not isinstance(app.view_functions, GatedViews):
        app.view_functions = GatedViews(state, app.view_functions)


def explain_unrouted(state: BailingState) -> None:
    """Make Flask's routing error of a signed call the package's JSON refusal.

    The hub shows the model the body of a failed call, and Flask's own 404
    and 405 pages are HTML that names no reason: a call to a path no tool
    serves (say ``/orders/abc`` where the route takes an integer) or with a
    method the route does not take is answered ``404 no_such_tool`` or
    ``405 method_not_allowed`` (with ``Allow``) instead. The package's own
    endpoints (catalog, probe, callbacks) answer any method they do not take
    the same way, signed or not. Every other request keeps the app's own
    error pages.

    Called when Flask raises the routing exception, as it dispatches (see
    :func:`explain_routing_errors`): the app's ``before_request`` functions
    all ran first, and an app's own ``errorhandler(404)`` still renders it.
    """
    exc = request.routing_exception
    verified: VerifiedCall | None = request.environ.get(ENVIRON_KEY)
    replacement: HTTPException
    if isinstance(exc, MethodNotAllowed):
        if verified is None and request.path not in state.config.own_paths:
            return
        response = state.error_response(ErrorInfo.make("method_not_allowed", status=405))
        if exc.valid_methods:
            response.headers["Allow"] = ", ".join(sorted(exc.valid_methods))
        replacement = MethodNotAllowed(valid_methods=exc.valid_methods, response=response)
    elif isinstance(exc, NotFound) and verified is not None:
        response = state.error_response(ErrorInfo.make("no_such_tool"))
        replacement = NotFound(response=response)
    else:
        return
    body = response.get_json(silent=True)
    if isinstance(body, dict):  # flask-restx answers an HTTPException with its ``data``, not its response
        setattr(replacement, "data", body)
    if verified is not None:  # the hub called something its catalog does not have
        logger.warning("bailing: refused %s %s: %s (a signed call that no route serves)",
                       request.method, request.path[:200], response.headers.get("X-Bailing-Reason"))
    request.routing_exception = replacement


def explain_routing_errors(state: BailingState) -> None:
    """At ``init_app``: routing errors go through :func:`explain_unrouted`.

    Flask calls ``app.raise_routing_exception`` only for a request that no
    route matched, so a routed request pays nothing for it.
    """
    app = state.app
    original = app.raise_routing_exception

    def raise_routing_exception(request: Any) -> Any:
        explain_unrouted(state)
        return original(request)

    app.raise_routing_exception = raise_routing_exception  # type: ignore[method-assign]


class ToolPlan:
    """One tool compiled for the gate: what its calls need, worked out once.

    Built when the registry compiles, for each tool of an endpoint; a call
    runs only the steps its plan says the tool uses (its own authorizer or
    the app's, de-duplication or approval, the shaped answer's guard).
    """

    __slots__ = ("tool", "info", "authorizer", "repeats", "approval", "shaped", "guarded", "audit")

    def __init__(self, tool: Tool, state: BailingState) -> None:
        self.tool = tool
        #: what the tool's audit record needs (decided once; who listens is asked per call)
        self.audit = audit.AuditNeeds(state, tool)
        self.info = tool.info
        #: the tool's own authorizer; ``None``: the app's, read per call (it may be set later)
        self.authorizer = tool.options.authorizer
        self.approval = bool(tool.options.business_approval)
        #: whether the call goes through the idempotency run (de-duplicated, or an approval to spend)
        self.repeats = tool.deduplicated or self.approval
        shaper = tool.shaper
        #: ``result=`` / ``response=`` shape the answer (else the view's value is the answer)
        self.shaped = shaper is not None
        self.guarded = shaper is not None and shaper.guards_errors


def _plans_of(registry: Registry, endpoint: str, state: BailingState) -> dict[str, ToolPlan]:
    plans = {method: ToolPlan(tool, state) for (name, method), tool in registry.by_endpoint.items()
             if name == endpoint}
    if "GET" in plans and "HEAD" not in plans:  # HEAD is served by GET
        plans["HEAD"] = plans["GET"]
    return plans


def _gated(state: BailingState, endpoint: str, view: Callable[..., Any],
           registry: Registry) -> Callable[..., Any]:
    sync_view = state.app.ensure_sync(view)
    # the endpoint's function is the @tool wrapper itself: once the gate admitted a call, the
    # wrapper would only call its view (unless the exercise watches), so the gate does
    direct = direct_view(view)
    plans = _plans_of(registry, endpoint, state)
    passthrough = frozenset(method for name, method in registry.passthrough if name == endpoint)
    #: the declarations this endpoint serves (an alias endpoint of the same view shares them)
    declarations = tuple({id(plan.tool.declaration): plan.tool.declaration
                          for plan in plans.values()}.values())
    if direct is not None and not any(get_declaration(view) is own for own in declarations):
        # plans compiled from another view's declaration: its @tool wrapper runs and fails closed
        direct = None

    def gated_view(**kwargs: Any) -> Any:
        req = request._get_current_object()  # type: ignore[attr-defined]  # once, passed down
        environ = req.environ
        admitted = environ.get(GATE_KEY)
        if admitted is not None:
            # a gate further out admitted this call: the app wrapped ours, or an alias endpoint
            # it added later serves this endpoint's view (the same declaration)
            if admitted.endpoint == endpoint or any(admitted.declaration is own for own in declarations):
                return sync_view(**kwargs)
            # another tool's admitted call reaches this endpoint's view: not this tool's decision
            return state.error_response(ErrorInfo.make("tool_not_registered"))
        method = req.method
        plan = plans.get(method)
        if plan is not None:
            target = direct if direct is not None and EXERCISE_KEY not in environ else sync_view
            return run_gate(state, plan.tool, functools.partial(target, **kwargs), kwargs,
                            req=req, plan=plan)
        if method in passthrough:  # not a tool (methods=, enabled=False, a class's plain handler)
            return sync_view(**kwargs)
        # a method the route accepts but no tool serves (OPTIONS listed by hand): never ungated
        return state.error_response(ErrorInfo.make("method_not_allowed", status=405))

    return _Gate(gated_view, view)


class _Gate:
    """What Flask dispatches a tool endpoint to: the gate in front of ``__wrapped__``.

    It carries the view's attributes (``functools.update_wrapper``) and
    compares equal to the view it guards. Flask asks that when a route is
    added for an endpoint that already has a view (an alias route of the same
    view is fine, another view is an error): an alias of a tool's view added
    after the registry compiled is accepted, and gated like the first route.
    """

    __slots__ = ("_run", "__dict__", "__weakref__")  # the view's attributes go to __dict__, never over _run
    __wrapped__: Callable[..., Any]

    def __init__(self, run: Callable[..., Any], view: Callable[..., Any]) -> None:
        self._run = run
        functools.update_wrapper(self, view)

    def __call__(self, **kwargs: Any) -> Any:
        return self._run(**kwargs)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _Gate):
            other = other.__wrapped__
        return bool(self.__wrapped__ == other)  # as the view compares (a bound method by its object)

    def __hash__(self) -> int:
        return hash(self.__wrapped__)

    def __repr__(self) -> str:
        return f"<bailing gate for {self.__wrapped__!r}>"


def run_declared_view(
    declaration: Declaration, view: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
    is_async: bool = False,
) -> Any:
    """What a ``@tool`` wrapper calls when the gate did not admit the call (or the exercise watches).

    The only way into a tool's view is the gate in front of its endpoint,
    installed when the registry compiles. Reached without it (a view that is
    not the tool's route calls the tool's function, an error handler renders
    it, a decorator hides the declaration), the call fails closed: the view
    never runs ungated.

    Behind the gate, an exercise request is noted as having reached the
    view; outside ``subject`` mode it stops there (:class:`ExerciseStop`).
    This runs only after the gate admitted the call, so it can keep a view
    from running, never let one run.
    """
    environ = request.environ
    admitted = environ.get(GATE_KEY)
    if admitted is not None and admitted.declaration is declaration:
        probe = environ.get(EXERCISE_KEY)
        if isinstance(probe, ExerciseProbe):
            probe.reached_view = True
            if probe.mode != "subject":
                current_app.ensure_sync(view)  # an async view without flask[async] fails here, as it would
                raise ExerciseStop()
        return (current_app.ensure_sync(view) if is_async else view)(*args, **kwargs)
    state = _state()
    registry = registry_of(state)
    endpoint = request.url_rule.endpoint if request.url_rule is not None else None
    method = request.method
    if admitted is None and registry.passes(endpoint, method, declaration):
        # this declaration's own route, for a method it leaves out (methods=, enabled=False):
        # a plain route, which the gate let pass; never another route calling the function, nor
        # from inside another tool's admitted call, where this is a function call, not this route
        return current_app.ensure_sync(view)(*args, **kwargs)
    if registry.tool_of(declaration, method) is not None:
        state.warn_once(
            ("ungated", declaration.qualname, endpoint),
            "bailing: %s was reached without its gate, from endpoint %r (a view that is not the "
            "tool's route calls its function, or an error handler renders it); refusing the call: "
            "a tool runs only behind its own route",
            declaration.qualname, endpoint, level=logging.ERROR,
        )
        return state.error_response(ErrorInfo.make("tool_not_registered"))
    state.warn_once(
        ("hidden", declaration.qualname),
        "bailing: %s is declared as a tool but its route %r does not show the declaration (a "
        "decorator between the route and @tool does not use functools.wraps); refusing the call",
        declaration.qualname, endpoint, level=logging.ERROR,
    )
    return state.error_response(ErrorInfo.make("tool_not_registered"))


def run_gate(
    state: BailingState, tool: Tool, call_view: Callable[[], Any], kwargs: dict[str, Any],
    *, req: Any = None, plan: ToolPlan | None = None,
) -> Response:
    """Decide on one call to ``tool``; run ``call_view`` only if it is admitted.

    The same steps for every request: nothing in the request (the
    exercise's marker included) skips one. ``req`` is the request object
    (looked up once by the gate) and ``plan`` the tool's compiled plan.
    """
    if req is None:
        req = request._get_current_object()  # type: ignore[attr-defined]
    if plan is None:
        plan = ToolPlan(tool, state)
    environ = req.environ
    verified: VerifiedCall | None = environ.get(ENVIRON_KEY)
    if verified is None and (tool.options.allow_unsigned or _UNSIGNED_HERE.get() is tool):
        return _unsigned(state, tool, call_view, kwargs, req)
    started = environ[audit.STARTED_KEY] = time.perf_counter()
    telemetry: audit.TelemetryHook | None = state.caches.get(audit.TELEMETRY)
    if telemetry is not None:
        environ[audit.SPAN_KEY] = telemetry.start(tool, verified)
    if verified is None:
        warn_refused_credentials(state, tool, environ)
        return _refuse(state, tool, None, ErrorInfo.make("missing_signature"))
    altered = altered_part(environ)
    if altered is not None:
        state.warn_once(
            ("altered", tool.name, altered),
            "bailing: refused %s %s: its %s was changed after the signature was verified; a WSGI "
            "middleware between BailingMiddleware and the app rewrites requests (install "
            "Bailing(app) after it, so the verifier is innermost)",
            req.method, req.path, altered, level=logging.ERROR,
        )
        return _refuse(state, tool, verified, ErrorInfo.make("request_altered", part=altered))
    subject = verified.subject
    if tool.subject_required and not subject:
        return _refuse(state, tool, verified, ErrorInfo.make("subject_required"))
    loader = state.callbacks.subject_loader_func
    user = None
    if loader is not None and subject:
        try:
            user = call_sync(loader, subject)  # an async loader is awaited
        except Exception as exc:
            loader_failed(exc, subject)
            return _refuse(state, tool, verified, ErrorInfo.make("forbidden"))
    try:
        args, query, body = validate_call(tool, req, kwargs)
    except ArgumentError as exc:
        return _refuse(state, tool, verified, _argument_refusal(exc))
    call = _admitted_call(verified, plan.info, user, args, query, body)
    environ[TOOL_CALL_KEY] = call
    decision = decide(tool, call, plan.authorizer or state.callbacks.authorizer_func)
    if not decision.allowed:
        return _refuse(state, tool, verified, ErrorInfo.make(decision.reason or "forbidden"), call)
    if plan.approval:
        unapproved = check_business_approval(state, tool, call)
        if unapproved is not None:
            return _refuse(state, tool, verified, unapproved, call)
    if state.config.reject_replays:
        replayed = idempotency_of(state).check_replay(tool, call)
        if replayed is not None:
            return _refuse(state, tool, verified, replayed, call)
    for hook in state.callbacks.admission_hooks:  # e.g. Flask-Login's current_user for this call
        refused = hook(call)
        if refused is not None:  # the integration cannot serve this call (it says why)
            return _refuse(state, tool, verified, refused, call)
    object.__setattr__(call, "authorized", True)  # ToolCall.admit(), without a call per call
    environ[GATE_KEY] = tool
    return _run(state, tool, plan, call, call_view, environ, started)


def _unsigned(state: BailingState, tool: Tool, call_view: Callable[[], Any], kwargs: dict[str, Any],
              req: Any) -> Response:
    """An unsigned request to an ``allow_unsigned`` tool: a human's, on a shared route."""
    if tool.options.validate_unsigned:
        # the human's request gets the same validation as the hub's
        try:
            validated = validate_arguments(tool, req, dict(kwargs), human=True)
        except ArgumentError as exc:
            return state.error_response(_argument_refusal(exc))
        req.environ[ARGUMENTS_KEY] = Arguments(validated.args, validated.query, validated.body)
    req.environ[GATE_KEY] = tool
    return state.app.make_response(call_view())


def _run(state: BailingState, tool: Tool, plan: ToolPlan, call: ToolCall, call_view: Callable[[], Any],
         environ: dict[str, Any], started: float) -> Response:
    """The admitted call: the view (de-duplicated when the tool's plan says so), then the audit."""
    guarded = plan.guarded and guard_answer(state, tool)  # an exception's error page is declared too
    try:
        if plan.repeats:
            def execute() -> Response:
                # inside the de-duplicated run, so a replay answers the projected bytes (never the full row)
                if tool.webargs:  # webargs' own 422 answers as the gate refuses arguments
                    return webargs_finish(state, tool, call_view, finish, ArgumentError, _argument_refusal)
                return finish(state, tool, call_view)

            response = idempotency_of(state).run(tool, call, execute)
        elif tool.webargs:
            response = webargs_finish(state, tool, call_view, finish, ArgumentError, _argument_refusal)
        elif plan.shaped:
            response = finish(state, tool, call_view)
        else:
            response = state.app.make_response(call_view())
    except _ApprovalRefused as refused:  # its approval was spent already: nothing of it stays
        return _refuse(state, tool, call.verified, refused.info, call)
    except Exception as exc:  # Flask answers it (500, or the HTTPException's status)
        _failed(state, tool, call, exc, started, plan.audit)
        raise
    if guarded:
        environ[DECLARED_KEY] = response
    _after(state, tool, call, response, started, plan.audit, plan.repeats)
    return response


def _refuse(
    state: BailingState, tool: Tool, verified: VerifiedCall | None, info: ErrorInfo,
    call: ToolCall | None = None,
) -> Response:
    response = state.error_response(info)
    if audit.wanted(state):
        _audit(state, tool, verified, response.status_code, info.reason, call)
    if tool_denied.receivers:
        tool_denied.send(current_app._get_current_object(), tool=tool_info(tool),  # type: ignore[attr-defined]
                         call=call, reason=info.reason, status=response.status_code)
    return response


def _after(state: BailingState, tool: Tool, call: ToolCall, response: Response, started: float,
           needs: audit.AuditNeeds, repeats: bool) -> None:
    duration_ms = (time.perf_counter() - started) * 1000
    if needs.wanted():  # else not one field of the record is looked up
        status = response.status_code
        environ = request.environ
        # answered from a record (not a view's own Idempotent-Replayed header): no header lookup
        replayed = repeats and REPLAYED_KEY in environ
        _audit(state, tool, call.verified, status, None if status < 400 else "view_status", call,
               duration_ms=duration_ms, values=needs.values, replayed=replayed,
               projected=environ.get(PROJECTION_KEY), environ=environ)
    limit = state.config.response_size_warning
    if limit:
        chunks = response.response  # a view's answer made by Flask: one bytes chunk, read as is
        if not (chunks.__class__ is list and len(chunks) == 1 and chunks[0].__class__ is bytes
                and len(chunks[0]) <= limit):  # (werkzeug's content_length: six Python calls)
            _warn_if_large(state, tool, response, limit)
    if tool_called.receivers:
        tool_called.send(state.app, call=call, response=response, duration_ms=duration_ms)


def _warn_if_large(state: BailingState, tool: Tool, response: Response, limit: int) -> None:
    """Warn (once per tool) when a successful answer is longer than the model reads.

    :func:`_after` calls it unless the answer is one chunk of at most ``limit`` bytes.
    """
    length = response.content_length  # set for every non-streamed body: no copy needed
    if ((length is None or length > limit) and 200 <= response.status_code < 300
            and not response.is_streamed):
        data = response.get_data()
        if len(data) > limit:  # UTF-16 units never exceed UTF-8 bytes
            units = len(data.decode("utf-8", "replace").encode("utf-16-le")) // 2
            if units > limit:
                state.warn_once(
                    ("size", tool.name),
                    "bailing: tool %r answered %d UTF-16 units; the model only reads the first %d "
                    "(response= declares what it needs and caps its lists)",
                    tool.name, units, limit,
                )


def _failed(state: BailingState, tool: Tool, call: ToolCall, exc: Exception, started: float,
            needs: audit.AuditNeeds) -> None:
    """The view raised: one record with the exception's class (never its message).

    The record waits for the status Flask (or the app's error handler)
    really answers; :func:`audit.finish_failed` writes it when the app is
    done with the call (the middleware runs it, answered or not): no hook of
    every request is needed for it.
    """
    duration_ms = (time.perf_counter() - started) * 1000
    status = audit.exception_status(exc)
    environ = request.environ
    if needs.wanted():  # else not one field of the record is looked up
        values = needs.values
        error = audit.exception_name(exc)

        def record(answered: int | None) -> None:
            final = status if answered is None else answered
            reason = "view_status" if final < 500 and status < 500 else "view_raised"
            _audit(state, tool, call.verified, final, reason, call, duration_ms=duration_ms,
                   values=values, error=error, environ=environ)

        environ[audit.FAILED_KEY] = record
        answered: list[Response] = []

        @after_this_request
        def _answered(response: Response) -> Response:
            answered.append(response)
            return response

        def _finish() -> None:  # after every after_request function: the status is final
            audit.finish_failed(environ, answered[-1].status_code if answered else None)

        environ.setdefault(AFTER_CALL_KEY, []).append(_finish)
    if tool_failed.receivers:
        tool_failed.send(current_app._get_current_object(), tool=tool_info(tool),  # type: ignore[attr-defined]
                         call=call, exception=exc, status=status, duration_ms=duration_ms)


def _audit(
    state: BailingState, tool: Tool, verified: VerifiedCall | None, status: int,
    reason: str | None, call: ToolCall | None, *, duration_ms: float | None = None,
    values: bool = False, error: str | None = None, replayed: bool = False,
    projected: dict[str, int] | None = None, environ: dict[str, Any] | None = None,
) -> None:
    """Build and hand out one record; only called when :func:`audit.wanted` said someone listens."""
    if environ is None:
        environ = request.environ
    span = environ.pop(audit.SPAN_KEY, None)
    if duration_ms is None:
        started = environ.get(audit.STARTED_KEY)
        duration_ms = None if started is None else (time.perf_counter() - started) * 1000
    audit.emit_gate_record(state, tool, verified, status, duration_ms, reason, call, values=values,
                           error=error, replayed=replayed, response=projected, environ=environ,
                           span=span)
