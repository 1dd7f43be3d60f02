"""The guide's app with its three users, for the commands docs/existing-app.rst runs at build time."""

from __future__ import annotations

from .extensions import db, limiter
from .factory import create_app
from .models import User

app = create_app()
with app.app_context():
    db.create_all()  # sqlite:// by default: one in-memory database for the process
    db.session.add_all([User(tenant="t1", login="alice", can_refund=True),
                        User(tenant="t1", login="bob"), User(tenant="t1", login="root")])
    db.session.commit()
    limiter.reset()
