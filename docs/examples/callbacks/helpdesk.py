"""The callbacks page's code (docs/concepts/callbacks.rst): a help desk the hub reports back to."""

import os
from typing import Any

from flask import Flask, render_template
from flask_sqlalchemy import SQLAlchemy

from bailing_flask import Bailing, tool

app = Flask(__name__)
app.config.update(BAILING_SECRETS=[os.environ["BAILING_SECRET"]], BAILING_STORE="memory://",
                  BAILING_HUB_URL=os.environ["BAILING_HUB_URL"], SQLALCHEMY_DATABASE_URI="sqlite://")
db = SQLAlchemy(app)
NOTIFIED: list[Any] = []


class Ticket(db.Model):
    id = db.Column(db.Integer, primary_key=True)
    hub_job_id = db.Column(db.String)
    status = db.Column(db.String)
    answer = db.Column(db.String)


class PendingApproval(db.Model):
    id = db.Column(db.Integer, primary_key=True)
    approval_id = db.Column(db.Integer, unique=True)
    payload = db.Column(db.String)

    @classmethod
    def create(cls, **fields: Any) -> None:
        db.session.add(cls(**fields))
        db.session.commit()

    @classmethod
    def get(cls, approval_id: int) -> "PendingApproval":
        return cls.query.filter_by(approval_id=approval_id).one()


def notify_team(*message: Any) -> None:
    NOTIFIED.append(message)


# [start:handlers]
app.config["BAILING_CLIENT_TOKENS"] = [os.environ["BAILING_CLIENT_TOKEN"]]
bailing = Bailing(app)                     # reads the configuration once: set it before

@bailing.job_finished
def job_finished(job):                   # a JobRecord
    Ticket.query.filter_by(hub_job_id=job.job_id).update(
        {"status": job.status, "answer": job.text})
    db.session.commit()

@bailing.delivery
def delivered(delivery):                 # a DeliveryWebhook
    notify_team(delivery.route_name, delivery.message, delivery.attachments)

@bailing.approval_request
def approval_requested(request):         # an ApprovalRequest
    PendingApproval.create(approval_id=request.approval_id,
                           payload=request.model_dump_json())
# [end:handlers]


bailing.authorizer(lambda call: call.subject == "t1:u1")


@app.post("/api/refunds/<int:request_id>/execute")
@tool(scope="refund.execute", risk="high")
def refund_execute(request_id: int) -> Any:
    """Pay out a refund (the hub asks the business first)."""
    return {"paid": request_id}


# [start:decide]
from bailing_flask.hub.payloads import ApprovalRequest

def decide(approval_id, approved: bool, supervisor):
    stored = PendingApproval.get(approval_id)
    request = ApprovalRequest.model_validate_json(stored.payload)
    result = bailing.hub_client().decide_approval(
        request,
        "approved" if approved else "denied",
        approver=supervisor.user_id,                    # at most 64 characters
        decision_id=f"shop-approval-{stored.id}",       # your idempotency key
        comment="checked against the invoice",
    )
    return result.status, result.idempotent
# [end:decide]


def start_job(ticket):
    # [start:client]
    client = bailing.hub_client()
    accepted = client.run(
        "after-sales",                                  # the hub route, or "auto"
        "Customer asks for a refund of order 1001: the earbuds crackle.",
        request_id=f"ticket-{ticket.id}",               # idempotency key of the job
        metadata={"shop_user": "t1:u1"},                # subject_field = "shop_user"
        callback_url="https://shop.example.com/.well-known/bailing/callbacks/job",
    )
    job = client.job(accepted.job_id)                   # a JobRecord
    # [end:client]
    ticket.hub_job_id = accepted.job_id
    db.session.commit()
    return job


@app.get("/help")
def help_page() -> str:
    from types import SimpleNamespace

    return render_template("help.html", current_user=SimpleNamespace(subject="t1:u1"))


with app.app_context():
    db.create_all()
