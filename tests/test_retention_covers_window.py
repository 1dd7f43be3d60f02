"""A record is kept at least as long as a captured copy of its signed request still verifies.

A signed request verifies within ``BAILING_WINDOW`` of its timestamp, so up
to twice the window after it first arrives (from a hub whose clock is ahead
by the window). A recorded write forgotten sooner than that
(``BAILING_IDEMPOTENCY_RETENTION``) runs again when the captured request is
replayed: such a configuration does not start.
"""

from __future__ import annotations

import pytest

from bailing_flask.errors import ConfigurationError
from bailing_flask.testing import HubSimulator

from .apps.idem_app import create_app, side_effects
from .helpers import STRONG_SECRET


@pytest.mark.parametrize(("retention", "window"), [(1, None), (599, None), (100, 60)])
def test_a_retention_shorter_than_twice_the_window_does_not_start(tmp_path, retention, window):
    extra = {} if window is None else {"BAILING_WINDOW": window}
    with pytest.raises(ConfigurationError) as refused:
        create_app(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://",
                   IDEM_DATABASE=str(tmp_path / "b.sqlite3"), BAILING_IDEMPOTENCY_RETENTION=retention,
                   **extra)
    message = str(refused.value)
    assert "BAILING_IDEMPOTENCY_RETENTION" in message and "twice BAILING_WINDOW" in message
    assert f"({retention:g} s)" in message


def test_twice_the_window_starts_and_answers_a_replay_from_the_record(tmp_path):
    business = str(tmp_path / "business.sqlite3")
    app = create_app(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://",
                     IDEM_DATABASE=business, BAILING_IDEMPOTENCY_RETENTION=600)
    hub = HubSimulator(app, STRONG_SECRET)
    call = hub.build_call("refund_create", {"order_id": 1, "amount": 2}, subject="t1:u1")
    assert hub.replay(call).status == 201
    assert hub.replay(call).status == 201
    assert side_effects(business) == 1
