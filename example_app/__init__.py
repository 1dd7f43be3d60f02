"""A small legacy order/refund back office that also serves governed tools to BailingHub.

``create_app`` builds it: the shop's own SQLite database and session login
(``auth``, ``views``), and the ``/api`` tools (``tools``) guarded by
bailing_flask with the shop's own permissions (``hub``). Run it with
``python -m example_app`` or ``flask --app example_app run``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Flask

from . import activity, auth, db, settings, tools, views
from .hub import bailing

__all__ = ["create_app"]


def create_app(config: Mapping[str, Any] | None = None, *, instance_path: str | None = None) -> Flask:
    """Build the app; ``config`` overrides everything (tests pass paths and a secret).

    Useful keys: ``BAILING_SECRETS`` (list), ``DATABASE`` (SQLite file),
    ``BAILING_STORE`` (idempotency store URL), ``SECRET_KEY``,
    ``PUBLIC_BASE_URL`` (how the hub reaches this app), ``BAILING_CLIENT_TOKENS``
    and ``BAILING_HUB_URL`` (to receive approval requests and answer them).
    What is not given is generated once and kept in the instance folder
    (``instance_path``, default ``instance/`` next to this package): see
    :mod:`example_app.settings`.
    """
    app = Flask(__name__, instance_relative_config=True, instance_path=instance_path)
    app.config.update(config or {})
    origins = settings.apply(app)
    # the model reads at most 8192 UTF-16 units of a tool answer: "张三", not "\u5f20\u4e09"
    app.json.ensure_ascii = False  # type: ignore[attr-defined]

    db.init_app(app)
    app.register_blueprint(auth.bp)
    app.register_blueprint(views.bp)
    app.register_blueprint(tools.api)
    bailing.init_app(app)  # after the secrets are known: the middleware needs them
    activity.init_app(app)  # the staff's page of what the agents did, fed by the audit signals

    settings.announce(app, origins)
    return app
