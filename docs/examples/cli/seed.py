"""Two refunds through the hub's door, for ``idempotency list`` (docs/cli.rst): one done, one uncertain."""

import logging
import os

from bailing_flask.testing import HubSimulator
from shop import app

logging.disable(logging.ERROR)  # the failed call's traceback: not what this page shows
store = os.path.join(app.instance_path, "bailing.sqlite3")  # the default BAILING_STORE
if os.path.exists(store):
    os.remove(store)  # a fresh store, so the page shows these two calls only
hub = HubSimulator(app, os.environ["BAILING_SECRET"])
done = hub.call("refund_create", {"order_id": 1001, "amount": 20}, subject="t1:alice",
                job_id="0f8e3c2a-6b1d-4c55-9a57-2d4f8b9e1c03")
failed = hub.call("refund_create", {"order_id": 1002, "amount": 1500}, subject="t1:alice",
                  job_id="5d1c0a4e-1111-4c55-9a57-2d4f8b9e1c03")
print(f"refund_create answered {done.status}, then {failed.status}")
