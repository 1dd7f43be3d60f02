"""Visitor tickets for the hub's chat widget.

A signed-in user of the business opens the hub's chat widget. The business
backend proves who that user is with a short ticket signed by its *client
token*; the page hands the ticket to the widget, the hub checks it and the
ticket's ``uid`` becomes the acting subject of the chat job (the
``X-Bailing-On-Behalf-Of`` of every tool call it makes).

The ticket is ``v1.<payload>.<mac>`` where ``payload`` is the base64url text
(no padding) of the compact JSON ``{"uid":..,"exp":..}`` and ``mac`` the
lowercase hex HMAC-SHA256 of that *text* under the client token.

:func:`sign_ticket` is strict where the hub is lenient: the hub trims a uid
it receives and cuts it to 64 UTF-16 code units (``String(uid).trim().slice(0,
64)``), so exactly the uids that survive that unchanged are accepted, and the
rest are refused instead of silently becoming a different subject. A uid
with a character above U+00FF is a valid ticket, but it can never be the
``X-Bailing-On-Behalf-Of`` header of a tool call (the hub's HTTP client
refuses such header values), so it is refused too, unless the caller says
the ticket is only for chatting (``chat_only=True``).
:func:`verify_ticket` applies the hub's own acceptance rules (including its
JavaScript conversions) so tests can check what the hub would accept.
The client token never leaves the server: only the ticket goes to the page.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from itsdangerous.encoding import base64_encode
from markupsafe import Markup, escape

from bailing_flask.wire.jsenc import js_trim as _js_trim, utf16_len as _utf16_len, utf16_slice as _utf16_prefix
from bailing_flask.wire.jsenc import js_string
from bailing_flask.hub.client import normalize_hub_url
from bailing_flask.errors import BailingError, ConfigurationError
from bailing_flask.wire.signing import Clock

if TYPE_CHECKING:  # pragma: no cover
    from bailing_flask.settings import Config

__all__ = [
    "DEFAULT_TICKET_TTL",
    "TicketError",
    "Ticket",
    "sign_ticket",
    "verify_ticket",
    "widget_script_tag",
]

#: The hub SDKs' default lifetime (seconds). The hub itself has no maximum.
DEFAULT_TICKET_TTL = 7200
#: The hub keeps the first 64 UTF-16 units of the (trimmed) uid.
_MAX_UID_UTF16 = 64

_TICKET_RE = re.compile(r"v1\.([A-Za-z0-9_-]+)\.([0-9a-f]{64})")
#: What the widget accepts in ``data-entry`` (``web/widget/widget.js``).
_ENTRY_RE = re.compile(r"[a-z0-9_-]{4,32}")
_ATTRIBUTE_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_:.-]*")
#: Attributes this helper owns; letting ``**attrs`` override them would
#: produce a tag the widget reads differently from what the caller asked.
_RESERVED_ATTRIBUTES = frozenset({"src", "data-entry", "data-ticket", "async"})
_JS_DECIMAL_RE = re.compile(r"[+-]?(?:Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)")
_JS_RADIX_RE = re.compile(r"0([xXoObB])([0-9A-Fa-f]+)")


class TicketError(BailingError, ValueError):
    """A ticket cannot be signed, or was refused the way the hub refuses it.

    :param reason: a stable code: ``invalid_uid``, ``uid_not_latin1``,
        ``invalid_ttl``, ``invalid_expiry``, ``missing_client_token`` when signing;
        ``malformed_ticket``, ``bad_signature``, ``malformed_payload``,
        ``empty_uid``, ``expired`` when verifying.
    """

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Ticket:
    """What the hub takes from a ticket it accepts."""

    #: The subject as the hub uses it (trimmed, at most 64 UTF-16 units).
    uid: str
    #: Expiry in Unix seconds; the ticket is valid through this second.
    exp: int | float


def _check_token(client_token: object) -> bytes:
    if not isinstance(client_token, str) or not client_token.strip():
        raise TicketError(
            "The client token is empty: tickets are signed with the client token the hub "
            "issued to this business (the chat entry's ticket issuer).",
            "missing_client_token",
        )
    return client_token.encode("utf-8")


def _check_uid(uid: object, chat_only: bool = False) -> str:
    """``uid`` if the hub keeps it exactly as it is, else :class:`TicketError`.

    The hub's rule is ``String(uid).trim().slice(0, 64)``: JavaScript's trim
    (a different set of characters than ``str.strip``) and 64 UTF-16 code
    units (an astral character counts 2).
    """
    if not isinstance(uid, str):
        raise TicketError(f"uid must be a string, not {type(uid).__name__}.", "invalid_uid")
    if not uid:
        raise TicketError("uid is empty: a ticket must name the signed-in user.", "invalid_uid")
    try:
        uid.encode("utf-8")
    except UnicodeEncodeError:
        raise TicketError("uid must be valid Unicode text (no lone surrogates).",
                          "invalid_uid") from None
    if uid != _js_trim(uid):
        raise TicketError(
            "uid must not start or end with whitespace: the hub trims it "
            "(String(uid).trim()), so the subject would silently differ.",
            "invalid_uid",
        )
    units = _utf16_len(uid)
    if units > _MAX_UID_UTF16:
        raise TicketError(
            f"uid is {units} UTF-16 code units long; the hub keeps only the first "
            f"{_MAX_UID_UTF16} (String(uid).trim().slice(0, 64)), so the subject would silently "
            "differ. Use a shorter, structured id such as 'tenant_1:user_1001'.",
            "invalid_uid",
        )
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in uid):
        # The uid becomes the X-Bailing-On-Behalf-Of header of tool calls.
        raise TicketError("uid must not contain control characters.", "invalid_uid")
    if not chat_only and any(ord(ch) > 0xFF for ch in uid):
        raise TicketError(
            "uid contains characters above U+00FF: the hub accepts the ticket, but the uid "
            "becomes the X-Bailing-On-Behalf-Of header of the chat's tool calls, and the hub's "
            "HTTP client refuses such header values, so every tool call on this user's behalf "
            "would fail. Use an ASCII id, or pass chat_only=True if no tool acts on behalf of "
            "this user.",
            "uid_not_latin1",
        )
    return uid


def _expiry(ttl: object, expires_at: object, now: float) -> int:
    if expires_at is not None:
        if isinstance(expires_at, bool) or not isinstance(expires_at, int):
            raise TicketError("expires_at must be Unix seconds (an int).", "invalid_expiry")
        if expires_at * 1000 < math.floor(now * 1000):
            raise TicketError("expires_at is in the past: the hub would refuse the ticket.",
                              "invalid_expiry")
        return expires_at
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not math.isfinite(ttl):
        raise TicketError("ttl must be a number of seconds.", "invalid_ttl")
    if ttl < 1:
        # the expiry is whole seconds (int(now + ttl), like the hub's SDKs): under one second
        # the ticket could be expired the moment it is issued
        raise TicketError("ttl must be at least 1 second.", "invalid_ttl")
    return int(now + ttl)


def _payload_text(uid: str, exp: int) -> str:
    document = json.dumps({"uid": uid, "exp": exp}, ensure_ascii=False, separators=(",", ":"))
    return base64_encode(document.encode("utf-8")).decode("ascii")


def _mac(key: bytes, payload: str) -> str:
    return hmac.new(key, payload.encode("ascii"), hashlib.sha256).hexdigest()


def sign_ticket(
    client_token: str,
    uid: str,
    ttl: int | float = DEFAULT_TICKET_TTL,
    expires_at: int | None = None,
    *,
    clock: Clock = time.time,
    chat_only: bool = False,
) -> str:
    """Sign a visitor ticket for ``uid``, valid for ``ttl`` seconds or until ``expires_at``.

    :param client_token: the client token of the client set as the chat
        entry's ticket issuer in the hub (never the provider secret).
    :param uid: the signed-in user: at most 64 UTF-16 code units, without
        surrounding whitespace (JavaScript's trim) or control characters --
        exactly what the hub keeps unchanged. Prefer ASCII such as
        ``tenant_1:user_1001``.
    :param ttl: lifetime in seconds (default 7200, like the hub's SDKs), at least 1.
    :param expires_at: absolute expiry in Unix seconds; overrides ``ttl``.
    :param clock: returns the current Unix time in seconds.
    :param chat_only: the ticket is only for chatting, no tool acts on the
        user's behalf: allows characters above U+00FF in ``uid``, which can
        never travel in a tool call's ``X-Bailing-On-Behalf-Of`` header.
    :raises TicketError: for anything the hub would refuse or alter
        (``invalid_uid``), and for a uid that cannot be a tool call's
        subject (``uid_not_latin1``).
    """
    key = _check_token(client_token)
    subject = _check_uid(uid, chat_only)
    exp = _expiry(ttl, expires_at, clock())
    payload = _payload_text(subject, exp)
    return f"v1.{payload}.{_mac(key, payload)}"






def _js_number(value: object) -> float:
    """``Number(value)`` for a JSON value."""
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, list):
        return _js_number(js_string(value))
    if not isinstance(value, str):
        return math.nan
    text = _js_trim(value)
    if not text:
        return 0.0
    radix = _JS_RADIX_RE.fullmatch(text)
    if radix is not None:
        base = {"x": 16, "o": 8, "b": 2}[radix.group(1).lower()]
        try:
            return float(int(radix.group(2), base))
        except ValueError:
            return math.nan
    if _JS_DECIMAL_RE.fullmatch(text) is None:
        return math.nan
    return float(text.replace("Infinity", "inf"))


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _decode_payload(payload: str) -> object:
    # Node's base64url decoder ignores a dangling last character.
    usable = payload[: len(payload) - 1] if len(payload) % 4 == 1 else payload
    try:
        data = base64.urlsafe_b64decode(usable + "=" * (-len(usable) % 4))
        return json.loads(data.decode("utf-8", "replace"), parse_constant=_reject_constant)
    except (binascii.Error, ValueError, RecursionError):
        return None


def verify_ticket(client_token: str, ticket: str, *, clock: Clock = time.time) -> Ticket:
    """Accept or refuse ``ticket`` exactly as the hub does; for tests and diagnostics.

    Rules (hub ``src/routes/chat.ts``): the whole ticket matches
    ``^v1\\.([A-Za-z0-9_-]+)\\.([0-9a-f]{64})$``; the HMAC covers the base64url
    text; the payload is JSON whose ``uid``, converted with JS ``String()``,
    trimmed and cut to 64 UTF-16 units, is non-empty; ``Number(exp)`` is
    finite and ``exp * 1000 >= now_ms``. There is no clock-skew allowance.

    :raises TicketError: with the reason the hub would have refused it for.
    """
    key = _check_token(client_token)
    match = _TICKET_RE.fullmatch(ticket) if isinstance(ticket, str) else None
    if match is None:
        raise TicketError("The ticket is not of the form v1.<base64url>.<64 hex>.",
                          "malformed_ticket")
    payload, mac = match.group(1), match.group(2)
    if not hmac.compare_digest(_mac(key, payload).encode("ascii"), mac.encode("ascii")):
        raise TicketError("The ticket was not signed with this client token.", "bad_signature")
    document = _decode_payload(payload)
    if not isinstance(document, dict):
        raise TicketError("The ticket payload is not a JSON object.", "malformed_payload")
    raw_uid = document.get("uid")
    uid = _utf16_prefix(_js_trim("" if raw_uid is None else js_string(raw_uid)), _MAX_UID_UTF16)
    if not uid:
        raise TicketError("The ticket names no uid.", "empty_uid")
    raw_exp = document.get("exp")
    exp = _js_number(0 if raw_exp is None else raw_exp)
    if not math.isfinite(exp) or exp * 1000 < math.floor(clock() * 1000):
        raise TicketError("The ticket has expired.", "expired")
    return Ticket(uid=uid, exp=int(exp) if exp.is_integer() else exp)


def _widget_src(hub_url: str) -> str:
    # The widget derives the hub's address from its own src, so a mount
    # path such as https://example.com/hub is kept.
    return normalize_hub_url(hub_url) + "/widget.js"


def _attribute(name: str, value: object) -> str | None:
    html_name = name.rstrip("_").replace("_", "-").lower()
    if _ATTRIBUTE_NAME_RE.fullmatch(html_name) is None:
        raise ConfigurationError(f"{name!r} is not a valid HTML attribute name.")
    if html_name in _RESERVED_ATTRIBUTES:
        raise ConfigurationError(f"The {html_name} attribute is set by widget_script_tag itself.")
    if value is None or value is False:
        return None
    if html_name in ("open", "data-open"):
        # The widget opens itself only for data-open="1".
        return 'data-open="1"'
    if html_name == "type" and str(value).strip().lower() == "module":
        raise ConfigurationError(
            "The widget must load as a classic script: it finds its attributes through "
            "document.currentScript, which is null in modules."
        )
    if value is True:
        return html_name
    return f'{html_name}="{escape(str(value))}"'


def widget_script_tag(
    hub_url: str, entry: str, ticket: str | None = None, **attrs: object
) -> Markup:
    """Render the hub's chat-widget ``<script>`` tag, carrying ``ticket`` if given.

    The widget (``{hub}/widget.js``) reads ``data-entry`` (required, must
    match ``^[a-z0-9_-]{4,32}$``), ``data-ticket`` (omitted for anonymous
    visitors) and ``data-open`` (``open=True`` renders ``data-open="1"``,
    opening the chat on load). Other keyword arguments become attributes
    (``nonce="..."`` for a CSP, ``data_foo`` -> ``data-foo``); ``True``
    renders a bare attribute, ``None``/``False`` omits it. All values are
    HTML-escaped; the result is safe to put into a Jinja template as is.

    :raises ConfigurationError: for a bad hub URL, entry key or attribute.
    :raises TicketError: if ``ticket`` is not a well-formed ticket.
    """
    src = _widget_src(hub_url)
    if not isinstance(entry, str) or _ENTRY_RE.fullmatch(entry) is None:
        raise ConfigurationError(
            "entry must be the chat entry key, 4-32 characters of a-z, 0-9, '_' or '-'."
        )
    parts = [f'src="{escape(src)}"', f'data-entry="{escape(entry)}"']
    if ticket:
        if not isinstance(ticket, str) or _TICKET_RE.fullmatch(ticket) is None:
            raise TicketError("ticket must be a ticket made by sign_ticket().", "malformed_ticket")
        parts.append(f'data-ticket="{escape(ticket)}"')
    for name, value in attrs.items():
        rendered = _attribute(name, value)
        if rendered is not None:
            parts.append(rendered)
    parts.append("async")
    return Markup(f"<script {' '.join(parts)}></script>")


def chat_widget(config: Config, entry: str, uid: str | None = None, *, chat_only: bool = False,
                **attrs: Any) -> Markup:
    """Template global ``bailing_chat_widget(entry, uid)``: the widget tag with a ticket.

    ``chat_only=True`` allows a uid no tool call could carry (see ``sign_ticket``).
    """
    from bailing_flask.hub.client import client_token

    hub_url = config.hub_url
    if not hub_url:
        raise ConfigurationError("set BAILING_HUB_URL to render the chat widget")
    ticket = sign_ticket(client_token(config), uid, chat_only=chat_only) if uid else None
    return widget_script_tag(hub_url, entry, ticket, **attrs)
