"""The signed bytes cannot be read as another request a forger could use.

The canonical string ``ts.METHOD.path?query.sha256(body).subject.job`` joins
its fields with ``.`` and escapes nothing, so a ``.`` followed by 64
lowercase hex digits and another ``.`` could pass for the body-hash field,
and one captured signed request could be re-sent as another one with the
same signed bytes:

* **a query value cut short**: the captured call's query held
  ``x.<sha256 of another body>.junk``; the forgery sends ``?tag=x``, that
  body, and the subject ``junk.<original body hash>.<subject>``. Refused
  (``ambiguous_signature``) on every method: a subject holding such a run is
  refused on every call;
* **a query value lengthened**: the captured call's *subject* held the run;
  the forgery appends ``.<original body hash>.<start of the subject>`` to the
  query. On a GET both bodies are empty, so only the empty body's hash can
  form it, and a GET path or query holding it between dots is refused. On a
  write it needs the hub to have signed a subject holding such a run -- one
  this package refuses on every call and never mints -- so content-addressed
  values (``backup.<sha256>.tar.gz``, ``tag=build.<sha256>``,
  ``tag=sha256.<hex>.sig``) keep working everywhere.

A GET or HEAD that carries a body is refused too (``unexpected_body``).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import time
from typing import Any

import pytest
from flask import Flask, jsonify, request
from hypothesis import given, settings
from pydantic import BaseModel
from hypothesis import strategies as st

from bailing_flask import Bailing, Param, tool
from bailing_flask.wire import SignatureError, Verifier, sign_tool_call
from bailing_flask.hub.tickets import sign_ticket
from bailing_flask.wire.signing import EMPTY_BODY_SHA256, canonical_tool_call, other_reading

from .apps.reading_app import create_app as reading_app
from .helpers import STRONG_SECRET, raw_request

NOW = 1_800_000_000
JOB = "9f1c2d3e-0000-4000-8000-000000000001"
E = EMPTY_BODY_SHA256


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Amount(BaseModel):
    amount: int


def make_app() -> tuple[Flask, list[Any]]:
    """A side-effecting tool that records every body it ran with."""
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    bailing = Bailing(app)
    bailing.authorizer(lambda call: True)
    ran: list[Any] = []

    @app.post("/orders")
    @tool(scope="order.write", params=[Param("tag")], body=Amount)
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


def lengthened_query_forgery(method: str, original_body: bytes, evil_body: bytes,
                             target: str = "/orders?tag=x") -> dict[str, Any]:
    """A genuine call whose *subject* holds ``.<sha256 of evil_body>.``, and its forgery.

    The forgery lengthens the query with the start of the subject and keeps
    only the subject's tail.
    """
    subject = f"y.{sha(evil_body)}.tail"
    signature = sign_tool_call(STRONG_SECRET, NOW, method, target, original_body, subject, JOB)
    forged_target = f"{target}.{sha(original_body)}.y"
    assert canonical_tool_call(NOW, method, target, sha(original_body), subject, JOB) == \
        canonical_tool_call(NOW, method, forged_target, sha(evil_body), "tail", JOB)
    return {
        "genuine": (target, original_body, headers(signature, subject)),
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
    assert ran == []
    # the genuine request carried the run in its query value: a write may, it passes
    genuine = raw_request(base, "POST", attack["genuine"][0], attack["genuine"][2], attack["genuine"][1])
    assert genuine.status == 201
    assert ran == [(attack["genuine"][0].split("tag=")[1], b'{"amount":1}')]


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
        verifier.check_reading("/orders", f"junk.{'a' * 64}.t1:u1", "POST")
    assert info.value.reason == "ambiguous_signature"
    assert info.value.status == 401
    assert "subject" in info.value.message and "Build subjects without" in info.value.message


# -- on three real servers: both shifts refused, content-addressed values pass -------------

SERVERS = ["werkzeug", "waitress", "gunicorn"]
DIGEST = sha(b"the build artifact")


@pytest.fixture(params=SERVERS)
def reading_server(request: pytest.FixtureRequest, wsgi_server: Any) -> str:
    """``tests/apps/reading_app.py`` on a real server, verifying with the real clock."""
    if request.param == "gunicorn":
        start = request.getfixturevalue("gunicorn")
        return str(start("tests.apps.reading_app:create_app()",
                         env={"BAILING_TEST_SECRET": STRONG_SECRET}))
    return str(wsgi_server(reading_app(STRONG_SECRET), request.param))


def signed(method: str, target: str, body: bytes, subject: str) -> dict[str, str]:
    now = int(time.time())
    return headers(sign_tool_call(STRONG_SECRET, now, method, target, body, subject, JOB),
                   subject, ts=now)


def refused_for(response: Any, field: str) -> bool:
    answer = json.loads(response.body)
    return (response.status == 401 and answer["reason"] == "ambiguous_signature"
            and ("The subject (X-Bailing-On-Behalf-Of)" if field == "subject" else "This GET's path")
            in answer["message"])


GENUINE_SHAPES = [
    ("GET", f"/files/backup.{DIGEST}.tar.gz", b"", 200),
    ("GET", f"/files/report.{DIGEST}", b"", 200),
    ("POST", f"/feedback?tag=build.{DIGEST}", b"{}", 201),
    ("POST", f"/feedback?tag=sha256.{DIGEST}.sig", b"{}", 201),
]


def test_content_addressed_names_and_digests_pass_on_real_servers(reading_server: str) -> None:
    for method, target, body, status in GENUINE_SHAPES:
        response = raw_request(reading_server, method, target, signed(method, target, body, "t1:u1"),
                               body)
        assert response.status == status, (target, response.body)
    ran = json.loads(raw_request(reading_server, "GET", "/ran").body)
    assert [entry["tag"] for entry in ran] == [f"build.{DIGEST}", f"sha256.{DIGEST}.sig"]


def test_a_query_value_cut_short_is_refused_on_real_servers(reading_server: str) -> None:
    original, evil = b'{"amount":1}', b'{"amount":999999}'
    # a write: the model filled tag=x.<sha256 of the evil body>.junk
    genuine = f"/orders?tag=x.{sha(evil)}.junk"
    hdrs = signed("POST", genuine, original, "t1:u1")
    hdrs["X-Bailing-On-Behalf-Of"] = f"junk.{sha(original)}.t1:u1"
    assert refused_for(raw_request(reading_server, "POST", "/orders?tag=x", hdrs, evil), "subject")
    # a read: only the empty body's hash can be moved
    genuine = f"/search?q=x.{E}.junk"
    hdrs = signed("GET", genuine, b"", "t1:u1")
    hdrs["X-Bailing-On-Behalf-Of"] = f"junk.{E}.t1:u1"
    assert refused_for(raw_request(reading_server, "GET", "/search?q=x", hdrs), "subject")
    assert json.loads(raw_request(reading_server, "GET", "/ran").body) == []


def test_a_query_value_lengthened_is_refused_on_real_servers(reading_server: str) -> None:
    # the captured read's subject held .<empty body hash>.; the forgery moves its start
    # into the query and keeps the tail as the subject
    hdrs = signed("GET", "/search?q=x", b"", f"y.{E}.t1:victim")
    hdrs["X-Bailing-On-Behalf-Of"] = "t1:victim"
    forged = raw_request(reading_server, "GET", f"/search?q=x.{E}.y", hdrs)
    assert refused_for(forged, "path")
    hdrs = signed("GET", f"/files/report.{E}", b"", "t1:u1")  # the path ends in the run
    assert refused_for(raw_request(reading_server, "GET", f"/files/report.{E}", hdrs), "path")


def test_a_lengthened_write_needs_a_subject_that_is_refused_on_every_call(clock) -> None:
    """On a write the lengthened reading cannot be told from ``tag=sha256.<hex>.sig``.

    Both received requests have the same shape; what makes one a forgery is
    that the hub signed a subject holding ``.<sha256 of the new body>.``.
    Such a subject is refused on every call (so no tool ever works for it),
    the package never mints one (ticket uids are at most 64 characters), and
    ``flask bailing check`` warns about the write tools whose values could
    carry the lengthened run (``hash_run_param``).
    """
    attack = lengthened_query_forgery("POST", b'{"amount":1}', b'{"amount":999999}')
    verifier = Verifier(STRONG_SECRET, clock=lambda: NOW)
    target, body, hdrs = attack["genuine"]
    with pytest.raises(SignatureError) as info:
        verifier.verify(signature=hdrs["X-Bailing-Signature"], timestamp=str(NOW), method="POST",
                        path_with_query=target, body=body, on_behalf_of=hdrs["X-Bailing-On-Behalf-Of"],
                        job_id=JOB)
    assert info.value.reason == "ambiguous_signature"
    assert other_reading("POST", attack["forged"][0], "tail") is None


@settings(max_examples=200, deadline=None)
@given(st.text(st.sampled_from("0123456789abcdef.:_-@t"), max_size=64))
def test_no_ticket_uid_can_hold_the_run(uid: str) -> None:
    uid = uid.strip() or "u"
    sign_ticket("client-token-0123456789abcdef0123456789", uid)  # the hub keeps it as it is
    assert other_reading("POST", "/orders", uid) is None


# -- genuine traffic keeps passing ------------------------------------------------------


GENUINE = [
    ("/search?q=v1.2.3", "alice@corp.example.com"),
    ("/search?q=" + "a" * 64, "t1:u1"),                       # a digest without dots around it
    ("/search?file=" + "b" * 64 + ".pdf", "t1:u1"),          # digest.ext
    ("/search?q=x." + "c" * 63 + ".y", "t1:u1"),            # 63 hex digits
    ("/search?q=x." + "D" * 64 + ".y", "t1:u1"),            # upper case is not the hash's form
    ("/search?q=x." + "e" * 65 + ".y", "t1:u1"),            # 65 hex digits
    ("/search?q=x." + "f" * 64 + ".y", "t1:u1"),            # on a GET only the empty body's hash
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


def forgeable_readings(method: str, path_with_query: str, body_hash: str, subject: str) -> int:
    """The oracle: every other split of ``P.H.S`` that a forger could use.

    A split with a *longer* path counts on every method (the hub may have
    signed it: a model-filled query value). A split with a *shorter* path
    counts only where its body hash is one the hub sends with this method:
    the empty body's on GET and HEAD; on a write it would need a hub-signed
    subject holding the run, which is refused on every call.
    """
    middle = f"{path_with_query}.{body_hash}.{subject}"
    dots = [i for i, ch in enumerate(middle) if ch == "."]
    found = 0
    for first, second in itertools.combinations(dots, 2):
        if second != first + 65 or first == 0 or not HEX64.fullmatch(middle[first + 1:second]):
            continue
        if first > len(path_with_query):
            found += 1
        elif first < len(path_with_query):
            if method in ("GET", "HEAD") and middle[first + 1:second] == EMPTY_BODY_SHA256:
                found += 1
    return found


hexes = st.one_of(st.text("0123456789abcdef", min_size=64, max_size=64), st.just(E))
pieces = st.one_of(st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=8),
                   st.just("."), hexes.map(lambda h: "." + h + "."), hexes)
fields = st.lists(pieces, max_size=6).map("".join)


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(["GET", "POST", "DELETE"]), fields, hexes, fields)
def test_refused_as_ambiguous_exactly_when_a_forgeable_reading_exists(method, path_tail, body_hash,
                                                                      subject):
    path_with_query = "/" + path_tail.replace("#", "")
    if method == "GET":
        body_hash = E  # a GET with a body is refused anyway (unexpected_body)
    forgeable = forgeable_readings(method, path_with_query, body_hash, subject)
    assert (other_reading(method, path_with_query, subject) is not None) == (forgeable > 0)


texts = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E, blacklist_characters="#"),
                max_size=30)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["GET", "POST", "PUT"]), texts, texts, st.binary(min_size=1, max_size=40),
       st.binary(min_size=1, max_size=40), texts, st.booleans())
def test_shifting_characters_across_field_boundaries_is_never_accepted(
    method, prefix, junk, body, other_body, subject, cut
):
    """Move text across the path/body-hash/subject boundaries, keeping the signed bytes."""
    if method == "GET":
        body = other_body = b""  # the hub's GETs have no body, and a forged one is refused
    verifier = Verifier(STRONG_SECRET, clock=lambda: NOW)
    if cut:  # the signed query held ".<hash of other_body>.junk"; the forgery cuts it
        signed = (f"/p?q={prefix}.{sha(other_body)}.{junk}", body, subject)
        forged = (f"/p?q={prefix}", other_body, f"{junk}.{sha(body)}.{subject}")
    elif method == "GET":  # the signed subject held ".<empty body hash>."; the forgery lengthens
        signed = (f"/p?q={prefix}", body, f"{junk}.{sha(other_body)}.{subject}")
        forged = (f"/p?q={prefix}.{sha(body)}.{junk}", other_body, subject)
    else:  # on a write that needs a subject refused on every call: see the test above
        return
    signature = sign_tool_call(STRONG_SECRET, NOW, method, signed[0], signed[1], signed[2], JOB)
    assert canonical_tool_call(NOW, method, signed[0], sha(signed[1]), signed[2], JOB) == \
        canonical_tool_call(NOW, method, forged[0], sha(forged[1]), forged[2], JOB)
    with pytest.raises(SignatureError) as info:
        verifier.verify(signature=signature, timestamp=str(NOW), method=method,
                        path_with_query=forged[0], body=forged[1], on_behalf_of=forged[2], job_id=JOB)
    assert info.value.reason == "ambiguous_signature"


realistic_values = st.one_of(
    st.emails(), st.from_regex(r"[a-z]{1,8}(\.[a-z0-9]{1,8}){0,3}", fullmatch=True),
    hexes, hexes.map(lambda h: f"sha256.{h}.sig"), hexes.map(lambda h: f"build.{h}"),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=30),
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
