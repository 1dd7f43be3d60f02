"""A tool that also serves humans reads its input one way (``validate_unsigned``)."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask, jsonify, session
from pydantic import BaseModel, Field

from bailing_flask import (
    Bailing,
    NotVerifiedError,
    ToolDeclarationError,
    get_arguments,
    get_current_call,
    tool,
)
from bailing_flask.testing import HubSimulator

from .helpers import STRONG_SECRET
from bailing_flask._state import state_of
from bailing_flask._pipeline.catalog import catalog_of


class NoteBody(BaseModel):
    text: str = Field(description="The note.", min_length=1, max_length=100)
    pinned: bool = Field(False, description="Pin it.")


class ListQuery(BaseModel):
    page: int = Field(1, ge=1, le=50, description="Page.")


def make_app() -> tuple[Flask, list[tuple[str, str, bool]]]:
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://", SECRET_KEY="k")
    bailing = Bailing(app)
    bailing.subject_loader(lambda subject: subject.partition(":")[2] or None)
    bailing.authorizer(lambda call: call.user is not None)
    notes: list[tuple[str, str, bool]] = []

    def author() -> str:
        call = get_current_call()
        return call.user if call is not None else session.get("user", "")

    @app.post("/notes")
    @tool(scope="note.write", body=NoteBody, allow_unsigned=True, validate_unsigned=True)
    def note_create() -> Any:
        """Write a note (the web page posts here too)."""
        arguments = get_arguments()  # no branching on who sent it
        body = arguments.body_as(NoteBody)
        notes.append((author(), body.text, arguments.signed))
        return jsonify(count=len(notes)), 201

    @app.get("/notes")
    @tool(scope="note.read", query=ListQuery, allow_unsigned=True, validate_unsigned=True)
    def note_list() -> Any:
        """List notes."""
        return jsonify(page=get_arguments().query_as(ListQuery).page)

    @app.post("/legacy")
    @tool(scope="note.write", body=NoteBody, allow_unsigned=True)
    def legacy() -> Any:
        """A shared route that did not opt in."""
        get_arguments()
        return jsonify(ok=True)

    @app.post("/login/<name>")
    def login(name: str) -> Any:
        session["user"] = name
        return "ok"

    return app, notes


def test_the_hub_and_a_human_reach_the_same_code_path():
    app, notes = make_app()
    hub = HubSimulator(app, STRONG_SECRET)
    assert hub.call("note_create", {"text": "from the agent"}, subject="t1:alice").status == 201
    browser = app.test_client()
    browser.post("/login/bob")
    response = browser.post("/notes", json={"text": "from the page", "pinned": True})
    assert response.status_code == 201, response.get_data(as_text=True)
    assert notes == [("alice", "from the agent", True), ("bob", "from the page", False)]


@pytest.mark.parametrize("body, reason, parameters", [
    ({"text": ""}, "invalid_parameter", ["text"]),
    ({"text": "x", "pinned": "very"}, "invalid_parameter", ["pinned"]),
    ({"text": "x", "admin": True}, "unknown_parameter", ["admin"]),
    ([1, 2], "invalid_body", ["(body)"]),
])
def test_a_humans_bad_input_is_a_422_not_a_500(body, reason, parameters):
    app, notes = make_app()
    response = app.test_client().post("/notes", json=body)
    assert response.status_code == 422
    assert response.json["reason"] == reason and response.json["parameters"] == parameters
    assert notes == []


def test_a_human_html_form_is_validated_too():
    app, notes = make_app()
    browser = app.test_client()
    ok = browser.post("/notes", data={"text": "a form", "pinned": "true"})
    assert ok.status_code == 201 and notes[-1] == ("", "a form", False)
    bad = browser.post("/notes", data={"text": "a", "pinned": "nope"})
    assert bad.status_code == 422 and bad.json["parameters"] == ["pinned"]
    twice = browser.post("/notes", data={"text": ["a", "b"]})
    assert twice.status_code == 422 and twice.json["errors"][0]["problem"] == "repeated"


def test_query_models_apply_to_humans_as_well():
    app, _ = make_app()
    browser = app.test_client()
    assert browser.get("/notes?page=3").json == {"page": 3}
    assert browser.get("/notes?page=0").status_code == 422
    assert HubSimulator(app, STRONG_SECRET).call("note_list", {"page": 2}, subject="t1:a").json() == {
        "page": 2}


def test_without_the_option_there_are_no_arguments_for_a_human():
    app, _ = make_app()
    app.config["PROPAGATE_EXCEPTIONS"] = True
    with pytest.raises(NotVerifiedError, match="validate_unsigned=True"):
        app.test_client().post("/legacy", json={"text": "x"})


def test_validate_unsigned_needs_allow_unsigned():
    with pytest.raises(ToolDeclarationError, match="allow_unsigned=True"):
        tool(scope="x.write", validate_unsigned=True, allow_unsigned=False)(lambda: None)
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET])
    Bailing(app).authorizer(lambda call: True)
    app.add_url_rule("/x", "x", tool(scope="x.read", validate_unsigned=True)(lambda: "x"))
    codes = {f.code for f in catalog_of(state_of(app)).findings}
    assert "validate_unsigned_without_allow_unsigned" in codes
