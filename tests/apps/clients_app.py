"""A ticket API whose routes already serve the app's own clients, then become tools.

``GET /api/v1/tickets`` is behind Flask-HTTPAuth's bearer-token
``login_required`` (a mobile client calls it with ``Authorization: Bearer
...``); ``/legacy/orders`` is behind a blueprint ``before_request`` guard that
wants a session; ``/api/v1/articles`` is shared on purpose
(``allow_unsigned=True``); ``/api/v1/hub/summary`` is declared the hub's
alone (``allow_unsigned=False``); ``/api/v1/fresh`` is a new route written
for the hub, with no authentication of its own.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Flask, jsonify, session
from flask_httpauth import HTTPTokenAuth

from bailing_flask import Bailing, is_hub_request, tool

from ..helpers import STRONG_SECRET

#: token -> (tenant, login): the app's own clients' tokens
TOKENS = {"tok-alice": ("t1", "alice"), "tok-bob": ("t2", "bob")}
#: the names of the views that ran
RAN: list[str] = []


def create_app(**config: Any) -> Flask:
    app = Flask("clients_app")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://", SECRET_KEY="dev", **config)
    auth = HTTPTokenAuth(scheme="Bearer")

    @auth.verify_token
    def verify_token(token: str) -> tuple[str, str] | None:
        return TOKENS.get(token)

    @auth.error_handler
    def unauthorized(status: int) -> Any:
        return jsonify(error="unauthorized"), status

    bailing = Bailing(app)
    bailing.bridge_flask_httpauth(auth)

    @bailing.subject_loader
    def load_subject(subject: str) -> tuple[str, str] | None:
        tenant, _, login = subject.partition(":")
        return next((user for user in TOKENS.values() if user == (tenant, login)), None)

    @bailing.authorizer
    def authorize(call: Any) -> bool:
        return call.user is not None

    api = Blueprint("api", __name__, url_prefix="/api/v1")

    @api.get("/tickets")
    @auth.login_required
    @tool(scope="ticket.read")
    def tickets() -> Any:
        """The open tickets of the caller's tenant."""
        RAN.append("tickets")
        return jsonify(tenant=auth.current_user()[0], tickets=[])

    @api.get("/articles")
    @auth.login_required
    @tool(scope="kb.read", allow_unsigned=True)
    def articles() -> Any:
        """Knowledge-base articles (the web client reads them too)."""
        RAN.append("articles")
        return jsonify(articles=[], reader=auth.current_user()[1])

    @api.get("/hub/summary")
    @tool(scope="summary.read", allow_unsigned=False)
    def summary() -> Any:
        """A summary written for the hub alone."""
        RAN.append("summary")
        return jsonify(open=0)

    @api.get("/fresh")
    @tool(scope="fresh.read")
    def fresh() -> Any:
        """A new route, with no authentication of its own."""
        RAN.append("fresh")
        return jsonify(fresh=True)

    legacy = Blueprint("legacy", __name__, url_prefix="/legacy")

    @legacy.before_request
    def require_session() -> Any:
        if "user" not in session and not is_hub_request():
            return jsonify(error="session required"), 401
        return None

    @legacy.get("/orders")
    @tool(scope="order.read")
    def orders() -> Any:
        """The caller's orders."""
        RAN.append("orders")
        return jsonify(orders=[])

    app.register_blueprint(api)
    app.register_blueprint(legacy)

    @app.post("/login")
    def login() -> Any:  # a human page: never a tool
        session["user"] = "alice"
        return jsonify(ok=True)
    return app
