"""Hub callbacks are bounded before they are read.

The callback, delivery and approval-request endpoints must read a body to
verify its signature, so the middleware bounds it first, signed or not:
413 ``body_too_large`` as soon as the limit is crossed (chunked uploads
included), and memory stays flat however large the upload claims to be.
"""

from __future__ import annotations

import io
import json
import socket
import time
from typing import Any

import pytest
from flask import Flask

from bailing_flask import Bailing
from bailing_flask.wire import sign_callback

from ._servers import post_chunked_until_refused
from .helpers import STRONG_SECRET, raw_request

CLIENT_TOKEN = "client-token-0123456789-abcdefghijklmnop"
JOB_PATH = "/.well-known/bailing/callbacks/job"
LIMIT = 64 * 1024


class CountingInput(io.RawIOBase):
    """A 16 MiB request body that counts what was read from it."""

    def __init__(self, total: int = 16 * 1024 * 1024) -> None:
        self.read_bytes = 0
        self.total = total

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        size = min(len(buffer), self.total - self.read_bytes)
        buffer[:size] = b"x" * size
        self.read_bytes += size
        return size


def make_app(handled: list[Any]) -> Flask:
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=STRONG_SECRET, BAILING_CLIENT_TOKENS=[CLIENT_TOKEN],
                      BAILING_STORE="memory://", BAILING_CALLBACK_MAX_BODY_SIZE=LIMIT)
    bailing = Bailing(app)
    bailing.job_finished(handled.append)
    return app


def call(app: Flask, headers: dict[str, str], stream: Any, length: str | None) -> tuple[int, dict[str, Any]]:
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": JOB_PATH, "SCRIPT_NAME": "", "QUERY_STRING": "",
               "SERVER_NAME": "localhost", "SERVER_PORT": "80", "SERVER_PROTOCOL": "HTTP/1.1",
               "wsgi.url_scheme": "http", "wsgi.input": stream, "wsgi.errors": io.StringIO(),
               "CONTENT_TYPE": "application/json"}
    if length is not None:
        environ["CONTENT_LENGTH"] = length
    else:
        environ["HTTP_TRANSFER_ENCODING"] = "chunked"
        environ["wsgi.input_terminated"] = True
    for name, value in headers.items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    status: list[str] = []
    body = b"".join(app.wsgi_app(environ, lambda s, h, *a: status.append(s)))  # type: ignore[arg-type]
    return int(status[0].split()[0]), json.loads(body)


BOGUS = {"X-Bailing-Timestamp": str(int(time.time() * 1000)), "X-Bailing-Signature": "sha256=" + "0" * 64}


@pytest.mark.parametrize("headers", [BOGUS, {}], ids=["bogus-signature", "unsigned"])
def test_declared_oversized_callback_is_refused_without_reading_it(headers):
    handled: list[Any] = []
    stream = CountingInput()
    status, payload = call(make_app(handled), headers, stream, str(120 * 1024 * 1024))
    assert status == 413
    assert payload["reason"] == "body_too_large"
    assert stream.read_bytes == 0
    assert handled == []


@pytest.mark.parametrize("headers", [BOGUS, {}], ids=["bogus-signature", "unsigned"])
def test_chunked_callback_is_cut_off_at_the_limit(headers):
    handled: list[Any] = []
    stream = CountingInput()
    status, payload = call(make_app(handled), headers, stream, None)
    assert status == 413
    assert payload == {**payload, "error": "body_too_large", "reason": "body_too_large"}
    assert stream.read_bytes <= LIMIT + 64 * 1024
    assert handled == []


def test_a_callback_within_the_limit_is_still_handled(live_server):
    handled: list[Any] = []
    base = live_server(make_app(handled))
    body = json.dumps({"job_id": "job-1", "request_id": "r-1", "status": "done", "input": "x" * (LIMIT - 200)}).encode()
    stamp = int(time.time() * 1000)
    response = raw_request(base, "POST", JOB_PATH, {
        "Content-Type": "application/json", "X-Bailing-Timestamp": str(stamp),
        "X-Bailing-Signature": sign_callback(CLIENT_TOKEN, stamp, body)}, body)
    assert response.status == 200, response.body
    assert [job.job_id for job in handled] == ["job-1"]
    chunked = raw_request(base, "POST", JOB_PATH, {
        "Content-Type": "application/json", "X-Bailing-Timestamp": str(stamp),
        "X-Bailing-Signature": sign_callback(CLIENT_TOKEN, stamp, b"{" + b" " * LIMIT + b"}")},
        [b"{", b" " * LIMIT, b"}"], chunked=True)
    assert chunked.status == 413


def test_three_huge_bogus_callbacks_leave_a_gunicorn_worker_flat(gunicorn):
    import urllib.request

    base = gunicorn("tests.apps.live_apps:callback_app()",
                    env={"BAILING_TEST_SECRET": STRONG_SECRET, "BAILING_TEST_CLIENT_TOKEN": CLIENT_TOKEN})

    def peak_kib() -> int:
        with urllib.request.urlopen(base + "/peak-rss", timeout=10) as response:
            return int(json.load(response)["kib"])

    before = peak_kib()
    answers = [post_chunked_until_refused(
        base, JOB_PATH, 120 * 1024 * 1024,
        f"X-Bailing-Timestamp: {int(time.time() * 1000)}\r\nX-Bailing-Signature: sha256={'0' * 64}\r\n") for _ in range(3)]
    after = peak_kib()
    assert any(b" 413 " in answer for answer in answers), answers
    assert after - before < 16 * 1024, (before, after)  # 4 MiB limit: never the 120 MiB
