"""The application factory, with bailing_flask added to it."""

from __future__ import annotations

import os
from typing import Any

from flask import Flask


# [start:factory]
def create_app(**config: Any) -> Flask:
    app = Flask(__name__)
    app.config.from_mapping(
        SQLALCHEMY_DATABASE_URI=os.environ.get("DATABASE_URL", "sqlite://"),
        BAILING_SECRETS=os.environ.get("BAILING_SECRET"),
    )
    app.config.update(config)

    from . import security  # noqa: F401  (verify_token, roles, subject loader, authorizer)
    from .api_v0 import api_v0
    from .api_v1 import api_v1
    from .extensions import bailing, cors, db

    db.init_app(app)
    cors.init_app(app, resources={r"/api/*": {"origins": os.environ.get("DESK_ORIGIN", "https://desk.example")}})
    bailing.init_app(app)
    app.register_blueprint(api_v1)
    app.register_blueprint(api_v0)
    return app
# [end:factory]
