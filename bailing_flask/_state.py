"""The per-app state, and the one way to find it.

``Bailing.init_app`` keeps one :class:`BailingState` per app in
``app.extensions["bailing"]``. It is thin on purpose: the frozen
configuration, the callbacks the app registered, the middleware and the
rendering of refusals. What the package compiles or builds for the app
(the registry and catalog, the idempotency runner, the callback verifier,
the approvals record, the telemetry hook) belongs to the module that owns
it, which keeps it on the state under a :class:`Cache` key of its own,
typed by that module (``registry_of``, ``catalog_of``, ``idempotency_of``,
``approvals_of``, ``callback_verifier``).

The class lives here, below everything that uses it, so no module below
:mod:`bailing_flask.extension` imports the extension, not even for a type.
Every layer looks the state up with :func:`state_of` or
:func:`current_state`, the way flask-login's decorators find their manager.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from flask import Blueprint, Flask, Response, current_app

from bailing_flask._sync import call_sync
from bailing_flask.responses import REASON_HEADER, ErrorInfo, json_response

if TYPE_CHECKING:  # what init_app builds: loaded by it, not by an import of the extension
    from bailing_flask._audit_sink import JsonLinesSink
    from bailing_flask.errors import SignatureError
    from bailing_flask.settings import Config
    from bailing_flask.stores.base import IdempotencyStore
    from bailing_flask.wire.middleware import BailingMiddleware

__all__ = ["BailingState", "Cache", "Callbacks", "state_of", "current_state", "EXTENSION_KEY"]

T = TypeVar("T")

EXTENSION_KEY = "bailing"

logger = logging.getLogger("bailing_flask")


class Callbacks:
    """What an app registers on its ``Bailing`` object (``@bailing.authorizer``, ...).

    :class:`~bailing_flask.extension.Bailing` is one; the state of every app
    it serves reads the same callbacks, registered before or after
    ``init_app``.
    """

    def __init__(self) -> None:
        #: ``@bailing.job_finished``, ``delivery``, ``approval_request`` by kind
        self.callback_handlers: dict[str, Callable[[Any], Any]] = {}
        self.authorizer_func: Callable[..., Any] | None = None
        self.subject_loader_func: Callable[[str], Any] | None = None
        self.error_handler_func: Callable[[ErrorInfo], Any] | None = None
        #: called by the gate with every :class:`ToolCall` it is about to admit
        #: (integrations); an :class:`ErrorInfo` returned refuses the call
        self.admission_hooks: list[Callable[[Any], ErrorInfo | None]] = []


class Cache(Generic[T]):
    """What one module above builds for an app and keeps on the app's state, typed by it.

    The state sits below the modules that fill it, so it cannot name their
    types (not even for type checking: the layers forbid it). Each owner
    declares a key instead, ``_REGISTRY: Cache[Registry] = Cache("registry")``,
    and reads and writes through it; the type checker sees ``Registry`` on
    both sides. A value is put once (the app's life) or replaced whole.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Cache({self.name!r})"

    def get(self, state: BailingState) -> T | None:
        """The value on ``state``; ``None`` before the owner put one."""
        value: T | None = state.caches.get(self)
        return value

    def put(self, state: BailingState, value: T) -> T:
        state.caches[self] = value
        return value

    def get_or_make(self, state: BailingState, make: Callable[[], T]) -> T:
        """The value on ``state``, made once (under the state's lock) when there is none."""
        value = self.get(state)
        if value is None:
            with state.lock:
                value = self.get(state)
                if value is None:
                    value = self.put(state, make())
        return value


class BailingState:
    """One app's state: configuration, registered callbacks, middleware, refusal rendering.

    What the modules above build for the app is in ``caches``, each under
    its owner's :class:`Cache` key; read it through the owner's function.
    """

    def __init__(self, app: Flask, config: Config, middleware: BailingMiddleware,
                 callbacks: Callbacks) -> None:
        self.app = app
        #: the configuration, read once by ``init_app`` (see :mod:`bailing_flask.settings`)
        self.config = config
        self.middleware = middleware
        self.callbacks = callbacks
        #: the package's own blueprints (catalog and probe, callbacks)
        self.blueprints: tuple[Blueprint, ...] = ()
        #: the direct audit sink (``BAILING_AUDIT_SINK``), ``None`` when not set
        self.audit_sink: JsonLinesSink | None = None
        #: what every ``@tool`` wrapper calls instead of the view (installed by ``init_app``)
        self.run_declared_view: Callable[..., Any] = _not_initialised
        #: called with (state, registry) each time the registry is compiled (installs the gates)
        self.on_compile: Callable[[BailingState, Any], None] = lambda state, registry: None
        #: the app's record store: the de-duplication runner's, for the modules below it
        #: (installed by ``init_app``)
        self.store: Callable[[], IdempotencyStore] = _not_initialised
        self.lock = threading.Lock()
        self.warned: set[Any] = set()
        #: the gate installed in front of each tool endpoint (``_pipeline.gate``)
        self.gates: dict[str, Callable[..., Any]] = {}
        #: ``_pipeline.registry``: whether the compiled registry can no longer change
        self.registry_final = False
        #: what the modules above keep for this app, each under its own :class:`Cache` key
        self.caches: dict[Cache[Any], Any] = {}

    def warn_once(
        self, key: Any, message: str, *args: Any, level: int = logging.WARNING, exc_info: bool = False
    ) -> None:
        """Log ``message`` the first time ``key`` is seen for this app."""
        if key in self.warned:
            return
        self.warned.add(key)
        logger.log(level, message, *args, exc_info=exc_info)

    # -- refusals ----------------------------------------------------------------

    def error_response(self, info: ErrorInfo) -> Response:
        """Render a refusal, through the app's ``@bailing.error_handler`` if any."""
        handler = self.callbacks.error_handler_func
        if handler is not None:
            rendered = call_sync(handler, info)
            if rendered is not None:
                response = self.app.make_response(rendered)
                response.headers[REASON_HEADER] = info.reason
                return response
        return json_response(info.payload(), info.status,
                             {"Cache-Control": "no-store", REASON_HEADER: info.reason})

    def render_signature_error(self, error: SignatureError) -> tuple[int, list[tuple[str, str]], bytes] | None:
        """Middleware refusals go through the same hook (inside an app context)."""
        if self.callbacks.error_handler_func is None:
            return None
        info = ErrorInfo(error.status, error.reason, error.message)
        with self.app.app_context():
            response = self.error_response(info)
            return response.status_code, list(response.headers.items()), response.get_data()


def _not_initialised(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("bailing_flask: Bailing(app) was not initialised for this app")


def state_of(app: Flask) -> BailingState:
    """``app``'s state; :class:`RuntimeError` when ``Bailing(app)`` was not initialised for it."""
    state = app.extensions.get(EXTENSION_KEY)
    if state is None:
        raise RuntimeError("bailing_flask: Bailing(app) was not initialised for this app")
    return state  # type: ignore[no-any-return]


def current_state() -> BailingState:
    """The state of the app handling this request (or of the current app context)."""
    return state_of(current_app._get_current_object())  # type: ignore[attr-defined]
