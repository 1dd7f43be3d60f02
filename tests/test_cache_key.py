"""``bailing_flask.cache_key``: Flask-Caching keeps one entry per acting subject for hub calls.

The gate decides before the view's stack, so an unsigned or unauthorized
request never reaches a cache. A second *authorized* subject does, and a
cache keyed on the path (``cache.cached``) or on the function's arguments
(``cache.memoize``) answers it with the first subject's bytes without the
view running: another user's orders, another tenant's. With
``key_prefix=bailing_flask.cache_key`` (``make_name=`` for ``memoize``)
each subject has its own entry, and every other request keeps exactly the
key Flask-Caching gave it before.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

import pytest
from flask import Flask, jsonify, request
from flask_caching import Cache

import bailing_flask
from bailing_flask import Bailing, get_current_call, tool
from bailing_flask.exercise import run_exercise
from bailing_flask.testing import HubSimulator, signed_headers

from .helpers import STRONG_SECRET, raw_request

#: Flask-Caching 2.5 adds the query to ``key_prefix`` under ``query_string=True``; before it (all
#: of it on Python 3.10 or Flask 2) that key is the path and the query alone
QUERY_KEY_HAS_THE_PREFIX = tuple(int(part) for part in
                                 importlib.metadata.version("flask-caching").split(".")[:2]) >= (2, 5)

ORDERS = {"t1:alice": ["t1-order-1"], "t2:bob": ["t2-order-9"]}


def orders_app(decorate: str) -> tuple[Flask, Cache, list[str]]:
    """Two tenants' users, one read tool behind a cache; ``decorate`` is how the cache is keyed."""
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://", CACHE_TYPE="SimpleCache")
    bailing = Bailing(app)
    cache = Cache(app)
    bailing.subject_loader(lambda subject: subject if subject in ORDERS else None)
    bailing.authorizer(lambda call: call.user is not None)
    ran: list[str] = []
    decorators = {
        "cached": cache.cached(timeout=300),
        "cached-by-subject": cache.cached(timeout=300, key_prefix=bailing_flask.cache_key),
        "cached-query-by-subject": cache.cached(timeout=300, key_prefix=bailing_flask.cache_key,
                                                query_string=True),
        "memoize": cache.memoize(timeout=300),
        "memoize-by-subject": cache.memoize(timeout=300, make_name=bailing_flask.cache_key),
    }

    @app.get("/api/orders")
    @decorators[decorate]
    @tool(scope="order.read", allow_unsigned=True)
    def orders() -> Any:
        """The acting user's orders (a browser sees the public sample)."""
        ran.append("view")
        call = get_current_call()
        subject = call.subject if call is not None else None
        return jsonify(orders=ORDERS.get(subject or "", ["public-sample"]))

    return app, cache, ran


def test_a_path_keyed_cache_gives_the_second_tenant_the_first_ones_orders(live_server):
    """The finding itself, over a real socket: what ``cache_key`` is for."""
    app, _, ran = orders_app("cached")
    hub = HubSimulator(live_server(app), STRONG_SECRET)
    assert hub.call("orders", subject="t1:alice").json() == {"orders": ["t1-order-1"]}
    assert hub.call("orders", subject="t2:bob").json() == {"orders": ["t1-order-1"]}  # alice's
    assert ran == ["view"]


@pytest.mark.parametrize("decorate", [
    "cached-by-subject",
    pytest.param("cached-query-by-subject", marks=pytest.mark.skipif(
        not QUERY_KEY_HAS_THE_PREFIX, reason="this Flask-Caching ignores key_prefix with query_string=True "
        "(the next test shows the exercise names it)")),
    "memoize-by-subject",
])
def test_with_cache_key_each_tenants_subject_gets_its_own_answer_over_a_real_server(decorate, live_server):
    app, _, ran = orders_app(decorate)
    hub = HubSimulator(live_server(app), STRONG_SECRET)
    for _ in range(2):  # the second round is answered from the cache, each from its own entry
        assert hub.call("orders", subject="t1:alice").json() == {"orders": ["t1-order-1"]}
        assert hub.call("orders", subject="t2:bob").json() == {"orders": ["t2-order-9"]}
    assert ran == ["view", "view"]


def test_query_string_with_cache_key_is_per_subject_or_named_by_the_exercise(live_server):
    """``query_string=True`` with ``key_prefix=cache_key``: one entry per subject where Flask-Caching
    puts the prefix into the query key (2.5+); where it leaves it out, the second tenant gets the
    first one's orders, and the exercise says so, naming the version and the way out."""
    app, _, _ = orders_app("cached-query-by-subject")
    hub = HubSimulator(live_server(app), STRONG_SECRET)
    assert hub.call("orders", subject="t1:alice").json() == {"orders": ["t1-order-1"]}
    second = hub.call("orders", subject="t2:bob").json()
    fresh, _, _ = orders_app("cached-query-by-subject")
    report = run_exercise(fresh, subject=["t1:alice", "t2:bob"])
    cache = [result for result in report.results if result.check == "cache"]
    if QUERY_KEY_HAS_THE_PREFIX:
        assert second == {"orders": ["t2-order-9"]}
        assert [result.status for result in cache] == ["pass"], report.render()
    else:
        assert second == {"orders": ["t1-order-1"]}  # alice's: the key ignored the subject
        assert [result.status for result in cache] == ["fail"], report.render()
        assert "query_string=True: the path and query alone, not key_prefix=" in cache[0].culprit
        assert "Flask-Caching 2.5 or later" in cache[0].fix and "make_cache_key=" in cache[0].fix
        without = run_exercise(orders_app("cached-query-by-subject")[0], subject=["t1:alice"])
        assert [r.status for r in without.results if r.check == "cache"] == ["warn"], without.render()


@pytest.mark.parametrize("decorate", ["cached-by-subject", "memoize-by-subject"])
def test_a_browser_never_reads_or_primes_a_subjects_entry(decorate, live_server):
    app, _, ran = orders_app(decorate)
    base = live_server(app)
    hub = HubSimulator(base, STRONG_SECRET)
    browser = raw_request(base, "GET", "/api/orders")
    assert browser.status == 200 and b"public-sample" in browser.body
    assert hub.call("orders", subject="t1:alice").json() == {"orders": ["t1-order-1"]}
    again = raw_request(base, "GET", "/api/orders")
    assert b"t1-order" not in again.body and b"public-sample" in again.body
    assert ran == ["view", "view"]


def test_browsers_keep_the_key_flask_caching_gave_them():
    app, cache, _ = orders_app("cached-by-subject")
    app.test_client().get("/api/orders")
    assert cache.get("view//api/orders") is not None  # Flask-Caching's default key for this path


def test_the_keys_of_hub_calls_and_of_everything_else_never_meet():
    app, _, _ = orders_app("cached-by-subject")
    app.add_url_rule("/page", "page", lambda: bailing_flask.cache_key())
    with app.test_request_context("/api/orders"):
        assert bailing_flask.cache_key() == "view//api/orders"
        assert bailing_flask.cache_key("orders") == "orders"
    hub = HubSimulator(app, STRONG_SECRET)
    seen: list[tuple[str, str]] = []

    @app.after_request
    def remember(response: Any) -> Any:
        if request.path == "/api/orders":
            seen.append((bailing_flask.cache_key(), bailing_flask.cache_key("orders")))
        return response

    hub.call("orders", subject="t1:alice")
    hub.call("orders", subject="t2:bob")
    hub.call("orders")
    (alice, alice_name), (bob, _), (anonymous, _) = seen
    assert alice.startswith("bailing/") and alice.endswith("/view//api/orders")
    assert alice_name.startswith("bailing/") and alice_name.endswith("/orders")
    assert len({alice, bob, anonymous}) == 3
    assert "t1:alice" not in alice  # a hash: any subject makes a valid key for every backend
    # a signed request to a route that is not a tool keeps the browsers' key
    page = app.test_client().get("/page", headers=signed_headers(STRONG_SECRET, "GET", "/page",
                                                                 subject="t1:alice"))
    assert page.get_data(as_text=True) == "view//page"
