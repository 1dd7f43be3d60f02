"""Fuzzing visitor tickets: arbitrary strings never verify and never crash (fast version).

See ``tests/_fuzz/tickets.py``. The regression test below is what this fuzzing found.
"""

from __future__ import annotations

import pytest
from hypothesis import given

from bailing_flask.hub.tickets import TicketError, sign_ticket, verify_ticket

from ._fuzz import CLIENT_TOKEN, fuzz_settings
from ._fuzz import tickets
from .helpers import FrozenClock


@fuzz_settings(150)
@given(case=tickets.cases)
def test_no_string_verifies_unless_signed_and_none_crashes(case):
    with tickets.target() as check:
        outcome = check(case)
    assert outcome.ok, str(outcome)


@pytest.mark.parametrize("ttl", [0.5, 0.99])
def test_a_ticket_is_never_issued_already_expired(ttl):
    clock = FrozenClock(1718000000.2)  # int(now + 0.5) would be the second that just began
    with pytest.raises(TicketError) as info:
        sign_ticket(CLIENT_TOKEN, "t1:u1", ttl, clock=clock)
    assert info.value.reason == "invalid_ttl"
    ticket = sign_ticket(CLIENT_TOKEN, "t1:u1", 1, clock=FrozenClock(1718000000.9))
    assert verify_ticket(CLIENT_TOKEN, ticket, clock=FrozenClock(1718000000.9)).uid == "t1:u1"
