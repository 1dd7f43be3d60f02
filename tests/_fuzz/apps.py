"""The apps the fuzz targets attack: a Flask app with tools and hub callbacks, and a bare middleware.

Every tool view answers with what it ran on (method, routed path, query, the
sha256 of the body it read, the signed subject and job; in the body and, as
ASCII JSON, in the ``X-Fuzz-Ran`` header), so an
oracle outside the process (a socket client, a gunicorn worker) can tell
whether what ran is what was signed. The authorizer admits every subject:
nothing stands between a valid signature and the view except the package,
so a false accept cannot hide behind a refusal of the app's own.

``socket_app()`` is the same app for gunicorn (``tests._fuzz.apps:socket_app()``),
configured from the environment.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from flask import Flask, Response, jsonify, request
from pydantic import BaseModel, ConfigDict, Field

from bailing_flask import Bailing, current_call, tool
from bailing_flask.wire import BailingMiddleware
from bailing_flask.wire.middleware import ENVIRON_KEY

from . import CLIENT_TOKEN, SECRET

__all__ = ["TOOL_PATHS", "tool_app", "socket_app", "echo_middleware", "APP_MARK"]

#: Set on every response the app produced, middleware refusals included (not the server's own).
APP_MARK = "X-Fuzz-App"
#: Method and path template of each tool (a ``{n}`` is an integer path parameter).
TOOL_PATHS = (
    ("GET", "/items/{n}"),
    ("GET", "/search"),
    ("POST", "/notes"),
    ("PUT", "/items/{n}/label"),
    ("DELETE", "/items/{n}"),
)
#: Body limits of the fuzzed apps: small, so the fuzzer reaches them.
MAX_BODY = 256 * 1024
SPOOL = 32 * 1024


class SearchQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    q: str | None = Field(None, max_length=200, description="Words to look for.")
    limit: int | None = Field(None, ge=1, le=100, description="How many results at most.")


class NoteBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=1000, description="The note.")
    tags: list[str] = Field(default_factory=list, max_length=10, description="Labels.")
    amount: float | None = Field(None, ge=0, le=1_000_000, description="An amount.")


class LabelBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    label: str = Field(min_length=1, max_length=50, description="The new label.")


def _ran(tool_name: str) -> Response:
    """What the view ran on; read from the request as the view sees it."""
    call = current_call
    body = request.get_data()
    ran = {
        "ran": tool_name,
        "method": request.method,
        "path_info": request.environ.get("PATH_INFO", ""),
        "query": request.environ.get("QUERY_STRING", ""),
        "body_sha256": hashlib.sha256(body).hexdigest(),
        "subject": call.subject,
        "job": call.job_id,
    }
    response = jsonify(ran)
    # also in a header (ASCII JSON): a HEAD answer has no body
    response.headers["X-Fuzz-Ran"] = json.dumps(ran)
    return response


def tool_app(**config: Any) -> Flask:
    """The fuzzed Flask app; ``config`` overrides settings (e.g. ``BAILING_STORE``)."""
    app = Flask("fuzz_tools")
    app.config.update(
        BAILING_SECRETS=[SECRET],
        BAILING_CLIENT_TOKENS=[CLIENT_TOKEN],
        BAILING_STORE="memory://",
        BAILING_MAX_BODY_SIZE=MAX_BODY,
        BAILING_SPOOL_THRESHOLD=SPOOL,
        BAILING_CALLBACK_MAX_BODY_SIZE=MAX_BODY,
        BAILING_CALLBACK_PATH="/hub/job",
        BAILING_DELIVERY_PATH="/hub/delivery",
        BAILING_APPROVAL_PATH="/hub/approval",
    )
    app.config.update(config)
    bailing = Bailing(app)
    bailing.subject_loader(lambda subject: {"subject": subject})
    bailing.authorizer(lambda call: True)
    received: list[tuple[str, Any]] = []
    app.config["FUZZ_RECEIVED"] = received
    bailing.job_finished(lambda job: received.append(("job", job)))
    bailing.delivery(lambda delivery: received.append(("delivery", delivery)))
    bailing.approval_request(lambda approval: received.append(("approval", approval)))

    @app.get("/items/<int:item_id>")
    @tool(scope="item.read")
    def item_get(item_id: int) -> Response:
        """Read one item."""
        return _ran("item_get")

    @app.get("/search")
    @tool(scope="item.read", query=SearchQuery)
    def item_search() -> Response:
        """Search the items."""
        return _ran("item_search")

    @app.post("/notes")
    @tool(scope="note.write", body=NoteBody, risk="medium")
    def note_create() -> Response:
        """Write a note (a side effect, de-duplicated)."""
        return _ran("note_create")

    @app.put("/items/<int:item_id>/label")
    @tool(scope="item.write", body=LabelBody, repeats="safe")
    def item_label(item_id: int) -> Response:
        """Relabel an item."""
        return _ran("item_label")

    @app.delete("/items/<int:item_id>")
    @tool(scope="item.write", risk="medium", subject_required=True)
    def item_delete(item_id: int) -> Response:
        """Delete an item."""
        return _ran("item_delete")

    @app.get("/plain")
    def plain() -> str:
        return "not a tool"

    app.wsgi_app = _Marked(app.wsgi_app)  # type: ignore[method-assign]
    return app


class _Marked:
    """Outermost: mark every response the app (middleware included) produced.

    It changes nothing in the environ, so the verifier still sees the request
    exactly as the server handed it over.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        def marked(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            return start_response(status, [*headers, (APP_MARK, "1")], exc_info)

        return self.app(environ, marked)


def quiet_worker() -> None:
    """Silence the logging of a fuzzed server process.

    Every refusal is logged, and the fuzzer provokes thousands; the test
    helper that starts gunicorn never reads the worker's output pipe, so once
    it is full the worker would block on its next log line.
    """
    import logging

    logging.getLogger().setLevel(logging.CRITICAL + 1)
    for name in ("bailing_flask", "example_app", "fuzz_tools", "gunicorn.error"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


def socket_app() -> Flask:
    """The fuzzed app for a gunicorn worker (same secret and client token), logging off."""
    quiet_worker()
    app = tool_app(BAILING_STORE=os.environ.get("FUZZ_STORE", "memory://"))
    app.logger.setLevel(100)
    return app


def _echo(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """Behind the bare middleware: read the body as a WSGI app does, report what ran."""
    length = environ.get("CONTENT_LENGTH") or ""
    try:
        body = environ["wsgi.input"].read(min(int(length), MAX_BODY)) if length.isdigit() else b""
    except OSError:  # an unsigned request passed through with a failing stream: the app's problem
        body = b""
    call = environ.get(ENVIRON_KEY)
    payload = (
        "ran" if call is not None and call.kind == "tool" else "passed"
    )
    environ["fuzz.echo"] = (body, call)
    start_response("200 OK", [("Content-Type", "text/plain"), ("X-Fuzz-Ran", payload)])
    return [payload.encode()]


def echo_middleware(**options: Any) -> BailingMiddleware:
    """The middleware alone in front of an echo app (no Flask)."""
    return BailingMiddleware(
        _echo, SECRET, max_body_size=MAX_BODY, spool_threshold=SPOOL,
        require_signature=("/secure",), verified_elsewhere=("/hub/job",),
        elsewhere_max_body_size=MAX_BODY, **options,
    )
