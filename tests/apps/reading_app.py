"""Tools whose values carry dots and sha256 digests, served by real servers in tests/test_one_reading.py.

``create_app()`` reads the provider secret from ``BAILING_TEST_SECRET`` (so
gunicorn can import it); ``GET /ran`` (not a tool, unsigned) lists the
bodies every side effect ran with, so a test can tell that a refused
forgery ran nothing, in this process.
"""

from __future__ import annotations

import os
from typing import Any

from flask import Flask, jsonify, request

from bailing_flask import Bailing, Param, tool


def create_app(secret: str | None = None) -> Flask:
    app = Flask("reading_app")
    app.config.update(BAILING_SECRETS=[secret or os.environ["BAILING_TEST_SECRET"]],
                      BAILING_STORE="memory://")
    bailing = Bailing(app)
    bailing.authorizer(lambda call: True)
    ran: list[dict[str, Any]] = []

    @app.get("/files/<name>")
    @tool(scope="file.read")
    def file_get(name: str) -> Any:
        """A content-addressed file: ``backup.<sha256>.tar.gz``, ``report.<sha256>``."""
        return jsonify(name=name)

    @app.post("/feedback")
    @tool(scope="feedback.write", params=[Param("tag")])
    def feedback_create() -> Any:
        """Feedback tagged with a build digest: ``build.<sha256>``, ``sha256.<hex>.sig``."""
        ran.append({"tool": "feedback", "tag": request.args.get("tag"),
                    "body": request.get_data(as_text=True)})
        return jsonify(tag=request.args.get("tag")), 201

    @app.post("/orders")
    @tool(scope="order.write", params=[Param("tag")])
    def order_create() -> Any:
        """A side effect whose query value the model fills."""
        ran.append({"tool": "orders", "tag": request.args.get("tag"),
                    "body": request.get_data(as_text=True)})
        return jsonify(ok=True), 201

    @app.get("/search")
    @tool(scope="order.read", params=[Param("q")])
    def order_search() -> Any:
        """A read whose query value the model fills."""
        return jsonify(q=request.args.get("q"))

    @app.get("/ran")
    def ran_list() -> Any:
        return jsonify(ran)

    return app
