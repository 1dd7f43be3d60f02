"""docs/operating.rst: an app with OpenTelemetry, with the providers the caller chooses."""

import os
from typing import Any

from flask import Flask

from bailing_flask import Bailing, tool


def create_app(tracer_provider: Any, meter_provider: Any) -> Flask:
    app = Flask(__name__)
    app.config["BAILING_SECRETS"] = [os.environ["BAILING_SECRET"]]
    # [start:otel]
    from bailing_flask.otel import instrument

    bailing = Bailing(app)
    instrument(app, tracer_provider=tracer_provider, meter_provider=meter_provider)
    # [end:otel]
    bailing.authorizer(lambda call: True)

    @app.get("/api/ping")
    @tool(scope="ping")
    def ping() -> dict[str, bool]:
        """Answer that the shop is up."""
        return {"ok": True}

    return app
