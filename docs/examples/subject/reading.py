"""The subject page's code (docs/concepts/subject.rst): a Flask-SQLAlchemy loader and what a view reads."""

import os

from flask import Flask, jsonify
from flask_sqlalchemy import SQLAlchemy
from pydantic import BaseModel

from bailing_flask import Bailing, tool

app = Flask(__name__)
app.config.update(BAILING_SECRETS=[os.environ["BAILING_SECRET"]], BAILING_STORE="memory://",
                  SQLALCHEMY_DATABASE_URI="sqlite://")
db = SQLAlchemy(app)
bailing = Bailing(app)
bailing.authorizer(lambda call: call.user is not None)


class User(db.Model):
    id = db.Column(db.Integer, primary_key=True)
    tenant_id = db.Column(db.String, nullable=False)
    user_id = db.Column(db.String, nullable=False)


# [start:loader]
@bailing.subject_loader
def load_user(subject: str):
    tenant_id, sep, user_id = subject.partition(":")
    if not sep:
        return None
    return User.query.filter_by(tenant_id=tenant_id, user_id=user_id).one_or_none()
# [end:loader]


class Note(BaseModel):
    text: str


@app.post("/api/orders/<int:order_id>/notes")
@tool(scope="order.write", body=Note)
def order_note(order_id):
    """Add a note to an order."""
    # [start:reading]
    from bailing_flask import current_call, current_subject, get_current_call

    current_call.subject        # "t1:u1001", or None for an anonymous call
    current_call.user           # what your subject loader returned (None if unknown)
    current_call.job_id         # the hub's job id (signed)
    current_call.tool.scope     # the scope from *your* declaration
    current_call.args           # validated arguments (path, query and body together)

    current_subject == "t1:u1001"   # a proxy: compare with ==, test truthiness
    get_current_call()              # None in a request the hub did not sign
    # [end:reading]
    return jsonify(subject=current_call.subject, user=current_call.user.user_id, job_id=current_call.job_id,
                   scope=current_call.tool.scope, args=dict(current_call.args),
                   same=current_subject == "t1:u1001", call=get_current_call() is not None)


with app.app_context():
    db.create_all()
    db.session.add(User(tenant_id="t1", user_id="u1001"))
    db.session.commit()
