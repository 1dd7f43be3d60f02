"""docs/operating.rst: audit records written as JSON lines by the direct sink, off the request path.

Run it (``python audit_sink.py``, with ``BAILING_SECRET`` set): it builds an
app whose sink writes to a temporary file, makes one call as the hub would,
and prints the file and what the sink counted.
"""

import os
import tempfile

from flask import Flask

from bailing_flask import Bailing, tool
from bailing_flask.testing import HubSimulator


def create_app(audit_file: str) -> Flask:
    app = Flask(__name__)
    app.config["BAILING_SECRETS"] = [os.environ["BAILING_SECRET"]]
    # [start:sink]
    from bailing_flask.audit import JsonLinesSink

    # a path alone works too: app.config["BAILING_AUDIT_SINK"] = "/var/log/shop/bailing-audit.jsonl"
    app.config["BAILING_AUDIT_SINK"] = JsonLinesSink(audit_file, max_queued=10_000, report_every=60)
    bailing = Bailing(app)
    # [end:sink]
    bailing.authorizer(lambda call: True)

    @app.get("/api/ping")
    @tool(scope="ping")
    def ping() -> dict[str, bool]:
        """Answer that the shop is up."""
        return {"ok": True}

    return app


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "bailing-audit.jsonl")
        app = create_app(path)
        hub = HubSimulator(app, os.environ["BAILING_SECRET"])
        assert hub.call("ping", subject="t1:alice", job_id="job-7f3a").status == 200
        sink = app.config["BAILING_AUDIT_SINK"]
        sink.close()  # at interpreter exit this happens by itself
        with open(path, encoding="utf-8") as lines:
            print(lines.read(), end="")
        print(f"written {sink.written}, dropped {sink.dropped}, queued {sink.queued}")
