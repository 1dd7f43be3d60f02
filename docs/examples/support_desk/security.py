"""Who a request acts as: the token for the web client, the signed subject for the hub."""

from __future__ import annotations

from typing import Any

from .extensions import auth, bailing, db
from .models import Agent


# [start:verify]
@auth.verify_token
def verify_token(token: str) -> Agent | None:
    return db.session.scalar(db.select(Agent).filter_by(token=token))


@auth.get_user_roles
def get_user_roles(agent: Agent) -> list[str]:
    return agent.roles.split()
# [end:verify]


# [start:subject]
@bailing.subject_loader
def load_subject(subject: str) -> Agent | None:
    """``"<tenant>:<login>"``, signed by the hub -> the Agent ``verify_token`` returns for them."""
    tenant, _, login = subject.partition(":")
    return db.session.scalar(db.select(Agent).filter_by(tenant=tenant, login=login))


@bailing.authorizer
def authorize(call: Any) -> bool:
    agent: Agent | None = call.user
    if agent is None:                      # unknown subjects (the hub's probe among them)
        return False
    return call.tool.readonly or "agent" in agent.roles.split()
# [end:subject]
