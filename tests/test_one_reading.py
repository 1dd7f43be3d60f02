"""The signed bytes have exactly one reading.

The canonical string ``ts.METHOD.path?query.sha256(body).subject.job`` joins
its fields with ``.`` and escapes nothing. A ``.`` followed by 64 lowercase
hex digits and another ``.`` inside the path+query or the subject could pass
for the body-hash field, so one captured signed request could be re-sent as
another request with the same signed bytes: a different body, query and
subject. Such requests are refused (``ambiguous_signature``) before any app
code runs; genuine hub traffic (dots, e-mail subjects, hex strings) passes.
A GET or HEAD that carries a body is refused too (``unexpected_body``).
"""

from __future__ import annotations

import hashlib
import itertools
import re
import time
from typing import Any

import pytest
from flask import Flask, jsonify, request
from hypothesis import given, settings
from hypothesis import strategies as st

from bailing_flask import Bailing, Param, SignatureError, Verifier, sign_tool_call, tool
from bailing_flask.wire.signing import canonical_tool_call, has_one_reading

from .helpers import STRONG_SECRET, raw_request

NOW = 1_800_000_000
JOB = "9f1c2d3e-0000-4000-8000-000000000001"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_app() -> tuple[Flask, list[Any]]:
    """A side-effecting tool that records every body it ran with."""
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    bailing = Bailing(app)
    bailing.authorizer(lambda call: True)
    ran: list[Any] = []

    @app.post("/orders")
    @tool(scope="order.write")
    def order_create():
        ran.append((request.args.get("tag"), request.get_data()))
        return jsonify(ok=True), 201

    @app.get("/search")
    @tool(scope="order.read", params=[Param("q"), Param("file")])
    def order_search():
        return jsonify(q=request.args.get("q"))

    return app, ran


def headers(signature: str, subject: str, *, ts: int | None = None, job: str = JOB) -> dict[str, str]:
    return {
        "X-Bailing-Timestamp": str(NOW if ts is None else ts),
        "X-Bailing-Signature": signature,
        "X-Bailing-On-Behalf-Of": subject,
        "X-Bailing-Job-Id": job,
        "Content-Type": "application/json",
    }


def query_cut_forgery(original_body: bytes, evil_body: bytes, subject: str) -> dict[str, Any]:
    """A genuine call whose query value holds ``.<sha256 of evil_body>.junk``, and its forgery.

    The forgery cuts the query to ``tag=x``, sends ``evil_body`` and moves the
    rest into the subject: ``junk.<sha256 of the original body>.<subject>``.
    """
    genuine_target = f"/orders?tag=x.{sha(evil_body)}.junk"
    signature = sign_tool_call(STRONG_SECRET, NOW, "POST", genuine_target, original_body, subject, JOB)
    forged_subject = f"junk.{sha(original_body)}.{subject}"
    assert canonical_tool_call(NOW, "POST", genuine_target, sha(original_body), subject, JOB) == \
        canonical_tool_call(NOW, "POST", "/orders?tag=x", sha(evil_body), forged_subject, JOB)
    return {
        "genuine": (genuine_target, original_body, headers(signature, subject)),
        "forged": ("/orders?tag=x", evil_body, headers(signature, forged_subject)),
    }


def lengthened_query_forgery(original_body: bytes, evil_body: bytes) -> dict[str, Any]:
    """A genuine call whose *subject* holds ``.<sha256 of evil_body>.``, and its forgery.

    The forgery lengthens the query with the start of the subject and keeps
    only the subject's tail.
    """
    subject = f"y.{sha(evil_body)}.tail"
    genuine_target = "/orders?tag=x"
    signature = sign_tool_call(STRONG_SECRET, NOW, "POST", genuine_target, original_body, subject, JOB)
    forged_target = f"/orders?tag=x.{sha(original_body)}.y"
    assert canonical_tool_call(NOW, "POST", genuine_target, sha(original_body), subject, JOB) == \
        canonical_tool_call(NOW, "POST", forged_target, sha(evil_body), "tail", JOB)
    return {
        "genuine": (genuine_target, original_body, headers(signature, subject)),
        "forged": (forged_target, evil_body, headers(signature, "tail")),
    }


@pytest.fixture
def clock():
    """Sign with the current time (the app verifies with the real clock)."""
    global NOW
    NOW = int(time.time())


# -- the attacks ----------------------------------------------------------------------


def test_query_cut_body_hash_shift_is_refused_before_the_view(clock):
    app, ran = make_app()
    attack = query_cut_forgery(b'{"amount":1}', b'{"amount":999999}', "t1:u1")
    target, body, hdrs = attack["forged"]
    path, _, query = target.partition("?")
    response = app.test_client().post(path, query_string=query, data=body, headers=hdrs,
                                      environ_overrides={"RAW_URI": target})
    assert response.status_code == 401
    assert response.get_json()["reason"] == "ambiguous_signature"
    assert ran == []


def test_query_cut_body_hash_shift_is_refused_on_a_real_server(live_server, clock):
    app, ran = make_app()
    base = live_server(app)
    attack = query_cut_forgery(b'{"amount":1}', b'{"amount":999999}', "alice@corp.example")
    forged = raw_request(base, "POST", attack["forged"][0], attack["forged"][2], attack["forged"][1])
    assert forged.status == 401
    assert b'"ambiguous_signature"' in forged.body
    # the genuine request carried a hex run in its query value: it is refused as well
    genuine = raw_request(base, "POST", attack["genuine"][0], attack["genuine"][2], attack["genuine"][1])
    assert genuine.status == 401
    assert ran == []


def test_query_cut_body_hash_shift_is_refused_under_gunicorn(gunicorn):
    now = int(time.time())
    evil, original, subject = b'{"amount":999999}', b'{"amount":1}', "t1:u1"
    genuine_target = f"/orders?tag=x.{sha(evil)}.junk"
    signature = sign_tool_call(STRONG_SECRET, now, "POST", genuine_target, original, subject, JOB)
    base = gunicorn("tests.apps.live_apps:middleware_app()", env={"BAILING_TEST_SECRET": STRONG_SECRET})
    forged = raw_request(base, "POST", "/orders?tag=x",
                         headers(signature, f"junk.{sha(original)}.{subject}", ts=now), evil)
    assert forged.status == 401
    assert b'"ambiguous_signature"' in forged.body


def test_lengthened_query_shift_is_refused(clock):
    app, ran = make_app()
    attack = lengthened_query_forgery(b'{"amount":1}', b'{"amount":999999}')
    client = app.test_client()
    for case in ("forged", "genuine"):
        target, body, hdrs = attack[case]
        path, _, query = target.partition("?")
        response = client.post(path, query_string=query, data=body, headers=hdrs,
                               environ_overrides={"RAW_URI": target})
        assert response.status_code == 401, case
        assert response.get_json()["reason"] == "ambiguous_signature"
    assert ran == []


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_get_or_head_tool_call_with_a_body_is_refused(live_server, clock, method):
    app, _ = make_app()
    base = live_server(app)
    body = b'{"q":"x"}'
    signature = sign_tool_call(STRONG_SECRET, NOW, method, "/search?q=a", body, "t1:u1", JOB)
    response = raw_request(base, method, "/search?q=a", headers(signature, "t1:u1"), body)
    assert response.status == 401
    if method == "GET":
        assert b'"unexpected_body"' in response.body


def test_get_with_a_chunked_body_is_refused(live_server, clock):
    app, _ = make_app()
    base = live_server(app)
    signature = sign_tool_call(STRONG_SECRET, NOW, "GET", "/search", b"abc", "t1:u1", JOB)
    response = raw_request(base, "GET", "/search", headers(signature, "t1:u1"), [b"a", b"bc"],
                           chunked=True)
    assert response.status == 401
    assert b'"unexpected_body"' in response.body


def test_ambiguity_is_refused_before_the_body_is_read():
    verifier = Verifier(STRONG_SECRET, clock=lambda: NOW)
    with pytest.raises(SignatureError) as info:
        verifier.check_reading("/orders", f"junk.{'a' * 64}.t1:u1")
    assert info.value.reason == "ambiguous_signature"
    assert info.value.status == 401


# -- genuine traffic keeps passing ------------------------------------------------------


GENUINE = [
    ("/search?q=v1.2.3", "alice@corp.example.com"),
    ("/search?q=" + "a" * 64, "t1:u1"),                       # a digest without dots around it
    ("/search?file=" + "b" * 64 + ".pdf", "t1:u1"),          # digest.ext
    ("/search?q=x." + "c" * 63 + ".y", "t1:u1"),            # 63 hex digits
    ("/search?q=x." + "D" * 64 + ".y", "t1:u1"),            # upper case is not the hash's form
    ("/search?q=x." + "e" * 65 + ".y", "t1:u1"),            # 65 hex digits
    ("/search?q=..." , "first.last@example.org"),
    ("/search", "t1:" + "f" * 64),                          # a hex user id
    ("/search", "t1:" + "f" * 64 + ".svc"),                 # not preceded by a dot
]


@pytest.mark.parametrize("target,subject", GENUINE)
def test_genuine_requests_with_dots_and_hex_pass(clock, target, subject):
    app, _ = make_app()
    signature = sign_tool_call(STRONG_SECRET, NOW, "GET", target, b"", subject, JOB)
    path, _, query = target.partition("?")
    response = app.test_client().get(path, query_string=query, headers=headers(signature, subject),
                                     environ_overrides={"RAW_URI": target})
    assert response.status_code == 200, response.get_data(as_text=True)


# -- properties -----------------------------------------------------------------------

HEX64 = re.compile(r"[0-9a-f]{64}")


def readings(middle: str) -> int:
    """How many ways ``P.H.S`` splits with ``H`` 64 lowercase hex (the oracle)."""
    dots = [i for i, ch in enumerate(middle) if ch == "."]
    return sum(
        1 for first, second in itertools.combinations(dots, 2)
        if second == first + 65 and HEX64.fullmatch(middle[first + 1:second]) and first > 0
    )


hexes = st.text("0123456789abcdef", min_size=64, max_size=64)
pieces = st.one_of(st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=8),
                   st.just("."), hexes.map(lambda h: "." + h + "."), hexes)
fields = st.lists(pieces, max_size=6).map("".join)


@settings(max_examples=400, deadline=None)
@given(fields, hexes, fields)
def test_refused_as_ambiguous_exactly_when_another_reading_exists(path_tail, body_hash, subject):
    path_with_query = "/" + path_tail.replace("#", "")
    middle = f"{path_with_query}.{body_hash}.{subject}"
    assert has_one_reading(path_with_query, subject) == (readings(middle) == 1)


texts = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E, blacklist_characters="#"),
                max_size=30)


@settings(max_examples=300, deadline=None)
@given(texts, texts, st.binary(min_size=1, max_size=40), st.binary(min_size=1, max_size=40),
       texts, st.booleans())
def test_shifting_characters_across_field_boundaries_is_never_accepted(
    prefix, junk, body, other_body, subject, cut
):
    """Move text across the path/body-hash/subject boundaries, keeping the signed bytes."""
    verifier = Verifier(STRONG_SECRET, clock=lambda: NOW)
    if cut:  # the signed query held ".<hash of other_body>.junk"; the forgery cuts it
        signed = (f"/p?q={prefix}.{sha(other_body)}.{junk}", body, subject)
        forged = (f"/p?q={prefix}", other_body, f"{junk}.{sha(body)}.{subject}")
    else:  # the signed subject held ".<hash of other_body>."; the forgery lengthens the query
        signed = (f"/p?q={prefix}", body, f"{junk}.{sha(other_body)}.{subject}")
        forged = (f"/p?q={prefix}.{sha(body)}.{junk}", other_body, subject)
    signature = sign_tool_call(STRONG_SECRET, NOW, "POST", signed[0], signed[1], signed[2], JOB)
    assert canonical_tool_call(NOW, "POST", signed[0], sha(signed[1]), signed[2], JOB) == \
        canonical_tool_call(NOW, "POST", forged[0], sha(forged[1]), forged[2], JOB)
    with pytest.raises(SignatureError) as info:
        verifier.verify(signature=signature, timestamp=str(NOW), method="POST",
                        path_with_query=forged[0], body=forged[1], on_behalf_of=forged[2], job_id=JOB)
    assert info.value.reason == "ambiguous_signature"


realistic_values = st.one_of(
    st.emails(), st.from_regex(r"[a-z]{1,8}(\.[a-z0-9]{1,8}){0,3}", fullmatch=True),
    hexes, st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=30),
)


@settings(max_examples=300, deadline=None)
@given(realistic_values, st.one_of(st.emails(), st.from_regex(r"t[0-9]:u[0-9]{1,6}", fullmatch=True)),
       st.binary(max_size=60))
def test_realistic_hub_traffic_verifies(value, subject, body):
    from bailing_flask.wire.jsenc import url_search_params

    target = "/orders?" + url_search_params([("q", value), ("v", "1.0")])
    verifier = Verifier(STRONG_SECRET, clock=lambda: NOW)
    signature = sign_tool_call(STRONG_SECRET, NOW, "POST", target, body, subject, JOB)
    assert verifier.verify(signature=signature, timestamp=str(NOW), method="POST",
                           path_with_query=target, body=body, on_behalf_of=subject, job_id=JOB) == "0"
