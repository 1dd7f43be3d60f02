"""The two hub-facing endpoints: the signed catalog and the authz probe.

Both answer exactly what the hub's classifiers expect: the catalog is 200 only for a correctly signed fetch and 401 (never a
redirect, never 200) otherwise; the probe answers ``{"authorized": bool}``
computed by the app's own authorizers, never a bare ``{"ok": true}``.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from flask import Blueprint, Response, request

from bailing_flask._pipeline.authz import probe_authorized
from bailing_flask._pipeline.gate import EXERCISE_KEY, ExerciseProbe
from bailing_flask.responses import REASON_HEADER, ErrorInfo, json_response
from bailing_flask.wire.middleware import ENVIRON_KEY, VerifiedCall
from bailing_flask._pipeline.registry import registry_of
from bailing_flask._pipeline.catalog import catalog_of

if TYPE_CHECKING:  # pragma: no cover
    from bailing_flask._state import BailingState

__all__ = ["make_blueprint"]

logger = logging.getLogger("bailing_flask")

_ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]


def method_not_allowed(state: BailingState, allowed: str) -> Response:
    """``405 method_not_allowed`` of one of the package's own endpoints, with ``Allow``."""
    response = state.error_response(ErrorInfo.make("method_not_allowed", status=405))
    response.headers["Allow"] = allowed
    return response


def _reached() -> None:
    """Tell an in-process exercise that the package's own endpoint answered."""
    probe = request.environ.get(EXERCISE_KEY)
    if isinstance(probe, ExerciseProbe):
        probe.reached_view = True


def make_blueprint(state: BailingState) -> Blueprint:
    """Build the ``bailing`` blueprint with the configured paths."""
    blueprint = Blueprint("bailing", __name__)
    public_catalog = state.config.public_catalog

    # exact path only: the middleware verifies the catalog by its exact path
    @blueprint.route(state.config.catalog_path, methods=_ALL_METHODS)
    def catalog() -> Response:
        if request.method not in ("GET", "HEAD"):
            return method_not_allowed(state, "GET")
        _reached()
        verified: VerifiedCall | None = request.environ.get(ENVIRON_KEY)
        if (verified is None or verified.kind != "catalog") and not public_catalog:
            return state.error_response(ErrorInfo.make("missing_signature"))
        try:
            body = catalog_of(state).served_bytes
        except Exception:
            logger.exception("bailing: the tool catalog could not be built")
            return json_response({"error": "catalog_unavailable", "reason": "catalog_unavailable"}, 503,
                                 {"Cache-Control": "no-store"})
        response = Response(body, status=200)
        response.headers["Content-Type"] = "application/json; charset=utf-8"
        # a signed fetch must never be cached and replayed to anyone else
        response.headers["Cache-Control"] = "private, no-store"
        return response

    @blueprint.route(state.config.probe_path, methods=_ALL_METHODS)
    def authz_probe() -> Response:
        if request.method not in ("GET", "POST"):
            return method_not_allowed(state, "GET, POST")
        _reached()
        verified: VerifiedCall | None = request.environ.get(ENVIRON_KEY)
        if verified is None or verified.kind != "tool":
            info = ErrorInfo.make("missing_signature")
            response = state.error_response(info)
            if state.callbacks.error_handler_func is None:
                response = json_response({"authorized": False, **info.payload()}, 401,
                                         {REASON_HEADER: info.reason})
            return response
        subject = _probe_subject(verified)
        try:
            authorized = probe_authorized(
                registry_of(state), verified, subject,
                state.callbacks.subject_loader_func, state.callbacks.authorizer_func,
            )
        except Exception:
            logger.exception("bailing: the authorization probe failed; answering not authorized")
            authorized = False
        logger.info("bailing: authz probe for subject %r: authorized=%s", subject, authorized)
        return json_response({"authorized": authorized}, 200, {"Cache-Control": "no-store"})

    return blueprint


def _probe_subject(verified: VerifiedCall) -> str | None:
    """The body's ``subject`` if it is a string, else the signed header, as the hub's probe sends it."""
    raw = request.get_data(cache=True)
    if raw:
        try:
            data: Any = json.loads(raw)
        except ValueError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("subject"), str):
            return data["subject"] or None
    return verified.subject
