"""Fuzzing the verifier and the gate with raw WSGI environs (fast version; long run: benchmarks/reliability).

See ``tests/_fuzz/wsgi.py`` for what a case is and what the oracle checks.
The regression tests below are what this fuzzing found.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bailing_flask.testing import signed_headers

from ._fuzz import SECRET, MemoryMeter, Outcome, fuzz_settings, run_batch
from ._fuzz import wsgi
from ._fuzz.apps import JOB_CALLBACK, MAX_BODY, tool_app


@pytest.fixture(scope="module")
def check() -> Iterator[Callable[[wsgi.WsgiCase], Outcome]]:
    with wsgi.target() as check:
        yield check


@fuzz_settings(150)
@given(case=wsgi.cases)
def test_no_environ_crashes_the_middleware_or_runs_a_tool_it_did_not_verify(check, case):
    outcome = check(case)
    assert outcome.ok, str(outcome)


_big = st.builds(
    wsgi.WsgiCase, app=st.sampled_from(["flask", "bare"]), method=st.just("POST"),
    raw_path=st.sampled_from(["/notes", JOB_CALLBACK, "/plain"]), query=st.just(""),
    body=st.builds(wsgi.LazyBody, st.just(b"x"),
                   st.sampled_from([MAX_BODY // 2, MAX_BODY, MAX_BODY + 1, 40 * MAX_BODY])),
    subject=st.just("t1:u1"), job=st.just("job-1"), signing=st.sampled_from(["valid", "other_key"]),
    mutations=st.lists(st.sampled_from([("chunked", True), ("content_length", ""),
                                        ("stream_error", 100_000)]), max_size=1),
)


def test_a_batch_of_large_and_chunked_bodies_stays_within_a_memory_bound(check):
    # bodies up to 40 times the limit, declared or chunked: none is held whole
    with MemoryMeter() as meter:
        tally = run_batch(_big, check, 25, meter=meter)
    assert tally.cases and not any(tally.counts.values()), tally.examples
    assert meter.peak < 4 * 1024 * 1024, f"one request needed {meter.peak / 2**20:.1f} MiB"


# -- regressions -------------------------------------------------------------------------------------


def _signed(app, method: str, path: str, body: bytes = b"", **headers: str):
    sent = signed_headers(SECRET, method, path, body, subject="t1:u1", job_id="job-1")
    sent.update(headers)
    return app.test_client().open(path, method=method, data=body, headers=sent,
                                  environ_overrides={"REQUEST_URI": path, "RAW_URI": path})


def test_a_signed_call_to_a_path_no_tool_serves_gets_a_json_refusal():
    response = _signed(tool_app(), "GET", "/items/abc")  # the route takes an integer
    assert response.status_code == 404
    assert response.json["reason"] == response.headers["X-Bailing-Reason"] == "no_such_tool"


def test_a_signed_call_with_a_method_the_route_does_not_take_gets_405_json():
    response = _signed(tool_app(), "PATCH", "/items/1", b"{}")
    assert response.status_code == 405
    assert response.json["reason"] == "method_not_allowed"
    assert set(response.headers["Allow"].split(", ")) >= {"GET", "DELETE"}


def test_an_unsigned_request_to_an_unknown_path_keeps_the_apps_own_404():
    response = tool_app().test_client().get("/items/abc")
    assert response.status_code == 404
    assert "X-Bailing-Reason" not in response.headers and response.mimetype == "text/html"


@pytest.mark.parametrize(("method", "path"), [("PUT", "/.well-known/bailing/tools.json"),
                                              ("GET", JOB_CALLBACK),
                                              ("PROPFIND", "/.well-known/bailing/callbacks/approval")])
def test_the_package_endpoints_answer_any_other_method_405_with_a_reason(method, path):
    response = tool_app().test_client().open(path, method=method)
    assert response.status_code == 405
    assert response.json["reason"] == response.headers["X-Bailing-Reason"] == "method_not_allowed"


def test_a_body_nested_deeper_than_python_parses_is_refused_422_not_500():
    body = b'{"text":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    response = _signed(tool_app(), "POST", "/notes", body, **{"Content-Type": "application/json"})
    assert response.status_code == 422
    assert response.json["reason"] == "invalid_body"


def test_a_query_string_that_is_not_utf8_is_refused_422_not_500():
    # raw bytes in the target reach the app as ISO-8859-1 text on servers such as wsgiref
    environ_query = "q=caf\xe9"
    path = "/search?" + environ_query
    headers = signed_headers(SECRET, "GET", path, subject="t1:u1", job_id="job-1")
    response = tool_app().test_client().get("/search", headers=headers, environ_overrides={
        "QUERY_STRING": environ_query, "REQUEST_URI": path, "RAW_URI": path})
    assert response.status_code == 422
    assert response.json["errors"][0]["problem"] == "not_utf8"


def test_a_path_integer_beyond_the_declared_maximum_is_refused_before_the_view():
    response = _signed(tool_app(), "GET", "/items/99999999999999999999")
    assert response.status_code == 422
    assert response.json["reason"] == "invalid_parameter"
    assert response.json["parameters"] == ["item_id"]
    assert _signed(tool_app(), "GET", "/items/9007199254740991").status_code == 200


def test_the_oracle_flags_a_tool_that_ran_on_a_request_nobody_signed():
    """The oracle itself: an app that runs every request as a tool is caught at once."""
    ran = {"method": "GET", "path_info": "/items/1", "query": "", "subject": None, "job": "",
           "body_sha256": hashlib.sha256(b"").hexdigest()}

    def runs_everything(environ, start_response):
        start_response("200 OK", [("X-Fuzz-Ran", json.dumps(ran)), ("Content-Length", "2")])
        return [b"{}"]

    for signing in ("none", "other_key", "stale"):
        case = wsgi.WsgiCase("flask", "GET", "/items/1", "", b"", None, None, signing)
        outcome = wsgi.check_case({"flask": runs_everything}, case)
        assert [kind for kind, _ in outcome.problems] == ["false_accept"], signing
    valid = wsgi.check_case({"flask": runs_everything},
                            wsgi.WsgiCase("flask", "GET", "/items/1", "", b"", None, None, "valid"))
    assert valid.ok, str(valid)


def test_require_signature_also_covers_the_routed_path_when_the_raw_target_differs():
    # a middleware outside the verifier rewrote PATH_INFO; the app serves what it routes
    from ._fuzz.apps import echo_middleware

    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/secure/x", "REQUEST_URI": "/public/x",
               "QUERY_STRING": "", "wsgi.input": io.BytesIO(b"")}
    statuses: list[str] = []
    body = b"".join(echo_middleware()(environ, lambda status, headers: statuses.append(status)))
    assert statuses == ["401 Unauthorized"], body
    assert json.loads(body)["reason"] == "missing_signature"
