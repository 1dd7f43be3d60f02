"""A fresh idempotency store for docs/concepts/idempotency.rst, with two calls whose outcome nobody knows.

The page's commands then run against it: ``bailing call`` twice with the
same job, ``idempotency list`` and ``resolve``.
"""

import logging
import os

from bailing_flask.testing import HubSimulator
from shop import app

logging.disable(logging.ERROR)  # the failed call's traceback: not what this page shows
store = os.path.join(app.instance_path, "bailing.sqlite3")  # the default BAILING_STORE
for path in (store, store + "-wal", store + "-shm"):
    if os.path.exists(path):
        os.remove(path)  # a fresh store, so the page shows its own calls only
hub = HubSimulator(app, os.environ["BAILING_SECRET"])
for order_id, amount, job_id in ((1002, 1500, "5d1c0a4e-1111-4c55-9a57-2d4f8b9e1c03"),
                                  (1003, 2500, "7b2e9f10-2222-4c55-9a57-2d4f8b9e1c03")):
    failed = hub.call("refund_create", {"order_id": order_id, "amount": amount}, subject="t1:alice",
                      job_id=job_id)
    print(f"refund_create of {amount} for order {order_id} answered {failed.status}: paid or not?")
