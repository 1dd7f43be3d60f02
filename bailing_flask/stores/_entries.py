"""The records every store reads and writes, and how the backends encode them.

The value objects of the store API (:class:`Entry`, :class:`EntryMeta`,
:class:`StoredResponse`, :class:`Reservation`, :class:`StoreUnavailable`),
re-exported by :mod:`bailing_flask.stores.base` and :mod:`bailing_flask.stores`;
the JSON the SQLite and Redis stores keep the meta and the headers in; and
how an existing entry is reported (:func:`_outcome`).
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from bailing_flask.errors import BailingError

#: A source of the current Unix time in seconds (``time.time`` by default).
Clock = Callable[[], float]
EntryState = Literal["in_progress", "completed"]
#: ``list()`` filter: ``"in_progress"`` means the lease has not run out yet.
ListState = Literal["uncertain", "in_progress", "completed"]
Outcome = Literal["reserved", "in_progress", "completed", "uncertain"]

def resolved_token() -> str:
    """The ``Entry.token`` of an entry an operator just resolved: no worker owns it any more.

    New for every decision, so a decision taken on one read of the entry
    (``resolve(..., seen=entry)``) applies at most once: a second operator
    who read the same resolved entry finds its token changed and is refused.
    """
    return "resolved-" + os.urandom(8).hex()


class StoreUnavailable(BailingError):
    """The store's backend cannot be reached or is broken.

    Raised by every store method instead of the backend's own exception, so
    the web layer can answer 503 without knowing which backend is in use.
    The message names the backend and the cause, never a password.
    """

    #: Stable reason code, like those of :class:`~bailing_flask.errors.SignatureError`.
    reason = "store_unavailable"


class StoreBusy(StoreUnavailable):
    """The store works but another process holds its lock past the busy timeout (a SQLite file
    locked by a backup, a migration, a ``sqlite3`` shell): try again shortly."""

    reason = "store_busy"
    #: Seconds the caller is told to wait (``Retry-After``).
    retry_after = 2


@dataclass(frozen=True)
class StoredResponse:
    """The response to hand to repeats of a completed call, byte for byte.

    ``headers`` are ``(name, value)`` string pairs as WSGI carries them
    (values may hold characters up to U+00FF, or beyond if an app sets
    them); any iterable of pairs is accepted and frozen into a tuple.
    """

    status: int
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""

    def __post_init__(self) -> None:
        if isinstance(self.status, bool) or not isinstance(self.status, int) or not (
            100 <= self.status <= 999
        ):
            raise ValueError("StoredResponse.status must be an HTTP status code (100-999).")
        headers = tuple((str(name), str(value)) for name, value in self.headers)
        object.__setattr__(self, "headers", headers)
        if not isinstance(self.body, bytes):
            object.__setattr__(self, "body", bytes(self.body))


def _trusted_response(
    status: int, headers: tuple[tuple[str, str], ...], body: bytes
) -> StoredResponse:
    """A :class:`StoredResponse` of values known to be right (Flask's own), unchecked.

    For the request path: the checks of ``__post_init__`` are for values from
    elsewhere (an operator, a script). Equal to ``StoredResponse(status,
    headers, body)`` (a test says so).
    """
    response = object.__new__(StoredResponse)
    fields = response.__dict__
    fields["status"] = status
    fields["headers"] = headers
    fields["body"] = body
    return response


@dataclass(frozen=True)
class EntryMeta:
    """What the entry is about, kept for operators reconciling uncertain calls.

    :param tool: the tool name.
    :param job_id: the signed hub job id.
    :param subject: the signed acting subject (``None`` when anonymous).
    :param unsigned_key: the ``X-Bailing-Idempotency-Key`` header as first
        seen. It is not signed, so it is recorded, never trusted.
    """

    tool: str = ""
    job_id: str = ""
    subject: str | None = None
    unsigned_key: str | None = None


def _trusted_meta(
    tool: str, job_id: str, subject: str | None, unsigned_key: str | None
) -> EntryMeta:
    """``EntryMeta(tool, job_id, subject, unsigned_key)``, built without the frozen
    dataclass's per-field ``object.__setattr__`` (the request path builds one per call)."""
    meta = object.__new__(EntryMeta)
    fields = meta.__dict__
    fields["tool"] = tool
    fields["job_id"] = job_id
    fields["subject"] = subject
    fields["unsigned_key"] = unsigned_key
    return meta


@dataclass(frozen=True)
class Entry:
    """One reserved key, as the store holds it at the time it was read.

    Times are Unix seconds by the store's clock. ``expires_at`` is the end of
    retention: after it the entry no longer exists for any method.
    """

    key: str
    state: EntryState
    token: str
    created_at: float
    lease_expires_at: float
    expires_at: float
    meta: EntryMeta
    response: StoredResponse | None = None
    note: str | None = None

    def is_uncertain(self, now: float) -> bool:
        """Whether the worker that reserved this entry is presumed dead.

        The side effect may or may not have happened, so the call must be
        neither answered nor re-run without a decision.
        """
        return self.state == "in_progress" and now >= self.lease_expires_at

    def to_dict(self, *, now: float | None = None) -> dict[str, Any]:
        """A JSON-ready view for listings (the token is left out).

        With ``now``, ``state`` reads ``"uncertain"`` for an in-progress entry
        whose lease ran out. The body is given as ``body`` text when it is
        valid UTF-8, else as ``body_base64``.
        """
        state: str = self.state
        if now is not None and self.is_uncertain(now):
            state = "uncertain"
        data: dict[str, Any] = {
            "key": self.key,
            "state": state,
            "created_at": self.created_at,
            "lease_expires_at": self.lease_expires_at,
            "expires_at": self.expires_at,
            "tool": self.meta.tool,
            "job_id": self.meta.job_id,
            "subject": self.meta.subject,
            "unsigned_key": self.meta.unsigned_key,
            "note": self.note,
            "response": None,
        }
        if self.response is not None:
            response: dict[str, Any] = {
                "status": self.response.status,
                "headers": [list(pair) for pair in self.response.headers],
            }
            try:
                response["body"] = self.response.body.decode("utf-8")
            except UnicodeDecodeError:
                response["body_base64"] = base64.b64encode(self.response.body).decode("ascii")
            data["response"] = response
        return data


@dataclass(frozen=True)
class Reservation:
    """The answer to :meth:`IdempotencyStore.reserve`.

    ``"reserved"``: the caller owns the key and must ``complete`` or
    ``release`` it. Otherwise ``entry`` is the existing record: answer its
    response (``"completed"``), or refuse with 409 (``"in_progress"``,
    ``"uncertain"``).
    """

    outcome: Outcome
    entry: Entry


def _new_entry(key: str, token: str, now: float, lease_seconds: float, retention_seconds: float,
               meta: EntryMeta) -> Entry:
    """The entry :meth:`~IdempotencyStore.reserve` creates for a new key at ``now``."""
    lease = float(lease_seconds)
    return Entry(key, "in_progress", token, now, now + lease,
                 now + max(lease, float(retention_seconds)), meta)


def _outcome(entry: Entry, now: float) -> Outcome:
    """How :meth:`IdempotencyStore.reserve` reports an existing live entry."""
    if entry.state == "completed":
        return "completed"
    return "uncertain" if entry.is_uncertain(now) else "in_progress"


def _matches(entry: Entry, state: ListState | None, now: float) -> bool:
    return state is None or _outcome(entry, now) == state


#: ``json.dumps`` of one string (``ensure_ascii``), the C function ``json`` itself uses
_json_str: Callable[[str], str] = json.encoder.encode_basestring_ascii


def _encode_meta(meta: EntryMeta) -> str:
    """The meta as compact JSON; exactly ``json.dumps`` of its four fields, built directly."""
    tool, job_id, subject, unsigned_key = meta.tool, meta.job_id, meta.subject, meta.unsigned_key
    if (tool.__class__ is str and job_id.__class__ is str
            and (subject is None or subject.__class__ is str)
            and (unsigned_key is None or unsigned_key.__class__ is str)):
        return '{"tool":%s,"job_id":%s,"subject":%s,"unsigned_key":%s}' % (
            _json_str(tool), _json_str(job_id),
            "null" if subject is None else _json_str(subject),
            "null" if unsigned_key is None else _json_str(unsigned_key),
        )
    return json.dumps(
        {
            "tool": meta.tool,
            "job_id": meta.job_id,
            "subject": meta.subject,
            "unsigned_key": meta.unsigned_key,
        },
        separators=(",", ":"),
    )


def _decode_meta(text: str | bytes) -> EntryMeta:
    data = json.loads(text)
    return EntryMeta(
        tool=data.get("tool", ""),
        job_id=data.get("job_id", ""),
        subject=data.get("subject"),
        unsigned_key=data.get("unsigned_key"),
    )


def _encode_headers(headers: Iterable[tuple[str, str]]) -> str:
    # JSON escapes every non-ASCII character, so any header value round-trips.
    try:
        return "[" + ",".join(
            ["[" + _json_str(name) + "," + _json_str(value) + "]" for name, value in headers]
        ) + "]"
    except TypeError:  # not str (a store used directly with other values): let json say
        return json.dumps([[name, value] for name, value in headers], separators=(",", ":"))


def _decode_headers(text: str | bytes) -> tuple[tuple[str, str], ...]:
    return tuple((str(name), str(value)) for name, value in json.loads(text))
