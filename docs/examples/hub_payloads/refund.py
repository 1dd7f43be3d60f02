"""The tool whose catalog entry docs/concepts/hub-payloads.rst shows."""

import os

from flask import Flask

from bailing_flask import Bailing, tool

app = Flask(__name__)
app.config["BAILING_SECRETS"] = [os.environ["BAILING_SECRET"]]
bailing = Bailing(app)
bailing.authorizer(lambda call: call.user is not None)


# [start:tool]
@app.post("/api/refunds/<int:request_id>/execute")
@tool(name="refund_execute", scope="refund.execute", risk="high",
      subject_required=True, business_approval=True,
      approval_prompt="Pay out refund {request_id}")
def refund_execute(request_id): ...
# [end:tool]
