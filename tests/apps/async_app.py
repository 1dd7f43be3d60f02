"""An app whose every callback is ``async def`` (Flask's async support, asgiref)."""

from __future__ import annotations

import asyncio
from typing import Any

from flask import Flask, jsonify
from flask.views import MethodView
from pydantic import BaseModel, Field

from bailing_flask import Bailing, ErrorInfo, get_current_call, tool

from ..helpers import STRONG_SECRET

CLIENT_TOKEN = "client-token-0123456789-abcdefghijklmnop"
USERS = {"t1:alice": {"name": "alice", "can": {"note.read", "note.write"}},
         "t1:bob": {"name": "bob", "can": {"note.read"}}}


class NoteBody(BaseModel):
    text: str = Field(description="The note.", max_length=100)


def create_app(**config: Any) -> tuple[Flask, Bailing, dict[str, list[Any]]]:
    app = Flask("async_app")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://",
                      BAILING_CLIENT_TOKENS=[CLIENT_TOKEN], **config)
    bailing = Bailing(app)
    seen: dict[str, list[Any]] = {"notes": [], "jobs": [], "keys": []}

    @bailing.subject_loader
    async def load(subject: str) -> dict[str, Any] | None:
        await asyncio.sleep(0)
        return USERS.get(subject)

    @bailing.authorizer
    async def authorize(call: Any) -> bool:
        await asyncio.sleep(0)
        return call.user is not None and call.tool.scope in call.user["can"]

    @bailing.error_handler
    async def restyle(error: ErrorInfo) -> Any:
        await asyncio.sleep(0)
        if error.reason == "forbidden":
            return jsonify(problem="not yours", reason=error.reason), error.status
        return None

    @bailing.job_finished
    async def finished(job: Any) -> None:
        await asyncio.sleep(0)
        seen["jobs"].append(job.job_id)

    @app.get("/api/whoami")
    @tool(scope="note.read")
    async def whoami() -> Any:
        """Who the acting user is."""
        await asyncio.sleep(0)
        call = get_current_call()
        assert call is not None
        return jsonify(name=call.user["name"])

    async def note_key(call: Any) -> str:
        await asyncio.sleep(0)
        seen["keys"].append(call.subject)
        return f"{call.subject}:{call.body.text}"

    @app.post("/api/notes")
    @tool(scope="note.write", body=NoteBody, idempotency_key=note_key)
    async def note_create() -> Any:
        """Write a note."""
        await asyncio.sleep(0)
        call = get_current_call()
        assert call is not None
        seen["notes"].append(call.body_as(NoteBody).text)
        return jsonify(created=len(seen["notes"])), 201

    @tool(scope="note.read")
    class NoteAPI(MethodView):
        async def get(self, note_id: int) -> Any:
            """Read one note."""
            await asyncio.sleep(0)
            return jsonify(note_id=note_id)

    app.add_url_rule("/api/notes/<int:note_id>", view_func=NoteAPI.as_view("note"))
    return app, bailing, seen
