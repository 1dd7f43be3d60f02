"""Visitor tickets match the hub's format and acceptance rules (CONTRACT.md §9)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest
from markupsafe import Markup

from bailing_flask.errors import BailingError, ConfigurationError
from bailing_flask.hub.tickets import (
    DEFAULT_TICKET_TTL,
    Ticket,
    TicketError,
    sign_ticket,
    verify_ticket,
    widget_script_tag,
)

from .helpers import FrozenClock

# The §9 example, verbatim.
TOKEN = "client-token-abc"
UID = "tenant_1:user_1001"
EXP = 1718007200
EXAMPLE = (
    "v1.eyJ1aWQiOiJ0ZW5hbnRfMTp1c2VyXzEwMDEiLCJleHAiOjE3MTgwMDcyMDB9."
    "103db2071034de89ef03f4574ab6b746fa4149b99c32805666abd284ceaf889c"
)


def at_ms(ms: int) -> FrozenClock:
    """A clock whose ``floor(now * 1000)`` is exactly ``ms``."""
    clock = FrozenClock((ms + 0.5) / 1000)
    assert int(clock() * 1000) == ms
    return clock


def forge(payload: dict | str | bytes, token: str = TOKEN) -> str:
    """A ticket over an arbitrary payload, signed like the hub expects."""
    if isinstance(payload, dict):
        payload = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    if isinstance(payload, str):
        payload = payload.encode("utf-8")
    text = base64.urlsafe_b64encode(payload).decode().rstrip("=")
    mac = hmac.new(token.encode(), text.encode(), hashlib.sha256).hexdigest()
    return f"v1.{text}.{mac}"


# --- signing ----------------------------------------------------------------


def test_contract_example_byte_for_byte():
    assert sign_ticket(TOKEN, UID, expires_at=EXP, clock=at_ms(1718000000000)) == EXAMPLE


def test_ttl_is_added_to_now_in_seconds():
    clock = FrozenClock(1718000000.9)
    ticket = sign_ticket(TOKEN, UID, clock=clock)
    assert verify_ticket(TOKEN, ticket, clock=clock) == Ticket(UID, 1718000000 + DEFAULT_TICKET_TTL)
    ticket = sign_ticket(TOKEN, UID, 60, clock=clock)
    assert verify_ticket(TOKEN, ticket, clock=clock).exp == 1718000060


def test_payload_is_compact_json_with_unescaped_non_ascii():
    ticket = sign_ticket(TOKEN, "租户:张三", expires_at=EXP, clock=at_ms(0), chat_only=True)
    payload = ticket.split(".")[1]
    assert "=" not in payload
    decoded = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    assert decoded == '{"uid":"租户:张三","exp":1718007200}'.encode()


@pytest.mark.parametrize(
    "uid",
    [
        "u" * 64,  # exactly the 64 UTF-16 units the hub keeps
        "é" * 64,  # 128 UTF-8 bytes, but 64 units: the hub keeps it whole (it travels as latin-1)
        "u" * 62 + "\xff" * 2,
        "a b",  # inner whitespace is kept by trim
        "tenant\x85",  # NEL: not whitespace to JavaScript's trim, so it survives
        "t1:u.1@corp",
    ],
)
def test_accepts_exactly_the_uids_the_hub_keeps_unchanged(uid):
    ticket = sign_ticket(TOKEN, uid, clock=at_ms(0))
    assert verify_ticket(TOKEN, ticket, clock=at_ms(0)).uid == uid


@pytest.mark.parametrize(
    "uid",
    [
        "",
        "u" * 65,  # the hub would cut it to 64
        "u" * 63 + "\U0001F600",  # 65 UTF-16 units: the emoji would be cut in half
        " tenant_1:user_1001",
        "tenant_1:user_1001 ",
        "\ttenant",
        "tenant\u3000",  # JS trim removes the ideographic space
        "tenant\ufeff",  # ... and the BOM, which str.strip() keeps
        "a\r\nb",
        "a\x00b",
        "\ud800",
    ],
)
def test_refuses_uids_the_hub_would_alter_or_that_cannot_be_a_header(uid):
    with pytest.raises(TicketError) as info:
        sign_ticket(TOKEN, uid, clock=at_ms(0), chat_only=True)
    assert info.value.reason == "invalid_uid"


@pytest.mark.parametrize("uid", ["张三", "t1:用户", "u\u0100", "\U0001F600"])
def test_a_uid_above_latin1_is_refused_unless_the_ticket_is_for_chat_only(uid):
    with pytest.raises(TicketError) as info:
        sign_ticket(TOKEN, uid, clock=at_ms(0))
    assert info.value.reason == "uid_not_latin1"
    assert "X-Bailing-On-Behalf-Of" in str(info.value) and "chat_only=True" in str(info.value)
    assert uid not in str(info.value)
    ticket = sign_ticket(TOKEN, uid, clock=at_ms(0), chat_only=True)
    assert verify_ticket(TOKEN, ticket, clock=at_ms(0)).uid == uid


def test_whitespace_padded_ticket_uid_is_refused_because_the_hub_trims_it():
    """The hub keeps String(uid).trim(): a padded uid would become another subject."""
    padded = " t1:u1 "
    with pytest.raises(TicketError, match="whitespace") as info:
        sign_ticket(TOKEN, padded, clock=at_ms(0))
    assert info.value.reason == "invalid_uid"
    # what the hub would have made of it (a forged ticket shows it)
    assert verify_ticket(TOKEN, forge({"uid": padded, "exp": EXP}), clock=at_ms(0)).uid == "t1:u1"


def test_refuses_non_string_uid():
    with pytest.raises(TicketError, match="uid must be a string"):
        sign_ticket(TOKEN, 1001, clock=at_ms(0))  # type: ignore[arg-type]


@pytest.mark.parametrize("ttl", [0, -1, -0.5, float("nan"), float("inf"), True, "60"])
def test_refuses_non_positive_or_non_numeric_ttl(ttl):
    with pytest.raises(TicketError) as info:
        sign_ticket(TOKEN, UID, ttl, clock=at_ms(0))
    assert info.value.reason == "invalid_ttl"


@pytest.mark.parametrize("expires_at", [1718007199, 1718007200.0, True, "1718007200"])
def test_refuses_past_or_non_integer_expires_at(expires_at):
    with pytest.raises(TicketError) as info:
        sign_ticket(TOKEN, UID, expires_at=expires_at, clock=at_ms(1718007200000))
    assert info.value.reason == "invalid_expiry"


def test_expires_at_this_very_second_is_still_valid():
    clock = at_ms(1718007200000)
    assert sign_ticket(TOKEN, UID, expires_at=EXP, clock=clock) == EXAMPLE


@pytest.mark.parametrize("token", ["", "   ", None])
def test_refuses_an_empty_client_token(token):
    with pytest.raises(TicketError) as info:
        sign_ticket(token, UID, clock=at_ms(0))  # type: ignore[arg-type]
    assert info.value.reason == "missing_client_token"


def test_ticket_error_is_a_bailing_error_and_a_value_error():
    assert issubclass(TicketError, BailingError)
    assert issubclass(TicketError, ValueError)


# --- the hub's acceptance rules ---------------------------------------------


def test_example_accepted_through_its_exp_second_and_rejected_1_ms_later():
    assert verify_ticket(TOKEN, EXAMPLE, clock=at_ms(1718007200000)) == Ticket(UID, EXP)
    with pytest.raises(TicketError) as info:
        verify_ticket(TOKEN, EXAMPLE, clock=at_ms(1718007200001))
    assert info.value.reason == "expired"


def test_no_clock_skew_allowance_in_the_past_either():
    # Issued "in the future" is fine: the hub checks only exp.
    assert verify_ticket(TOKEN, EXAMPLE, clock=at_ms(0)).uid == UID


def test_wrong_token_is_a_bad_signature():
    with pytest.raises(TicketError) as info:
        verify_ticket("another-token", EXAMPLE, clock=at_ms(0))
    assert info.value.reason == "bad_signature"


@pytest.mark.parametrize(
    "ticket",
    [
        EXAMPLE.upper(),  # upper-case hex
        EXAMPLE.replace("v1.", "v2."),
        EXAMPLE + "=",
        EXAMPLE.replace("eyJ1aWQ", "eyJ1aWQ="),  # padding inside
        EXAMPLE[:-1],  # 63 hex digits
        " " + EXAMPLE,
        EXAMPLE + "\n",
        "v1..%s" % ("0" * 64),
    ],
)
def test_malformed_tickets(ticket):
    with pytest.raises(TicketError) as info:
        verify_ticket(TOKEN, ticket, clock=at_ms(0))
    assert info.value.reason == "malformed_ticket"


def test_hmac_covers_the_base64url_text_not_the_json():
    payload = EXAMPLE.split(".")[1]
    json_mac = hmac.new(
        TOKEN.encode(), base64.urlsafe_b64decode(payload + "=="), hashlib.sha256
    ).hexdigest()
    with pytest.raises(TicketError):
        verify_ticket(TOKEN, f"v1.{payload}.{json_mac}", clock=at_ms(0))


@pytest.mark.parametrize(
    "payload, uid, exp",
    [
        ({"uid": 1001, "exp": EXP}, "1001", EXP),  # numeric uid is stringified
        ({"uid": "  padded  ", "exp": EXP}, "padded", EXP),  # trimmed
        ({"uid": "x" * 70, "exp": EXP}, "x" * 64, EXP),  # cut to 64 UTF-16 units
        ({"uid": "😀" * 40, "exp": EXP}, "😀" * 32, EXP),  # astral = 2 units
        ({"uid": "u", "exp": "1718007200"}, "u", EXP),  # Number("1718007200")
        ({"uid": "u", "exp": 1718007200.5}, "u", 1718007200.5),
        ({"uid": True, "exp": EXP}, "true", EXP),
    ],
)
def test_hub_conversions_of_accepted_payloads(payload, uid, exp):
    assert verify_ticket(TOKEN, forge(payload), clock=at_ms(1718007200000)) == Ticket(uid, exp)


@pytest.mark.parametrize(
    "payload, reason",
    [
        ({"exp": EXP}, "empty_uid"),
        ({"uid": "", "exp": EXP}, "empty_uid"),
        ({"uid": "   ", "exp": EXP}, "empty_uid"),
        ({"uid": None, "exp": EXP}, "empty_uid"),
        ({"uid": "u"}, "expired"),  # missing exp = 0
        ({"uid": "u", "exp": None}, "expired"),
        ({"uid": "u", "exp": "soon"}, "expired"),  # NaN
        ({"uid": "u", "exp": {}}, "expired"),
        ("[1,2]", "malformed_payload"),
        ("not json", "malformed_payload"),
        ('{"uid":"u","exp":NaN}', "malformed_payload"),
        (b"\xff\xfe", "malformed_payload"),
    ],
)
def test_hub_refusals(payload, reason):
    with pytest.raises(TicketError) as info:
        verify_ticket(TOKEN, forge(payload), clock=at_ms(1718007200000))
    assert info.value.reason == reason


# --- the widget tag ---------------------------------------------------------


def test_widget_tag_for_a_signed_in_visitor():
    tag = widget_script_tag("https://hub.example.com/", "pub_demo", EXAMPLE)
    assert isinstance(tag, Markup)
    assert tag == (
        '<script src="https://hub.example.com/widget.js" data-entry="pub_demo" '
        f'data-ticket="{EXAMPLE}" async></script>'
    )


def test_widget_tag_for_an_anonymous_visitor_has_no_ticket():
    for ticket in (None, ""):
        assert widget_script_tag("http://hub:8080", "pub_demo", ticket) == (
            '<script src="http://hub:8080/widget.js" data-entry="pub_demo" async></script>'
        )


def test_widget_tag_keeps_a_mount_path_and_renders_extra_attributes():
    tag = widget_script_tag(
        "https://example.com/hub/", "pub_demo", EXAMPLE,
        open=True, nonce='r4nd"<om>', data_page="x&y", crossorigin=True, defer=False, id=None,
    )
    assert tag.startswith('<script src="https://example.com/hub/widget.js" data-entry="pub_demo"')
    assert 'data-open="1"' in tag
    assert 'nonce="r4nd&#34;&lt;om&gt;"' in tag
    assert 'data-page="x&amp;y"' in tag
    assert " crossorigin " in tag
    assert "defer" not in tag and "id=" not in tag
    assert tag.endswith(" async></script>")


def test_widget_tag_is_not_escaped_again_by_jinja():
    from flask import Flask, render_template_string

    app = Flask(__name__)
    with app.app_context():
        html = render_template_string(
            "{{ tag }}", tag=widget_script_tag("https://hub.example.com", "pub_demo", EXAMPLE)
        )
    assert html.startswith("<script src=")


@pytest.mark.parametrize("entry", ["", "abc", "a" * 33, "Pub_Demo", "pub demo", 'pub"x'])
def test_widget_tag_refuses_entries_the_widget_ignores(entry):
    with pytest.raises(ConfigurationError):
        widget_script_tag("https://hub.example.com", entry, EXAMPLE)


@pytest.mark.parametrize(
    "hub_url",
    ["hub.example.com", "ftp://hub.example.com", "https://hub.example.com/?x=1",
     "https://user:pw@hub.example.com", "https://hub.example.com/#top", ""],
)
def test_widget_tag_refuses_bad_hub_urls(hub_url):
    with pytest.raises(ConfigurationError):
        widget_script_tag(hub_url, "pub_demo")


def test_widget_tag_refuses_a_malformed_ticket():
    with pytest.raises(TicketError):
        widget_script_tag("https://hub.example.com", "pub_demo", '"><script>alert(1)</script>')


@pytest.mark.parametrize(
    "attrs",
    [{"src": "https://evil.example/x.js"}, {"data_entry": "other"}, {"data_ticket": "x"},
     {"type": "module"}, {"bad name": "x"}],
)
def test_widget_tag_refuses_attributes_it_owns_or_that_break_the_widget(attrs):
    with pytest.raises(ConfigurationError):
        widget_script_tag("https://hub.example.com", "pub_demo", None, **attrs)
