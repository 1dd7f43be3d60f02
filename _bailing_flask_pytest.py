"""The pytest plugin's entry point: the ``bailing_hub`` and ``bailing_fake_hub`` fixtures.

Installing ``bailing_flask`` registers this module with pytest (entry point
``bailing_flask``), so it is loaded by every pytest run of the environment,
also by test suites that never use the package. It therefore imports only
pytest: ``bailing_flask`` (and with it Flask) is imported when a test asks
for one of the fixtures, not before. The fixtures are documented with the
implementation, :mod:`bailing_flask.pytest_plugin`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # pragma: no cover
    from bailing_flask.hub.fake import FakeHub
    from bailing_flask.testing import HubSimulator

__all__ = ["bailing_hub", "bailing_fake_hub"]


@pytest.fixture
def bailing_hub(app: Any) -> HubSimulator:
    """Call the ``app`` fixture's tools like the hub (signed with its first secret)."""
    from bailing_flask.pytest_plugin import hub_for

    return hub_for(app)


@pytest.fixture
def bailing_fake_hub(app: Any, bailing_hub: HubSimulator) -> Iterator[FakeHub]:
    """A fake hub on a loopback port for the app's decisions (``BAILING_HUB_URL`` points to it)."""
    from bailing_flask.pytest_plugin import fake_hub_for

    with fake_hub_for(app, bailing_hub) as hub:
        yield hub
