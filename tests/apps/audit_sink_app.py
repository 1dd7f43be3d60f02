"""An app whose audit records go to a ``JsonLinesSink`` file, for the sink's real-server tests.

The file is ``$AUDIT_SINK_FILE`` (set as ``BAILING_AUDIT_SINK``, a path).
While it loads, the app makes one call itself (job ``loaded-<pid>``), so the
process that loads it has queued a record before a pre-forking server forks
its workers: the file must hold that line once, never once per worker.
``AUDIT_SINK_LOAD_CALL=0`` leaves that call out (uWSGI forks its workers in
C without taking the GIL from other threads, so a Python thread running in
its master, such as the sink's, can leave a new worker waiting for the GIL
forever). ``POST /notes`` answers the pid of the worker that served it.
"""

from __future__ import annotations

import os
from typing import Any

from flask import Flask, jsonify
from pydantic import BaseModel

from bailing_flask import Bailing, tool
from bailing_flask.testing import HubSimulator

from tests.helpers import STRONG_SECRET


class Note(BaseModel):
    text: str
    tags: list[str] = []


def create_app() -> Flask:
    app = Flask("audit_sink_app")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://",
                      BAILING_AUDIT_SINK=os.environ["AUDIT_SINK_FILE"],
                      BAILING_AUDIT_ARGUMENT_VALUES=True)
    bailing = Bailing(app)
    bailing.authorizer(lambda call: call.subject == "t1:u1")

    @app.post("/notes")
    @tool(scope="note.write", body=Note)
    def note() -> Any:
        """Write a note."""
        return jsonify(pid=os.getpid())

    if os.environ.get("AUDIT_SINK_LOAD_CALL") != "0":
        loaded = HubSimulator(app, STRONG_SECRET).call("note", {"text": "loaded"}, subject="t1:u1",
                                                       job_id=f"loaded-{os.getpid()}")
        assert loaded.status == 200, loaded.body
    return app


#: uWSGI's ``--module`` entry point
application = create_app() if os.environ.get("AUDIT_SINK_FILE") else None
