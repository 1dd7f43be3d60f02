"""How the Redis store's records travel: RESP commands out, hashes back into records.

Times travel as Python ``repr(float)`` strings (the Lua scripts compare them
as numbers), TTLs as whole milliseconds; entries and approval records are
hashes of byte strings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from bailing_flask.stores._entries import Entry, StoredResponse, _decode_headers, _decode_meta
from bailing_flask.stores.approvals import ApprovalRecord, decode_record


def _approval_from_hash(approval_id: int, fields: Mapping[bytes, bytes]) -> ApprovalRecord:
    def text(name: bytes) -> str | None:
        value = fields.get(name)
        return None if value is None else value.decode("utf-8")

    decided_at = fields.get(b"decided_at")
    used_at = fields.get(b"used_at")
    return decode_record(
        approval_id, text(b"job_id") or "", text(b"tool") or "", fields[b"request"],
        status=text(b"status") or "pending", received_at=float(fields[b"received_at"]),
        expires_at=float(fields[b"expires_at"]), decision_id=text(b"decision_id"),
        approver=text(b"approver"), decided_at=None if decided_at is None else float(decided_at),
        used_by=text(b"used_by"), used_at=None if used_at is None else float(used_at),
    )



def _millis(seconds: float) -> int:
    """A Redis TTL in milliseconds, never zero (PX 0 is an error)."""
    return max(1, math.ceil(seconds * 1000))



def _num(value: float) -> str:
    return repr(float(value))



def _pack(commands: list[tuple[bytes, ...]]) -> bytes:
    """Commands of byte strings in RESP, the way redis-py packs them (but without its
    per-argument encoder: every argument here is bytes already)."""
    out = []
    for command in commands:
        out.append(b"*%d\r\n" % len(command))
        for arg in command:
            out.append(b"$%d\r\n" % len(arg))
            out.append(arg)
            out.append(b"\r\n")
    return b"".join(out)



def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8")



def _entry_from_hash(key: str, fields: Mapping[bytes, bytes]) -> Entry:
    response = None
    if b"status" in fields:
        response = StoredResponse(
            int(fields[b"status"]), _decode_headers(fields[b"headers"]), fields[b"body"]
        )
    return Entry(
        key=key,
        state=fields[b"state"].decode("ascii"),  # type: ignore[arg-type]
        token=fields[b"token"].decode("utf-8"),
        created_at=float(fields[b"created_at"]),
        lease_expires_at=float(fields[b"lease_expires_at"]),
        expires_at=float(fields[b"expires_at"]),
        meta=_decode_meta(fields[b"meta"]),
        response=response,
        note=_text(fields.get(b"note")),
    )



def _pairs(flat: list[bytes]) -> dict[bytes, bytes]:
    """HGETALL as returned from a Lua script: a flat list of fields and values."""
    return dict(zip(flat[::2], flat[1::2]))



def _glob_escape(text: str) -> str:
    """Escape SCAN ``MATCH`` wildcards, so a prefix like ``app[1]:`` is literal."""
    return "".join("\\" + char if char in "*?[]\\" else char for char in text)
