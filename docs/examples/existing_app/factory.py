"""The application factory, with bailing_flask added to it."""

from __future__ import annotations

import os
from typing import Any

from flask import Flask


# [start:factory]
def create_app(**config: Any) -> Flask:
    app = Flask(__name__)
    app.config.from_mapping(
        SECRET_KEY=os.environ.get("SECRET_KEY", "dev"),
        SQLALCHEMY_DATABASE_URI=os.environ.get("DATABASE_URL", "sqlite://"),
        # the tool source's provider secret; without it the app still starts
        # (flask routes, flask db upgrade) but refuses every hub request
        BAILING_SECRETS=os.environ.get("BAILING_SECRET"),
        RATELIMIT_STORAGE_URI=os.environ.get("RATELIMIT_STORAGE_URI", "memory://"),
        CACHE_TYPE=os.environ.get("CACHE_TYPE", "SimpleCache"),
        # where the hub calls the app (the tool source's base_url)
        BAILING_BASE_URL=os.environ.get("BAILING_BASE_URL", "https://shop.example.com"),
        FORCE_HTTPS=os.environ.get("FORCE_HTTPS", "on") == "on",
    )
    app.config.update(config)

    from . import hub  # noqa: F401  (registers the subject loader and the authorizer)
    from .api import api, auth
    from .extensions import bailing, cache, csrf, db, limiter, login_manager
    from .guards import admin, require_session
    from .transport import https_only

    https_only(app)                    # Flask-Talisman first: it redirects before any guard runs

    db.init_app(app)
    login_manager.init_app(app)
    csrf.init_app(app)
    limiter.init_app(app)
    cache.init_app(app)
    bailing.init_app(app)              # the order among them does not matter
    app.before_request(require_session)
    app.register_blueprint(auth)
    app.register_blueprint(api)
    app.register_blueprint(admin)
    return app
# [end:factory]
