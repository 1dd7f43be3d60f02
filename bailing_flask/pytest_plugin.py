"""pytest plugin (registered as the ``bailing_flask`` entry point).

Provides ``bailing_hub``: a :class:`~bailing_flask.testing.HubSimulator`
bound to your ``app`` fixture, calling tools exactly as BailingHub does::

    def test_order_get(bailing_hub):
        response = bailing_hub.call("order_get", {"order_id": 1}, subject="t1:u1")
        assert response.status == 200
"""

from __future__ import annotations

from typing import Any

import pytest

from .signing import primary_secret
from .testing import HubSimulator

__all__ = ["bailing_hub"]


def _first_secret(config: Any) -> str:
    secret = primary_secret(config.get("BAILING_SECRETS") or config.get("BAILING_SECRET"))
    if secret is None:
        raise pytest.UsageError("bailing_hub: the app has no BAILING_SECRETS")
    return secret


@pytest.fixture
def bailing_hub(app: Any) -> HubSimulator:
    """Call the ``app`` fixture's tools like the hub (signed with its first secret)."""
    return HubSimulator(app, _first_secret(app.config))
