"""The same support desk on flask-restx and on Flask-RESTful, plus bailing_flask.

Each framework's ``Api`` sits on a blueprint with a ``url_prefix``; its
``Resource`` classes carry ``method_decorators`` (Flask-HTTPAuth's
``login_required``, bridged, and a decorator that records that it ran and
turns away any request whose agent it cannot see, as an auth decorator
written for the web client does). ``@tool`` sits on methods and on classes,
below and above the framework's route decorator (``@api.route`` /
``@api.resource``) and on classes registered with ``api.add_resource``.
Agents of two tenants come from :mod:`tests.apps.httpauth_app`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Literal

from flask import Blueprint, Flask, current_app, request
from flask_cors import CORS
from flask_httpauth import HTTPTokenAuth
from pydantic import BaseModel, Field

from bailing_flask import Bailing, Param, get_arguments, tool

from ..helpers import STRONG_SECRET
from .httpauth_app import AGENTS, Agent

#: ``(resource, method)`` of every call a ``method_decorators`` decorator let through
DECORATED: list[tuple[str, str]] = []


class TicketQuery(BaseModel):
    status: Literal["open", "closed"] | None = Field(default=None, description="Only tickets in this state.")


class NewTicket(BaseModel):
    title: str = Field(description="What is wrong, in one line.", min_length=1, max_length=80)


class TicketPatch(BaseModel):
    status: Literal["open", "closed"] = Field(description="The new state.")


TICKET_ID = Param("ticket_id", location="path", description="The ticket's number.")


def _desk() -> dict[int, dict[str, Any]]:
    return {1: {"id": 1, "tenant": "t1", "title": "printer on fire", "status": "open"},
            2: {"id": 2, "tenant": "t2", "title": "vpn down", "status": "open"},
            3: {"id": 3, "tenant": "t1", "title": "password reset", "status": "closed"}}


def _common(name: str, bridge: bool, config: dict[str, Any]) -> tuple[Flask, HTTPTokenAuth]:
    app = Flask(name)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://", **config)
    CORS(app, resources={r"/desk/*": {"origins": "https://desk.example"}})
    auth = HTTPTokenAuth(scheme="Bearer")

    @auth.verify_token
    def verify_token(token: str) -> Agent | None:
        return next((a for a in AGENTS if a.token == token), None)

    bailing = Bailing(app)
    if bridge:
        bailing.bridge_flask_httpauth(auth)

    @bailing.subject_loader
    def load_subject(subject: str) -> Agent | None:
        tenant, _, login = subject.partition(":")
        return next((a for a in AGENTS if a.tenant == tenant and a.login == login), None)

    @bailing.authorizer
    def authorize(call: Any) -> bool:
        user: Agent | None = call.user
        return user is not None and (call.tool.readonly or "agent" in user.roles)

    app.extensions["desk_auth"] = auth
    return app, auth


def agent_seen(method: Callable[..., Any]) -> Callable[..., Any]:
    """The web client's own check: no agent, no answer (and a note that it ran)."""

    @functools.wraps(method)
    def checked(*args: Any, **kwargs: Any) -> Any:  # method_decorators get bound methods
        if not isinstance(current_app.extensions["desk_auth"].current_user(), Agent):
            return {"error": "agent required"}, 401
        DECORATED.append((type(method.__self__).__name__, request.method))  # type: ignore[attr-defined]
        return method(*args, **kwargs)

    return checked


def _agent(auth: HTTPTokenAuth) -> Agent:
    user = auth.current_user()
    assert isinstance(user, Agent)
    return user


def create_restx_app(*, bridge: bool = True, **config: Any) -> Flask:
    from flask_restx import Api, Namespace, Resource, fields

    app, auth = _common("restx_app", bridge, config)
    desk = _desk()
    blueprint = Blueprint("desk", __name__, url_prefix="/desk/v2")
    api = Api(blueprint, title="Support desk", doc="/docs")
    ns = Namespace("tickets", path="/tickets")
    api.add_namespace(ns)
    ticket = ns.model("Ticket", {"id": fields.Integer, "title": fields.String, "status": fields.String})
    new_ticket = ns.model("NewTicket", {"title": fields.String(required=True)})

    def mine() -> list[dict[str, Any]]:
        tenant = _agent(auth).tenant
        return [t for t in desk.values() if t["tenant"] == tenant]

    @ns.route("")
    class TicketList(Resource):  # @tool on the methods, the class below @ns.route
        method_decorators = [agent_seen, auth.login_required]

        @tool(scope="ticket.read", query=TicketQuery)
        @ns.marshal_list_with(ticket)
        def get(self) -> Any:
            """The acting agent's tenant's tickets."""
            wanted = get_arguments().query_as(TicketQuery).status
            return [t for t in mine() if wanted is None or t["status"] == wanted]

        @ns.expect(new_ticket, validate=True)
        @tool(scope="ticket.write", body=NewTicket)
        def post(self) -> Any:
            """Open a ticket for the acting agent's tenant."""
            number = max(desk) + 1
            desk[number] = {"id": number, "tenant": _agent(auth).tenant,
                            "title": get_arguments().body_as(NewTicket).title, "status": "open"}
            return {"id": number}, 201

    @ns.route("/<int:ticket_id>")
    @tool(scope="ticket.read", params=[TICKET_ID])  # the class, below the route: every method
    class TicketItem(Resource):
        method_decorators = [agent_seen, auth.login_required]

        @ns.marshal_with(ticket)
        def get(self, ticket_id: int) -> Any:
            """One ticket of the acting agent's tenant."""
            found = next((t for t in mine() if t["id"] == ticket_id), None)
            return found if found is not None else ({"id": ticket_id, "status": "unknown"}, 404)

        @tool(scope="ticket.write", body=TicketPatch)  # a method refines the class's options
        def patch(self, ticket_id: int) -> Any:
            """Open or close a ticket of the acting agent's tenant."""
            found = next((t for t in mine() if t["id"] == ticket_id), None)
            if found is None:
                return {"error": "no such ticket"}, 404
            found["status"] = get_arguments().body_as(TicketPatch).status
            return {"id": ticket_id, "status": found["status"]}

    @tool(scope="queue.read")  # the class, above the route
    @api.route("/queue")
    class Queue(Resource):
        method_decorators = [auth.login_required]

        def get(self) -> Any:
            """How many of the acting agent's tenant's tickets are open."""
            return {"open": sum(1 for t in mine() if t["status"] == "open")}

    class Stats(Resource):  # registered with api.add_resource
        method_decorators = [agent_seen]

        @tool(scope="stats.read")
        def get(self) -> Any:
            """Ticket counts of the acting agent's tenant."""
            return {"tickets": len(mine()), "agent": _agent(auth).login}

    api.add_resource(Stats, "/stats")

    @api.route("/health")
    class Health(Resource):  # not a tool
        def get(self) -> Any:
            return {"ok": True}

    app.register_blueprint(blueprint)
    return app


def create_restful_app(*, bridge: bool = True, **config: Any) -> Flask:
    from flask_restful import Api, Resource

    app, auth = _common("restful_app", bridge, config)
    desk = _desk()
    blueprint = Blueprint("desk", __name__, url_prefix="/desk/v2")
    api = Api(blueprint)

    def mine() -> list[dict[str, Any]]:
        tenant = _agent(auth).tenant
        return [t for t in desk.values() if t["tenant"] == tenant]

    def public(t: dict[str, Any]) -> dict[str, Any]:
        return {"id": t["id"], "title": t["title"], "status": t["status"]}

    class TicketList(Resource):  # @tool on the methods, registered with api.add_resource
        method_decorators = [agent_seen, auth.login_required]

        @tool(scope="ticket.read", query=TicketQuery)
        def get(self) -> Any:
            """The acting agent's tenant's tickets."""
            wanted = get_arguments().query_as(TicketQuery).status
            return [public(t) for t in mine() if wanted is None or t["status"] == wanted]

        @tool(scope="ticket.write", body=NewTicket)
        def post(self) -> Any:
            """Open a ticket for the acting agent's tenant."""
            number = max(desk) + 1
            desk[number] = {"id": number, "tenant": _agent(auth).tenant,
                            "title": get_arguments().body_as(NewTicket).title, "status": "open"}
            return {"id": number}, 201

    api.add_resource(TicketList, "/tickets", endpoint="ticket_list")

    @api.resource("/tickets/<int:ticket_id>", endpoint="ticket_item")
    @tool(scope="ticket.read", params=[TICKET_ID])  # the class, below the route decorator
    class TicketItem(Resource):
        method_decorators = [agent_seen, auth.login_required]

        def get(self, ticket_id: int) -> Any:
            """One ticket of the acting agent's tenant."""
            found = next((t for t in mine() if t["id"] == ticket_id), None)
            return public(found) if found is not None else ({"error": "no such ticket"}, 404)

        @tool(scope="ticket.write", body=TicketPatch)  # a method refines the class's options
        def patch(self, ticket_id: int) -> Any:
            """Open or close a ticket of the acting agent's tenant."""
            found = next((t for t in mine() if t["id"] == ticket_id), None)
            if found is None:
                return {"error": "no such ticket"}, 404
            found["status"] = get_arguments().body_as(TicketPatch).status
            return {"id": ticket_id, "status": found["status"]}

    @tool(scope="queue.read")  # the class, above the route decorator
    @api.resource("/queue", endpoint="queue")
    class Queue(Resource):
        method_decorators = [auth.login_required]

        def get(self) -> Any:
            """How many of the acting agent's tenant's tickets are open."""
            return {"open": sum(1 for t in mine() if t["status"] == "open")}

    class Stats(Resource):
        method_decorators = [agent_seen]

        @tool(scope="stats.read")
        def get(self) -> Any:
            """Ticket counts of the acting agent's tenant."""
            return {"tickets": len(mine()), "agent": _agent(auth).login}

    api.add_resource(Stats, "/stats", endpoint="stats")

    class Health(Resource):  # not a tool
        def get(self) -> Any:
            return {"ok": True}

    api.add_resource(Health, "/health", endpoint="health")
    app.register_blueprint(blueprint)
    return app


FACTORIES: dict[str, Callable[..., Flask]] = {"restx": create_restx_app, "restful": create_restful_app}
Framework = Literal["restx", "restful"]
