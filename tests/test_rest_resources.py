"""flask-restx and Flask-RESTful ``Resource`` classes as tools, ``Api`` on a blueprint.

``@tool`` goes on a ``Resource`` method or on the class, above or below the
framework's route decorator (``@api.route`` / ``@api.resource``) or on a
class registered with ``api.add_resource``. The gate stands in front of the
framework's view, so ``method_decorators`` (an auth decorator written for
the web client) run only for calls the gate admitted, and the frameworks'
own error handlers do not turn the package's JSON refusals into theirs.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bailing_flask.exercise import run_exercise
from bailing_flask.testing import PROBE_SUBJECT, HubSimulator, signed_headers

from .apps.httpauth_app import agent
from .apps.rest_apps import DECORATED, FACTORIES
from .helpers import STRONG_SECRET, raw_request

FRAMEWORKS = sorted(FACTORIES)


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    DECORATED.clear()
    yield
    DECORATED.clear()


def names(framework: str) -> dict[str, str]:
    """Tool names by resource and method: restx prefixes a namespace's endpoints with its name."""
    tickets = "desk_tickets_" if framework == "restx" else "desk_"
    return {"list": tickets + "ticket_list_get", "open": tickets + "ticket_list_post",
            "get": tickets + "ticket_item_get", "patch": tickets + "ticket_item_patch",
            "queue": "desk_queue", "stats": "desk_stats"}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_catalog_lists_every_declared_resource_method_under_the_blueprints_prefix(framework, live_server):
    hub = HubSimulator(live_server(FACTORIES[framework]()), STRONG_SECRET)
    paths = hub.document()["paths"]
    tool = names(framework)
    assert {p: sorted(ops) for p, ops in paths.items()} == {
        "/desk/v2/queue": ["get"],                       # @tool on the class, above the route
        "/desk/v2/stats": ["get"],                       # @tool on a method, api.add_resource
        "/desk/v2/tickets": ["get", "post"],             # @tool on each method
        "/desk/v2/tickets/{ticket_id}": ["get", "patch"],  # @tool on the class, below the route
    }
    listing = paths["/desk/v2/tickets"]["get"]
    assert listing["operationId"] == tool["list"]
    assert listing["parameters"] == [{"name": "status", "in": "query", "required": False,
                                      "description": "Only tickets in this state.",
                                      "schema": {"type": "string", "enum": ["open", "closed"]}}]
    item = paths["/desk/v2/tickets/{ticket_id}"]
    for method in ("get", "patch"):
        [ticket_id] = item[method]["parameters"]
        assert (ticket_id["name"], ticket_id["in"], ticket_id["required"], ticket_id["schema"]["type"],
                ticket_id["description"]) == ("ticket_id", "path", True, "integer", "The ticket's number.")
    # the class's options, refined by the method's own @tool
    assert item["get"]["x-agent-capability"]["scope"] == "ticket.read"
    assert item["patch"]["x-agent-capability"]["scope"] == "ticket.write"
    assert item["patch"]["requestBody"]["content"]["application/json"]["schema"]["required"] == ["status"]
    assert paths["/desk/v2/tickets"]["post"]["x-agent-capability"]["execution"]["readonly"] is False
    assert paths["/desk/v2/queue"]["get"]["summary"] == "How many of the acting agent's tenant's tickets are open."


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_two_agents_of_two_tenants_through_a_real_server(framework, live_server):
    hub = HubSimulator(live_server(FACTORIES[framework]()), STRONG_SECRET)
    tool = names(framework)
    assert hub.probe().json() == {"authorized": False}
    alice = [t["id"] for t in hub.call(tool["list"], subject="t1:alice").json()]
    bob = [t["id"] for t in hub.call(tool["list"], subject="t2:bob").json()]
    assert (alice, bob) == ([1, 3], [2])
    assert [t["id"] for t in hub.call(tool["list"], {"status": "open"}, subject="t1:alice").json()] == [1]
    assert hub.call(tool["get"], {"ticket_id": 1}, subject="t1:alice").json()["title"] == "printer on fire"
    assert hub.call(tool["get"], {"ticket_id": 1}, subject="t2:bob").status == 404  # another tenant's
    created = hub.call(tool["open"], {"title": "toner low"}, subject="t2:bob")
    assert created.status == 201 and created.json() == {"id": 4}
    patched = hub.call(tool["patch"], {"ticket_id": 4, "status": "closed"}, subject="t2:bob")
    assert patched.json() == {"id": 4, "status": "closed"}
    assert hub.call(tool["queue"], subject="t2:bob").json() == {"open": 1}
    assert hub.call(tool["stats"], subject="t1:alice").json() == {"tickets": 2, "agent": "alice"}
    assert hub.call(tool["stats"], subject="t2:bob").json() == {"tickets": 2, "agent": "bob"}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_method_decorators_run_only_for_calls_the_gate_admitted(framework):
    app = FACTORIES[framework]()
    hub = HubSimulator(app, STRONG_SECRET)
    tool = names(framework)
    web = {"Authorization": f"Bearer {agent('alice').token}"}  # the web client's own credentials
    unsigned = app.test_client().get("/desk/v2/tickets", headers=web)
    assert unsigned.status_code == 401 and unsigned.json["reason"] == "missing_signature"
    probe = hub.call(tool["list"], subject=PROBE_SUBJECT)
    assert probe.status == 403 and probe.json()["reason"] == "forbidden"
    bad = hub.call(tool["patch"], {"ticket_id": 1, "status": "gone"}, subject="t1:alice")
    assert bad.status == 422 and bad.json()["parameters"] == ["status"]
    reader = hub.call(tool["open"], {"title": "x"}, subject="t1:carol")  # no agent role: not a writer
    assert reader.status == 403 and reader.json()["reason"] == "forbidden"
    assert DECORATED == []  # nothing of the resource's stack ran for any of them
    assert hub.call(tool["list"], subject="t1:alice").status == 200
    assert DECORATED == [("TicketList", "GET")]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_without_the_bridge_the_web_clients_auth_decorator_turns_the_admitted_call_away(framework):
    hub = HubSimulator(FACTORIES[framework](bridge=False), STRONG_SECRET)
    tool = names(framework)
    refused = hub.call(tool["queue"], subject="t1:alice")  # method_decorators = [auth.login_required]
    assert refused.status == 401 and refused.headers["WWW-Authenticate"].startswith("Bearer")
    # ... and still only after the gate: the probe subject never reaches it
    assert hub.call(tool["queue"], subject=PROBE_SUBJECT).json()["reason"] == "forbidden"


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_signed_call_with_a_method_the_resource_does_not_take_is_the_packages_405(framework, live_server):
    """flask-restx answered it with its own ``{"message": ...}``: no reason for the model to read."""
    base = live_server(FACTORIES[framework]())
    path = "/desk/v2/tickets/1"
    response = raw_request(base, "DELETE", path, signed_headers(STRONG_SECRET, "DELETE", path,
                                                                 subject="t1:alice"))
    assert response.status == 405
    assert response.headers["X-Bailing-Reason"] == "method_not_allowed"
    assert response.headers["Content-Type"].startswith("application/json")
    assert '"reason": "method_not_allowed"' in response.body.decode().replace('":"', '": "')
    assert set(response.headers["Allow"].replace(" ", "").split(",")) >= {"GET", "PATCH"}
    # an unsigned request keeps the framework's own answer
    assert raw_request(base, "DELETE", path).headers.get("X-Bailing-Reason") is None


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_web_client_keeps_the_frameworks_answers_and_cors(framework):
    client = FACTORIES[framework]().test_client()
    assert client.get("/desk/v2/health").json == {"ok": True}
    preflight = client.options("/desk/v2/tickets", headers={"Origin": "https://desk.example",
                                                            "Access-Control-Request-Method": "POST"})
    assert preflight.status_code == 200
    assert preflight.headers["Access-Control-Allow-Origin"] == "https://desk.example"
    refused = client.get("/desk/v2/tickets", headers={"Origin": "https://desk.example"})
    assert refused.status_code == 401  # a tool: only signed calls
    assert refused.headers["Access-Control-Allow-Origin"] == "https://desk.example"


def test_restx_serves_its_own_swagger_beside_the_catalog():
    client = FACTORIES["restx"]().test_client()
    spec = client.get("/desk/v2/swagger.json").json
    assert "/tickets/{ticket_id}" in spec["paths"]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_exercise_walks_the_resources_and_their_method_decorators(framework):
    report = run_exercise(FACTORIES[framework](), subject=["t1:alice", "t2:bob"])
    assert report.ok, report.render()
    tool = names(framework)
    listing = next(line for line in report.plan if f"tool {tool['list']} " in line)
    # the web client's decorators in front of the method, in the order they run; not the method itself
    assert ": decorators " in listing and listing.index("login_required") \
        < listing.index("tests.apps.rest_apps.agent_seen")
    assert "create_" not in listing


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_exercise_names_flask_httpauth_in_method_decorators(framework):
    report = run_exercise(FACTORIES[framework](bridge=False), subject="t1:alice")
    queue = next(r for r in report.results if r.target.startswith("tool desk_queue ") and r.check == "stack")
    assert queue.status == "fail"
    assert queue.culprit is not None and queue.culprit.startswith(
        "Flask-HTTPAuth: login_required of the HTTPTokenAuth (scheme 'Bearer') answered 401")


def test_restx_catch_all_404s_keeps_the_reason_of_a_call_no_route_serves():
    from flask import Flask
    from flask_restx import Api, Resource

    from bailing_flask import Bailing, tool

    app = Flask("catch_all")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    api = Api(app, catch_all_404s=True)

    @api.route("/tickets")
    class Tickets(Resource):
        @tool(scope="ticket.read", authorizer=lambda call: True)
        def get(self) -> dict[str, int]:
            """Tickets."""
            return {"tickets": 0}

    Bailing(app)
    client = app.test_client()
    signed = signed_headers(STRONG_SECRET, "GET", "/ticket", subject="t1:alice")
    response = client.get("/ticket", headers=signed)
    assert response.status_code == 404 and response.headers["X-Bailing-Reason"] == "no_such_tool"
    assert response.json["reason"] == "no_such_tool"  # flask-restx appends its "did you mean" hint
    app.config["RESTX_ERROR_404_HELP"] = False
    assert "did you mean" not in client.get("/ticket", headers=signed).json["message"]
