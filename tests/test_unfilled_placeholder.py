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
