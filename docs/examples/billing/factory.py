"""The billing app's factory, with bailing_flask added to it."""

from __future__ import annotations

from typing import Any

from flask import Flask

from bailing_flask import Bailing

#: the hub's subjects -> tenant
SUBJECTS = {"t1:ann": "t1", "t2:ben": "t2"}


def create_app(**config: Any) -> Flask:
    from .api import billing

    app = Flask(__name__)
    app.config.update(config)
    bailing = Bailing(app)

    @bailing.subject_loader
    def load_subject(subject: str) -> str | None:
        return SUBJECTS.get(subject)

    @bailing.authorizer
    def authorize(call: Any) -> bool:
        return call.user is not None

    app.register_blueprint(billing)
    return app
