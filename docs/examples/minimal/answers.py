"""docs/concepts/minimal.rst: the answers, log lines and catalog text the page shows, from real calls.

``python answers.py WHAT`` calls ``orders.py`` as the hub would and prints
one of them: ``truncated`` (a list cut to its limits), ``error`` (a failure
in the error shape), ``invalid`` (the log line of a result that does not
match), ``audit`` (the audit record's counts) or ``returns`` (what the
catalog tells the model).
"""

import json
import logging
import sys
from typing import Any

from bailing_flask.testing import HubSimulator
from orders import app

SECRET = app.config["BAILING_SECRETS"][0]


def show(value: Any) -> None:
    print(json.dumps(value, indent=1, ensure_ascii=False))


def main(what: str) -> None:
    hub = HubSimulator(app, SECRET)
    if what == "truncated":
        answer = hub.call("order_list", subject="t1:alice")
        assert answer.status == 200, answer.text
        show(answer.json())
    elif what == "error":
        answer = hub.call("refund_request_create", {"order_id": 1001, "amount": 19.9}, subject="t1:alice")
        assert answer.status == 409, answer.text
        show(answer.json())
    elif what == "invalid":
        handler = logging.StreamHandler(sys.stdout)
        handler.setLevel(logging.ERROR)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logging.getLogger("bailing_flask").addHandler(handler)
        answer = hub.call("order_get", {"order_id": 1002}, subject="t1:alice")
        assert (answer.status, answer.json()["reason"]) == (500, "invalid_response"), answer.text
    elif what == "audit":
        records = []
        handler = logging.StreamHandler(sys.stdout)
        handler.emit = lambda record: records.append(json.loads(record.getMessage()))  # type: ignore[method-assign]
        audit = logging.getLogger("bailing_flask.audit")
        audit.addHandler(handler)
        audit.setLevel(logging.INFO)
        assert hub.call("order_get", {"order_id": 1001}, subject="t1:alice").status == 200
        record = records[-1]
        show({"tool": record["tool"], "status": record["status"], "response": record["response"]})
    elif what == "returns":
        operation = hub.document()["paths"]["/api/orders/{order_id}"]["get"]
        print(operation["x-agent-capability"]["guidance"]["returns"])
    else:
        raise SystemExit(f"what to show: truncated, error, invalid, audit or returns, not {what!r}")


if __name__ == "__main__":
    main(sys.argv[1])
