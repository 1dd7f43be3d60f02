"""The marshmallow and webargs section of "Adding to an existing app", run: docs/examples/billing.

The billing API keeps its marshmallow schemas and webargs decorators; served
over a socket and called the way the hub calls it (catalog, probe, tools as
two subjects of two tenants), and by its own web client with a bearer token.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner
from flask.cli import FlaskGroup

from bailing_flask.exercise import run_exercise
from bailing_flask.testing import HubSimulator

from .helpers import STRONG_SECRET, raw_request

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"
sys.path.insert(0, str(EXAMPLES))

from billing.api import REFUNDS  # noqa: E402
from billing.factory import create_app  # noqa: E402

CONFIG = {"BAILING_SECRETS": [STRONG_SECRET], "BAILING_STORE": "memory://"}


@pytest.fixture(autouse=True)
def no_refunds() -> Iterator[None]:
    REFUNDS.clear()
    yield
    REFUNDS.clear()


def test_the_hub_calls_the_billing_api_as_two_users_of_two_tenants(live_server):
    base = live_server(create_app(**CONFIG))
    hub = HubSimulator(base, STRONG_SECRET)
    assert sorted(hub.document()["paths"]) == ["/api/orders", "/api/refunds"]
    assert hub.probe().json() == {"authorized": False}
    assert hub.call("billing_orders", subject="t1:ann").json() == [{"id": 1, "status": "paid", "total": "40.00"}]
    assert hub.call("billing_orders", {"status": "open"}, subject="t2:ben").json() == []
    assert hub.call("billing_orders", subject="t2:ben").json() == [{"id": 2, "status": "paid", "total": "15.50"}]
    refund = hub.call("billing_refund", {"order_id": 1, "amount": 12.345}, subject="t1:ann")
    assert (refund.status, refund.json()) == (201, {"id": 1, "amount": "12.34", "status": "pending",
                                                    "customer": {"name": "Ann"}})
    other = hub.call("billing_refund", {"order_id": 1, "amount": 1}, subject="t2:ben")
    assert other.status == 404 and other.json()["reason"] == "not_found"
    # the web client, through the same view and the same schema, gets the same answer
    client = raw_request(base, "POST", "/api/refunds", {"Authorization": "Bearer tok-ann",
                         "Content-Type": "application/json"},
                         json.dumps({"order_id": 1, "amount": 12.345}).encode())
    assert client.status == 201 and json.loads(client.body)["amount"] == "12.34"
    assert [r["amount"] for r in REFUNDS] == [Decimal("12.34"), Decimal("12.34")]
    refused = hub.call("billing_refund", {"order_id": 1, "amount": 0}, subject="t1:ann")
    assert refused.status == 422 and refused.json()["reason"] == "invalid_parameter"


def test_flask_bailing_check_finds_nothing_to_fix_and_the_exercise_passes():
    app = create_app(**CONFIG)
    result = CliRunner().invoke(FlaskGroup(create_app=lambda: app), ["bailing", "check"])
    assert result.exit_code == 0, result.output
    assert "2 tool(s), 0 error(s), 0 warning(s)" in result.output
    report = run_exercise(app, subject=["t1:ann", "t2:ben"])
    assert report.ok, report.render()
    assert REFUNDS == []  # the write tool's view never ran


def test_the_guides_tools_listing_is_real():
    result = CliRunner().invoke(FlaskGroup(create_app=lambda: create_app(**CONFIG)), ["bailing", "tools"])
    assert result.exit_code == 0, result.output
    shown = (EXAMPLES / "billing" / "tools.txt").read_text().splitlines()
    assert shown[0] == "$ flask bailing tools"
    assert result.output.splitlines()[: len(shown) - 1] == shown[1:]


def test_the_guides_snippets_are_the_files_the_app_runs() -> None:
    page = (EXAMPLES.parent / "existing-app.rst").read_text()
    for name in ("schemas.py", "api.py", "tools.txt"):
        assert f"examples/billing/{name}" in page, name
