"""What the agents did, and on whose behalf: the staff's activity page.

Fed by bailing_flask's ``audit_record`` signal, not by parsing logs: every
tool call that reached the gate (allowed, refused, failed), every signed
request refused before it, is one row in the shop's own ``hub_activity``
table. The page shows, for the logged-in user's company,

* the approval requests the hub sent that wait for a decision, with buttons
  to approve or deny (the decision goes to the hub through
  ``bailing.approvals().decide``; ``refund_execute`` runs only for a call
  approved here, see ``business_approval`` in ``tools.py``);
* each acting user with their number of calls and refusals;
* the recent calls (tool, status, reason, duration);
* refusals, including requests the signature check refused (those carry no
  verified user, so every company's staff sees them).
"""

from __future__ import annotations

import datetime
import logging
import sqlite3
from contextlib import closing
from typing import Any

from flask import Blueprint, Flask, abort, flash, redirect, render_template, request, url_for

from bailing_flask.hub.client import HubError
from bailing_flask.signals import audit_record

from .auth import current_user, login_required
from .db import connect, get_db
from .hub import bailing, parse_subject

__all__ = ["bp", "init_app", "SCHEMA", "KEEP_ROWS"]

logger = logging.getLogger(__name__)

bp = Blueprint("activity", __name__, url_prefix="/activity")

#: Only the newest rows are kept: this is a page for people, not the audit log.
KEEP_ROWS = 5000

SCHEMA = """
CREATE TABLE IF NOT EXISTS hub_activity (
    id          INTEGER PRIMARY KEY,
    at          TEXT NOT NULL,
    event       TEXT NOT NULL,
    tenant_id   TEXT,
    subject     TEXT,
    tool        TEXT,
    status      INTEGER NOT NULL,
    reason      TEXT,
    error       TEXT,
    duration_ms REAL,
    job_id      TEXT,
    approval_id INTEGER
);
CREATE INDEX IF NOT EXISTS hub_activity_by_tenant ON hub_activity (tenant_id, id);
"""


def _record(app: Flask, record: dict[str, Any]) -> None:
    """One audit record -> one row. Never breaks the call it describes."""
    subject = record.get("subject")
    parsed = parse_subject(subject) if subject else None
    try:
        with closing(connect(app.config["DATABASE"])) as conn:
            conn.execute(
                "INSERT INTO hub_activity (at, event, tenant_id, subject, tool, status, reason, "
                "error, duration_ms, job_id, approval_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (record["time"], record["event"], parsed[0] if parsed else None, subject,
                 record.get("tool"), record["status"], record.get("reason"), record.get("error"),
                 record.get("duration_ms"), record.get("job_id"), record.get("approval_id")),
            )
            conn.execute("DELETE FROM hub_activity WHERE id <= (SELECT MAX(id) FROM hub_activity) - ?",
                         (KEEP_ROWS,))
    except sqlite3.Error:
        logger.exception("could not record hub activity")


def init_app(app: Flask) -> None:
    """Create the table and listen to this app's audit records."""
    with closing(connect(app.config["DATABASE"])) as conn:
        conn.executescript(SCHEMA)

    def on_audit(sender: Flask, record: dict[str, Any]) -> None:
        _record(sender, record)

    audit_record.connect(on_audit, app, weak=False)
    app.register_blueprint(bp)


@bp.app_template_filter("short_time")
def short_time(iso: str | None) -> str:
    """``2024-06-10T06:13:21.503Z`` -> ``2024-06-10 06:13:21`` (UTC)."""
    return (iso or "")[:19].replace("T", " ")


@bp.app_template_filter("unix_time")
def unix_time(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S")


def _names(conn: sqlite3.Connection, tenant_id: str) -> dict[str, str]:
    rows = conn.execute("SELECT user_id, display_name FROM users WHERE tenant_id = ?", (tenant_id,))
    return {f"{tenant_id}:{row['user_id']}": row["display_name"] for row in rows}


@bp.get("/")
@login_required
def activity() -> Any:
    user = current_user()
    assert user is not None
    conn = get_db()
    names = _names(conn, user.tenant_id)
    calls = conn.execute(
        "SELECT * FROM hub_activity WHERE tenant_id = ? ORDER BY id DESC LIMIT 100",
        (user.tenant_id,)).fetchall()
    by_user = conn.execute(
        "SELECT subject, COUNT(*) AS calls, SUM(status >= 400) AS refused, MAX(at) AS last "
        "FROM hub_activity WHERE tenant_id = ? GROUP BY subject ORDER BY last DESC",
        (user.tenant_id,)).fetchall()
    refusals = conn.execute(
        "SELECT * FROM hub_activity WHERE status >= 400 AND (tenant_id = ? OR tenant_id IS NULL) "
        "ORDER BY id DESC LIMIT 50", (user.tenant_id,)).fetchall()
    waiting = [record for record in bailing.approvals().pending()
               if record.subject and (parse_subject(record.subject) or ("",))[0] == user.tenant_id]
    return render_template("activity.html", calls=calls, by_user=by_user, refusals=refusals,
                           waiting=waiting, names=names, user=user)


@bp.post("/approvals/<int:approval_id>")
@login_required
def decide(approval_id: int) -> Any:
    """Approve or deny one approval request of the user's company, with the tool's permission."""
    user = current_user()
    assert user is not None
    decision = request.form.get("decision")
    if decision not in ("approved", "denied"):
        abort(400)
    record = bailing.approvals().get(approval_id)
    parsed = parse_subject(record.subject) if record is not None and record.subject else None
    if record is None or parsed is None or parsed[0] != user.tenant_id:
        abort(404)  # another company's approvals do not exist for this user
    if not user.can(str(record.details.get("scope", ""))):
        abort(403)
    try:
        bailing.approvals().decide(approval_id, decision, approver=user.subject,
                                   decision_id=f"shop:{approval_id}")
    except HubError as exc:
        flash(f"The hub did not take the decision on approval {approval_id}: {exc.message}")
    else:
        flash(f"Approval {approval_id} {decision}.")
    return redirect(url_for("activity.activity"))
