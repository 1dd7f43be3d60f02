"""A support-desk API guarded by Flask-HTTPAuth, with Flask-CORS, plus bailing_flask.

Token auth (``HTTPTokenAuth``), basic auth (``HTTPBasicAuth``) or both
(``MultiAuth``, token first) guard a blueprint under ``/api/v1``: views
behind ``@auth.login_required``, ``login_required(role=...)`` with the
app's ``get_user_roles``, ``login_required(optional=True)``, a route the
web client and the hub share (``allow_unsigned=True``) and human pages that
are never tools. Agents of two tenants; ``carol`` has no role.
:func:`create_app` can leave the bridge out and register an
``error_handler`` before or after it.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, Literal

from flask import Blueprint, Flask, jsonify
from flask_cors import CORS
from flask_httpauth import HTTPBasicAuth, HTTPTokenAuth, MultiAuth

from bailing_flask import Bailing, tool

from ..helpers import STRONG_SECRET


@dataclass(frozen=True)
class Agent:
    login: str
    tenant: str
    roles: tuple[str, ...]
    token: str
    password: str


AGENTS = (
    Agent("alice", "t1", ("agent", "admin"), "tok-alice", "pw-alice"),
    Agent("bob", "t2", ("agent",), "tok-bob", "pw-bob"),
    Agent("carol", "t1", (), "tok-carol", "pw-carol"),
    Agent("root", "t1", ("agent", "admin", "root"), "tok-root", "pw-root"),
)
#: ticket id -> (tenant, title)
TICKETS = {1: ("t1", "printer on fire"), 2: ("t2", "vpn down"), 3: ("t1", "password reset")}
#: what the app's callbacks were asked: ("verify_token", token), ("roles", "token"|"basic", login), ...
ASKED: list[tuple[str, ...]] = []
#: the tickets closed through the API
CLOSED: list[int] = []

Scheme = Literal["token", "basic", "multi"]


def basic_header(login: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{login}:{password}".encode()).decode()


def credentials(scheme: Scheme, agent: Agent) -> dict[str, str]:
    """The ``Authorization`` header a human's client sends for ``agent``."""
    if scheme == "basic":
        return {"Authorization": basic_header(agent.login, agent.password)}
    return {"Authorization": f"Bearer {agent.token}"}


def agent(login: str) -> Agent:
    return next(a for a in AGENTS if a.login == login)


def create_app(
    scheme: Scheme = "token",
    *,
    bridge: bool = True,
    error_handler: Literal["before", "after", None] = None,
    **config: Any,
) -> Flask:
    app = Flask("httpauth_app")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://", **config)
    CORS(app, resources={r"/api/*": {"origins": "https://desk.example"}})

    token_auth = HTTPTokenAuth(scheme="Bearer")
    basic_auth = HTTPBasicAuth()

    @token_auth.verify_token
    def verify_token(token: str) -> Agent | None:
        ASKED.append(("verify_token", token))
        return next((a for a in AGENTS if a.token == token), None)

    @basic_auth.verify_password
    def verify_password(login: str, password: str) -> Agent | None:
        ASKED.append(("verify_password", login))
        found = next((a for a in AGENTS if a.login == login), None)
        return found if found is not None and found.password == password else None

    @token_auth.get_user_roles
    def token_roles(user: Agent) -> list[str]:
        ASKED.append(("roles", "token", user.login))
        return list(user.roles)

    @basic_auth.get_user_roles
    def basic_roles(user: Agent) -> list[str]:
        ASKED.append(("roles", "basic", user.login))
        return list(user.roles)

    auth: Any = {"token": token_auth, "basic": basic_auth,
                 "multi": MultiAuth(token_auth, basic_auth)}[scheme]
    plain = token_auth if scheme != "basic" else basic_auth  # the object whose current_user() views read

    def on_auth_error(status: int) -> Any:
        return jsonify(error="unauthorized" if status == 401 else "forbidden"), status

    if error_handler == "before":
        for obj in (token_auth, basic_auth):
            obj.error_handler(on_auth_error)
    bailing = Bailing(app)
    if bridge:
        bailing.bridge_flask_httpauth(auth)
    if error_handler == "after":
        for obj in (token_auth, basic_auth):
            obj.error_handler(on_auth_error)

    @bailing.subject_loader
    def load_subject(subject: str) -> Agent | None:
        tenant, _, login = subject.partition(":")
        return next((a for a in AGENTS if a.tenant == tenant and a.login == login), None)

    @bailing.authorizer
    def authorize(call: Any) -> bool:
        return call.user is not None

    def anyone(call: Any) -> bool:  # anonymous hub calls too; unknown subjects never
        return call.subject is None or call.user is not None

    def acting() -> Agent:
        user = plain.current_user()
        assert isinstance(user, Agent)
        return user

    api = Blueprint("api", __name__, url_prefix="/api/v1")

    @api.get("/me")
    @auth.login_required
    @tool(scope="profile.read")
    def me() -> Any:
        """Who the acting agent is."""
        return jsonify(login=acting().login, tenant=acting().tenant)

    @api.get("/tickets")
    @tool(scope="ticket.read")
    @auth.login_required(role="agent")
    def tickets() -> Any:
        """The open tickets of the acting agent's tenant."""
        tenant = acting().tenant
        return jsonify(tickets=[{"id": i, "title": title} for i, (t, title) in TICKETS.items()
                                if t == tenant and i not in CLOSED])

    @api.post("/tickets/<int:ticket_id>/close")
    @auth.login_required(role="admin")
    @tool(scope="ticket.write", risk="medium")
    def close_ticket(ticket_id: int) -> Any:
        """Close a ticket of the acting agent's tenant."""
        found = TICKETS.get(ticket_id)
        if found is None or found[0] != acting().tenant:
            return jsonify(error="no such ticket"), 404
        CLOSED.append(ticket_id)
        return jsonify(closed=ticket_id, by=acting().login)

    @api.get("/status")
    @auth.login_required(optional=True)
    @tool(scope="status.read", authorizer=anyone)
    def status() -> Any:
        """Whether the desk is open (agents also see who they are)."""
        user = plain.current_user()
        return jsonify(open=True, agent=user.login if isinstance(user, Agent) else None)

    @api.get("/queue")
    @auth.login_required
    @tool(scope="queue.read", authorizer=anyone)
    def queue() -> Any:
        """How many tickets wait (the view wants an agent)."""
        return jsonify(waiting=len(TICKETS) - len(CLOSED))

    @api.get("/kb/<int:article_id>")
    @auth.login_required
    @tool(scope="kb.read", allow_unsigned=True)
    def article(article_id: int) -> Any:
        """A knowledge-base article (the web client reads it too)."""
        return jsonify(article=article_id, reader=acting().login)

    @api.get("/profile")
    @auth.login_required
    def profile() -> Any:
        """A human page: never a tool."""
        return jsonify(page="profile", login=acting().login)

    app.register_blueprint(api)

    @app.get("/whoami")
    def whoami() -> Any:
        user = plain.current_user()
        return jsonify(agent=user.login if isinstance(user, Agent) else None)

    return app
