"""The signing core agrees with the hub byte for byte and refuses everything else.

Vectors are copied verbatim from CONTRACT.md §2.5, §2.6 and §3.8.
"""

from __future__ import annotations

import hashlib
import logging

import pytest

from bailing_flask import ConfigurationError
from bailing_flask.wire import (
    CallbackVerifier,
    SignatureError,
    Verifier,
    canonical_tool_call,
    sign_callback,
    sign_tool_call,
    verify_callback,
)
from bailing_flask.wire.signing import EMPTY_BODY_SHA256

from .helpers import HUB_SECRET, STRONG_SECRET, VECTOR_TS, FrozenClock

# --- the hub's frozen vectors -------------------------------------------------

V1_BODY = '{"title":"test","price":9.9}'
V3_BODY = '{"kind":"delivery","job_id":"job-test-001","status":"done"}'
V4_BODY = (
    '{"subject":"__bailing_authz_probe__:nobody","reason":"bailing-authz-probe","expect":"deny"}'
)
V6_BODY = (
    '{"kind":"tool_approval_decision","schema_version":"bailing.approval-decision.v1",'
    '"approval_id":123,"job_id":"job-test-001","request_id":"req-1",'
    '"args_hash":"17b4db064e17f4878e391177e6ca623b798911f34014bc9e78920993d7dd27ad",'
    '"decision_id":"oa:approval:9001","decision":"approved","approver":"user_2002"}'
)


def test_v1_tool_call():
    assert canonical_tool_call(
        VECTOR_TS, "POST", "/goods/create", hashlib.sha256(V1_BODY.encode()).hexdigest(),
        "179:1", "job-test-001",
    ) == (
        b"1718000000.POST./goods/create."
        b"392d0d2e9f5d5c23d61e0b8ee42bc41ad1a8eb9d739f527385eeb58733f668c0.179:1.job-test-001"
    )
    assert sign_tool_call(
        HUB_SECRET, VECTOR_TS, "POST", "/goods/create", V1_BODY, "179:1", "job-test-001"
    ) == "sha256=6deb8dbd54268eee4631129b442acbc9797431642473326a10a5b0826431aae5"


def test_v2_catalog_fetch_signs_empty_subject_and_job():
    assert canonical_tool_call(VECTOR_TS, "GET", "/bailing/tools.json", EMPTY_BODY_SHA256) == (
        b"1718000000.GET./bailing/tools.json."
        b"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855.."
    )
    assert sign_tool_call(HUB_SECRET, VECTOR_TS, "GET", "/bailing/tools.json") == (
        "sha256=505ab99763cd20b50ba4066ee2ac315fe6af12a8638e7dabef63508abddedc74"
    )


def test_v3_callback_milliseconds():
    assert sign_callback(HUB_SECRET, 1718000000000, V3_BODY) == (
        "sha256=ca81d247422d926be3066f065a8c92a1beaffc6f37f01ef7d3e2c47b46f63210"
    )


def test_v4_dedicated_authz_probe():
    assert hashlib.sha256(V4_BODY.encode()).hexdigest() == (
        "26eb3464067fe62873a9fd548b7d09a2ebe1284fd838dcf1b275ebf9179b4490"
    )
    assert sign_tool_call(
        HUB_SECRET, VECTOR_TS, "POST", "/.well-known/bailing/authz-probe", V4_BODY,
        "__bailing_authz_probe__:nobody", "probe",
    ) == "sha256=525ee888a201dfc27d71ddef60ec49b0d56962c02357ec1d4807e6960667cbd7"


def test_v5_catalog_at_recommended_path():
    assert sign_tool_call(HUB_SECRET, VECTOR_TS, "GET", "/.well-known/bailing/tools.json") == (
        "sha256=5a69f5f33e860a7eb227f67bc7fef901c26bbb5b53ef5c9030e8badc1f25fc05"
    )


def test_v6_approval_decision_with_client_token():
    expected = "sha256=ebf53b11b94bc00a467d5c72da776719bd7d135b8fdbf6b0f6ec1efde82b2f4f"
    assert sign_callback("client-token-abc", 1718000000000, V6_BODY) == expected
    assert verify_callback(
        "client-token-abc", "1718000000000", expected, V6_BODY,
        clock=FrozenClock(1718000000.0),
    ) == "0"


# --- worked examples E1-E5 (CONTRACT.md §3.8) ---------------------------------

E_CASES = [
    (  # E1: GET, query with space and non-ASCII
        "GET",
        "/orders?keyword=%E5%BC%A0%E4%B8%89+%E9%80%80%E6%AC%BE&status=paid&page=2",
        "",
        "t1:u1001",
        "sha256=4a05ec9611fbaf1eeeefd19a591ef85ac6cdd18fb5631bc1ee82ea0159096a9d",
    ),
    (  # E2: path parameter with / ? = space #, anonymous
        "GET",
        "/files/reports%2F2024%3Fv%3D1%20final%232.pdf",
        "",
        "",
        "sha256=7ce636ab245028a1f001cb5b29ecd79ede6c839aa34b53b06a2138c80687e54b",
    ),
    (  # E3: POST with JSON body; base_url prefix /openapi not signed
        "POST",
        "/goods/create?dry_run=true",
        '{"title":"测试 \\"x\\"","price":9.9,"tags":["a","b"]}',
        "t1:u1001",
        "sha256=71c24b97027c42aa2dc37c4741c489770cfaf8a6e0bf46a48bae2de209331026",
    ),
    (  # E4: reserved characters, integer-like key first
        "GET",
        "/staff/list?2024=y&limit=10&dept=R%26D+%7E*%27%28%29%21%2B",
        "",
        "t1:u1001",
        "sha256=d894ce3e90341829e69dcde72a2addd7db97c86564d6ffbaf3c12c94c787e64e",
    ),
    (  # E5: DELETE with only a path parameter: body is "{}"
        "DELETE",
        "/staff/42",
        "{}",
        "t1:u1001",
        "sha256=6212d86e4ca809cfae77ba3344a51c57c8304dae4a155b61bbbb7c6929c755f3",
    ),
]


@pytest.mark.parametrize("method,path,body,subject,expected", E_CASES)
def test_worked_examples(method, path, body, subject, expected):
    assert sign_tool_call(HUB_SECRET, VECTOR_TS, method, path, body, subject, "job-test-001") == (
        expected
    )
    verifier = Verifier(HUB_SECRET, clock=FrozenClock(VECTOR_TS))
    assert verifier.verify(
        signature=expected, timestamp=str(VECTOR_TS), method=method, path_with_query=path,
        body=body.encode(), on_behalf_of=subject, job_id="job-test-001",
    ) == "0"


def test_e3_body_hash_is_of_the_exact_bytes():
    body = '{"title":"测试 \\"x\\"","price":9.9,"tags":["a","b"]}'.encode()
    assert len(body) == 53
    assert hashlib.sha256(body).hexdigest() == (
        "94f87f22b2649d20c961fa00779a77fa9a9b6297255064de2feeb7177c27174c"
    )


def test_empty_and_brace_body_hashes():
    assert EMPTY_BODY_SHA256 == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert hashlib.sha256(b"{}").hexdigest() == (
        "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    )


def test_latin1_subject_is_signed_as_utf8():
    # The hub signs UTF-8 but sends U+00E9 as one byte; WSGI hands us "café".
    sig = sign_tool_call(HUB_SECRET, VECTOR_TS, "GET", "/x", b"", "café", "j")
    canonical = canonical_tool_call(VECTOR_TS, "GET", "/x", EMPTY_BODY_SHA256, "café", "j")
    assert canonical.endswith("café.j".encode("utf-8"))
    verifier = Verifier(HUB_SECRET, clock=FrozenClock(VECTOR_TS))
    assert verifier.verify(
        signature=sig, timestamp=str(VECTOR_TS), method="GET", path_with_query="/x",
        on_behalf_of="café", job_id="j",
    ) == "0"


# --- the verifier's refusals ----------------------------------------------------


def _verify(verifier: Verifier, **overrides: object) -> str:
    request = dict(
        signature=sign_tool_call(HUB_SECRET, VECTOR_TS, "POST", "/a?b=1", b"{}", "t1:u1", "job-1"),
        timestamp=str(VECTOR_TS),
        method="POST",
        path_with_query="/a?b=1",
        body=b"{}",
        on_behalf_of="t1:u1",
        job_id="job-1",
    )
    request.update(overrides)
    return verifier.verify(**request)  # type: ignore[arg-type]


@pytest.fixture
def verifier() -> Verifier:
    return Verifier(HUB_SECRET, clock=FrozenClock(VECTOR_TS))


def reason_of(verifier: Verifier, **overrides: object) -> str:
    with pytest.raises(SignatureError) as info:
        _verify(verifier, **overrides)
    return info.value.reason


def test_valid_request_reports_key_label(verifier):
    assert _verify(verifier) == "0"


@pytest.mark.parametrize("value", [None, ""])
def test_missing_signature(verifier, value):
    assert reason_of(verifier, signature=value) == "missing_signature"


@pytest.mark.parametrize(
    "value",
    [
        "sha256=" + "A" * 64,  # upper-case hex
        "sha256=" + "a" * 63,
        "sha256=" + "a" * 65,
        "SHA256=" + "a" * 64,
        "sha1=" + "a" * 40,
        " sha256=" + "a" * 64,
        "sha256=" + "a" * 64 + "\n",
        "sha256=" + "a" * 64 + ",sha256=" + "b" * 64,  # header sent twice, joined
        "a" * 64,
    ],
)
def test_malformed_signature(verifier, value):
    assert reason_of(verifier, signature=value) == "malformed_signature"


@pytest.mark.parametrize(
    "value", [None, "", " 1718000000", "1718000000 ", "+1718000000", "1_718_000_000",
              "１７１８０００００００", "171800000.0", "-5", "1718000000,1718000000", "1" * 13]
)
def test_malformed_timestamp(verifier, value):
    assert reason_of(verifier, timestamp=value) == "malformed_timestamp"


def test_window_is_exclusive_and_symmetric():
    sig = sign_tool_call(HUB_SECRET, VECTOR_TS, "GET", "/x")
    for delta, ok in [(0, True), (299, True), (-299, True), (300, False), (-300, False),
                      (299.999, True), (-299.5, False)]:
        verifier = Verifier(HUB_SECRET, clock=FrozenClock(VECTOR_TS + delta))
        if ok:
            assert verifier.verify(signature=sig, timestamp=str(VECTOR_TS), method="GET",
                                   path_with_query="/x") == "0", delta
        else:
            with pytest.raises(SignatureError) as info:
                verifier.verify(signature=sig, timestamp=str(VECTOR_TS), method="GET",
                                path_with_query="/x")
            assert info.value.reason == "timestamp_out_of_window", delta


def test_window_is_configurable():
    sig = sign_tool_call(HUB_SECRET, VECTOR_TS, "GET", "/x")
    verifier = Verifier(HUB_SECRET, window=30, clock=FrozenClock(VECTOR_TS + 30))
    with pytest.raises(SignatureError):
        verifier.verify(signature=sig, timestamp=str(VECTOR_TS), method="GET", path_with_query="/x")


@pytest.mark.parametrize("window", [0, -1, 3601, 10**9, True, "300", float("nan")])
def test_window_is_bounded(window):
    with pytest.raises(ConfigurationError):
        Verifier(HUB_SECRET, window=window)  # type: ignore[arg-type]


def test_job_id_with_dot_is_refused(verifier):
    # CONTRACT.md T31: "alice@corp" + "com.job_1" signs like "alice@corp.com" + "job_1".
    sig = sign_tool_call(HUB_SECRET, VECTOR_TS, "GET", "/x", b"", "alice@corp.com", "job_1")
    with pytest.raises(SignatureError) as info:
        verifier.verify(signature=sig, timestamp=str(VECTOR_TS), method="GET", path_with_query="/x",
                        on_behalf_of="alice@corp", job_id="com.job_1")
    assert info.value.reason == "malformed_job_id"
    # ... while the genuine split verifies, dots in the subject being fine.
    assert verifier.verify(signature=sig, timestamp=str(VECTOR_TS), method="GET",
                           path_with_query="/x", on_behalf_of="alice@corp.com", job_id="job_1") == "0"


@pytest.mark.parametrize(
    "field,value",
    [
        ("timestamp", str(VECTOR_TS + 1)),
        ("method", "PUT"),
        ("path_with_query", "/a?b=2"),
        ("path_with_query", "/a"),
        ("body", b"{} "),
        ("on_behalf_of", "t1:u2"),
        ("on_behalf_of", ""),
        ("job_id", "job-2"),
        ("job_id", ""),
    ],
)
def test_changing_any_signed_element_is_refused(verifier, field, value):
    assert reason_of(verifier, **{field: value}) == "bad_signature"


def test_rotation_accepts_any_configured_secret_and_reports_label():
    old, new = "old-" + STRONG_SECRET, "new-" + STRONG_SECRET
    sig = sign_tool_call(old, VECTOR_TS, "GET", "/x")
    by_index = Verifier([new, old], clock=FrozenClock(VECTOR_TS))
    assert by_index.verify(signature=sig, timestamp=str(VECTOR_TS), method="GET",
                           path_with_query="/x") == "1"
    by_label = Verifier({"2026-11": new, "2026-05": old}, clock=FrozenClock(VECTOR_TS))
    assert by_label.verify(signature=sig, timestamp=str(VECTOR_TS), method="GET",
                           path_with_query="/x") == "2026-05"
    assert by_label.labels == ("2026-11", "2026-05")


@pytest.mark.parametrize("secrets", [None, "", "   ", [], ["ok-" + STRONG_SECRET, ""], {}, {"a": ""}, [1]])
def test_refuses_to_start_without_a_usable_secret(secrets):
    with pytest.raises(ConfigurationError) as info:
        Verifier(secrets, setting="BAILING_SECRETS")  # type: ignore[arg-type]
    assert "BAILING_SECRETS" in str(info.value)


def test_short_secret_is_warned_about_without_revealing_it(caplog):
    with caplog.at_level(logging.WARNING, logger="bailing_flask"):
        Verifier("short-but-set")
    assert "only 13 bytes" in caplog.text
    assert "token_urlsafe" in caplog.text
    assert "short-but-set" not in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="bailing_flask"):
        Verifier(STRONG_SECRET)
    assert caplog.text == ""


def test_error_never_contains_the_secret_or_expected_signature(verifier):
    with pytest.raises(SignatureError) as info:
        _verify(verifier, body=b"tampered")
    text = str(info.value) + info.value.message + repr(info.value)
    assert HUB_SECRET not in text
    expected = sign_tool_call(HUB_SECRET, VECTOR_TS, "POST", "/a?b=1", b"tampered", "t1:u1", "job-1")
    assert expected[7:] not in text


def test_sdk_error_codes_follow_the_hub_sdks():
    assert SignatureError("malformed_timestamp").sdk_error == "timestamp_out_of_window"
    assert SignatureError("timestamp_out_of_window").sdk_error == "timestamp_out_of_window"
    for reason in ("missing_signature", "malformed_signature", "bad_signature", "malformed_job_id"):
        assert SignatureError(reason).sdk_error == "bad_signature"


# --- the millisecond scheme -----------------------------------------------------


def test_callback_window_is_milliseconds_and_exclusive():
    sig = sign_callback("client-token-abc", 1718000000000, V6_BODY)
    ok = CallbackVerifier("client-token-abc", clock=FrozenClock(1718000000 + 299.999))
    assert ok.verify(sig, "1718000000000", V6_BODY) == "0"
    late = CallbackVerifier("client-token-abc", clock=FrozenClock(1718000000 + 300.0))
    with pytest.raises(SignatureError) as info:
        late.verify(sig, "1718000000000", V6_BODY)
    assert info.value.reason == "timestamp_out_of_window"


def test_callback_with_seconds_timestamp_is_out_of_window():
    sig = sign_callback("client-token-abc", 1718000000, V3_BODY)
    verifier = CallbackVerifier("client-token-abc", clock=FrozenClock(1718000000))
    with pytest.raises(SignatureError) as info:
        verifier.verify(sig, "1718000000", V3_BODY)
    assert info.value.reason == "timestamp_out_of_window"


def test_callback_signed_with_the_provider_secret_names_the_wrong_key():
    sig = sign_callback(HUB_SECRET, 1718000000000, V3_BODY)
    verifier = CallbackVerifier(
        "client-token-abc", clock=FrozenClock(1718000000), foreign_secrets=HUB_SECRET
    )
    with pytest.raises(SignatureError) as info:
        verifier.verify(sig, "1718000000000", V3_BODY)
    assert info.value.reason == "wrong_key"


def test_callback_body_tampering_is_refused():
    sig = sign_callback("client-token-abc", 1718000000000, V3_BODY)
    verifier = CallbackVerifier("client-token-abc", clock=FrozenClock(1718000000))
    with pytest.raises(SignatureError) as info:
        verifier.verify(sig, "1718000000000", V3_BODY.replace("done", "error"))
    assert info.value.reason == "bad_signature"
