"""A support desk that serves HTTPS only: Flask-Talisman, Flask-CORS, Flask-Limiter, a blueprint.

``create_app(base_url=..., exempt=..., proxy_fix=...)`` builds it the way
such an app is deployed:

* TLS ends at a proxy in front, which says so in ``X-Forwarded-Proto``
  (``proxy_fix=True`` adds Werkzeug's ``ProxyFix``); the hub calls the
  public ``https`` URL (``base_url="https://desk.example.com"``);
* or the hub reaches the app inside the network over plain ``http``
  (``base_url="http://desk-api.internal:8000"``), and Talisman's redirect
  steps aside for the hub's verified requests (``exempt=True``).

``PAGE_HITS`` counts what the app's human page served, so a test can see
that a request never reached it.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Flask, jsonify, request
from flask_cors import CORS
from flask_limiter import Limiter
from flask_talisman import Talisman
from werkzeug.middleware.proxy_fix import ProxyFix

import bailing_flask
from bailing_flask import Bailing, Param, current_call, tool
from bailing_flask.integrations import exempt_hub_requests

from ..helpers import STRONG_SECRET
from .doctor_apps import ForwardingProxy

USERS = {"t1:alice": {"ticket.read", "ticket.write"}, "t1:bob": {"ticket.read"}}
#: requests the human page answered
PAGE_HITS: list[str] = []
#: tickets the close tool closed
CLOSED: list[int] = []


class TLSProxy(ForwardingProxy):
    """The proxy in front: forwards to the app over http, adding ``X-Forwarded-Proto``.

    Served with TLS it is nginx's ``ssl_certificate`` + ``proxy_set_header
    X-Forwarded-Proto $scheme``; served without, it is that proxy's plain-http side.
    """

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        environ = {**environ, "HTTP_X_FORWARDED_PROTO": environ["wsgi.url_scheme"]}
        return super().__call__(environ, start_response)


def create_app(*, base_url: str | None = None, exempt: bool = False, proxy_fix: bool = False,
               **config: Any) -> Flask:
    app = Flask("desk_app")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://",
                      RATELIMIT_STORAGE_URI="memory://", BAILING_BASE_URL=base_url, **config)
    talisman = Talisman(app, force_https=True, content_security_policy=None)
    CORS(app, resources={r"/api/*": {"origins": "https://desk.example.com"}})
    Limiter(key_func=bailing_flask.rate_limit_key, app=app, default_limits=["1000/minute"])
    bailing = Bailing(app)

    @bailing.subject_loader
    def load(subject: str) -> set[str] | None:
        return USERS.get(subject)

    @bailing.authorizer
    def authorize(call: Any) -> bool:
        return call.user is not None and call.tool.scope in call.user

    api = Blueprint("api", __name__, url_prefix="/api/v1")

    @api.get("/tickets")
    @tool(scope="ticket.read", params=[
        Param("department", description="Only the tickets of this department (billing, support)."),
        Param("status", description="open or closed."),
    ])
    def ticket_search() -> Any:
        """Search the desk's tickets."""
        return jsonify(tickets=[], department=request.args.get("department"),
                       secure=request.is_secure, subject=current_call.subject)

    @api.post("/tickets/<int:ticket_id>/close")
    @tool(scope="ticket.write", params=[Param("ticket_id", location="path", description="The ticket.")])
    def ticket_close(ticket_id: int) -> Any:
        """Close a ticket."""
        CLOSED.append(ticket_id)
        return jsonify(closed=ticket_id)

    @api.get("/dashboard")
    def dashboard() -> Any:
        PAGE_HITS.append(request.url)
        return jsonify(open_tickets=12)

    app.register_blueprint(api)
    if exempt:
        exempt_hub_requests(app, talisman._force_https)
    if proxy_fix:
        app.wsgi_app = ProxyFix(app.wsgi_app, x_proto=1)  # type: ignore[method-assign]
    return app
