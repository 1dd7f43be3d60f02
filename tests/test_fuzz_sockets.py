"""Fuzzing real servers with raw request bytes: Werkzeug and gunicorn (fast version).

See ``tests/_fuzz/sockets.py``: garbled request lines, folded and duplicated
headers, conflicting lengths, bad chunk framing and requests pipelined behind
a signed one, each on its own loopback connection. The regression tests below
are what this fuzzing found.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given

from ._fuzz import Outcome, fuzz_settings
from ._fuzz import sockets
from ._fuzz.apps import tool_app


@pytest.fixture(scope="module")
def check() -> Iterator[Callable[[sockets.SocketCase], Outcome]]:
    with sockets.target() as check:
        yield check


@pytest.mark.slow
@fuzz_settings(120)
@given(case=sockets.cases)
def test_no_bytes_on_the_wire_make_the_app_fail_or_run_an_unsigned_call(check, case):
    outcome = check(case)
    assert outcome.ok, str(outcome)


@pytest.mark.slow
def test_a_request_smuggled_behind_a_signed_one_never_runs_a_tool(check):
    for server in ("werkzeug", "gunicorn"):
        for framing in (("chunked", "ok"), ("transfer_encoding", "chunked"), ("conflicting_length", 0)):
            case = sockets.SocketCase(server, "POST", "/notes", "", b'{"text":"signed"}', "t1:u1",
                                      "job-1", True, [framing, ("smuggle", ("POST", "/notes"))])
            outcome = check(case)
            assert outcome.ok, str(outcome)


def test_raw_non_utf8_bytes_in_the_query_are_refused_422_over_a_real_server(wsgi_server):
    # wsgiref hands the request target's bytes to the app as they came; the hub never sends
    # such a query (it percent-encodes UTF-8), but the gate must not answer it with a 500
    base = wsgi_server(tool_app(), "wsgiref")
    case = sockets.SocketCase("wsgiref", "GET", "/search", "q=caf\xe9", b"", "t1:u1", "job-1", True)
    payload, methods, _ = sockets.build_bytes(case, base.split("//", 1)[1])
    (response,), _ = sockets.parse_responses(sockets.exchange(base, payload), methods)
    assert response.status == 422, response.body
    assert response.headers["x-bailing-reason"] == "invalid_parameter"


def test_a_chunk_that_ends_early_is_refused_and_no_memory_nobody_sent_is_read():
    # Werkzeug's development server decodes chunked uploads with a raw stream whose
    # readinto reports more bytes than it wrote when a chunk ends early; read() then
    # returned uninitialised memory (or crashed the process)
    from werkzeug.serving import DechunkedInput

    from bailing_flask.wire.body import read_body
    from bailing_flask.errors import SignatureError

    environ = {"wsgi.input": DechunkedInput(io.BytesIO(b"fffff\r\nabc")),
               "HTTP_TRANSFER_ENCODING": "chunked", "wsgi.input_terminated": True}
    with pytest.raises(SignatureError) as refused:
        read_body(environ, 10 * 1024 * 1024, 1024 * 1024)
    assert (refused.value.reason, refused.value.status) == ("malformed_body", 400)
    whole = {"wsgi.input": DechunkedInput(io.BytesIO(b"5\r\nhello\r\n0\r\n\r\n")),
             "HTTP_TRANSFER_ENCODING": "chunked"}
    assert read_body(whole, 1024, 1024).stream.read() == b"hello"


@pytest.mark.slow
@pytest.mark.parametrize("framing", ["short", "size_mismatch", "huge"])
def test_a_signed_chunked_call_whose_chunk_ends_early_is_refused_400_on_werkzeug(check, framing):
    case = sockets.SocketCase("werkzeug", "POST", "/notes", "", b'{"text":"signed body"}', "t1:u1",
                              "job-1", True, [("chunked", framing)])
    outcome = check(case)
    assert outcome.ok and outcome.label == "400", str(outcome)


def test_the_view_reads_the_verified_body_when_the_server_leaves_transfer_encoding_in_place(
        wsgi_server):
    # wsgiref passes Transfer-Encoding on without de-chunking or marking the stream as ended;
    # the framework then read no body at all, while the verifier had checked "{}"
    base = wsgi_server(tool_app(), "wsgiref")
    case = sockets.SocketCase("wsgiref", "DELETE", "/items/5", "", b"{}", "t1:u1", "job-te", True,
                              [("transfer_encoding", "identity, chunked")])
    payload, methods, signed = sockets.build_bytes(case, base.split("//", 1)[1])
    (response,), _ = sockets.parse_responses(sockets.exchange(base, payload), methods)
    assert response.status == 200, response.body
    assert json.loads(response.headers["x-fuzz-ran"])["body_sha256"] == signed["body_sha256"]
