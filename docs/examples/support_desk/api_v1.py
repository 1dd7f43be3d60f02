"""The current API: flask-restx resources on the ``/api/v1`` blueprint."""

from __future__ import annotations

from typing import Any, Literal

from flask import Blueprint
from flask_restx import Api, Resource, fields
from pydantic import BaseModel, Field

from bailing_flask import Param, get_arguments, tool, tool_defaults

from .extensions import auth, db
from .models import Agent, Ticket

# [start:shared-api_v1]
api_v1 = tool_defaults(Blueprint("api_v1", __name__, url_prefix="/api/v1"),
                       allow_unsigned=True, validate_unsigned=True)  # the web client calls them too
# [end:shared-api_v1]
api = Api(api_v1, title="Support desk", doc="/docs")
tickets = api.namespace("tickets", description="The tenant's tickets")
ticket_fields = tickets.model("Ticket", {"id": fields.Integer, "title": fields.String,
                                         "status": fields.String})


class TicketFilter(BaseModel):
    status: Literal["open", "closed"] | None = Field(default=None, description="Only tickets in this state.")


class NewTicket(BaseModel):
    title: str = Field(description="What is wrong, in one line.", min_length=1, max_length=120)


def acting_agent() -> Agent:
    agent = auth.current_user()            # the token's agent, or the hub's subject
    assert isinstance(agent, Agent)
    return agent


def tenant_ticket(ticket_id: int) -> Ticket | None:
    ticket = db.session.get(Ticket, ticket_id)
    return ticket if ticket is not None and ticket.tenant == acting_agent().tenant else None


# [start:restx]
@tickets.route("")
class TicketList(Resource):
    method_decorators = [auth.login_required]      # unchanged: the bridge lets admitted calls in

    @tool(scope="ticket.read", query=TicketFilter)
    @tickets.marshal_list_with(ticket_fields)
    def get(self) -> Any:
        """The tickets of the acting agent's tenant."""
        wanted = get_arguments().query_as(TicketFilter).status
        query = db.select(Ticket).filter_by(tenant=acting_agent().tenant).order_by(Ticket.id)
        return [t for t in db.session.scalars(query) if wanted is None or t.status == wanted]

    @tool(scope="ticket.write", body=NewTicket)
    def post(self) -> Any:
        """Open a ticket for the acting agent's tenant."""
        ticket = Ticket(tenant=acting_agent().tenant, title=get_arguments().body_as(NewTicket).title)
        db.session.add(ticket)
        db.session.commit()
        return {"id": ticket.id}, 201


@tickets.route("/<int:ticket_id>")
@tool(scope="ticket.read", params=[Param("ticket_id", location="path", description="The ticket's number.")])
class TicketItem(Resource):                        # @tool on the class: every method below
    method_decorators = [auth.login_required]

    @tickets.marshal_with(ticket_fields)
    def get(self, ticket_id: int) -> Any:
        """One ticket of the acting agent's tenant."""
        return tenant_ticket(ticket_id) or ({"id": ticket_id, "status": "unknown"}, 404)

    @tool(scope="ticket.close", risk="medium")     # a method refines the class's options
    @auth.login_required(role="supervisor")        # the role comes from get_user_roles
    def delete(self, ticket_id: int) -> Any:
        """Close a ticket of the acting agent's tenant."""
        ticket = tenant_ticket(ticket_id)
        if ticket is None:
            return {"error": "no such ticket"}, 404
        ticket.status = "closed"
        db.session.commit()
        return {"id": ticket.id, "status": ticket.status}
# [end:restx]
