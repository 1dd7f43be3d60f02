"""A small app for the settings tests: a read tool, a write tool, an ordinary route, a job handler."""

from __future__ import annotations

from typing import Any

from flask import Flask, jsonify
from pydantic import BaseModel

from bailing_flask import Bailing, get_arguments, tool

from ..helpers import STRONG_SECRET

CLIENT_TOKEN = "client-token-settings-0123456789abcdefghij"


class NoteBody(BaseModel):
    text: str


def create_app(options: dict[str, Any] | None = None, **config: Any) -> tuple[Flask, Bailing]:
    """The app with ``config`` in ``app.config`` and ``options`` given to ``Bailing(...)``."""
    app = Flask("settings_app")
    app.config.update({"BAILING_SECRETS": [STRONG_SECRET], "BAILING_CLIENT_TOKENS": CLIENT_TOKEN,
                       "BAILING_STORE": "memory://", **config})
    bailing = Bailing(**(options or {}))
    bailing.authorizer(lambda call: call.subject == "t1:alice")
    bailing.subject_loader(lambda subject: {"id": subject})
    runs: list[str] = []
    jobs: list[str] = []
    app.extensions["runs"], app.extensions["jobs"] = runs, jobs

    @app.get("/orders")
    @tool(scope="orders.read", description="List the orders.")
    def orders() -> Any:
        return {"orders": [1, 2]}

    @app.post("/notes")
    @tool(scope="notes.write", description="Write a note.", body=NoteBody)
    def notes_post() -> Any:
        text = get_arguments().body_as(NoteBody).text
        runs.append(text)
        return jsonify(saved=text), 201

    @app.get("/")
    def home() -> Any:
        return "home"

    @app.get("/admin/panel")
    def admin() -> Any:
        return "admin"

    @bailing.job_finished
    def job_finished(job: Any) -> None:
        jobs.append(job.job_id)

    bailing.init_app(app)
    return app, bailing
