"""Repeated, huge and countless headers on real servers: refused clearly, never accepted.

A server joins a repeated header into one value (``a,b``), so a second
signature, timestamp, subject or job id -- the same value again or another
one in front of the signed one -- reaches the middleware as a value that is
malformed or that the hub did not sign. Headers past the server's own
limits (a 64 KiB header, thousands of headers) are refused by the server
before the application runs. Either way: a 4xx that says why, never a 2xx,
never a 5xx.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from flask import Flask, jsonify

from bailing_flask import Bailing, current_call, tool
from bailing_flask.testing import signed_headers

from ._faults import send_raw, status_of
from ._servers import gunicorn_serving, serving
from .helpers import STRONG_SECRET

BODY = b'{}'
HUB_HEADERS = ("X-Bailing-Signature", "X-Bailing-Timestamp", "X-Bailing-On-Behalf-Of",
               "X-Bailing-Job-Id")
#: a value for each header that differs from the signed one (an attacker's choice)
OTHER = {"X-Bailing-Signature": "sha256=" + "1" * 64, "X-Bailing-On-Behalf-Of": "t1:admin",
         "X-Bailing-Job-Id": "job-someone-else"}
EXPECTED = {"X-Bailing-Signature": "malformed_signature",
            "X-Bailing-Timestamp": "malformed_timestamp",
            "X-Bailing-On-Behalf-Of": "bad_signature", "X-Bailing-Job-Id": "bad_signature"}


def notes_app() -> Flask:
    app = Flask("headers_app")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    bailing = Bailing(app)
    bailing.authorizer(lambda call: call.subject is not None)

    @app.post("/notes")
    @tool(scope="notes.write", repeats="safe")
    def notes_create():
        """Write a note for the acting subject."""
        return jsonify(subject=current_call.subject)

    return app


@pytest.fixture(scope="module", params=["werkzeug", "gunicorn"])
def base(request: pytest.FixtureRequest) -> Iterator[str]:
    """The Flask app behind Bailing, on Werkzeug's server and on gunicorn."""
    if request.param == "werkzeug":
        with serving(notes_app(), "werkzeug") as url:
            yield url
    else:
        request.applymarker(pytest.mark.slow)
        env = {"BAILING_TEST_SECRET": STRONG_SECRET}
        with gunicorn_serving("tests.test_faults_headers:_app_from_env()", env=env) as url:
            yield url


def _app_from_env() -> Flask:  # gunicorn's entry point
    return notes_app()


def raw(headers: list[tuple[str, str]], body: bytes = BODY) -> bytes:
    lines = ["POST /notes HTTP/1.1", "Host: localhost", "Content-Type: application/json",
             f"Content-Length: {len(body)}", "Connection: close",
             *(f"{name}: {value}" for name, value in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def signed(subject: str = "t1:u1") -> list[tuple[str, str]]:
    return list(signed_headers(STRONG_SECRET, "POST", "/notes", BODY, subject=subject).items())


def answer(base: str, headers: list[tuple[str, str]], body: bytes = BODY) -> tuple[int, bytes]:
    got = send_raw(base, raw(headers, body))
    status = status_of(got)
    assert status is not None, got[:200]
    return status, got.partition(b"\r\n\r\n")[2]


def test_the_signed_call_itself_is_accepted(base):
    status, body = answer(base, signed())
    assert status == 200 and json.loads(body) == {"subject": "t1:u1"}


@pytest.mark.parametrize("name", HUB_HEADERS)
@pytest.mark.parametrize("placement", ["same value twice", "another value in front"])
def test_a_repeated_signed_header_is_refused(base, name, placement):
    headers = signed()
    value = dict(headers)[name]
    if placement == "same value twice":
        headers.append((name, value))
    else:
        other = OTHER.get(name, str(int(time.time())))
        headers.insert(0, (name, other))
    status, body = answer(base, headers)
    assert status == 401, (name, placement, body[:200])
    assert json.loads(body)["reason"] == EXPECTED[name]


def test_a_repeated_content_length_never_lets_an_unsigned_body_through(base):
    """gunicorn refuses the request; Werkzeug's server reads by the last one.

    Either way the body the app gets is the one the signature covers: a body
    read by another length would not match it.
    """
    request = raw(signed()).replace(b"Content-Length:", b"Content-Length: 5\r\nContent-Length:", 1)
    got = send_raw(base, request)
    status = status_of(got)
    assert status is not None and status < 500, got[:200]
    if status == 200:
        assert json.loads(got.partition(b"\r\n\r\n")[2]) == {"subject": "t1:u1"}
    else:
        assert status == 400, got[:200]


@pytest.mark.parametrize("shape", ["one 64 KiB header", "3000 headers"])
def test_headers_past_the_servers_limits_are_refused_before_the_app(base, shape):
    if shape == "one 64 KiB header":
        extra = [("X-Filler", "a" * 65536)]
    else:
        extra = [(f"X-Filler-{i}", "v") for i in range(3000)]
    status, _ = answer(base, signed() + extra)
    assert status in (400, 431), status


@pytest.mark.parametrize("where", ["subject", "unsigned header"])
def test_a_large_header_within_the_servers_limits_is_no_5xx(base, where):
    if where == "subject":  # signed, so verified; then the gate decides
        status, body = answer(base, signed(subject="t1:" + "u" * 7000))
        assert status < 500, body[:200]
    else:  # the unsigned idempotency key is only recorded
        status, body = answer(base, signed() + [("X-Bailing-Idempotency-Key", "k" * 7000)])
        assert status == 200, body[:200]
