"""Who may do what through the hub: subject loading and the authorizer.

The hub proves that it sent a request; it does not know this shop's users.
So every tool call is decided here, from the shop's own tables:

* the signed subject ``tenant:user`` must be an existing user of that tenant;
* the tool's scope must be one of the user's permissions (scopes and
  permission names are the same words, so the hub's route allow-lists and
  the back office speak one vocabulary);
* every order, refund request or customer named in the arguments must
  belong to the user's tenant.

The services filter by tenant again, so a mistake here cannot leak rows.
"""

from __future__ import annotations

import logging

from bailing_flask import Bailing, ToolCall
from bailing_flask.hub.payloads import ApprovalRequest
from bailing_flask.transactional import DBAPITransaction

from . import services
from .auth import User, load_user
from .db import get_db

__all__ = ["bailing", "parse_subject"]

logger = logging.getLogger(__name__)

# tools declared repeats="transaction" record each call in the shop's own database, in the
# transaction of the request's connection (db.init_app creates the table)
bailing = Bailing(transaction=DBAPITransaction(get_db, create_table=False))


def parse_subject(subject: str) -> tuple[str, str] | None:
    """Split ``"t1:u1"`` into tenant and user; anything else is not one of our subjects."""
    tenant_id, separator, user_id = subject.partition(":")
    if not separator or not tenant_id or not user_id or ":" in user_id:
        return None
    return tenant_id, user_id


@bailing.subject_loader
def load_subject(subject: str) -> User | None:
    """The acting user; ``None`` (deny) for unknown subjects, such as the hub's probe subject."""
    parsed = parse_subject(subject)
    if parsed is None:
        return None
    return load_user(get_db(), *parsed)


@bailing.authorizer
def authorize(call: ToolCall) -> bool:
    """Allow only a known user with the tool's permission, on rows of their own tenant."""
    user = call.user
    if not isinstance(user, User) or call.tool is None:
        return False
    if not user.can(call.tool.scope):
        return False
    if call.is_probe:
        return True  # "may this subject use the tool at all?": no arguments to check
    conn = get_db()
    for argument in services.owned_arguments():
        if argument in call.args and call.args[argument] is not None:
            if services.owner_tenant(conn, argument, call.args[argument]) != user.tenant_id:
                return False  # another tenant's row, or none at all: indistinguishable on purpose
    return True


@bailing.approval_request
def approval_received(request: ApprovalRequest) -> None:
    """The hub asks this shop to approve a call (route approval lane: the business).

    bailing_flask has already recorded the request; staff decide on the
    activity page (``/activity``), which sends the decision to the hub.
    """
    logger.info("approval %d requested: %s for %s (%s)", request.approval_id, request.tool,
                request.subject, request.reason)
