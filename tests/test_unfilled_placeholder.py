"""A path argument the model left out: the hub signs the template, its URL parser sends ``%7B..%7D``.

The hub replaces each ``{name}`` of the path template with the argument's
``encodeURIComponent`` value, signs that path, and hands the URL to
``fetch``. An argument the model omitted (or sent as ``null``) leaves the
placeholder in: the signature covers ``/orders/{order_id}``, but the WHATWG
URL parser percent-encodes the braces, so the request line is
``/orders/%7Border_id%7D``. Such a call is the hub's own and authentic; it
must be refused as a missing argument the model can correct, not as a bad
signature that sends the operator hunting for a wrong secret or a proxy.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import HUB_SECRET
from tests.test_middleware import call, protect, signed


def test_omitted_path_argument_is_named_not_called_a_bad_signature():
    headers = signed("GET", "/orders/{order_id}?verbose=true", subject="t1:u1", job_id="job-1")
    response = call(protect(), "GET", "/orders/%7Border_id%7D?verbose=true", headers=headers)
    assert response.status_code == 422, response.data
    assert response.headers["X-Bailing-Reason"] == "missing_path_argument"
    assert response.json["reason"] == "missing_path_argument"


def test_omitted_path_argument_of_a_write_tool_is_named_too():
    headers = signed("DELETE", "/staff/{id}", b"{}", subject="t1:u1", job_id="job-1")
    headers["Content-Type"] = "application/json"
    response = call(protect(), "DELETE", "/staff/%7Bid%7D", b"{}", headers=headers)
    assert response.status_code == 422, response.data
    assert response.json["reason"] == "missing_path_argument"


def test_a_forged_placeholder_request_is_still_a_bad_signature():
    from bailing_flask.testing import signed_headers
    from tests.helpers import VECTOR_TS

    headers = signed_headers("not-" + HUB_SECRET, "GET", "/orders/{order_id}", b"", ts=VECTOR_TS)
    response = call(protect(), "GET", "/orders/%7Border_id%7D", headers=headers)
    assert response.status_code == 401
    assert response.json["reason"] == "bad_signature"


def test_a_value_with_braces_is_verified_as_sent():
    # a value the model filled in is encoded before signing, braces included
    target = "/files/%7Bx%7D"
    response = call(protect(), "GET", target, headers=signed("GET", target))
    assert response.status_code == 200
    assert response.json["call"]["signed_path"] == target


# -- the simulator sends what the hub's fetch sends ---------------------------------------------


def _orders_app() -> Any:
    from flask import Flask

    from bailing_flask import Bailing, tool

    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[HUB_SECRET], BAILING_STORE="memory://")
    Bailing(app).authorizer(lambda call: True)

    @app.get("/orders/<int:order_id>")
    @tool(scope="order.read")
    def order_get(order_id: int) -> Any:
        """Read one order."""
        return {"order_id": order_id}

    return app


def test_the_simulator_sends_an_omitted_path_argument_the_way_the_hub_does():
    from bailing_flask.testing import HubSimulator

    hub = HubSimulator(_orders_app(), HUB_SECRET)
    request = hub.build_call("order_get", {})
    assert request.path_with_query == "/orders/{order_id}"  # what is signed
    response = hub.call("order_get", {})
    assert (response.status, response.json()["reason"]) == (422, "missing_path_argument")
    assert hub.call("order_get", {"order_id": 7}).json() == {"order_id": 7}


@pytest.mark.parametrize(("signed_target", "wire"), [
    ("/orders/{order_id}", "/orders/%7Border_id%7D"),
    ("/商品/list x?q=1", "/%E5%95%86%E5%93%81/list%20x?q=1"),
    ("/files/..", "/"),
    ("/files/./a", "/files/a"),
    ("/a\\b", "/a/b"),
    ("/orders/7?keyword=%E5%BC%A0+x&page=2", "/orders/7?keyword=%E5%BC%A0+x&page=2"),  # URLSearchParams: kept
])
def test_the_request_line_is_the_url_parsers(signed_target, wire):
    from bailing_flask.wire.jsenc import whatwg_target

    assert whatwg_target(signed_target) == wire


def test_escapes_a_proxy_lowered_are_recognised_too():
    headers = signed("GET", "/orders/{order_id}", subject="t1:u1", job_id="job-1")
    response = call(protect(), "GET", "/orders/%7border_id%7d", headers=headers)
    assert (response.status_code, response.json["reason"]) == (422, "missing_path_argument")
