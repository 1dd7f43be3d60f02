"""The business approval page's code (docs/concepts/business-approval.rst), in an app the suite runs."""

import os
from typing import Any

from flask import Flask, jsonify

from bailing_flask import Bailing, tool

app = Flask(__name__)
app.config.update(BAILING_SECRETS=[os.environ["BAILING_SECRET"]], BAILING_STORE="memory://",
                  BAILING_CLIENT_TOKENS=[os.environ["BAILING_CLIENT_TOKEN"]],
                  BAILING_HUB_URL=os.environ["BAILING_HUB_URL"])
bailing = Bailing(app)
bailing.subject_loader(lambda subject: subject if subject == "t1:alice" else None)
bailing.authorizer(lambda call: call.user is not None)
FINANCE_QUEUE: list[Any] = []
PAID: list[int] = []


def queue_for_finance(request: Any) -> None:
    FINANCE_QUEUE.append(request)


# [start:approval]
@app.post("/api/refunds/<int:request_id>/execute")
@tool(scope="refund.execute", risk="high", business_approval=True)
def refund_execute(request_id):
    ...
# [end:approval]
    PAID.append(request_id)
    return jsonify(paid=request_id), 201


# [start:decide]
@bailing.approval_request
def approval_received(request):          # recorded before this runs
    queue_for_finance(request)            # people decide later, or right here:

def finance_decides(approval_id, decision, user):
    bailing.approvals().decide(approval_id, decision, approver=user.id)
# [end:decide]
