"""The configuration page's three ways in (docs/configuration.rst), each a function tests call."""

import os
from typing import Any

from flask import Flask

from bailing_flask import Bailing


def from_app_config() -> Flask:
    app = Flask(__name__)
    # [start:config]
    app.config["BAILING_SECRETS"] = [os.environ["BAILING_SECRET"]]
    app.config["BAILING_STORE"] = os.environ.get("BAILING_STORE")   # unset: SQLite in instance/
    bailing = Bailing(app)
    # [end:config]
    assert bailing
    return app


def from_defaults() -> Flask:
    app = Flask(__name__)
    # [start:defaults]
    bailing = Bailing(app, secrets=[os.environ["BAILING_SECRET"]], window=120)
    # [end:defaults]
    assert bailing
    return app


# [start:factory]
bailing = Bailing()

def create_app(config: dict[str, Any] | None = None) -> Flask:
    app = Flask(__name__)
    app.config.update(config or {})
    ...
    bailing.init_app(app)        # after the secrets are in app.config
    return app
# [end:factory]
