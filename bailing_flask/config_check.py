"""Configuration mistakes, found at start-up and by ``flask bailing check``.

Each problem names the setting to fix. Found when ``init_app`` runs:

* an invalid ``BAILING_STORE`` URL: ``init_app`` raises
  :class:`~bailing_flask.errors.ConfigurationError` (otherwise the first
  side-effecting call would answer 500);
* an unknown ``BAILING_*`` key, with the nearest valid name (a misspelt
  setting is otherwise silently ignored): a warning;
* a removed setting (:data:`~bailing_flask.settings.REMOVED_SETTINGS`):
  ``init_app`` raises, naming what to write instead;
* a secret or client token with surrounding whitespace: an error logged at
  start-up (the hub trims the secrets it stores, so such a value can never
  match one of its signatures).

Found at the first request (handlers and templates may be registered after
``init_app``) and by ``check``:

* an event handler (``job_finished``, ``delivery``, ``approval_request``)
  without ``BAILING_CLIENT_TOKENS``, or whose path setting is off: every
  hub POST would be refused and the event lost;
* a template that renders ``bailing_chat_widget`` without
  ``BAILING_HUB_URL`` (or without a client token to sign tickets);
* a ``business_approval`` tool without an approval handler, a client token
  or a hub URL: every call would be refused;
* with ``bridge_flask_login``, a subject loader declared to return something
  Flask-Login cannot use as ``current_user`` (a ``dict``, a plain
  dataclass): every call through ``login_required`` would fail.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from flask import Flask

from bailing_flask.wire.jsenc import js_trim
from bailing_flask.errors import ConfigurationError
from bailing_flask.settings import DEFAULTS, REMOVED_SETTINGS

if TYPE_CHECKING:  # pragma: no cover
    from bailing_flask.extension import BailingState

__all__ = [
    "ConfigProblem",
    "SECRET_SETTINGS",
    "check_settings",
    "check_wiring",
    "check_all",
    "check_at_init",
    "check_at_first_request",
    "widget_templates",
]

logger = logging.getLogger("bailing_flask")

#: Settings whose values are secrets: never shown, only labels and lengths.
SECRET_SETTINGS = ("BAILING_SECRETS", "BAILING_SECRET", "BAILING_CLIENT_TOKENS")
#: Accepted besides the settings table (the one-secret spelling).
_ALSO_KNOWN = frozenset({"BAILING_SECRET"})
_HANDLER_PATHS = {
    "job": ("job_finished", "BAILING_CALLBACK_PATH"),
    "delivery": ("delivery", "BAILING_DELIVERY_PATH"),
    "approval": ("approval_request", "BAILING_APPROVAL_PATH"),
}
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


def check_settings(config: Mapping[str, Any]) -> list[ConfigProblem]:
    """Problems visible in the configuration alone."""
    problems: list[ConfigProblem] = []
    known = set(DEFAULTS) | _ALSO_KNOWN
    for key in sorted(k for k in config if isinstance(k, str) and k.startswith("BAILING_")):
        if key in known:
            continue
        if key in REMOVED_SETTINGS:
            problems.append(ConfigProblem(
                "error", key, "removed_setting", f"{key} is removed: {REMOVED_SETTINGS[key]}"))
            continue
        nearest = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
        hint = f"; did you mean {nearest[0]}?" if nearest else "; see the configuration reference"
        problems.append(ConfigProblem(
            "warning", key, "unknown_setting", f"{key} is not a bailing_flask setting and is "
            f"ignored{hint}"))
    for setting in SECRET_SETTINGS:
        for label, secret in secret_items(config.get(setting)):
            if isinstance(secret, str) and secret.strip() and js_trim(secret) != secret:
                problems.append(ConfigProblem(
                    "error", setting, "secret_whitespace",
                    f"{setting}[{label!r}] starts or ends with whitespace; the hub trims the "
                    "secrets it stores, so this one can never match (strip it where it is "
                    "loaded, e.g. a trailing newline of a file)"))
    store = config.get("BAILING_STORE")
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
    return problems


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
    has_tokens = bool(secret_items(state.config("BAILING_CLIENT_TOKENS")))
    handlers = state.ext.callback_handlers
    for kind, (decorator, path_setting) in _HANDLER_PATHS.items():
        if kind not in handlers:
            continue
        if not has_tokens:
            problems.append(ConfigProblem(
                "error", "BAILING_CLIENT_TOKENS", "handler_without_client_token",
                f"a @bailing.{decorator} handler is registered but BAILING_CLIENT_TOKENS is not "
                "set: every hub POST to it is refused (503) and the event is lost"))
        if not state.config(path_setting):
            problems.append(ConfigProblem(
                "error", path_setting, "handler_without_path",
                f"a @bailing.{decorator} handler is registered but {path_setting} is off, so "
                "nothing receives the hub's POSTs"))
    hub_url = state.config("BAILING_HUB_URL")
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
        approved = [t.name for t in state.registry().tools if t.options.business_approval]
        if approved:
            names = ", ".join(approved) + (" needs" if len(approved) == 1 else " need")
            if "approval" not in handlers:
                problems.append(ConfigProblem(
                    "error", "BAILING_APPROVAL_PATH", "business_approval_without_handler",
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
    for hook in state.ext.admission_hooks:
        check = getattr(getattr(hook, "__self__", None), "loader_problem", None)
        message = check(state.ext.subject_loader_func) if callable(check) else None
        if message:
            problems.append(ConfigProblem("error", "subject_loader", "login_user_invalid", message))
    return problems


def check_all(state: BailingState) -> list[ConfigProblem]:
    """Everything :func:`check_settings` and :func:`check_wiring` find."""
    return check_settings(state.app.config) + check_wiring(state)


def _log(state: BailingState, problems: Iterable[ConfigProblem]) -> None:
    for problem in problems:
        state.warn_once(("config", problem.code, problem.setting, problem.message),
                        "bailing: %s (%s)", problem.message, problem.code,
                        level=logging.ERROR if problem.severity == "error" else logging.WARNING)


def check_at_init(app: Flask) -> list[ConfigProblem]:
    """Raise for a configuration that cannot work; return the rest for logging."""
    problems = check_settings(app.config)
    for problem in problems:
        if problem.code == "invalid_store":
            raise ConfigurationError(f"BAILING_STORE: {problem.message}")
        if problem.code == "removed_setting":
            raise ConfigurationError(problem.message)
    return problems


def log_at_init(state: BailingState, problems: list[ConfigProblem]) -> None:
    """Log what :func:`check_at_init` found, and the handlers already registered."""
    _log(state, problems + check_wiring(state, templates=False, tools=False))


def check_at_first_request(state: BailingState) -> None:
    """The wiring checks, once the app is complete (logged once each)."""
    try:
        _log(state, check_wiring(state))
    except Exception:  # a check must never break the first request
        state.warn_once("config_check_failed", "bailing: the configuration check failed",
                        level=logging.ERROR, exc_info=True)
