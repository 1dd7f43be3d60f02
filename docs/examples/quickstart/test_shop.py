"""The quickstart's tests (docs/quickstart.rst), run with pytest and the package's plugin."""

# [start:tests]
import pytest
from flask import Flask

from shop import app as shop_app


@pytest.fixture
def app() -> Flask:
    return shop_app


def test_order_get(bailing_hub):
    response = bailing_hub.call("order_get", {"order_id": 1001}, subject="t1:alice")
    assert response.status == 200
    assert response.json()["item"] == "headphones"


def test_other_tenant_is_refused(bailing_hub):
    response = bailing_hub.call("order_get", {"order_id": 1001}, subject="t2:bob")
    assert response.status == 403
    assert response.json()["reason"] == "forbidden"


def test_probe_denies_the_synthetic_subject(bailing_hub):
    response = bailing_hub.probe()
    assert (response.status, response.json()) == (200, {"authorized": False})
# [end:tests]
