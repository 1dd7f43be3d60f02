"""docs/concepts/minimal.rst, minimal parameters: what ``flask bailing check`` says about them.

``report_get`` takes the tenant from the model: ``check`` warns. ``account_unlock``
takes a user id from the model too, and says why that is the model's to choose:
no warning for it.
"""

import os

from flask import Blueprint, Flask
from flask.typing import ResponseReturnValue
from pydantic import BaseModel, Field

from bailing_flask import Bailing, ToolCall, tool

app = Flask(__name__)
app.config["BAILING_SECRETS"] = [os.environ["BAILING_SECRET"]]
bailing = Bailing(app)
api = Blueprint("api", __name__, url_prefix="/api")


@bailing.authorizer
def authorize(call: ToolCall) -> bool:
    return call.subject == "t1:admin"


class ReportQuery(BaseModel):
    tenant_id: str = Field(description="The tenant whose report to read.")


@api.get("/reports")
@tool(name="report_get", scope="report.read", query=ReportQuery)
def report_get() -> ResponseReturnValue:
    """Read the monthly report."""
    return {"orders": 0}


class UnlockBody(BaseModel):
    user_id: str = Field(description="The account to unlock.")


@api.post("/accounts/unlock")
@tool(scope="account.admin", body=UnlockBody,
      model_chooses={"user_id": "the administrator names the account to unlock; the "
                                "authorizer checks it is in their tenant"})
def account_unlock() -> ResponseReturnValue:
    """Unlock a user's account."""
    return {"unlocked": True}


app.register_blueprint(api)
