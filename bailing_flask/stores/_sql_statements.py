"""The statements of :class:`~bailing_flask.stores.SQLStore`, per database, in one place.

Parameters are named (``%(name)s``, the DB-API ``pyformat`` style that both
psycopg and PyMySQL take). Every mutation is one statement, atomic on its
own; how each one decides between concurrent callers:

* **claim** (insert-if-absent, or take over a dead entry): PostgreSQL's
  ``INSERT ... ON CONFLICT (entry_key) DO UPDATE ... WHERE`` the existing
  entry is dead, inside a CTE whose outer ``SELECT`` answers either
  "claimed" or the live entry that stopped it: one round trip in every
  case. On MySQL/MariaDB it is ``INSERT ... ON DUPLICATE KEY UPDATE`` where
  every column keeps its value unless the entry is dead (``expires_at``,
  which every condition reads, is assigned last: MySQL evaluates the
  assignments in order). MariaDB (10.5+) answers with ``RETURNING`` the row
  as it now is: one round trip. MySQL has no ``RETURNING``; a duplicate also
  bumps ``claims``, so its affected-row count is 2 (1 only for a new row,
  whatever ``CLIENT_FOUND_ROWS`` says) and only then is the row read. ``claims``
  is 0 in a row the statement itself wrote, so "claimed now" and "this token
  held it already" are told apart.
  The primary key's unique index is what makes two hosts' claims of one
  key meet: the second waits for the first's row, then sees it.
* **complete**, **take over**, **mark uncertain**, **release**, **resolve**:
  one ``UPDATE``/``DELETE`` whose ``WHERE`` is the compare-and-set (token,
  state, liveness); the row count answers.
* **remember a signature**: the claim's pattern with a random nonce, so a
  statement repeated after a lost answer recognises its own write.
"""

from __future__ import annotations

from dataclasses import dataclass

from bailing_flask.stores._entries import ListState
from bailing_flask.stores._sql_schema import APPROVALS, ENTRIES, SIGNATURES, Dialect

__all__ = ["Statements", "statements_for"]

#: what ``get`` and ``claim`` read of an entry, in this order (``list`` puts the key first)
ENTRY_COLUMNS = ("state, token, created_at, lease_expires_at, expires_at, meta, status, headers, "
                 "body, note")
APPROVAL_COLUMNS = ("approval_id, job_id, tool, status, received_at, expires_at, request, "
                    "decision_id, approver, decided_at, used_by, used_at")

_LIVE = "expires_at > %(now)s"

_LIST_FILTERS: dict[ListState | None, str] = {
    None: "",
    "completed": " AND state = 'completed'",
    "in_progress": " AND state = 'in_progress' AND lease_expires_at > %(now)s",
    "uncertain": " AND state = 'in_progress' AND lease_expires_at <= %(now)s",
}


@dataclass(frozen=True)
class Statements:
    dialect: Dialect
    #: the claim answers with the row (PostgreSQL's CTE, MariaDB's RETURNING); else row count
    claim_answers: bool
    claim: str
    remember_signature: str
    complete: str
    take_over: str
    mark_uncertain: str
    release: str
    resolve_delete: str
    resolve_complete: str
    get: str
    #: ``get`` and ``claims`` (MySQL: 0 while no duplicate met the row since it was written)
    claimed: str
    token_of: str
    nonce_of: str
    list: dict[ListState | None, str]
    cleanup: tuple[str, ...]
    add_approval: str
    record_decision: str
    get_approval: str
    find_approvals: str
    list_approvals: dict[bool, str]
    spend_approval: str
    approvals_used_by: str
    lock_approvals: str


def _if_dead(column: str, value: str) -> str:
    """MySQL: ``column`` becomes ``value`` only when the existing row is dead."""
    return f"{column} = IF(expires_at <= %(now)s, {value}, {column})"


def _postgresql_claim() -> str:
    return (
        "WITH claimed AS ("
        f"INSERT INTO {ENTRIES} AS e "
        "(entry_key, state, token, created_at, lease_expires_at, expires_at, meta) "
        "VALUES (%(key)s, 'in_progress', %(token)s, %(now)s, %(lease)s, %(expires)s, %(meta)s) "
        "ON CONFLICT (entry_key) DO UPDATE SET state = 'in_progress', token = EXCLUDED.token, "
        "created_at = EXCLUDED.created_at, lease_expires_at = EXCLUDED.lease_expires_at, "
        "expires_at = EXCLUDED.expires_at, meta = EXCLUDED.meta, status = NULL, headers = NULL, "
        "body = NULL, note = NULL "
        "WHERE e.expires_at <= %(now)s RETURNING 1) "
        "SELECT 'claimed', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL "
        f"FROM claimed UNION ALL SELECT {ENTRY_COLUMNS}, NULL FROM {ENTRIES} "
        f"WHERE entry_key = %(key)s AND {_LIVE} AND NOT EXISTS (SELECT 1 FROM claimed)"
    )


def _mysql_claim(returning: bool) -> str:
    assignments = [
        _if_dead("state", "'in_progress'"), _if_dead("token", "%(token)s"),
        _if_dead("created_at", "%(now)s"), _if_dead("lease_expires_at", "%(lease)s"),
        _if_dead("meta", "%(meta)s"), _if_dead("status", "NULL"), _if_dead("headers", "NULL"),
        _if_dead("body", "NULL"), _if_dead("note", "NULL"),
    ]
    # 0 for a row this statement wrote (inserted, or a dead one taken over), else counted up:
    # a duplicate always changes the row (2 affected rows, whatever CLIENT_FOUND_ROWS says)
    assignments.append("claims = IF(expires_at <= %(now)s, 0, claims + 1)")
    assignments.append(_if_dead("expires_at", "%(expires)s"))  # last: the others read it
    return (
        f"INSERT INTO {ENTRIES} "
        "(entry_key, state, token, created_at, lease_expires_at, expires_at, meta) "
        "VALUES (%(key)s, 'in_progress', %(token)s, %(now)s, %(lease)s, %(expires)s, %(meta)s) "
        "ON DUPLICATE KEY UPDATE " + ", ".join(assignments)
        + (f" RETURNING {ENTRY_COLUMNS}, claims" if returning else "")
    )


def _signature(dialect: Dialect, returning: bool) -> str:
    if dialect == "postgresql":
        return (
            f"INSERT INTO {SIGNATURES} AS s (signature, nonce, expires_at) "
            "VALUES (%(signature)s, %(nonce)s, %(expires)s) "
            "ON CONFLICT (signature) DO UPDATE SET nonce = EXCLUDED.nonce, "
            "expires_at = EXCLUDED.expires_at "
            "WHERE s.expires_at <= %(now)s OR s.nonce = EXCLUDED.nonce"
        )
    assignments = [_if_dead("nonce", "%(nonce)s")]
    if not returning:
        assignments.append("claims = claims + 1")
    assignments.append(_if_dead("expires_at", "%(expires)s"))
    return (
        f"INSERT INTO {SIGNATURES} (signature, nonce, expires_at) "
        "VALUES (%(signature)s, %(nonce)s, %(expires)s) ON DUPLICATE KEY UPDATE "
        + ", ".join(assignments) + (" RETURNING nonce" if returning else "")
    )


def _add_approval(dialect: Dialect) -> str:
    insert = (
        f"INSERT INTO {APPROVALS} {'AS a ' if dialect == 'postgresql' else ''}"
        f"({APPROVAL_COLUMNS}) VALUES (%(approval_id)s, %(job_id)s, %(tool)s, 'pending', "
        "%(now)s, %(expires)s, %(request)s, NULL, NULL, NULL, NULL, NULL) "
    )
    columns = [c.strip() for c in APPROVAL_COLUMNS.split(",")][1:]
    if dialect == "postgresql":
        return (insert + "ON CONFLICT (approval_id) DO UPDATE SET "
                + ", ".join(f"{c} = EXCLUDED.{c}" for c in columns)
                + " WHERE a.expires_at <= %(now)s")
    values = {"job_id": "%(job_id)s", "tool": "%(tool)s", "status": "'pending'",
              "received_at": "%(now)s", "expires_at": "%(expires)s", "request": "%(request)s"}
    assignments = [_if_dead(c, values.get(c, "NULL")) for c in columns if c != "expires_at"]
    assignments.append(_if_dead("expires_at", values["expires_at"]))
    return insert + "ON DUPLICATE KEY UPDATE " + ", ".join(assignments)


def statements_for(dialect: Dialect, returning: bool) -> Statements:
    """The statements of ``dialect``; ``returning``: a MariaDB that has ``INSERT ... RETURNING``."""
    greatest = "GREATEST"
    least = "LEAST"
    limit_cleanup: tuple[str, ...]
    if dialect == "postgresql":
        # the batch is chosen once (a materialized CTE): a LIMIT in an IN (...) subquery may be
        # evaluated again (a re-planned semi-join, a concurrent update's recheck) and delete more
        limit_cleanup = tuple(
            f"WITH doomed AS MATERIALIZED (SELECT {pk} FROM {table} WHERE expires_at <= %(now)s "
            f"ORDER BY expires_at, {pk} LIMIT %(limit)s FOR UPDATE SKIP LOCKED) "
            f"DELETE FROM {table} USING doomed WHERE {table}.{pk} = doomed.{pk} "
            f"AND {table}.expires_at <= %(now)s"
            for table, pk in ((ENTRIES, "entry_key"), (SIGNATURES, "signature"),
                              (APPROVALS, "approval_id"))
        )
    else:
        limit_cleanup = tuple(
            f"DELETE FROM {table} WHERE expires_at <= %(now)s ORDER BY expires_at LIMIT %(limit)s"
            for table in (ENTRIES, SIGNATURES, APPROVALS)
        )
    claim = _postgresql_claim() if dialect == "postgresql" else _mysql_claim(returning)
    live_approval = f"SELECT {APPROVAL_COLUMNS} FROM {APPROVALS} WHERE "
    return Statements(
        dialect=dialect,
        claim_answers=dialect == "postgresql" or returning,
        claim=claim,
        remember_signature=_signature(dialect, returning),
        complete=(
            f"UPDATE {ENTRIES} SET state = 'completed', status = %(status)s, "
            "headers = %(headers)s, body = %(body)s, expires_at = %(expires)s "
            "WHERE entry_key = %(key)s AND token = %(token)s AND state = 'in_progress' "
            f"AND {_LIVE}"
        ),
        take_over=(
            f"UPDATE {ENTRIES} SET token = %(new_token)s, lease_expires_at = %(lease)s, "
            f"expires_at = {greatest}(expires_at, %(lease)s) "
            "WHERE entry_key = %(key)s AND token = %(old_token)s AND state = 'in_progress' "
            f"AND {_LIVE}"
        ),
        mark_uncertain=(
            f"UPDATE {ENTRIES} SET lease_expires_at = {least}(lease_expires_at, %(now)s), "
            "note = %(note)s WHERE entry_key = %(key)s AND token = %(token)s "
            f"AND state = 'in_progress' AND {_LIVE}"
        ),
        release=(
            f"DELETE FROM {ENTRIES} WHERE entry_key = %(key)s AND token = %(token)s "
            f"AND state = 'in_progress' AND {_LIVE}"
        ),
        resolve_delete=f"DELETE FROM {ENTRIES} WHERE entry_key = %(key)s AND {_LIVE}",
        resolve_complete=(
            f"UPDATE {ENTRIES} SET state = 'completed', token = %(token)s, status = %(status)s, "
            "headers = %(headers)s, body = %(body)s, note = %(note)s, expires_at = %(expires)s "
            f"WHERE entry_key = %(key)s AND {_LIVE}"
        ),
        get=f"SELECT {ENTRY_COLUMNS} FROM {ENTRIES} WHERE entry_key = %(key)s AND {_LIVE}",
        claimed=(f"SELECT {ENTRY_COLUMNS}{', claims' if dialect == 'mysql' else ', NULL'} "
                 f"FROM {ENTRIES} WHERE entry_key = %(key)s AND {_LIVE}"),
        token_of=f"SELECT state, token FROM {ENTRIES} WHERE entry_key = %(key)s AND {_LIVE}",
        nonce_of=f"SELECT nonce FROM {SIGNATURES} WHERE signature = %(signature)s AND {_LIVE}",
        list={
            state: (f"SELECT entry_key, {ENTRY_COLUMNS} FROM {ENTRIES} WHERE {_LIVE}{where} "
                    "ORDER BY created_at, entry_key LIMIT %(limit)s")
            for state, where in _LIST_FILTERS.items()
        },
        cleanup=limit_cleanup,
        add_approval=_add_approval(dialect),
        record_decision=(
            f"UPDATE {APPROVALS} SET status = %(status)s, decision_id = %(decision_id)s, "
            "approver = %(approver)s, decided_at = %(now)s, "
            f"expires_at = {greatest}(expires_at, %(expires)s) "
            f"WHERE approval_id = %(approval_id)s AND status = 'pending' AND {_LIVE}"
        ),
        get_approval=live_approval + f"approval_id = %(approval_id)s AND {_LIVE}",
        find_approvals=(live_approval + f"job_id = %(job_id)s AND tool = %(tool)s AND {_LIVE} "
                        "ORDER BY received_at, approval_id"),
        list_approvals={
            False: live_approval + f"{_LIVE} ORDER BY received_at, approval_id LIMIT %(limit)s",
            True: (live_approval + f"{_LIVE} AND status = %(status)s "
                   "ORDER BY received_at, approval_id LIMIT %(limit)s"),
        },
        spend_approval=(
            f"UPDATE {APPROVALS} SET used_by = %(key)s, used_at = %(now)s "
            "WHERE approval_id = %(approval_id)s AND status = 'approved' AND used_by IS NULL "
            f"AND {_LIVE}"
        ),
        lock_approvals=(
            f"SELECT approval_id FROM {APPROVALS} WHERE approval_id IN ({{ids}}) "
            "ORDER BY approval_id FOR UPDATE"
        ),
        approvals_used_by=(
            f"SELECT approval_id, used_by FROM {APPROVALS} WHERE approval_id = %(approval_id)s "
            f"AND status = 'approved' AND used_by IS NOT NULL AND {_LIVE}"
        ),
    )
