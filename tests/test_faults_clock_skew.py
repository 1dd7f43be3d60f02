"""Clock skew at the edge of the window, both ways, through a real server.

The hub's rule, which the package follows: a tool call is refused when
``abs(floor(now) - ts) >= window`` (seconds). The window is symmetric and
exclusive: with the default 300, a timestamp 299 s in the past or the future
is accepted, 300 s and 301 s are refused (``401 timestamp_out_of_window``,
coarse code ``timestamp_out_of_window``). ``BAILING_WINDOW`` moves the edge
and nothing else. The server's clock is frozen so that a second ticking
between signing and checking cannot move a case across the edge; the
requests go over a real socket to Werkzeug's server.
"""

from __future__ import annotations

import json

import pytest
from flask import Flask, jsonify

from bailing_flask import Bailing, current_call, tool
from bailing_flask.testing import signed_headers

from .helpers import STRONG_SECRET, FrozenClock, raw_request

NOW = 1_780_000_000


def skew_app(window: int | None, clock: FrozenClock) -> Flask:
    app = Flask("skew_app")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    if window is not None:
        app.config["BAILING_WINDOW"] = window
    bailing = Bailing(app)
    bailing.authorizer(lambda call: True)
    app.wsgi_app.verifier.clock = clock  # type: ignore[attr-defined]  # the middleware's verifier

    @app.get("/orders/<int:order_id>")
    @tool(scope="orders.read")
    def order_get(order_id: int):
        """Read an order."""
        return jsonify(order_id=order_id, subject=current_call.subject)

    return app


def send(base: str, ts: int) -> tuple[int, dict]:
    headers = signed_headers(STRONG_SECRET, "GET", "/orders/7", subject="t1:u1", ts=ts)
    response = raw_request(base, "GET", "/orders/7", headers)
    return response.status, json.loads(response.body)


CASES = [(offset, direction) for offset in (-1, 0, 1) for direction in ("past", "future")]


@pytest.mark.parametrize("window", [None, 60, 1], ids=["default-300", "window-60", "window-1"])
def test_the_window_is_symmetric_and_exclusive_at_its_edge(live_server, window):
    clock = FrozenClock(NOW + 0.999)  # floor(now) is NOW: the fraction never counts
    base = live_server(skew_app(window, clock))
    edge = 300 if window is None else window
    for offset, direction in CASES:
        skew = edge + offset  # 299, 300, 301 with the default
        ts = NOW - skew if direction == "past" else NOW + skew
        status, body = send(base, ts)
        if skew < edge:
            assert status == 200, (skew, direction, body)
            assert body == {"order_id": 7, "subject": "t1:u1"}
        else:
            assert status == 401, (skew, direction, body)
            assert body["reason"] == "timestamp_out_of_window"
            assert body["error"] == "timestamp_out_of_window"


def test_the_fraction_of_the_servers_second_never_widens_the_window(live_server):
    clock = FrozenClock(NOW)
    base = live_server(skew_app(None, clock))
    for fraction in (0.0, 0.5, 0.999):
        clock.now = NOW + fraction
        assert send(base, NOW - 299)[0] == 200
        assert send(base, NOW - 300)[0] == 401
        assert send(base, NOW + 299)[0] == 200
        assert send(base, NOW + 300)[0] == 401
