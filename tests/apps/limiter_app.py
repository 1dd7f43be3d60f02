"""A Flask-Limiter app with the documented recipe, for tests/test_rate_limit.py on real servers.

``create_app()`` reads ``BAILING_TEST_SECRET``, ``BAILING_TEST_STORE`` (the
package's store: where replays are recognised) and ``BAILING_TEST_LIMITER``
(Flask-Limiter's storage) from the environment, so gunicorn workers can
import it.
"""

from __future__ import annotations

import os
from typing import Any

from flask import Flask, jsonify
from flask_limiter import Limiter

import bailing_flask
from bailing_flask import Bailing, tool


def create_app(secret: str | None = None, store: str | None = None, limiter_storage: str | None = None,
               limit: str = "3/minute") -> Flask:
    app = Flask("limiter_app")
    app.config.update(
        BAILING_SECRETS=[secret or os.environ["BAILING_TEST_SECRET"]],
        BAILING_STORE=store or os.environ.get("BAILING_TEST_STORE", "memory://"),
        RATELIMIT_STORAGE_URI=limiter_storage or os.environ.get("BAILING_TEST_LIMITER", "memory://"),
    )
    Bailing(app).authorizer(lambda call: True)
    Limiter(key_func=bailing_flask.rate_limit_key, app=app, default_limits=[limit])

    @app.get("/me")
    @tool(scope="me.read")
    def me() -> Any:
        """Who is acting."""
        return jsonify(subject=bailing_flask.current_call.subject, pid=os.getpid())

    return app
