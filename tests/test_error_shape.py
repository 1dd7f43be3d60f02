"""What a tool with ``response=`` answers on every other status: only the declared error shape.

The model reads the bodies of failed calls too (the hub shows it up to 2048
characters of a non-2xx answer). A view declared ``response=Profile`` that
answers the same row with status 409 must not send the row: whichever way
the 409 is made -- returned as ``(row, 409)``, as ``jsonify(row), 409``, as
a ``Response``, through ``abort()`` and the app's error handler, or by the
app's handler for an exception the view raised -- the body is the package's
bounded error shape (``error``, ``reason``, ``message``), or the tool's own
``error_response=`` model, never a sensitive or secret field.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from flask import Flask, Response, abort, jsonify, make_response
from pydantic import BaseModel, Field, SecretStr

from bailing_flask import Bailing, tool, tool_result
from bailing_flask.testing import HubSimulator

from .helpers import STRONG_SECRET, raw_request
from bailing_flask._state import state_of
from bailing_flask._pipeline.idempotency import idempotency_of

TOKEN = "tok-8c1d2e3f4a5b"
EMAIL = "ann.private@example.com"
HASH = "$argon2id$v=19$m=65536$c2FsdA$aGFzaA"
ROW = {"user_id": 7, "name": "Ann", "email": EMAIL, "api_token": TOKEN, "password_hash": HASH}
LEAKS = (TOKEN, EMAIL, HASH)


class Profile(BaseModel):
    user_id: int
    name: str
    email: str = Field(json_schema_extra={"sensitive": True})
    api_token: SecretStr


class ConflictView(BaseModel):
    error: str
    current_version: int
    api_token: SecretStr | None = None


class ProfileTaken(Exception):
    """The app's own exception, rendered by its own error handler (with the row in it)."""

    def __init__(self, row: dict[str, Any]) -> None:
        super().__init__("taken")
        self.row = row


def create_app() -> tuple[Flask, dict[str, Any]]:
    app = Flask("error_shape_app")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://",
                      PROPAGATE_EXCEPTIONS=False)
    Bailing(app).authorizer(lambda call: True)
    state: dict[str, Any] = {"runs": 0}

    @app.errorhandler(ProfileTaken)
    def taken(exc: ProfileTaken) -> Any:
        return jsonify(error="taken", row=exc.row), 409

    @app.errorhandler(LookupError)
    def recovered(exc: LookupError) -> Any:  # turns an exception into a success, row and all
        return jsonify(ROW), 200

    @app.errorhandler(410)
    def gone(exc: Any) -> Any:
        return jsonify(error="gone", message="This profile was deleted.", row=ROW), 410

    @app.errorhandler(KeyError)
    def crashed(exc: KeyError) -> Any:  # the kind of handler that echoes what it caught
        return jsonify(error="internal", detail=repr(exc), row=ROW), 500

    @app.get("/tuple")
    @tool(scope="p.read", response=Profile)
    def as_tuple() -> Any:
        """The same row, with status 409."""
        return ROW, 409

    @app.get("/jsonify")
    @tool(scope="p.read", response=Profile)
    def as_jsonify() -> Any:
        """jsonify(row), 409, with a header the caller needs."""
        return jsonify(ROW), 409, {"Retry-After": "30"}

    @app.get("/response")
    @tool(scope="p.read", response=Profile)
    def as_response() -> Any:
        """A Response built by hand."""
        return Response(json.dumps(ROW), status=409, mimetype="application/json")

    @app.get("/abort-response")
    @tool(scope="p.read", response=Profile)
    def abort_response() -> Any:
        """abort() with a ready response."""
        abort(make_response(jsonify(ROW), 409))

    @app.get("/abort-handled")
    @tool(scope="p.read", response=Profile)
    def abort_handled() -> Any:
        """abort(410), rendered by the app's errorhandler(410)."""
        abort(410)

    @app.get("/abort-html")
    @tool(scope="p.read", response=Profile)
    def abort_html() -> Any:
        """abort(409, description=...) with Flask's own HTML page."""
        abort(409, description="Ann's profile is being edited; retry in a minute.")

    @app.get("/raised")
    @tool(scope="p.read", response=Profile)
    def raised() -> Any:
        """An exception of the app, rendered by its handler."""
        raise ProfileTaken(ROW)

    @app.get("/crash")
    @tool(scope="p.read", response=Profile)
    def crash() -> Any:
        """A bug: the app's handler answers 500 with what it caught."""
        return {}[TOKEN]

    @app.get("/recovered")
    @tool(scope="p.read", response=Profile)
    def recovered_call() -> Any:
        """An exception the app's handler answers with 200 and the row."""
        raise LookupError("cache miss")

    @app.get("/stream")
    @tool(scope="p.read", response=Profile)
    def stream() -> Any:
        """A streamed error body."""
        return Response((chunk for chunk in (json.dumps(ROW).encode(),)), status=409,
                        mimetype="application/json")

    @app.get("/long")
    @tool(scope="p.read", response=Profile)
    def long_message() -> Any:
        """The view's own error, message and all, too long."""
        return {"error": "conflict_" + "x" * 300, "message": "m" * 5000, "row": ROW}, 409

    @app.post("/profiles")
    @tool(scope="p.write", response=Profile)
    def profile_create() -> Any:
        """A side effect whose conflict answers the existing row."""
        state["runs"] += 1
        return ROW, 409

    @app.post("/refunds")
    @tool(scope="r.write", response=Profile)
    def refund_create() -> Any:
        """A workflow tool refusing by its own rule."""
        return tool_result("rejected", "Refunds above 500 need a manager.", business_id=12,
                           data={"approver_email": EMAIL})

    @app.put("/profiles/7")
    @tool(scope="p.write", response=Profile, error_response=ConflictView)
    def profile_update() -> Any:
        """An error model: the model may learn the current version, nothing else."""
        return {**ROW, "error": "version_conflict", "current_version": 4}, 409

    @app.put("/profiles/8")
    @tool(scope="p.write", response=Profile, error_response=ConflictView)
    def profile_update_mismatch() -> Any:
        """An error body the error model does not fit."""
        return {**ROW, "error": "version_conflict"}, 409

    @app.get("/undeclared")
    @tool(scope="p.read")
    def undeclared() -> Any:
        """No response=: the app's answer is its own."""
        return {"error": "conflict", "hint": "kept"}, 409

    return app, state


@pytest.fixture
def app() -> Flask:
    return create_app()[0]


@pytest.fixture
def hub(app: Flask) -> HubSimulator:
    return HubSimulator(app, STRONG_SECRET)


def assert_no_leak(body: bytes) -> None:
    for secret in LEAKS:
        assert secret.encode() not in body, body


@pytest.mark.parametrize("name", ["as_tuple", "as_jsonify", "as_response", "abort_response",
                                  "stream"])
def test_a_409_carrying_the_row_leaves_as_the_error_shape(hub: HubSimulator, name: str) -> None:
    response = hub.call(name, subject="t1:u1")
    assert response.status == 409
    assert_no_leak(response.body)
    assert response.json() == {"error": "conflict", "reason": "conflict", "message": "Conflict"}
    assert response.headers["Content-Type"].startswith("application/json")


def test_status_and_headers_of_the_error_are_kept(hub: HubSimulator) -> None:
    response = hub.call("as_jsonify", subject="t1:u1")
    assert (response.status, response.headers["Retry-After"]) == (409, "30")


def test_the_apps_error_handlers_cannot_send_the_row_either(hub: HubSimulator) -> None:
    handled = hub.call("abort_handled", subject="t1:u1")
    assert handled.status == 410
    assert handled.json() == {"error": "gone", "reason": "gone", "message": "This profile was deleted."}
    raised = hub.call("raised", subject="t1:u1")
    assert raised.status == 409
    assert raised.json() == {"error": "taken", "reason": "taken", "message": "Conflict"}
    crash = hub.call("crash", subject="t1:u1")
    assert crash.status == 500
    assert crash.json() == {"error": "internal", "reason": "internal",
                            "message": "Internal Server Error"}
    for response in (handled, raised, crash):
        assert_no_leak(response.body)


def test_a_success_an_error_handler_makes_of_an_exception_is_projected(hub: HubSimulator) -> None:
    response = hub.call("recovered_call", subject="t1:u1")
    assert (response.status, response.json()) == (200, {"user_id": 7, "name": "Ann"})


def test_flasks_html_error_page_becomes_json_with_the_description(hub: HubSimulator) -> None:
    response = hub.call("abort_html", subject="t1:u1")
    assert response.status == 409
    assert response.json() == {"error": "conflict", "reason": "conflict",
                               "message": "Ann's profile is being edited; retry in a minute."}


def test_the_error_shape_is_bounded(hub: HubSimulator) -> None:
    response = hub.call("long_message", subject="t1:u1")
    answer = response.json()
    assert set(answer) == {"error", "reason", "message"}
    assert len(answer["error"]) == 100 and answer["error"].endswith("…")
    assert len(answer["message"]) == 1000 and answer["message"].endswith("…")
    assert len(response.text) < 2048
    assert_no_leak(response.body)


def test_a_stored_conflict_is_replayed_as_the_projected_bytes(app: Flask, hub: HubSimulator) -> None:
    request = hub.build_call("profile_create", {}, subject="t1:u1")
    first, again = hub.replay(request), hub.replay(request)
    assert first.status == again.status == 409
    assert again.headers["Idempotent-Replayed"] == "true" and again.body == first.body
    assert_no_leak(first.body)
    stored = idempotency_of(state_of(app)).store().list()
    assert [entry.response.body for entry in stored] == [first.body]  # type: ignore[union-attr]


def test_a_rejected_tool_result_keeps_its_workflow_fields(hub: HubSimulator) -> None:
    response = hub.call("refund_create", {}, subject="t1:u1")
    assert response.status == 422
    assert response.json() == {"error": "unprocessable_entity", "reason": "unprocessable_entity",
                               "message": "Refunds above 500 need a manager.",
                               "ok": False, "status": "rejected"}
    assert_no_leak(response.body)


def test_an_error_model_is_projected_like_the_response(hub: HubSimulator) -> None:
    response = hub.call("profile_update", {}, subject="t1:u1")
    assert response.status == 409
    assert response.json() == {"error": "version_conflict", "current_version": 4}
    assert_no_leak(response.body)


def test_an_error_body_the_error_model_does_not_fit_falls_back_to_the_error_shape(
    hub: HubSimulator, caplog: pytest.LogCaptureFixture,
) -> None:
    response = hub.call("profile_update_mismatch", {}, subject="t1:u1")
    assert response.status == 409
    assert response.json() == {"error": "version_conflict", "reason": "version_conflict",
                               "message": "Conflict"}
    assert_no_leak(response.body)
    logged = [r.getMessage() for r in caplog.records if r.name == "bailing_flask"]
    assert any("error_response=ConflictView" in m and "current_version: missing" in m for m in logged)
    assert not any(secret in m for m in logged for secret in LEAKS)


def test_a_tool_without_response_keeps_its_own_error_body(hub: HubSimulator) -> None:
    response = hub.call("undeclared", subject="t1:u1")
    assert (response.status, response.json()) == (409, {"error": "conflict", "hint": "kept"})


def test_the_package_refusals_are_unchanged(hub: HubSimulator) -> None:
    response = hub.call("as_tuple", {"extra": "x"}, subject="t1:u1")
    assert response.status == 422 and response.json()["reason"] == "unknown_parameter"


def test_a_409_with_the_row_never_reaches_the_hub_from_a_real_server(live_server: Any) -> None:
    app, _ = create_app()
    base = live_server(app)
    hub = HubSimulator(base, STRONG_SECRET)
    for name in ("as_tuple", "raised", "abort_handled"):
        request = hub.build_call(name, subject="t1:u1")
        response = raw_request(base, request.method, request.path_with_query, request.headers)
        assert response.status in (409, 410)
        assert_no_leak(response.body)
        assert set(json.loads(response.body)) == {"error", "reason", "message"}
