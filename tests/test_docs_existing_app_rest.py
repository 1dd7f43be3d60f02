"""The REST sections of "Adding to an existing app", run: the support desk of docs/examples/support_desk.

Flask-HTTPAuth token auth (bridged), Flask-CORS, Flask-SQLAlchemy, a
flask-restx ``Api`` on ``/api/v1`` and a Flask-RESTful ``Api`` on
``/api/v0``, served over a socket and called the way the hub calls them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from flask import Flask
from flask.cli import FlaskGroup

from bailing_flask.exercise import run_exercise
from bailing_flask.testing import PROBE_SUBJECT, HubSimulator

from .helpers import STRONG_SECRET, raw_request

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"
sys.path.insert(0, str(EXAMPLES))

from support_desk.extensions import auth, bailing, db  # noqa: E402
from support_desk.factory import create_app  # noqa: E402
from support_desk.models import Agent, Ticket  # noqa: E402

TOOLS = {"list": "api_v1_tickets_ticket_list_get", "open": "api_v1_tickets_ticket_list_post",
         "get": "api_v1_tickets_ticket_item_get", "close": "api_v1_tickets_ticket_item_delete",
         "me": "api_v0_me", "open_count": "api_v0_open_count"}


def seeded() -> Flask:
    app = create_app(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    with app.app_context():
        db.create_all()
        db.session.add_all([
            Agent(tenant="t1", login="alice", token="tok-alice", roles="agent supervisor"),
            Agent(tenant="t2", login="bob", token="tok-bob", roles="agent"),
            Agent(tenant="t1", login="carol", token="tok-carol", roles=""),
            Ticket(tenant="t1", title="printer on fire"), Ticket(tenant="t2", title="vpn down"),
            Ticket(tenant="t1", title="password reset", status="closed"),
        ])
        db.session.commit()
    return app


@pytest.fixture
def app() -> Flask:
    return seeded()


def test_the_hub_calls_the_desk_as_two_agents_of_two_tenants(app, live_server):
    base = live_server(app)
    hub = HubSimulator(base, STRONG_SECRET)
    assert {p: sorted(ops) for p, ops in hub.document()["paths"].items()} == {
        "/api/v0/me": ["get"], "/api/v0/tickets/open": ["get"], "/api/v1/tickets": ["get", "post"],
        "/api/v1/tickets/{ticket_id}": ["delete", "get"]}
    assert hub.probe().json() == {"authorized": False}
    assert hub.call(TOOLS["me"], subject="t1:alice").json() == {
        "login": "alice", "tenant": "t1", "roles": ["agent", "supervisor"]}
    assert hub.call(TOOLS["me"], subject="t2:bob").json()["tenant"] == "t2"
    assert [t["title"] for t in hub.call(TOOLS["list"], subject="t1:alice").json()] == [
        "printer on fire", "password reset"]
    assert [t["title"] for t in hub.call(TOOLS["list"], {"status": "open"}, subject="t2:bob").json()] == [
        "vpn down"]
    assert hub.call(TOOLS["get"], {"ticket_id": 1}, subject="t2:bob").status == 404  # another tenant's
    created = hub.call(TOOLS["open"], {"title": "toner low"}, subject="t2:bob")
    assert created.status == 201
    assert hub.call(TOOLS["open_count"], subject="t2:bob").json() == {"open": 2}
    # the role comes from the app's get_user_roles: bob is no supervisor
    refused = hub.call(TOOLS["close"], {"ticket_id": created.json()["id"]}, subject="t2:bob")
    assert refused.status == 403 and refused.json()["reason"] == "role_required"
    assert "WWW-Authenticate" not in refused.headers
    closed = hub.call(TOOLS["close"], {"ticket_id": 1}, subject="t1:alice")
    assert closed.json() == {"id": 1, "status": "closed"}
    # the gate decides first: carol may read, not write; the probe subject nothing
    assert hub.call(TOOLS["open"], {"title": "x"}, subject="t1:carol").json()["reason"] == "forbidden"
    assert hub.call(TOOLS["list"], subject=PROBE_SUBJECT).json()["reason"] == "forbidden"


def test_the_web_client_keeps_its_token_and_its_cors(app, live_server):
    base = live_server(app)
    mine = raw_request(base, "GET", "/api/v1/tickets", {"Authorization": "Bearer tok-bob",
                                                        "Origin": "https://desk.example"})
    assert mine.status == 200 and b"vpn down" in mine.body and b"printer" not in mine.body
    assert mine.headers["Access-Control-Allow-Origin"] == "https://desk.example"
    anonymous = raw_request(base, "GET", "/api/v0/me")
    assert anonymous.status == 401 and anonymous.headers["WWW-Authenticate"].startswith("Bearer")
    bad = raw_request(base, "GET", "/api/v1/tickets?status=lost", {"Authorization": "Bearer tok-bob"})
    assert bad.status == 422  # the same validation as the hub's calls (validate_unsigned)
    preflight = raw_request(base, "OPTIONS", "/api/v1/tickets/1", {
        "Origin": "https://desk.example", "Access-Control-Request-Method": "DELETE"})
    assert preflight.status == 200 and "DELETE" in preflight.headers["Access-Control-Allow-Methods"]
    assert raw_request(base, "GET", "/api/v1/swagger.json").status == 200  # restx's own spec


def test_the_exercise_passes_and_rolls_back(app):
    report = run_exercise(app, subject=["t1:alice", "t2:bob"])
    assert report.ok, report.render()
    with app.app_context():
        assert db.session.scalar(db.select(db.func.count(Ticket.id))) == 3  # the POST never ran


GUIDE_OUTPUT = EXAMPLES / "support_desk" / "exercise-httpauth.txt"


def test_the_guides_exercise_output_without_the_bridge_is_real(app, monkeypatch):
    # the desk before its bridge line: Flask-HTTPAuth as it comes
    monkeypatch.delattr(auth, "authenticate")
    monkeypatch.setattr(auth, "auth_error_callback", auth.auth_error_callback.__wrapped__)
    monkeypatch.setattr(bailing, "admission_hooks", [])
    result = CliRunner().invoke(FlaskGroup(create_app=lambda: app),
                                ["bailing", "check", "--exercise", "--subject", "t2:bob"])
    assert result.exit_code == 1, result.output
    shown = GUIDE_OUTPUT.read_text().splitlines()
    lines = result.output.splitlines()
    assert shown and lines[lines.index(shown[0]):lines.index(shown[0]) + len(shown)] == shown, result.output


def test_the_guides_snippets_are_the_files_the_app_runs() -> None:
    page = (EXAMPLES.parent / "existing-app.rst").read_text()
    for name in ("extensions.py", "security.py", "api_v1.py", "api_v0.py", "factory.py",
                 "exercise-httpauth.txt"):
        assert f"examples/support_desk/{name}" in page, name
