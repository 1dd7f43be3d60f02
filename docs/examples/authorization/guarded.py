"""The authorization page's code (docs/concepts/authorization.rst), in an app the suite calls."""

import functools
import os
from typing import Any

from flask import Flask, jsonify, redirect, session, url_for

from bailing_flask import Bailing, current_call, tool

app = Flask(__name__)
app.config.update(SECRET_KEY="docs-example-session-key", BAILING_SECRETS=[os.environ["BAILING_SECRET"]])
bailing = Bailing(app)
USERS = {"t1:alice": {"name": "alice"}}
bailing.subject_loader(USERS.get)
bailing.authorizer(lambda call: call.user is not None and call.args.get("order_id") != 666)


class AuditRow:
    """Stands for the app's own audit table."""

    rows: list[dict[str, Any]] = []

    @classmethod
    def create(cls, **fields: Any) -> None:
        cls.rows.append(fields)


# [start:login_required]
from bailing_flask import get_current_call

def login_required(view):
    @functools.wraps(view)
    def check(*args, **kwargs):
        call = get_current_call()            # None when the hub did not sign
        if session.get("user_id") or (call is not None and call.authorized):
            return view(*args, **kwargs)
        return redirect(url_for("login"))
    return check
# [end:login_required]


@app.get("/login")
def login() -> str:
    return "the login form"


@app.get("/api/orders/<int:order_id>")
@tool(scope="order.read", subject_required=True)
@login_required
def order_get(order_id: int) -> Any:
    """Read one order."""
    return jsonify(order_id=order_id)


# [start:per_tool]
@app.get("/api/me")
@tool(scope="profile.read", authorizer=lambda call: call.user is not None)
def whoami():
    """Who is the acting user."""
    return jsonify(subject=current_call.subject)
# [end:per_tool]


# [start:signals]
from bailing_flask.signals import tool_called, tool_denied

@tool_called.connect_via(app)
def record_call(app, call, response, duration_ms):
    AuditRow.create(job_id=call.job_id, subject=call.subject, tool=call.tool.name,
                    status=response.status_code, key=call.verified.key_label)

@tool_denied.connect_via(app)
def record_denial(app, tool, call, reason, status):
    AuditRow.create(job_id=call.job_id if call else None, tool=tool.name,
                    status=status, reason=reason)
# [end:signals]
