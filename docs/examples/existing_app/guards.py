"""The guards a legacy app already has, each stepping aside for hub calls with one line."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify, request
from flask_login import current_user

import bailing_flask


# [start:guard]
def require_session() -> Any:
    """The app's global "session required" guard (app.before_request)."""
    if bailing_flask.is_hub_request():
        return None                    # signed hub call to a tool: the gate decides next
    if request.path.startswith("/api/") and not current_user.is_authenticated:
        return jsonify(error="session required"), 401
    return None
# [end:guard]


# [start:blueprint-guard]
admin = Blueprint("admin", __name__, url_prefix="/api/v1/admin")


@admin.before_request
def staff_only() -> Any:
    if bailing_flask.is_tool_call():
        return None                    # not yet authorized: the gate and the authorizer decide
    if not (current_user.is_authenticated and current_user.login == "root"):
        return jsonify(error="staff only"), 403
    return None
# [end:blueprint-guard]
