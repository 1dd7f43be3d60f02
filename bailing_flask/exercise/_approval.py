"""The exercise's approval of its own request, for a ``business_approval`` tool.

The gate admits a call to such a tool only with this business's approval of
exactly that call. The exercise has none, so its request stopped at ``403
business_approval_required`` and the decorators in front of the view -- the
ones most worth checking on a high-risk tool -- never ran. The exercise
approves its own request instead, in its throwaway store (which only its
own requests read): the gate looks the approval up and spends it as it does
a real one. Nothing reaches the app's store or the hub.
"""

from __future__ import annotations

import secrets
from typing import Any

from bailing_flask.stores import ApprovalRecord, IdempotencyStore

__all__ = ["approve_own_request"]

#: how long the exercise's approvals are kept in its throwaway store
_KEPT_SECONDS = 600.0


def approve_own_request(store: IdempotencyStore, tool: str, job_id: str, subject: str,
                        args: dict[str, Any]) -> int:
    """Record an approved approval of the call ``(tool, job_id, subject, args)``; its id.

    The id is drawn above any the hub hands out (they count from 1), so in
    the transaction mode, where a spent approval is a row of the app's own
    table, it never meets one a real call spent (that row is rolled back
    with the rest of the exercise's writes).
    """
    approval_id = 2**52 + secrets.randbelow(2**52)
    store.add_approval(ApprovalRecord(
        approval_id=approval_id, job_id=job_id, request_id=f"{job_id}-approval", tool=tool,
        args_hash="sha256:" + "0" * 64,  # read only for arguments the hub cut; these are whole
        subject=subject, args=dict(args),
        details={"reason": "bailing_flask's exercise approved its own request"},
    ), retention_seconds=_KEPT_SECONDS)
    store.record_decision(approval_id, status="approved", decision_id=f"{job_id}-decision",
                          approver="bailing_flask exercise", retention_seconds=_KEPT_SECONDS)
    return approval_id
