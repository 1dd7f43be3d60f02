"""WSGI apps started in subprocesses (gunicorn) by the live-server tests."""

from __future__ import annotations

import json
import os
from typing import Any

from bailing_flask.wire import BailingMiddleware
from bailing_flask.wire.middleware import ENVIRON_KEY


def _echo(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else b""
    call = environ.get(ENVIRON_KEY)
    payload = {
        "signed_path": call.signed_path if call else None,
        "subject": call.subject if call else None,
        "length": len(body),
    }
    start_response("200 OK", [("Content-Type", "application/json")])
    return [json.dumps(payload).encode()]


def middleware_app() -> BailingMiddleware:
    """The bare echo app behind the middleware, secret from the environment.

    ``BAILING_TEST_MAX_BODY`` sets the largest accepted body (default 10 MiB),
    ``BAILING_TEST_BODY_TIMEOUT`` the body read deadline (default 10 s).
    """
    options: dict[str, Any] = {}
    if os.environ.get("BAILING_TEST_MAX_BODY"):
        options["max_body_size"] = int(os.environ["BAILING_TEST_MAX_BODY"])
    if os.environ.get("BAILING_TEST_BODY_TIMEOUT"):
        options["body_timeout"] = float(os.environ["BAILING_TEST_BODY_TIMEOUT"])
    return BailingMiddleware(_echo, os.environ["BAILING_TEST_SECRET"], **options)


def callback_app() -> Any:
    """A Flask app receiving hub callbacks, which reports its own peak memory."""
    from flask import Flask, jsonify

    from bailing_flask import Bailing

    app = Flask("callback_app")
    app.config.update(BAILING_SECRETS=os.environ["BAILING_TEST_SECRET"],
                      BAILING_CLIENT_TOKENS=[os.environ["BAILING_TEST_CLIENT_TOKEN"]],
                      BAILING_STORE="memory://")
    bailing = Bailing(app)
    bailing.job_finished(lambda job: None)

    @app.get("/peak-rss")
    def peak_rss() -> Any:
        with open("/proc/self/status") as status:
            fields = dict(line.split(":", 1) for line in status if ":" in line)
        return jsonify(kib=int(fields["VmHWM"].split()[0]))

    return app
