"""The SQL of :class:`~bailing_flask.stores.SQLiteStore`: its tables and its statements.

Kept apart from the store's logic so that the file schema and every
statement that touches it can be read (and reviewed for atomicity) in one
place. Every mutation is one statement, so it is atomic on its own.
"""

from __future__ import annotations

from bailing_flask.stores._entries import ListState

#: Bumped when the tables change, so a later version can migrate old files.
_SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS bailing_idempotency (
    key TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    token TEXT NOT NULL,
    created_at REAL NOT NULL,
    lease_expires_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    meta TEXT NOT NULL,
    status INTEGER,
    headers TEXT,
    body BLOB,
    note TEXT
);
CREATE INDEX IF NOT EXISTS bailing_idempotency_expires_at
    ON bailing_idempotency (expires_at);
CREATE INDEX IF NOT EXISTS bailing_idempotency_created_at
    ON bailing_idempotency (created_at);
CREATE TABLE IF NOT EXISTS bailing_signatures (
    signature TEXT PRIMARY KEY,
    expires_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS bailing_signatures_expires_at
    ON bailing_signatures (expires_at);
"""

#: Created on first use by the approval methods (``IF NOT EXISTS``, so files
#: written by an earlier version gain it without a schema version bump).
_APPROVALS_SCHEMA = """
CREATE TABLE IF NOT EXISTS bailing_approvals (
    approval_id INTEGER PRIMARY KEY,
    job_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    status TEXT NOT NULL,
    received_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    request TEXT NOT NULL,
    decision_id TEXT,
    approver TEXT,
    decided_at REAL,
    used_by TEXT,
    used_at REAL
);
CREATE INDEX IF NOT EXISTS bailing_approvals_job ON bailing_approvals (job_id, tool);
CREATE INDEX IF NOT EXISTS bailing_approvals_received ON bailing_approvals (received_at);
"""
_APPROVAL_COLUMNS = (
    "approval_id, job_id, tool, status, received_at, expires_at, request, decision_id, approver, "
    "decided_at, used_by, used_at"
)
#: what a file written before approvals could be spent lacks (added with ALTER TABLE)
_APPROVAL_USE_COLUMNS = (("used_by", "TEXT"), ("used_at", "REAL"))

_COLUMNS = (
    "key, state, token, created_at, lease_expires_at, expires_at, meta, "
    "status, headers, body, note"
)

#: claim a key: insert it, or take over a dead entry of the same key (``?3`` is now);
#: a live entry makes the WHERE false and nothing is written
_CLAIM = (
    "INSERT INTO bailing_idempotency "
    "(key, state, token, created_at, lease_expires_at, expires_at, meta) "
    "VALUES (?1, 'in_progress', ?2, ?3, ?4, ?5, ?6) "
    "ON CONFLICT (key) DO UPDATE SET state = 'in_progress', token = excluded.token, "
    "created_at = excluded.created_at, lease_expires_at = excluded.lease_expires_at, "
    "expires_at = excluded.expires_at, meta = excluded.meta, status = NULL, headers = NULL, "
    "body = NULL, note = NULL "
    "WHERE bailing_idempotency.expires_at <= ?3"
)

#: record the response of a live in-progress entry still owned by the token
_COMPLETE = (
    "UPDATE bailing_idempotency SET state = 'completed', expires_at = ?, status = ?, "
    "headers = ?, body = ? WHERE key = ? AND token = ? AND state = 'in_progress' "
    "AND expires_at > ?"
)

_LIST_FILTERS: dict[ListState | None, str] = {
    None: "",
    "completed": " AND state = 'completed'",
    "in_progress": " AND state = 'in_progress' AND lease_expires_at > :now",
    "uncertain": " AND state = 'in_progress' AND lease_expires_at <= :now",
}


#: hand an in-progress entry to a new token with a new lease
_TAKE_OVER = (
    "UPDATE bailing_idempotency SET token = ?, lease_expires_at = ?, "
    "expires_at = MAX(expires_at, ?) WHERE key = ?"
)

#: end the lease of a live in-progress entry of the token now, keeping a note
_MARK_UNCERTAIN = (
    "UPDATE bailing_idempotency SET lease_expires_at = MIN(lease_expires_at, ?), "
    "note = ? WHERE key = ? AND token = ? AND state = 'in_progress' AND expires_at > ?"
)

#: delete a live in-progress entry of the token
_RELEASE = (
    "DELETE FROM bailing_idempotency WHERE key = ? AND token = ? "
    "AND state = 'in_progress' AND expires_at > ?"
)

#: an operator's decision: a response to answer repeats with (or ``DELETE`` the entry)
_RESOLVE = (
    "UPDATE bailing_idempotency SET state = 'completed', token = ?, "
    "expires_at = ?, status = ?, headers = ?, body = ?, note = ? WHERE key = ?"
)

#: up to ``?2`` dead rows of the table ``{table}``, through its expires_at index
_CLEANUP = (
    "DELETE FROM {table} WHERE rowid IN "
    "(SELECT rowid FROM {table} WHERE expires_at <= ? LIMIT ?)"
)

#: One statement, so atomic: insert, or take over a dead record; a live record makes
#: the WHERE false and nothing changes.
_REMEMBER_SIGNATURE = (
    "INSERT INTO bailing_signatures (signature, expires_at) VALUES (?, ?) "
    "ON CONFLICT (signature) DO UPDATE SET expires_at = excluded.expires_at "
    "WHERE bailing_signatures.expires_at <= ?"
)

#: a received approval request (``INSERT OR REPLACE``: a dead record of the id may remain)
_ADD_APPROVAL = (
    f"INSERT OR REPLACE INTO bailing_approvals ({_APPROVAL_COLUMNS}) "
    "VALUES (?, ?, ?, 'pending', ?, ?, ?, NULL, NULL, NULL, NULL, NULL)"
)

#: up to 100 dead approval records, removed as a new one arrives
_PRUNE_APPROVALS = (
    "DELETE FROM bailing_approvals WHERE rowid IN (SELECT rowid FROM "
    "bailing_approvals WHERE expires_at <= ? LIMIT 100)"
)

#: the first decision on a pending record
_RECORD_DECISION = (
    "UPDATE bailing_approvals SET status = ?, decision_id = ?, approver = ?, "
    "decided_at = ?, expires_at = MAX(expires_at, ?) WHERE approval_id = ?"
)

#: spend a live approved record on one call (inside the claim's transaction, which holds the
#: write lock; the WHERE repeats the checks, so the statement is safe on its own too)
_SPEND_APPROVAL = (
    "UPDATE bailing_approvals SET used_by = ?, used_at = ? WHERE approval_id = ? "
    "AND status = 'approved' AND used_by IS NULL AND expires_at > ?"
)
