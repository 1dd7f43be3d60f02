"""Target ``tickets``: visitor tickets, signed and verified.

Cases are arbitrary strings, strings shaped like tickets, genuine tickets
with one edit (a character changed, added or removed, another payload, a
different case, padding, whitespace), tickets signed with another key, and
payloads signed with the right key but carrying any JSON (what the hub's own
checks must cope with). Signing gets arbitrary uids, lifetimes and expiries.

Oracle: :func:`~bailing_flask.hub.tickets.verify_ticket` and
:func:`~bailing_flask.hub.tickets.widget_script_tag` raise nothing but
:class:`~bailing_flask.hub.tickets.TicketError` (and ``ConfigurationError`` for a
bad tag); a ticket verifies only if it is exactly what was signed with the
client token; a ticket :func:`~bailing_flask.hub.tickets.sign_ticket` issues
verifies, with the same uid.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from . import CLIENT_TOKEN, Outcome
from .callbacks import json_values

__all__ = ["TicketCase", "cases", "target"]

_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"


@dataclass
class TicketCase:
    kind: str  # verify, sign
    data: dict[str, Any]

    def __repr__(self) -> str:
        return f"TicketCase({self.kind}, {self.data!r:.800})"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _mac(key: str, payload: str) -> str:
    return hmac.new(key.encode(), payload.encode("ascii"), hashlib.sha256).hexdigest()


def _genuine(uid: Any = "t1:u1", exp: Any = None, key: str = CLIENT_TOKEN) -> str:
    document = {"uid": uid, "exp": int(time.time()) + 3600 if exp is None else exp}
    payload = _b64(json.dumps(document, separators=(",", ":")).encode("utf-8", "surrogatepass"))
    return f"v1.{payload}.{_mac(key, payload)}"


_edits = st.one_of(
    st.tuples(st.just("replace"), st.integers(0, 500), st.characters()),
    st.tuples(st.just("insert"), st.integers(0, 500), st.characters()),
    st.tuples(st.just("delete"), st.integers(0, 500), st.none()),
    st.tuples(st.just("upper_mac"), st.none(), st.none()),
    st.tuples(st.just("pad"), st.sampled_from(["=", "==", "\n", " ", "\x00", "\r\n"]), st.none()),
    st.tuples(st.just("prefix"), st.sampled_from(["V1.", "v2.", "v1..", "", "v1"]), st.none()),
    st.tuples(st.just("swap_payload"), st.none(), st.none()),
)


@st.composite
def _verify(draw: st.DrawFn) -> TicketCase:
    kind = draw(st.sampled_from(["text", "shaped", "edited", "edited", "other_key", "any_payload"]))
    genuine: str | None = None
    if kind == "text":
        ticket = draw(st.one_of(st.text(max_size=120), st.binary(max_size=20).map(repr)))
    elif kind == "shaped":
        ticket = "v1.{}.{}".format(draw(st.text(_ALPHABET, min_size=1, max_size=80)),
                                   draw(st.text("0123456789abcdef", min_size=64, max_size=64)))
    elif kind == "other_key":
        ticket = _genuine(key="not-the-client-token-0123456789abcdef")
    elif kind == "any_payload":
        ticket = genuine = _genuine(draw(json_values), draw(st.one_of(json_values, st.none())))
    else:
        ticket = original = _genuine(draw(st.text(max_size=20)) or "u")
        for action, where, value in draw(st.lists(_edits, min_size=1, max_size=3)):
            if action == "replace" and ticket:
                i = where % len(ticket)
                ticket = ticket[:i] + value + ticket[i + 1:]
            elif action == "insert":
                i = where % (len(ticket) + 1)
                ticket = ticket[:i] + value + ticket[i:]
            elif action == "delete" and ticket:
                i = where % len(ticket)
                ticket = ticket[:i] + ticket[i + 1:]
            elif action == "upper_mac":
                head, _, mac = ticket.rpartition(".")
                ticket = head + "." + mac.upper()
            elif action == "pad":
                ticket = ticket + where
            elif action == "prefix":
                ticket = where + ticket.partition(".")[2]
            elif action == "swap_payload":
                other = _genuine("someone-else").split(".")[1]
                parts = ticket.split(".")
                if len(parts) == 3:
                    ticket = ".".join([parts[0], other, parts[2]])
        genuine = original  # an edit may give the ticket back unchanged
    return TicketCase("verify", {"ticket": ticket, "genuine": genuine})


@st.composite
def _sign(draw: st.DrawFn) -> TicketCase:
    return TicketCase("sign", {
        "uid": draw(st.one_of(st.text(max_size=70), json_values,
                              st.sampled_from(["t1:u1", " u", "u ", "\u3000u", "𝒳" * 33, "é", "\ud800"]))),
        "ttl": draw(st.one_of(st.sampled_from([7200, 1, 0, -1, 0.5, float("inf"), float("nan"), True,
                                               10**20, "60"]), json_values)),
        "expires_at": draw(st.one_of(st.none(), st.none(), st.integers(-10, 2**63),
                                     st.sampled_from([int(time.time()) + 60, 1.5, "1", True]))),
        "chat_only": draw(st.booleans()),
    })


cases = st.one_of(_verify(), _verify(), _sign())


def _check_verify(data: dict[str, Any]) -> Outcome:
    from bailing_flask.errors import ConfigurationError
    from bailing_flask.hub.tickets import Ticket, TicketError, verify_ticket, widget_script_tag

    outcome = Outcome()
    ticket = data["ticket"]
    try:
        result = verify_ticket(CLIENT_TOKEN, ticket)
    except TicketError as exc:
        outcome.label = exc.reason
    except Exception as exc:
        outcome.add("exception", f"verify_ticket: {type(exc).__name__}: {exc}")
    else:
        outcome.label = "verified"
        if ticket != data["genuine"]:
            outcome.add("false_accept", f"a ticket nobody signed verified: {result!r}")
        elif not isinstance(result, Ticket) or not isinstance(result.uid, str) or not result.uid:
            outcome.add("malformed", f"verified as {result!r}")
    try:
        tag = widget_script_tag("https://hub.example.com", "entry_1", ticket)
    except (TicketError, ConfigurationError):
        pass
    except Exception as exc:
        outcome.add("exception", f"widget_script_tag: {type(exc).__name__}: {exc}")
    else:
        if ticket and ("<" in ticket or '"' in ticket) and ticket in tag:
            outcome.add("malformed", f"the ticket went into the tag unescaped: {tag}")
    return outcome


def _check_sign(data: dict[str, Any]) -> Outcome:
    from bailing_flask.hub.tickets import TicketError, sign_ticket, verify_ticket

    outcome = Outcome()
    try:
        ticket = sign_ticket(CLIENT_TOKEN, data["uid"], data["ttl"], data["expires_at"],
                             chat_only=data["chat_only"])
    except TicketError as exc:
        outcome.label = exc.reason
        return outcome
    except Exception as exc:
        outcome.add("exception", f"sign_ticket: {type(exc).__name__}: {exc}")
        return outcome
    outcome.label = "signed"
    try:
        verified = verify_ticket(CLIENT_TOKEN, ticket)
    except Exception as exc:
        outcome.add("malformed", f"a ticket sign_ticket issued does not verify: {type(exc).__name__}: {exc}")
        return outcome
    if verified.uid != data["uid"]:
        outcome.add("malformed", f"signed for {data['uid']!r}, verified as {verified.uid!r}")
    return outcome


@contextmanager
def target() -> Iterator[Callable[[TicketCase], Outcome]]:
    yield lambda case: _check_verify(case.data) if case.kind == "verify" else _check_sign(case.data)
