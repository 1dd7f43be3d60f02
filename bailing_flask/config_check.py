"""Configuration mistakes, found at start-up and by ``flask bailing check``.

Each problem names the setting to fix. Found when ``init_app`` runs, after
:func:`bailing_flask.settings.load_config` has checked every value's type
(and refused unknown and renamed keys):

* an invalid ``BAILING_STORE`` URL or store object, an invalid
  ``BAILING_TRANSACTION`` or ``BAILING_HUB_URL``: ``init_app`` raises
  :class:`~bailing_flask.errors.ConfigurationError` (otherwise the first
  call that needs it would answer 500);
* a secret or client token with surrounding whitespace: an error logged at
  start-up (the hub trims the secrets it stores, so such a value can never
  match one of its signatures).

Found at the first request (handlers and templates may be registered after
``init_app``) and by ``check``:

* an event handler (``job_finished``, ``delivery``, ``approval_request``)
  without ``BAILING_CLIENT_TOKENS``: every hub POST would be refused and
  the event lost;
* a template that renders ``bailing_chat_widget`` without
  ``BAILING_HUB_URL`` (or without a client token to sign tickets);
* a ``business_approval`` tool without an approval handler, a client token
  or a hub URL: every call would be refused;
* with ``bridge_flask_login``, a subject loader declared to return something
  Flask-Login cannot use as ``current_user`` (a ``dict``, a plain
  dataclass): every call through ``login_required`` would fail.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from flask import Flask

from bailing_flask.wire.jsenc import js_trim
from bailing_flask.wire.signing import MIN_RECOMMENDED_SECRET_BYTES
from bailing_flask.errors import ConfigurationError
from bailing_flask.settings import Config
from bailing_flask._pipeline.registry import registry_of

if TYPE_CHECKING:  # pragma: no cover
    from bailing_flask._state import BailingState

__all__ = [
    "ConfigProblem",
    "check_settings",
    "check_wiring",
    "check_all",
    "check_at_init",
    "check_at_first_request",
    "widget_templates",
]

logger = logging.getLogger("bailing_flask")

#: callback kind -> the decorator that registers its handler
_HANDLER_DECORATORS = {"job": "job_finished", "delivery": "delivery", "approval": "approval_request"}
_SQLALCHEMY = ("sqlalchemy", "flask_sqlalchemy", "flask-sqlalchemy")
_WIDGET_CALL = re.compile(r"bailing_chat_widget\s*\(")
_MAX_TEMPLATES = 500
_MAX_TEMPLATE_CHARS = 256 * 1024


@dataclass(frozen=True)
class ConfigProblem:
    """One configuration problem; ``setting`` is the key to fix."""

    severity: Literal["error", "warning"]
    setting: str
    code: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"severity": self.severity, "setting": self.setting, "code": self.code,
                "message": self.message}


def secret_items(value: Any) -> list[tuple[str, Any]]:
    """``(label, secret)`` pairs of a secret setting, as the verifier labels them."""
    if value is None:
        return []
    if isinstance(value, str):
        return [("0", value)]
    if isinstance(value, Mapping):
        return [(str(label), secret) for label, secret in value.items()]
    if isinstance(value, Iterable):
        return [(str(index), secret) for index, secret in enumerate(value)]
    return []


def check_settings(config: Config) -> list[ConfigProblem]:
    """Problems visible in the configuration alone (its types are checked already)."""
    problems: list[ConfigProblem] = []
    for setting, value in (("BAILING_SECRETS", config.secrets),
                           ("BAILING_CLIENT_TOKENS", config.client_tokens)):
        for label, secret in secret_items(value):
            if isinstance(secret, str) and secret.strip() and js_trim(secret) != secret:
                problems.append(ConfigProblem(
                    "error", setting, "secret_whitespace",
                    f"{setting}[{label!r}] starts or ends with whitespace; the hub trims the "
                    "secrets it stores, so this one can never match (strip it where it is "
                    "loaded, e.g. a trailing newline of a file)"))
            elif isinstance(secret, str) and len(secret.encode("utf-8")) < MIN_RECOMMENDED_SECRET_BYTES:
                problems.append(ConfigProblem(
                    "warning", setting, "secret_short",
                    f"{setting}[{label!r}] is only {len(secret.encode('utf-8'))} bytes long; ask the "
                    f"hub operator for one of at least {MIN_RECOMMENDED_SECRET_BYTES} bytes, e.g. "
                    "`python -c \"import secrets; print(secrets.token_urlsafe(48))\"`"))
    store = config.store
    if isinstance(store, str):
        from bailing_flask.stores import store_from_url

        try:
            built = store_from_url(store)
        except ConfigurationError as exc:
            problems.append(ConfigProblem("error", "BAILING_STORE", "invalid_store", str(exc)))
        else:
            try:
                built.close()
            except Exception:  # nothing was connected yet
                pass
    elif store is not None:
        from bailing_flask.stores import IdempotencyStore

        if not isinstance(store, IdempotencyStore):
            problems.append(ConfigProblem(
                "error", "BAILING_STORE", "invalid_store",
                "BAILING_STORE must be a store URL (memory://, sqlite:///..., redis://..., "
                "postgresql+psycopg://..., mysql+pymysql://...) or an IdempotencyStore such as "
                "SQLStore(db.engine)"))
    if config.idempotency_retention < 2 * config.window:
        # a signed request verifies for up to twice the window after it first arrives (a hub
        # clock ahead by the window): a record gone sooner lets a captured call run again
        problems.append(ConfigProblem(
            "error", "BAILING_IDEMPOTENCY_RETENTION", "retention_below_window",
            f"BAILING_IDEMPOTENCY_RETENTION ({config.idempotency_retention:g} s) must be at least "
            f"twice BAILING_WINDOW ({config.window:g} s): a recorded call forgotten sooner runs "
            "again when a captured copy of its signed request is replayed while it still verifies"))
    problems.extend(_transaction_problems(config.transaction))
    if config.hub_url:
        from bailing_flask.hub.client import normalize_hub_url

        try:
            normalize_hub_url(config.hub_url)
        except ConfigurationError as exc:
            problems.append(ConfigProblem("error", "BAILING_HUB_URL", "invalid_hub_url",
                                          str(exc).replace("hub_url", "BAILING_HUB_URL", 1)))
    return problems


def _transaction_problems(value: object) -> list[ConfigProblem]:
    """``BAILING_TRANSACTION``: an adapter, ``"sqlalchemy"`` or ``None``."""
    if value is None:
        return []
    if isinstance(value, str):
        if value.strip().lower() in _SQLALCHEMY:
            return []  # Flask-SQLAlchemy may be initialised after Bailing: found on first use
    else:
        # an adapter object exists only once its module is imported: this imports nothing new
        from bailing_flask.transactional import TransactionAdapter

        if isinstance(value, TransactionAdapter):
            return []
    shown = f"{value.strip()[:24]!r}" if isinstance(value, str) else f"a {type(value).__name__}"
    return [ConfigProblem(
        "error", "BAILING_TRANSACTION", "invalid_transaction",
        "BAILING_TRANSACTION must be SQLAlchemyTransaction(db), DBAPITransaction(get_db) (from "
        f"bailing_flask.transactional), 'sqlalchemy' or None, not {shown}")]


def widget_templates(app: Flask) -> list[str]:
    """Templates that render the chat widget (``bailing_chat_widget(...)``)."""
    found: list[str] = []
    try:
        names = app.jinja_env.list_templates()
    except (TypeError, OSError):  # a loader that cannot list
        return found
    for name in names[:_MAX_TEMPLATES]:
        try:
            source, _, _ = app.jinja_env.loader.get_source(app.jinja_env, name)  # type: ignore[union-attr]
        except Exception:
            continue
        if _WIDGET_CALL.search(source[:_MAX_TEMPLATE_CHARS]):
            found.append(name)
    return found


def check_wiring(state: BailingState, *, templates: bool = True, tools: bool = True
                 ) -> list[ConfigProblem]:
    """Problems between settings and what the app registered (handlers, templates, tools)."""
    problems: list[ConfigProblem] = []
    has_tokens = bool(secret_items(state.config.client_tokens))
    handlers = state.callbacks.callback_handlers
    for kind, decorator in _HANDLER_DECORATORS.items():
        if kind in handlers and not has_tokens:
            problems.append(ConfigProblem(
                "error", "BAILING_CLIENT_TOKENS", "handler_without_client_token",
                f"a @bailing.{decorator} handler is registered but BAILING_CLIENT_TOKENS is not "
                "set: every hub POST to it is refused (503) and the event is lost"))
    hub_url = state.config.hub_url
    if templates and not (hub_url and has_tokens):
        users = widget_templates(state.app)
        if users:
            shown = ", ".join(users[:3]) + (" ..." if len(users) > 3 else "")
            if not hub_url:
                problems.append(ConfigProblem(
                    "error", "BAILING_HUB_URL", "widget_without_hub_url",
                    f"the chat widget is rendered by {shown} but BAILING_HUB_URL is not set: "
                    "those pages fail"))
            if not has_tokens:
                problems.append(ConfigProblem(
                    "error", "BAILING_CLIENT_TOKENS", "widget_without_client_token",
                    f"the chat widget is rendered by {shown} but BAILING_CLIENT_TOKENS is not "
                    "set: visitor tickets cannot be signed"))
    if tools:
        approved = [t.name for t in registry_of(state).tools if t.options.business_approval]
        if approved:
            names = ", ".join(approved) + (" needs" if len(approved) == 1 else " need")
            if "approval" not in handlers:
                problems.append(ConfigProblem(
                    "error", "approval_request", "business_approval_without_handler",
                    f"{names} the business's approval, but no @bailing.approval_request "
                    "handler receives approval requests: every call is refused"))
            if not hub_url:
                problems.append(ConfigProblem(
                    "error", "BAILING_HUB_URL", "business_approval_without_hub_url",
                    f"{names} the business's approval, but without BAILING_HUB_URL no "
                    "decision can be sent: every call is refused"))
            if not has_tokens:
                problems.append(ConfigProblem(
                    "error", "BAILING_CLIENT_TOKENS", "business_approval_without_client_token",
                    f"{names} the business's approval, but without BAILING_CLIENT_TOKENS "
                    "no approval request can be verified: every call is refused"))
    problems.extend(_login_bridge_problems(state))
    return problems


def _login_bridge_problems(state: BailingState) -> list[ConfigProblem]:
    """The Flask-Login bridge's word on the subject loader (it knows what Flask-Login needs)."""
    problems = []
    for hook in state.callbacks.admission_hooks:
        check = getattr(getattr(hook, "__self__", None), "loader_problem", None)
        message = check(state.callbacks.subject_loader_func) if callable(check) else None
        if message:
            problems.append(ConfigProblem("error", "subject_loader", "login_user_invalid", message))
    return problems


def check_all(state: BailingState) -> list[ConfigProblem]:
    """Everything :func:`check_settings` and :func:`check_wiring` find."""
    return check_settings(state.config) + check_wiring(state)


def _log(state: BailingState, problems: Iterable[ConfigProblem]) -> None:
    for problem in problems:
        state.warn_once(("config", problem.code, problem.setting, problem.message),
                        "bailing: %s (%s)", problem.message, problem.code,
                        level=logging.ERROR if problem.severity == "error" else logging.WARNING)


_FATAL = {"invalid_store", "invalid_transaction", "invalid_hub_url", "retention_below_window"}


def check_at_init(config: Config) -> list[ConfigProblem]:
    """Raise for a configuration that cannot work; return the rest for logging."""
    problems = check_settings(config)
    for problem in problems:
        if problem.code in _FATAL:
            message = problem.message
            raise ConfigurationError(message if message.startswith(problem.setting)
                                     else f"{problem.setting}: {message}")
    return problems


def log_at_init(state: BailingState, problems: list[ConfigProblem]) -> None:
    """Log what :func:`check_at_init` found, and the handlers already registered."""
    # a short secret is warned about by the verifier that holds it, when it is built
    _log(state, [problem for problem in problems if problem.code != "secret_short"]
         + check_wiring(state, templates=False, tools=False))


def check_at_first_request(state: BailingState) -> None:
    """The wiring checks, once the app is complete (logged once each)."""
    try:
        _log(state, check_wiring(state))
    except Exception:  # a check must never break the first request
        state.warn_once("config_check_failed", "bailing: the configuration check failed",
                        level=logging.ERROR, exc_info=True)
