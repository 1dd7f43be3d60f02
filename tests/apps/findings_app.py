"""An app whose catalog has warnings, with a log line that names the process (for the gunicorn test)."""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask

from bailing_flask import Bailing, Param, tool

from ..helpers import STRONG_SECRET


def create_app() -> Flask:
    logging.basicConfig(format="pid=%(process)d %(name)s %(message)s", level=logging.WARNING)
    app = Flask("findings_app")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    Bailing(app).authorizer(lambda call: True)

    @app.get("/tickets")
    @tool(scope="ticket.read", params=[
        Param("tags", type={"type": "array", "items": {"type": "string"}}, description="Tags, any of."),
    ])
    def ticket_search() -> Any:
        """Search tickets by tag."""
        return {"tickets": []}

    return app


app = create_app()
