"""The older API the mobile app still calls: Flask-RESTful on the ``/api/v0`` blueprint."""

from __future__ import annotations

from typing import Any

from flask import Blueprint
from flask_restful import Api, Resource

from bailing_flask import tool, tool_defaults

from .extensions import auth, db
from .models import Agent, Ticket

# [start:shared-api_v0]
api_v0 = tool_defaults(Blueprint("api_v0", __name__, url_prefix="/api/v0"),
                       allow_unsigned=True, validate_unsigned=True)  # the web client calls them too
# [end:shared-api_v0]
api = Api(api_v0)


# [start:restful]
@tool(scope="profile.read")
class Me(Resource):
    method_decorators = [auth.login_required]

    def get(self) -> Any:
        """Who the acting agent is."""
        agent: Agent = auth.current_user()
        return {"login": agent.login, "tenant": agent.tenant, "roles": agent.roles.split()}


class OpenCount(Resource):
    method_decorators = [auth.login_required]

    @tool(scope="ticket.read")
    def get(self) -> Any:
        """How many tickets of the acting agent's tenant are open."""
        agent: Agent = auth.current_user()
        query = db.select(db.func.count(Ticket.id)).filter_by(tenant=agent.tenant, status="open")
        return {"open": db.session.scalar(query)}


api.add_resource(Me, "/me", endpoint="me")
api.add_resource(OpenCount, "/tickets/open", endpoint="open_count")
# [end:restful]
