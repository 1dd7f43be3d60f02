"""docs/operating.rst: the audit records of the quickstart's shop, routed to a log, and a receiver.

Run it (``python audit_record.py``, with ``BAILING_SECRET`` set): it makes one
call as the hub would and prints the audit record that call left.
"""

import os
import sqlite3
import sys

from bailing_flask.testing import HubSimulator
from shop import app

# [start:logging]
import logging

handler = logging.StreamHandler(sys.stdout)   # or logging.FileHandler("/var/log/shop/bailing-audit.jsonl")
handler.setFormatter(logging.Formatter("%(message)s"))   # the message is the JSON
audit = logging.getLogger("bailing_flask.audit")
audit.addHandler(handler)
audit.setLevel(logging.INFO)
audit.propagate = False
# [end:logging]

db = sqlite3.connect(":memory:")
db.execute("CREATE TABLE agent_activity (at TEXT, subject TEXT, tool TEXT, status INTEGER, reason TEXT)")

# [start:receiver]
from bailing_flask.signals import audit_record

@audit_record.connect_via(app)
def keep(app, record):
    db.execute("INSERT INTO agent_activity (at, subject, tool, status, reason) "
               "VALUES (?, ?, ?, ?, ?)", (record["time"], record["subject"], record["tool"],
                                          record["status"], record["reason"]))
# [end:receiver]

hub = HubSimulator(app, os.environ["BAILING_SECRET"])
assert hub.call("order_get", {"order_id": 1001}, subject="t1:alice").status == 200
assert db.execute("SELECT tool, status FROM agent_activity").fetchall() == [("order_get", 200)]
