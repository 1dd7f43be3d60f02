"""A WSGI app that reports what a pre-forked worker inherited, for fork tests.

``GET /`` answers ``<pid> <reservation token>`` from the idempotency layer's
token source: workers forked from one loaded app must never hand out the
same tokens, whether or not the server tells Python about the fork.
"""

from __future__ import annotations

import os

from bailing_flask._pipeline.idempotency import _TOKENS

# drawn once in the process that loads the app (uWSGI's master, before it forks)
_TOKENS.next()


def application(environ, start_response):  # type: ignore[no-untyped-def]
    body = f"{os.getpid()} {_TOKENS.next()}".encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
