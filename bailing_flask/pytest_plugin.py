"""pytest plugin: the ``bailing_hub`` and ``bailing_fake_hub`` fixtures.

Installing the package registers them with pytest (the ``bailing_flask``
entry point), at no cost to test runs that do not use them: the package is
imported when a test first asks for one. With plugin autoloading disabled,
list this module in ``pytest_plugins``. Provides two fixtures for an app under test (your ``app`` fixture):

``bailing_hub``
    a :class:`~bailing_flask.testing.HubSimulator` that calls the app's
    tools exactly as BailingHub does, and POSTs what the hub POSTs (job
    callbacks, delivery webhooks, approval requests), signed like the hub::

        def test_order_get(bailing_hub):
            response = bailing_hub.call("order_get", {"order_id": 1}, subject="t1:u1")
            assert response.status == 200

``bailing_fake_hub``
    a :class:`~bailing_flask.hub.fake.FakeHub` served on a loopback port,
    with the app's ``BAILING_HUB_URL`` pointed at it for the test, that
    receives the app's approval decisions and answers them with the hub's
    rules. Approval requests sent with ``bailing_hub`` are registered in it::

        def test_finance_approves(bailing_hub, bailing_fake_hub):
            bailing_hub.send_approval_request("refund_execute", {"request_id": 7},
                                              subject="t1:u1", job_id="job-1")
            ...  # the app's approver decides through bailing.hub_client()
            assert bailing_fake_hub.decisions[0]["decision"] == "approved"
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

# the fixtures themselves live in a module that imports nothing of the package: the entry point
# loads it into every pytest run of the environment, and only a test that uses them pays the import
from _bailing_flask_pytest import bailing_fake_hub, bailing_hub
from bailing_flask.hub.fake import FakeHub, serve
from bailing_flask.settings import provider_secrets
from bailing_flask.wire.signing import primary_secret
from bailing_flask.testing import HubSimulator

__all__ = ["bailing_hub", "bailing_fake_hub", "hub_for", "fake_hub_for"]


def _first_secret(config: Any) -> str:
    secret = primary_secret(provider_secrets(config))
    if secret is None:
        raise pytest.UsageError("bailing_hub: the app has no BAILING_SECRETS")
    return secret


def hub_for(app: Any) -> HubSimulator:
    """What ``bailing_hub`` is: a simulator signing with the app's first secret."""
    return HubSimulator(app, _first_secret(app.config))


@contextmanager
def fake_hub_for(app: Any, bailing_hub: HubSimulator) -> Iterator[FakeHub]:
    """What ``bailing_fake_hub`` is: a served fake hub, ``BAILING_HUB_URL`` pointed at it."""
    if not primary_secret(app.config.get("BAILING_CLIENT_TOKENS")):
        raise pytest.UsageError("bailing_fake_hub: the app has no BAILING_CLIENT_TOKENS")
    missing = object()
    previous = app.config.get("BAILING_HUB_URL", missing)
    with serve() as (hub, url):
        app.config["BAILING_HUB_URL"] = url
        bailing_hub.fake_hub = hub
        try:
            yield hub
        finally:
            bailing_hub.fake_hub = None
            if previous is missing:
                app.config.pop("BAILING_HUB_URL", None)
            else:
                app.config["BAILING_HUB_URL"] = previous
