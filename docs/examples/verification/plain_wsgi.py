"""The verification page's code (docs/concepts/verification.rst): a restyled refusal, and no Flask at all."""

import json
import os

from flask import Flask

from bailing_flask import Bailing, tool

app = Flask(__name__)
app.config.update(BAILING_SECRETS=[os.environ["BAILING_SECRET"]])
bailing = Bailing(app)
bailing.authorizer(lambda call: call.subject is not None)


@app.get("/api/ping")
@tool(scope="ping.read")
def ping():
    """Answer pong."""
    return {"pong": True}


# [start:restyle]
@bailing.error_handler
def restyle(error):                      # ErrorInfo: status, reason, message, details
    return {"code": 0, "msg": error.reason}, error.status
# [end:restyle]


def legacy_app(environ, start_response):
    # [start:inside]
    call = environ.get("bailing.call")           # None when unsigned
    if call is not None:
        subject, job_id = call.subject, call.job_id   # signed: trust them
        scope_header = call.unsigned.tool_scope        # unsigned: informational only
    # [end:inside]
    else:
        subject = job_id = scope_header = None
    start_response("200 OK", [("Content-Type", "application/json")])
    return [json.dumps({"subject": subject, "job_id": job_id, "scope_header": scope_header}).encode()]


# [start:middleware]
import os
from bailing_flask.wire import BailingMiddleware

application = BailingMiddleware(
    legacy_app,                              # any WSGI callable
    [os.environ["BAILING_SECRET"]],
    require_signature=["/agent-api"],        # unsigned requests there: 401
    catalog_path="/.well-known/bailing/tools.json",   # verified with the full public path
)
# [end:middleware]
