"""What the package builds for an app is kept on that app's state, each thing by its owner.

The per-app state sits below the modules that fill it, so it holds their
values under :class:`~bailing_flask._state.Cache` keys the owners declare
(and type). These tests pin what the keys promise: one value per app, made
once however many threads ask, and rebuilt when what it was built from
changed.
"""

from __future__ import annotations

import threading

from flask import Flask

from bailing_flask import Bailing, tool
from bailing_flask.approvals import approvals_of
from bailing_flask._state import BailingState, Cache, state_of
from bailing_flask._pipeline.catalog import catalog_of
from bailing_flask._pipeline.callbacks import callback_verifier
from bailing_flask._pipeline.idempotency import idempotency_of
from bailing_flask._pipeline.registry import registry_of

from .helpers import STRONG_SECRET


def _app(**config: object) -> Flask:
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_CLIENT_TOKENS=[STRONG_SECRET],
                      BAILING_STORE="memory://", **config)

    @app.get("/orders/<int:order_id>")
    @tool(description="Read one order.", readonly=True)
    def order_read(order_id: int) -> dict[str, int]:
        return {"id": order_id}

    Bailing(app)
    return app


def _state(app: Flask) -> BailingState:
    return state_of(app)


def test_one_key_keeps_one_value_per_app() -> None:
    key: Cache[list[str]] = Cache("a test's list")
    first, second = _state(_app()), _state(_app())
    assert key.get(first) is None
    kept = key.put(first, ["first"])
    assert key.get(first) is kept and key.get(second) is None
    assert repr(key) == "Cache(\"a test's list\")"


def test_threads_racing_for_a_missing_value_get_the_one_made() -> None:
    key: Cache[object] = Cache("made once")
    state = _state(_app())
    made: list[object] = []
    start = threading.Barrier(8)
    seen: list[object] = []

    def make() -> object:
        made.append(object())
        return made[-1]

    def ask() -> None:
        start.wait()
        seen.append(key.get_or_make(state, make))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 1 and seen == made * 8


def test_what_an_owner_builds_is_built_once_per_app() -> None:
    state, other = _state(_app()), _state(_app())
    assert approvals_of(state) is approvals_of(state) is not approvals_of(other)
    assert callback_verifier(state) is callback_verifier(state) is not callback_verifier(other)
    assert registry_of(state) is registry_of(state) is not registry_of(other)
    assert catalog_of(state) is catalog_of(state)


def test_the_catalog_is_built_again_when_a_route_adds_a_tool() -> None:
    app = _app()
    state = _state(app)
    before = catalog_of(state)
    assert sorted(before.document["paths"]) == ["/orders/{order_id}"]

    @app.get("/refunds/<int:refund_id>")
    @tool(description="Read one refund.", readonly=True)
    def refund_read(refund_id: int) -> dict[str, int]:
        return {"id": refund_id}

    after = catalog_of(state)
    assert after is not before
    assert sorted(after.document["paths"]) == ["/orders/{order_id}", "/refunds/{refund_id}"]
    assert catalog_of(state) is after


def test_the_layers_below_the_runner_keep_their_records_in_its_store() -> None:
    state = _state(_app())
    runner = idempotency_of(state)
    assert state.store() is runner.store()
    assert approvals_of(state)._store() is runner.store()
