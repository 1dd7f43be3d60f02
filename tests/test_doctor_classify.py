"""The doctor's pure classifiers reach the hub's own verdicts.

The cases are the hub's expectations (its tests of ``classifyDedicatedAuthzProbe``
and ``refreshProviderSpecFor`` in ``src/app/tool-specs.test.ts``) plus the
branches of ``fetchProviderSpecWithPolicy`` and ``probeAuthorizeFor`` they do
not cover. No request is sent.
"""

from __future__ import annotations

import pytest

from bailing_flask.doctor.classify import (
    _classify_probe,
    _negative_access,
    _primary_access,
)
from bailing_flask.doctor.transport import _Exchange
from bailing_flask.lint import ProbeTarget

DEDICATED = ProbeTarget("dedicated", "POST", "/bailing/authz-probe", "probe")
TOOL = ProbeTarget("tool", "GET", "/orders", "order_list")


def answer(status: int | None, body: str = "", **headers: str) -> _Exchange:
    return _Exchange(
        "test", "GET", "http://h/x", status, tuple(headers.items()), body.encode(),
        error=None if status is not None else "connection refused",
    )


@pytest.mark.parametrize(
    ("status", "body", "verdict"),
    [
        (200, '{"authorized":false}', "pass"),
        (200, '{"allow":true}', "suspect"),
        (403, "", "pass"),
        (200, "{}", "inconclusive"),
        (401, "", "pass"),
        (200, '{"ok":true}', "suspect"),
        (204, "", "inconclusive"),
        (404, "", "inconclusive"),
        (500, '{"authorized":false}', "inconclusive"),
        (None, "", "inconclusive"),
    ],
)
def test_dedicated_probe_verdicts(status: int | None, body: str, verdict: str) -> None:
    outcome = _classify_probe(DEDICATED, answer(status, body), True)
    assert outcome.status == verdict
    assert (outcome.mode, outcome.tool, outcome.requires_subject, outcome.http) == (
        "dedicated", "probe", True, status)
    assert outcome.reason


@pytest.mark.parametrize(
    ("status", "requires_subject", "verdict"),
    [
        (401, True, "pass"),
        (403, False, "pass"),
        (200, True, "suspect"),
        (200, False, "inconclusive"),
        (302, True, "inconclusive"),
        (None, True, "inconclusive"),
    ],
)
def test_tool_probe_verdicts(status: int | None, requires_subject: bool, verdict: str) -> None:
    outcome = _classify_probe(TOOL, answer(status, '{"authorized":false}'), requires_subject)
    assert (outcome.status, outcome.mode, outcome.tool) == (verdict, "tool", "order_list")
    assert outcome.requires_subject is requires_subject


@pytest.mark.parametrize(
    ("signed", "unsigned", "invalid", "verdict"),
    [
        (200, 401, 403, "protected"),
        (200, 429, 404, "inconclusive"),
        (200, 200, 401, "public"),
        (200, 401, 200, "public"),
        (200, 404, 404, "protected"),
        (200, 302, 401, "inconclusive"),
        (200, None, 401, "inconclusive"),
        (200, 500, 500, "inconclusive"),
    ],
)
def test_signed_required_access(signed: int, unsigned: int | None, invalid: int | None, verdict: str) -> None:
    primary = answer(signed, "{}")
    assert _primary_access("signed_required", primary) is None  # the negative probes decide
    access = _negative_access(primary, answer(unsigned), answer(invalid))
    assert access.status == verdict
    assert (access.signed_http, access.unsigned_http, access.invalid_http) == (signed, unsigned, invalid)


@pytest.mark.parametrize(
    ("primary", "policy", "verdict", "field"),
    [
        (answer(None), "signed_required", "inconclusive", None),
        (answer(401, '{"reason":"bad_signature"}'), "signed_required", "inconclusive", "signed_http"),
        (answer(301, location="https://h/x"), "signed_required", "inconclusive", "signed_http"),
        (answer(404), "public_allowed", "inconclusive", "unsigned_http"),
        (answer(200, "{}"), "public_allowed", "public", "unsigned_http"),
    ],
)
def test_the_hubs_own_fetch_can_decide_alone(
    primary: _Exchange, policy: str, verdict: str, field: str | None
) -> None:
    access = _primary_access(policy, primary)  # type: ignore[arg-type]
    assert access is not None and access.status == verdict
    if field is not None:
        assert getattr(access, field) == primary.status
    if primary.status == 401:
        assert access.primary_reason == "bad_signature"
    if primary.status == 301:
        assert "redirects are not followed" in access.reason


def test_a_catalog_over_the_limit_is_inconclusive() -> None:
    big = _Exchange("test", "GET", "http://h/x", 200, (), b"{}", too_big=True)
    access = _primary_access("signed_required", big)
    assert access is not None and access.status == "inconclusive" and "5 MiB" in access.reason
