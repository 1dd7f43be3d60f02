"""Who the hub's subject is, and what they may do: the app's own tables decide."""

from __future__ import annotations

from typing import Any

from .extensions import bailing, db
from .models import User


# [start:subject]
@bailing.subject_loader
def load_subject(subject: str) -> User | None:
    """``"<tenant>:<login>"``, signed by the hub -> the same User the session would have."""
    tenant, _, login = subject.partition(":")
    return db.session.scalar(db.select(User).filter_by(tenant=tenant, login=login))


@bailing.authorizer
def authorize(call: Any) -> bool:
    user: User | None = call.user
    if user is None:                       # unknown subjects (the hub's probe among them)
        return False
    if call.tool.readonly:
        return True
    if call.tool.scope == "refund.write":
        return user.can_refund
    return call.tool.scope == "feedback.write"
# [end:subject]
