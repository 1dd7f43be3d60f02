"""HTTPS only: Flask-Talisman, with TLS ending at the proxy in front of the app."""

from __future__ import annotations

from flask import Flask
from flask_talisman import Talisman
from werkzeug.middleware.proxy_fix import ProxyFix

from bailing_flask.integrations import exempt_hub_requests


# [start:talisman]
def https_only(app: Flask) -> None:
    """Redirect plain http to https; called first in the factory, so it runs before the guards."""
    talisman = Talisman(app, force_https=app.config["FORCE_HTTPS"], content_security_policy=None)
    # TLS ends at the proxy in front of the app, which says so in X-Forwarded-Proto
    app.wsgi_app = ProxyFix(app.wsgi_app, x_proto=1)
    # [end:talisman]
    # [start:internal-hop]
    if (app.config["BAILING_BASE_URL"] or "").startswith("http://"):
        # the hub calls from inside the network over plain http: its verified
        # requests are not redirected, every other request still is
        exempt_hub_requests(app, talisman._force_https)
    # [end:internal-hop]
