"""The hub stand-in the HubClient tests talk to; it now ships with the package."""

from bailing_flask.fake_hub import Client, FakeHub, Recorded

__all__ = ["Client", "FakeHub", "Recorded"]
