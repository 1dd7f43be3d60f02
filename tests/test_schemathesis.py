"""The example app's own served catalog, fuzzed over real sockets (Werkzeug and gunicorn).

schemathesis generates requests from the catalog the app serves (fetched
signed: it is a signed-only endpoint) and a ``requests`` auth hook signs each
one exactly like the hub, over the bytes that go on the wire
(``tests/_fuzz/openapi.py``); the same catalog also drives the hub's own
request builder with arguments drawn from its schemas. Every request is sent
once as signed and once tampered with. No 5xx, every refusal carries a
reason code, a hub-signed request is never refused for its signature, a
tampered one is always refused.

schemathesis is in the ``fuzz`` extra (``pip install -e '.[fuzz]'``); without
it the schemathesis test is skipped, and fails under CI only if the ``test``
extra names it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from importlib import metadata
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ._fuzz import fuzz_settings
from ._fuzz import openapi

pytestmark = pytest.mark.slow


def _in_test_extra() -> bool:
    requirements = metadata.requires("bailing_flask") or []
    return any(r.startswith("schemathesis") and 'extra == "test"' in r for r in requirements)


@pytest.fixture(scope="module")
def shop() -> Iterator[Any]:
    with openapi.target(("werkzeug", "gunicorn")) as shop:
        yield shop


@fuzz_settings(25)
@given(data=st.data())
def test_schemathesis_finds_no_5xx_and_no_refusal_without_a_reason(shop, data):
    missing = openapi.schemathesis_available()
    if missing is not None:
        if os.environ.get("CI") and _in_test_extra():
            pytest.fail(f"CI installs the test extra, which names schemathesis: {missing}")
        pytest.skip(missing)
    cases, check = shop
    outcome = check(data.draw(cases("schemathesis")))
    assert outcome.ok, str(outcome)


@fuzz_settings(30)
@given(data=st.data())
def test_the_hubs_own_encoding_of_generated_arguments_is_answered_clearly(shop, data):
    cases, check = shop
    outcome = check(data.draw(cases("hub")))
    assert outcome.ok, str(outcome)


def test_an_order_id_beyond_the_declared_maximum_is_refused_before_the_authorizer(tmp_path, caplog):
    from bailing_flask.testing import HubSimulator
    from example_app import create_app

    from ._fuzz import SECRET

    app = create_app(openapi._example_config(str(tmp_path / "shop.sqlite3")))
    # 2**60: the hub writes it out in full (below 1e21), the route takes it, the catalog does not
    response = HubSimulator(app, SECRET).call("order_get", {"order_id": 2**60}, subject="t1:u1")
    assert response.status == 422, response.text
    assert response.json()["parameters"] == ["order_id"]
    assert "authorizer raised" not in caplog.text  # the shop's SQLite never saw the number
