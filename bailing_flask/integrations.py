"""Living with the extensions a legacy Flask app already has.

A tool endpoint in an existing app sits behind the app's own machinery:
``before_request`` guards, Flask-Login's ``login_required``, Flask-WTF's
CSRF check, Flask-Limiter. Each was written for browsers and gets a hub
call wrong in its own way. The helpers here let each of them recognise a
hub call with one line, and only a hub call:

* :func:`is_tool_call`: the request carries a verified hub signature and is
  routed to a declared tool (the gate still decides whether it runs);
* :func:`is_hub_request`: that, or a request to one of the package's own
  endpoints (catalog, authorization probe, callbacks), which check their
  own signatures;
* :func:`rate_limit_key`: a Flask-Limiter ``key_func`` with one bucket per
  acting subject for tool calls;
* :func:`cache_key`: a Flask-Caching key (``key_prefix=`` of
  ``cache.cached``, ``make_name=`` of ``cache.memoize``) with one entry per
  acting subject for tool calls;
* :class:`FlaskLoginBridge` (through :meth:`Bailing.bridge_flask_login
  <bailing_flask.Bailing.bridge_flask_login>`): Flask-Login's
  ``current_user`` is the subject loader's user for an admitted call, and
  only for one;
* :class:`FlaskHTTPAuthBridge` (through :meth:`Bailing.bridge_flask_httpauth
  <bailing_flask.Bailing.bridge_flask_httpauth>`): Flask-HTTPAuth's
  ``login_required`` passes an admitted call with the subject loader's user,
  and only an admitted one;
* :func:`exempt_tool_calls_from_csrf`: Flask-WTF's ``CSRFProtect`` skips
  verified tool calls and nothing else (installed automatically);
* :func:`exempt_hub_requests`: a ``before_request`` function of another
  package (Flask-Talisman's HTTPS redirect) steps aside for requests whose
  hub signature verified, and for nothing else.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import types
import typing
import weakref
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from flask import Flask, Response, current_app, g, has_app_context, has_request_context, request

from bailing_flask._state import EXTENSION_KEY
from bailing_flask.context import TOOL_CALL_KEY, ToolCall
from bailing_flask.responses import ErrorInfo
from bailing_flask.wire.middleware import AFTER_CALL_KEY, ENVIRON_KEY, VerifiedCall, altered_part
from bailing_flask._pipeline.registry import registry_of
from bailing_flask._pipeline.idempotency import idempotency_of

if TYPE_CHECKING:  # pragma: no cover
    from bailing_flask._state import BailingState

__all__ = [
    "is_tool_call",
    "is_hub_request",
    "rate_limit_key",
    "cache_key",
    "FlaskLoginBridge",
    "FlaskHTTPAuthBridge",
    "exempt_tool_calls_from_csrf",
    "exempt_hub_requests",
]

logger = logging.getLogger("bailing_flask")

_IS_TOOL_CALL_KEY = "bailing.is_tool_call"
#: The names in ``g`` that a bridge (Flask-Login, Flask-HTTPAuth) set for this request.
BRIDGED_KEY = "bailing.bridged"
#: on the patched ``CSRFProtect.protect``: the apps whose hub requests it skips
_PATCHED_ATTR = "__bailing_exempted_apps__"


def _state() -> BailingState | None:
    return current_app.extensions.get(EXTENSION_KEY)  # type: ignore[no-any-return,unused-ignore]


def is_tool_call() -> bool:
    """Whether this request is a hub call to one of the app's declared tools.

    True exactly when the request's hub signature verified and its route
    (endpoint and method) is a declared tool, from the app's first
    ``before_request`` function on. **Not yet authorized there**: the gate,
    which runs after the ``before_request`` functions, still checks the
    subject, the arguments and the authorization, and refuses with its own
    answer. So a guard may step aside for it, and must grant nothing::

        @app.before_request
        def require_session():
            if bailing_flask.is_tool_call():
                return None          # the gate decides
            if "user_id" not in session:
                return jsonify(error="login required"), 401

    False outside a request, for unsigned requests, for signed requests to
    routes that are not tools, and for the package's own endpoints (see
    :func:`is_hub_request`).
    """
    if not has_request_context():
        return False
    environ = request.environ
    cached = environ.get(_IS_TOOL_CALL_KEY)
    if cached is not None:
        return bool(cached)
    verified: VerifiedCall | None = environ.get(ENVIRON_KEY)
    result = False
    if verified is not None and verified.kind == "tool" and request.url_rule is not None:
        state = _state()
        if state is not None:
            try:
                result = registry_of(state).lookup(request.url_rule.endpoint, request.method) is not None
            except Exception:  # the gate answers catalog_unavailable for such a request
                logger.debug("bailing: is_tool_call: the registry could not be built", exc_info=True)
    environ[_IS_TOOL_CALL_KEY] = result
    return result


def is_hub_request() -> bool:
    """:func:`is_tool_call`, or a request to one of the package's own endpoints.

    The catalog, the authorization probe and the callback endpoints verify
    their requests themselves (and refuse what is not signed), so a guard
    in front of the whole app can step aside for them as well::

        if bailing_flask.is_hub_request():
            return None
    """
    if is_tool_call():
        return True
    if not has_request_context() or request.url_rule is None:
        return False
    state = _state()
    if state is None:
        return False
    return current_app.blueprints.get(request.blueprint or "") in state.blueprints


def rate_limit_key() -> str:
    """A Flask-Limiter ``key_func``: one bucket per acting subject for hub calls.

    Every hub call comes from the hub's address, so keying on the remote
    address puts all of the hub's users into one bucket. For a tool call
    (:func:`is_tool_call`) the key is the **signed** subject; anonymous hub
    calls share one bucket (``bailing:anonymous``), so minting new jobs does
    not buy new quota. Every other request is keyed on its remote address,
    as Flask-Limiter's ``get_remote_address`` does::

        limiter = Limiter(key_func=bailing_flask.rate_limit_key, app=app)

    An exact replay of a signed call (the same signature again, within the
    window in which it verifies) proves nothing about who acts, so it never
    counts against the subject's bucket: it is keyed on its remote address,
    like any visitor. Replays are recognised by the signature, remembered in
    the package's store (``BAILING_STORE``, shared by every worker and host
    that shares the store), one write per tool call; only apps that use this
    key function pay for it. If the store cannot answer, the call counts for
    its subject, as before.
    """
    if is_tool_call():
        environ = request.environ
        verified: VerifiedCall = environ[ENVIRON_KEY]
        if verified.signature and not _first_arrival(environ, verified.signature):
            return request.remote_addr or "127.0.0.1"
        return f"bailing:subject:{verified.subject}" if verified.subject else "bailing:anonymous"
    return request.remote_addr or "127.0.0.1"


def _first_arrival(environ: dict[str, Any], signature: str) -> bool:
    state = _state()
    if state is None:
        return True
    try:
        return idempotency_of(state).first_arrival(environ, signature)
    except Exception as exc:  # the store is down: count the call for its subject, as before
        state.warn_once("rate_limit_store", "bailing: rate_limit_key could not ask the store "
                        "whether a call is a replay (%s); replays count for their subject until "
                        "it answers", type(exc).__name__)
        return True


# -- another package's before_request function ----------------------------------------------

_EXEMPTS_ATTR = "__bailing_exempts__"


def exempt_hub_requests(app: Flask, hook: Callable[[], Any]) -> Callable[[], Any]:
    """Make a ``before_request`` function of another package step aside for hub requests.

    :func:`is_hub_request` is the first line of a guard you wrote; an
    extension's hook (Flask-Talisman's ``force_https`` redirect, say) is not
    yours to edit. This replaces ``hook`` wherever ``app`` registered it with
    a function that returns ``None`` for a request whose hub signature
    verified (a tool call, the authorization probe, the catalog fetch) and
    that reaches the app as it was signed, and runs ``hook`` for every other
    request (one a middleware inside the verifier rerouted included)::

        talisman = Talisman(app)
        bailing_flask.integrations.exempt_hub_requests(app, talisman._force_https)

    Only a **verified** signature counts. The signature is checked below
    Flask, before any ``before_request`` function runs: a request with a bad
    or stale signature is answered ``401`` there and never reaches ``hook``
    nor the app, and an unsigned request -- a browser's, or one to the
    package's own endpoints -- meets ``hook`` as before. The hub's POSTs to
    the callback endpoints verify inside the endpoint, after the
    ``before_request`` functions, so they are not exempted. The gate still
    checks the subject, the arguments and the authorization of every call.

    Call it after the extension registered ``hook`` (and after
    ``register_blueprint`` for a blueprint's hook). Returns the replacement.

    :raises ConfigurationError: ``hook`` is not a ``before_request``
        function of ``app``.
    """
    from bailing_flask.errors import ConfigurationError

    @functools.wraps(hook)
    def step_aside_for_hub() -> Any:
        environ = request.environ
        # verified by the middleware, and routed as it was signed (no middleware inside the
        # verifier turned it into a request to another route)
        if environ.get(ENVIRON_KEY) is not None and altered_part(environ) is None:
            return None
        return current_app.ensure_sync(hook)()

    setattr(step_aside_for_hub, _EXEMPTS_ATTR, True)
    found: Callable[[], Any] | None = None
    for funcs in app.before_request_funcs.values():
        for index, func in enumerate(funcs):
            if func == hook:
                funcs[index] = found = step_aside_for_hub
            elif getattr(func, _EXEMPTS_ATTR, False) and getattr(func, "__wrapped__", None) == hook:
                found = found or func  # exempted already
    if found is None:
        raise ConfigurationError(
            f"exempt_hub_requests: {_qualname(hook)} is not a before_request function of "
            f"{app.name!r}: call it after the extension registered it (and after register_blueprint "
            "for a blueprint's function)")
    return found


# -- Flask-Caching ---------------------------------------------------------------------


def _subject_part() -> str | None:
    """``bailing/<sha256 of the signed subject>`` for a tool call, ``None`` for anything else."""
    if not is_tool_call():
        return None
    verified: VerifiedCall = request.environ[ENVIRON_KEY]
    if not verified.subject:
        return "bailing/anonymous"
    return "bailing/" + hashlib.sha256(verified.subject.encode("utf-8", "surrogatepass")).hexdigest()


def cache_key(name: str | None = None) -> str:
    """A Flask-Caching key with one entry per acting subject for hub calls.

    A cached view answers from its key without running; Flask-Caching keys
    ``cache.cached`` on the request path and ``cache.memoize`` on the
    function and its arguments, so the second *authorized* subject to call a
    tool gets the first one's answer -- another user's, another tenant's.
    For a tool call (:func:`is_tool_call`) this key adds the **signed**
    subject (as a SHA-256, so any subject makes a valid key); every other
    request keeps exactly the key Flask-Caching gives it by default, so the
    entries your pages already use stay where they are::

        @app.get("/api/orders")
        @cache.cached(timeout=60, key_prefix=bailing_flask.cache_key)
        @tool(scope="order.read")
        def orders(): ...

        @cache.memoize(timeout=60, make_name=bailing_flask.cache_key)
        def orders_of(user_id): ...

    As ``key_prefix`` it is called with no argument and returns
    ``view/<path>`` (Flask-Caching's default) or
    ``bailing/<subject hash>/view/<path>``; with ``query_string=True``
    Flask-Caching 2.5+ appends the hash of the query as usual (earlier
    versions never call ``key_prefix`` with ``query_string=True``: every
    subject would share the entry, which ``check --exercise`` reports). As ``make_name``
    it gets the function's name and returns it, or
    ``bailing/<subject hash>/<name>``. A key of a hub call always starts with
    ``bailing/`` and a key of any other request never does, so no path a
    browser requests can reach a subject's entry. ``cache.delete_memoized(f)``
    still drops every entry of ``f``; ``delete_memoized(f, *args)`` and
    ``delete_cached(path)``, called outside a hub call, drop the browsers'
    entry only.
    """
    subject = _subject_part() if has_request_context() else None
    if name is not None:
        return name if subject is None else f"{subject}/{name}"
    path = request.path if has_request_context() else ""
    return f"view/{path}" if subject is None else f"{subject}/view/{path}"


# -- Flask-WTF -----------------------------------------------------------------------


def exempt_tool_calls_from_csrf(app: Flask) -> bool:
    """Let Flask-WTF's ``CSRFProtect`` of ``app`` skip verified tool calls.

    A hub call carries no CSRF token (and no cookie a token could be bound
    to); its signature already proves who sent it. Only the request is
    exempted, never the view: an unsigned browser POST to the same route is
    still checked. The package's own endpoints (the authorization probe and
    the callbacks, which the hub POSTs to) are skipped as well: they use no
    cookie and verify their own signatures (:func:`is_hub_request`).
    ``Bailing`` calls this itself (setting ``BAILING_CSRF_EXEMPT``),
    whichever of the two was initialised first. One ``CSRFProtect`` shared
    by several apps skips hub requests only for the apps this was called
    for. Returns whether a ``CSRFProtect`` was found.
    """
    csrf = app.extensions.get("csrf")
    if csrf is None or not callable(getattr(csrf, "protect", None)):
        return False
    exempted: weakref.WeakSet[Flask] | None = getattr(csrf.protect, _PATCHED_ATTR, None)
    if exempted is None:
        exempted = weakref.WeakSet()
        original = csrf.protect
        apps = exempted

        @functools.wraps(original)
        def protect(*args: Any, **kwargs: Any) -> Any:
            # one CSRFProtect may serve several apps: only those that asked step aside
            if current_app._get_current_object() in apps and is_hub_request():  # type: ignore[attr-defined]
                return None
            return original(*args, **kwargs)

        setattr(protect, _PATCHED_ATTR, exempted)
        csrf.protect = protect
    exempted.add(app)
    return True


# -- Flask-Login ------------------------------------------------------------------------


def _admitted_call() -> ToolCall | None:
    if not has_request_context():
        return None
    call: ToolCall | None = request.environ.get(TOOL_CALL_KEY)
    if call is None or not call.authorized:
        return None
    return call


def _hub_refusal(reason: str) -> Response | None:
    """The package's JSON refusal when a Flask-Login check fails for an admitted hub call."""
    if _admitted_call() is None:
        return None
    state = _state()
    if state is None:
        return None
    return state.error_response(ErrorInfo.make(reason))


#: what Flask-Login reads on ``current_user`` (``UserMixin`` has them all)
_LOGIN_ATTRIBUTES = ("is_authenticated", "is_active", "is_anonymous", "get_id")


def _qualname(func: Any) -> str:
    func = getattr(func, "__func__", func)
    return f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}"


def login_user_problem(loader: Any, user: Any) -> str | None:
    """Why ``user`` (what ``loader`` returned) cannot be Flask-Login's ``current_user``, or ``None``."""
    if user is None:
        return None
    missing = [name for name in _LOGIN_ATTRIBUTES if not hasattr(user, name)]
    if not missing:
        return None
    return (f"the subject loader {_qualname(loader)} returned a value of type "
            f"{type(user).__name__}, which Flask-Login cannot use as current_user (it has no "
            f"{', '.join(missing)}): with "
            "bridge_flask_login the loader must return the objects your login_manager.user_loader "
            "returns (a UserMixin), or None for a subject it does not know")


def _annotated_return(loader: Any) -> Any:
    try:
        hints = typing.get_type_hints(loader)
    except Exception:  # a forward reference that does not resolve: nothing to say
        return None
    returned = hints.get("return")
    if typing.get_origin(returned) in (typing.Union, types.UnionType):
        others = [arg for arg in typing.get_args(returned) if arg is not type(None)]
        returned = others[0] if len(others) == 1 else None
    if typing.get_origin(returned) is not None:  # dict[str, Any], Mapping[...]
        returned = typing.get_origin(returned)
    return returned if isinstance(returned, type) else None


class FlaskLoginBridge:
    """Make Flask-Login's ``current_user`` the subject loader's user, for admitted calls only.

    Installed with :meth:`Bailing.bridge_flask_login
    <bailing_flask.Bailing.bridge_flask_login>`. When the gate admits a hub
    call (signature, subject, arguments and authorization all passed), the
    user the subject loader returned becomes ``current_user`` for this one
    request (``None`` becomes Flask-Login's anonymous user). Nothing else
    changes: no ``login_user()``, no session write, no remember cookie; a
    signed request to a route that is not a tool, or a refused call, never
    gets a user; and the user is removed when the request ends.

    For admitted hub calls, Flask-Login's failures become the package's JSON
    refusals instead of a redirect to the login page: ``login_required`` on
    an anonymous user answers ``403 login_required``, and
    ``fresh_login_required`` always answers ``403 fresh_login_required``
    (a hub call is never a fresh login).
    """

    def __init__(self, login_manager: Any) -> None:
        if not hasattr(login_manager, "anonymous_user"):
            raise TypeError(f"expected a flask_login.LoginManager, got {login_manager!r}")
        self.login_manager = login_manager
        self._patch()

    def _patch(self) -> None:
        manager = self.login_manager
        for name, reason in (("unauthorized", "login_required"), ("needs_refresh", "fresh_login_required")):
            original = getattr(manager, name)
            if getattr(original, _PATCHED_ATTR, False):
                continue

            def answer(*args: Any, _original: Callable[..., Any] = original, _reason: str = reason,
                       **kwargs: Any) -> Any:
                refusal = _hub_refusal(_reason)
                if refusal is not None:
                    return refusal
                return _original(*args, **kwargs)

            functools.update_wrapper(answer, original)
            setattr(answer, _PATCHED_ATTR, True)
            setattr(manager, name, answer)

    def loader_problem(self, loader: Any) -> str | None:
        """What the annotated return type of ``loader`` says is wrong for Flask-Login, or ``None``.

        For ``flask bailing check`` and the first request: a loader declared
        to return a ``dict`` or a plain dataclass can never give Flask-Login
        a user. An unannotated loader is checked on its first call instead.
        """
        if loader is None:
            return None
        returned = _annotated_return(getattr(loader, "__wrapped__", loader))
        if returned is None or returned is object or returned is Any:
            return None
        missing = [name for name in _LOGIN_ATTRIBUTES if not hasattr(returned, name)]
        if not missing:
            return None
        return (f"the subject loader {_qualname(loader)} is declared to return "
                f"{returned.__name__}, which Flask-Login cannot use as current_user (it has no "
                f"{', '.join(missing)}): with bridge_flask_login the loader must return the objects "
                "your login_manager.user_loader returns (a UserMixin), or None")

    def admit(self, call: ToolCall) -> ErrorInfo | None:
        """Called by the gate for every call it is about to admit, in an app that has this bridge.

        A user Flask-Login cannot use (a ``dict``, a plain dataclass) refuses
        the call, ``500 login_user_invalid``, logged once with the loader's
        name: ``login_required`` would otherwise fail on it with an
        ``AttributeError`` deep in Flask-Login.
        """
        app = current_app._get_current_object()  # type: ignore[attr-defined]
        manager: Any = self.login_manager
        if id(getattr(app, "login_manager", None)) != id(manager):  # another app's manager
            return None
        if call.user is not None and not all(hasattr(call.user, a) for a in _LOGIN_ATTRIBUTES):
            state = _state()
            loader = state.callbacks.subject_loader_func if state is not None else None
            problem = login_user_problem(loader, call.user) or "the subject loader's user"
            if state is not None:
                state.warn_once(("login_user", type(call.user).__name__),
                                "bailing: refusing the call (500 login_user_invalid): %s", problem,
                                level=logging.ERROR)
            return ErrorInfo.make("login_user_invalid")
        anonymous: Callable[[], Any] = manager.anonymous_user
        user = call.user if call.user is not None else anonymous()
        # what Flask-Login's own loaders end with; replaces a user an earlier
        # before_request function may already have loaded for this request
        g._login_user = user
        _bridged("_login_user")
        return None


def _bridged(name: str) -> None:
    """Note that ``g.<name>`` belongs to this call only (see :func:`forget_bridged_user`)."""
    environ = request.environ
    names = environ.get(BRIDGED_KEY)
    if names is None:
        names = environ[BRIDGED_KEY] = set()
        # only a bridged call pays for the clean-up: the middleware runs it when the app is done
        environ.setdefault(AFTER_CALL_KEY, []).append(functools.partial(forget_bridged_user, environ))
    names.add(name)


def forget_bridged_user(environ: dict[str, Any]) -> None:
    """The bridged user never outlives its call (shared app contexts keep ``g``)."""
    names = environ.get(BRIDGED_KEY)
    if names and has_app_context():
        for name in names:
            g.pop(name, None)
    if names and "flask_httpauth_user" in names:
        _ADMITTED.set(None)


# -- Flask-HTTPAuth ---------------------------------------------------------------------


def _httpauth_objects(auth: Any) -> tuple[Any, ...]:
    """The ``HTTPAuth`` objects behind ``auth``: itself, or a ``MultiAuth``'s main and others."""
    if hasattr(auth, "main_auth"):  # MultiAuth (``additional_auth`` before Flask-HTTPAuth 4.8.1)
        others = getattr(auth, "additional_auths", getattr(auth, "additional_auth", ()))
        return (auth.main_auth, *others)
    if all(hasattr(auth, name) for name in ("authenticate", "authorize", "auth_error_callback")):
        return (auth,)
    raise TypeError("expected a flask_httpauth HTTPTokenAuth, HTTPBasicAuth, HTTPDigestAuth or "
                    f"MultiAuth, got {auth!r}")


#: The call the gate admitted in this context, set by the Flask-HTTPAuth bridge and cleared
#: when the request ends: one context-variable read tells every other request apart.
_ADMITTED: ContextVar[ToolCall | None] = ContextVar("bailing_admitted_call", default=None)


def _admitted_here() -> ToolCall | None:
    """:func:`_admitted_call`, for the cost of one context-variable read when there is none."""
    call = _ADMITTED.get()
    if call is None:
        return None
    return call if _admitted_call() is call else None  # one left by another request is never trusted


def _when_not_admitted(original: Callable[..., Any], admitted: Callable[[ToolCall], Any]
                       ) -> Callable[..., Any]:
    """``original``, except for an admitted hub call, which gets ``admitted(call)`` instead."""

    def bridged(*args: Any, **kwargs: Any) -> Any:
        call = _admitted_here()
        if call is None:
            return original(*args, **kwargs)
        return admitted(call)

    functools.update_wrapper(bridged, original)
    setattr(bridged, _PATCHED_ATTR, True)
    return bridged


def _httpauth_refusal(original: Callable[..., Any]) -> Callable[..., Any]:
    """An ``auth_error_callback`` that answers admitted hub calls with the package's JSON."""

    def answer(*args: Any, **kwargs: Any) -> Any:
        if _admitted_here() is not None:
            status = args[0] if args else kwargs.get("status", 401)
            refusal = _hub_refusal("role_required" if status == 403 else "login_required")
            if refusal is not None:
                return refusal
        return original(*args, **kwargs)

    functools.update_wrapper(answer, original)
    setattr(answer, _PATCHED_ATTR, True)
    return answer


class FlaskHTTPAuthBridge:
    """Let Flask-HTTPAuth's ``login_required`` pass admitted calls, as the subject loader's user.

    Installed with :meth:`Bailing.bridge_flask_httpauth
    <bailing_flask.Bailing.bridge_flask_httpauth>` for an ``HTTPTokenAuth``,
    ``HTTPBasicAuth`` (or ``HTTPDigestAuth``) object, or a ``MultiAuth`` of
    them. A hub call carries no credentials of the app's own: its signature
    and subject already say who acts. So when the gate admits a call
    (signature, subject, arguments and authorization all passed):

    * ``login_required`` authenticates it as the user the subject loader
      returned, without calling ``verify_token`` / ``verify_password``, and
      whatever ``Authorization`` header the request carries (the hub sends
      none; a header is no signed part of the call) neither picks the user
      nor, for a ``MultiAuth``, the scheme: the main one decides, as for any
      request without credentials;
    * ``login_required(role=...)`` asks the app's ``get_user_roles`` about
      that user, as for any user;
    * ``auth.current_user()`` is that user, from the gate's decision to the
      end of the request, in the view and in anything it calls;
    * a refusal is the package's JSON instead of a ``401`` with
      ``WWW-Authenticate``: no user (an anonymous call, an unknown subject)
      answers ``403 login_required``, a missing role ``403 role_required``.

    Every other request (unsigned, signed to a route that is not a tool, or
    refused by the gate, which then never reaches the view) goes through
    Flask-HTTPAuth exactly as without the bridge. Flask-HTTPAuth offers no
    callback for a request without credentials (``verify_token`` is never
    called without a token), so the bridge wraps three methods of the
    objects given to it, on those objects only: ``authenticate``,
    ``auth_error_callback`` (set again if ``@auth.error_handler`` replaces
    it later) and, for a ``MultiAuth``'s main object, ``is_compatible_auth``.
    For any request but an admitted call each wrapper costs one
    context-variable read before it calls Flask-HTTPAuth's own method.
    """

    def __init__(self, auth: Any) -> None:
        self.auth = auth
        self.objects = _httpauth_objects(auth)
        for obj in self.objects:
            if not getattr(obj.authenticate, _PATCHED_ATTR, False):
                obj.authenticate = _when_not_admitted(obj.authenticate, lambda call: call.user)
            self._wrap_error_callback(obj)
        if len(self.objects) > 1 or self.objects[0] is not auth:  # a MultiAuth: the main one decides
            main = self.objects[0]
            if not getattr(main.is_compatible_auth, _PATCHED_ATTR, False):
                main.is_compatible_auth = _when_not_admitted(main.is_compatible_auth, lambda call: True)

    @staticmethod
    def _wrap_error_callback(obj: Any) -> None:
        callback = obj.auth_error_callback
        if callback is not None and not getattr(callback, _PATCHED_ATTR, False):
            obj.auth_error_callback = _httpauth_refusal(callback)

    def admit(self, call: ToolCall) -> ErrorInfo | None:
        """Called by the gate for every call it is about to admit, in an app that has this bridge."""
        for obj in self.objects:  # an @auth.error_handler registered after the bridge
            self._wrap_error_callback(obj)
        # what login_required stores and current_user() reads, replaced for this request
        g.flask_httpauth_user = call.user
        _bridged("flask_httpauth_user")
        _ADMITTED.set(call)
        return None
