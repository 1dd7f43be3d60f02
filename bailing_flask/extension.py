"""``Bailing``: the Flask extension that wires everything into one app.

``init_app`` installs the verifying middleware on ``app.wsgi_app``,
registers the well-known endpoints and the ``flask bailing`` commands, and
keeps per-app state in ``app.extensions["bailing"]`` (so one ``Bailing``
object can serve several apps, app factories included). The registry and
the catalog are compiled lazily and rebuilt when routes change.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

import click
from flask import Flask, Response, request

from bailing_flask._state import EXTENSION_KEY, BailingState, Callbacks, state_of
from bailing_flask._sync import check_async_support
from bailing_flask.errors import ConfigurationError
from bailing_flask.responses import ErrorInfo
from bailing_flask.declare import get_declaration, get_wrapped_by
from bailing_flask.declare import tool as _tool

# What init_app installs is imported by init_app: an application's ``from bailing_flask
# import Bailing, tool`` loads neither the request pipeline nor pydantic (its settings and
# the options' models load with the first init_app and the first declaration).
if TYPE_CHECKING:  # pragma: no cover
    from typing_extensions import Unpack

    from bailing_flask._options import BailingKwargs
    from bailing_flask._pipeline.idempotency import Idempotency
    from bailing_flask.declare import ToolKwargs
    from bailing_flask.integrations import FlaskHTTPAuthBridge, FlaskLoginBridge
    from bailing_flask.settings import Config
    from bailing_flask.transactional import TransactionalIdempotency
    from bailing_flask.approvals import BusinessApprovals
    from bailing_flask.hub.client import HubClient

__all__ = ["Bailing"]

logger = logging.getLogger("bailing_flask")

F = TypeVar("F", bound=Callable[..., Any])
V = TypeVar("V", bound=Callable[..., Any])


def _transaction_mode(idempotency: Idempotency) -> TransactionalIdempotency:
    """The transaction mode's runner, imported only by apps that use it."""
    from bailing_flask.transactional import TransactionalIdempotency

    return TransactionalIdempotency(idempotency)


class _CommandsOnUse(click.Group):
    """``flask bailing``: the commands, and what they import, load when the group is used.

    ``Bailing(app)`` adds it to ``app.cli``; only ``flask bailing ...`` (or
    ``flask --help``) imports :mod:`bailing_flask.cli`, so serving
    processes and other commands never load it.
    """

    @staticmethod
    def _group() -> click.Group:
        from bailing_flask.cli import bailing_cli

        return bailing_cli

    def list_commands(self, ctx: click.Context) -> list[str]:
        return self._group().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self._group().get_command(ctx, cmd_name)

    def get_short_help_str(self, limit: int = 45) -> str:
        return self._group().get_short_help_str(limit)

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self._group().format_help_text(ctx, formatter)


def _signature_refused(state: BailingState, error: Any, environ: dict[str, Any], path: str) -> None:
    """The middleware refused a signed request: audit it and send the signal."""
    from bailing_flask.audit import signature_refusal

    try:
        signature_refusal(state, error, environ, path)
    except Exception:  # never let the audit turn a 401 into a 500
        state.warn_once("refusal_audit_failed", "bailing: auditing a refused request failed",
                        level=logging.ERROR, exc_info=True)


def _chat_widget(state: BailingState, entry: str, uid: str | None = None, **attrs: Any) -> Any:
    """Template global ``bailing_chat_widget(entry, uid)`` (the hub's modules load on first use)."""
    from bailing_flask.hub.tickets import chat_widget

    return chat_widget(state.config, entry, uid, **attrs)


def first_request_compile(state: BailingState) -> None:
    """One ``before_request`` function that compiles the tools, then takes itself out.

    Ordinary routes of the app pay nothing per request afterwards: the gate
    stands in the view function of every tool endpoint. While the tools do
    not compile it stays, and a request to a tool endpoint fails closed.
    """
    app = state.app
    lock = threading.Lock()
    done: list[bool] = []

    def _bailing_compile() -> Response | None:
        with lock:
            if done:
                return None
            from bailing_flask._pipeline.catalog import catalog_of
            from bailing_flask.integrations import exempt_tool_calls_from_csrf

            try:
                if state.config.csrf_exempt:
                    # CSRFProtect initialised after Bailing: its check runs after this hook
                    exempt_tool_calls_from_csrf(app)
                catalog_of(state)  # compile early so declaration problems are logged at start-up
                from bailing_flask.config_check import check_at_first_request

                check_at_first_request(state)  # handlers and templates registered since init_app
            except Exception:
                state.warn_once("registry_failed", "bailing: the tools could not be compiled",
                                level=logging.ERROR, exc_info=True)
                view = app.view_functions.get(request.endpoint or "")
                if get_declaration(view) is not None or get_wrapped_by(view) is not None:
                    # without a registry no gate stands in front of this tool: fail closed
                    return state.error_response(ErrorInfo.make("catalog_unavailable"))
                return None
            done.append(True)
            for key, functions in list(app.before_request_funcs.items()):
                if _bailing_compile in functions:
                    # a new list: Flask may be iterating over the old one right now
                    app.before_request_funcs[key] = [f for f in functions if f is not _bailing_compile]
        return None

    app.before_request(_bailing_compile)


class Bailing(Callbacks):
    """The BailingHub integration for a Flask app.

    :param app: the app, or ``None`` to call :meth:`init_app` later.
    :param options: defaults for the ``BAILING_*`` settings, by their
        lower-case name without the prefix (``secrets=...``, ``window=...``);
        values in ``app.config`` win. :meth:`init_app` reads and validates
        them once (see :mod:`bailing_flask.settings`).
    """

    def __init__(self, app: Flask | None = None, **options: Unpack[BailingKwargs]) -> None:
        super().__init__()  # the registered callbacks: every app's state reads them
        self._options: dict[str, Any] = {}
        if options:  # checked here, so a misspelt keyword fails where it is written
            from bailing_flask.settings import option_key

            self._options = {option_key(name): value for name, value in options.items()}
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        """Install the middleware, endpoints and CLI on ``app``."""
        if "bailing" in app.extensions:
            raise ConfigurationError("Bailing was already initialised for this app")
        from bailing_flask._audit_sink import configured_sink
        from bailing_flask._pipeline.gate import (
            explain_routing_errors, gate_view_functions, install_gates, run_declared_view,
        )
        from bailing_flask._pipeline.idempotency import install_idempotency
        from bailing_flask.integrations import exempt_tool_calls_from_csrf
        from bailing_flask.settings import load_config
        from bailing_flask.wire.middleware import BailingMiddleware

        # the one reading of app.config: everything below reads the frozen object
        config = load_config(app.config, self._options)
        from bailing_flask.config_check import check_at_init, log_at_init

        problems = check_at_init(config)  # raises for a configuration that cannot work
        audit_sink = configured_sink(config.audit_sink)
        state_holder: list[BailingState] = []
        middleware = BailingMiddleware(
            app.wsgi_app,
            config.secrets,
            window=config.window,
            max_body_size=config.max_body_size,
            spool_threshold=config.spool_threshold,
            catalog_path=config.catalog_path,
            public_prefix=config.public_prefix,
            require_signature=config.require_signature,
            raw_target=config.raw_target,
            error_renderer=lambda error: state_holder[0].render_signature_error(error),
            on_refuse=lambda error, environ, path: _signature_refused(state_holder[0], error, environ, path),
            verified_elsewhere=config.callback_paths,
            elsewhere_max_body_size=config.callback_max_body_size,
            body_timeout=config.body_timeout,
            setting="BAILING_SECRETS",
            base_url=config.base_url,
            # commands that do not talk to the hub (flask routes, migrations) must run
            # without the secret; serving stays closed: every signed request is refused
            missing_secret="refuse",
        )
        app.wsgi_app = middleware  # type: ignore[method-assign]
        state = BailingState(app, config, middleware, self)
        state.audit_sink = audit_sink
        install_idempotency(state, _transaction_mode)
        state.run_declared_view = run_declared_view
        state.on_compile = install_gates
        state_holder.append(state)
        app.extensions[EXTENSION_KEY] = state
        log_at_init(state, problems)

        from bailing_flask._pipeline.callbacks import make_callbacks_blueprint
        from bailing_flask._pipeline.wellknown import make_blueprint

        state.blueprints = (make_blueprint(state), make_callbacks_blueprint(state))
        for blueprint in state.blueprints:
            app.register_blueprint(blueprint)
        if config.csrf_exempt:
            exempt_tool_calls_from_csrf(app)  # CSRFProtect initialised before Bailing
        app.jinja_env.globals["bailing_chat_widget"] = functools.partial(_chat_widget, state)
        app.cli.add_command(_CommandsOnUse("bailing"))
        if config.otel:
            from bailing_flask.otel import instrument

            instrument(app)
        if config.public_catalog:
            logger.warning(
                "bailing: BAILING_PUBLIC_CATALOG is on: the tool catalog at %s is readable without "
                "a signature (hub policy public_allowed). Tool calls remain signed and authorized.",
                config.catalog_path,
            )

        gate_view_functions(state)  # a view put on a tool endpoint later is gated at once
        explain_routing_errors(state)  # a signed call no route serves: JSON, not HTML
        first_request_compile(state)

    # -- integrations -----------------------------------------------------------------

    def bridge_flask_login(self, login_manager: Any) -> FlaskLoginBridge:
        """Make Flask-Login's ``current_user`` the subject loader's user for admitted calls.

        Only for a verified call to a declared tool that the gate admitted,
        for that request only, without touching the session: a signed
        request to any other route, or a refused call, never gets a user.
        ``@login_required`` and ``MethodView.decorators = [login_required]``
        then work for hub calls unchanged; ``fresh_login_required`` refuses
        them (``403 fresh_login_required``: a hub call is never a fresh
        login). The subject loader must return the objects your
        ``user_loader`` returns (or ``None``): a call whose user Flask-Login
        cannot use (a ``dict``, a plain dataclass) is refused
        ``500 login_user_invalid``, logged with the loader's name. See
        :class:`~bailing_flask.integrations.FlaskLoginBridge`.
        """
        from bailing_flask.integrations import FlaskLoginBridge

        bridge = FlaskLoginBridge(login_manager)
        self.admission_hooks.append(bridge.admit)
        return bridge

    def bridge_flask_httpauth(self, auth: Any) -> FlaskHTTPAuthBridge:
        """Let Flask-HTTPAuth's ``login_required`` pass admitted calls as the subject loader's user.

        ``auth`` is an ``HTTPTokenAuth``, ``HTTPBasicAuth`` or ``MultiAuth``.
        For a verified call to a declared tool that the gate admitted, and
        for nothing else: ``@auth.login_required`` (and
        ``method_decorators = [auth.login_required]``) passes with the user
        the subject loader returned, ``role=`` is checked with the app's
        ``get_user_roles``, and ``auth.current_user()`` is that user. The
        subject loader must return what ``verify_token`` /
        ``verify_password`` return. No user answers ``403 login_required``
        and a missing role ``403 role_required`` (JSON, never a ``401`` with
        ``WWW-Authenticate``). Every other request is Flask-HTTPAuth's as
        before. See :class:`~bailing_flask.integrations.FlaskHTTPAuthBridge`.
        """
        from bailing_flask.integrations import FlaskHTTPAuthBridge

        bridge = FlaskHTTPAuthBridge(auth)
        self.admission_hooks.append(bridge.admit)
        return bridge

    # -- registration decorators (Flask-HTTPAuth style: they return the function) ----

    @overload
    def tool(self, target: V, /, **options: Unpack[ToolKwargs]) -> V: ...
    @overload
    def tool(self, target: None = None, /, **options: Unpack[ToolKwargs]) -> Callable[[V], V]: ...
    def tool(self, target: Any = None, /, **options: Any) -> Any:
        """Same as :func:`bailing_flask.tool`."""
        return _tool(target, **options)

    def authorizer(self, func: F) -> F:
        """Register the app-wide authorizer: ``func(call) -> bool``; only ``True`` allows.

        ``async def`` works too (with ``flask[async]``).
        """
        check_async_support(func, "the authorizer")
        self.authorizer_func = func
        return func

    def subject_loader(self, func: F) -> F:
        """Register ``func(subject: str) -> user | None`` mapping the signed subject to a user.

        ``async def`` works too (with ``flask[async]``).
        """
        check_async_support(func, "the subject loader")
        self.subject_loader_func = func
        return func

    def error_handler(self, func: F) -> F:
        """Register ``func(error: ErrorInfo) -> response | None`` to restyle refusals."""
        check_async_support(func, "the error handler")
        self.error_handler_func = func
        return func

    def job_finished(self, func: F) -> F:
        """Handle the hub's ``callback_url`` POST: ``func(job: JobRecord)``, once per event."""
        check_async_support(func, "the job_finished handler")
        self.callback_handlers["job"] = func
        return func

    def delivery(self, func: F) -> F:
        """Handle a route's delivery webhook: ``func(delivery: DeliveryWebhook)``."""
        check_async_support(func, "the delivery handler")
        self.callback_handlers["delivery"] = func
        return func

    def approval_request(self, func: F) -> F:
        """Handle an approval request (both variants): ``func(request: ApprovalRequest)``.

        Decide later with :meth:`hub_client` and
        :meth:`~bailing_flask.hub.client.HubClient.decide_approval`.
        """
        check_async_support(func, "the approval_request handler")
        self.callback_handlers["approval"] = func
        return func

    def hub_client(self, app: Flask | None = None) -> HubClient:
        """A :class:`~bailing_flask.hub.client.HubClient` for this app's hub and client token.

        Decisions it sends and the hub accepts are recorded for
        ``business_approval`` tools.
        """
        from flask import current_app

        from bailing_flask.approvals import hub_client_of

        return hub_client_of(state_of(app or current_app._get_current_object()))  # type: ignore[attr-defined]

    def approvals(self, app: Flask | None = None) -> BusinessApprovals:
        """The approval requests this app received, and its decisions (see :mod:`~bailing_flask.approvals`)."""
        from flask import current_app

        from bailing_flask.approvals import approvals_of

        return approvals_of(state_of(app or current_app._get_current_object()))  # type: ignore[attr-defined]

    # -- accessors ----------------------------------------------------------------------

    @staticmethod
    def config(app: Flask | None = None) -> Config:
        """The configuration ``init_app`` read for ``app`` (default: the current app).

        Frozen: it is what every part of the package reads; changing
        ``app.config`` after ``init_app`` changes nothing.
        """
        from flask import current_app

        return state_of(app or current_app._get_current_object()).config  # type: ignore[attr-defined]
