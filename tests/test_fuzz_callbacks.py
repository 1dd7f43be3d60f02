"""Fuzzing what the hub POSTs to the business, and its answers to decisions (fast version).

See ``tests/_fuzz/callbacks.py``: signed job records, deliveries and approval
requests of arbitrary JSON shape, the hub's answers to a decision, and
decisions built from arbitrary values. The regression tests below are what
this fuzzing found.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from hypothesis import given

from bailing_flask.hub.payloads import PayloadError, build_decision

from ._fuzz import MemoryMeter, Outcome, fuzz_settings, run_batch
from ._fuzz import callbacks


@pytest.fixture(scope="module")
def check() -> Iterator[Callable[[callbacks.CallbackCase], Outcome]]:
    with callbacks.target() as check:
        yield check


@fuzz_settings(100)
@given(case=callbacks.cases)
def test_callbacks_answer_2xx_or_a_clear_4xx_and_handlers_get_only_valid_payloads(check, case):
    outcome = check(case)
    assert outcome.ok, str(outcome)


def test_a_batch_of_callbacks_stays_within_a_memory_bound(check):
    with MemoryMeter() as meter:
        tally = run_batch(callbacks.cases, check, 20, meter=meter)
    assert not any(tally.counts.values()), tally.examples
    # the deepest JSON the fuzzer sends is 100,000 levels; its parse is refused, not held
    assert meter.peak < 16 * 1024 * 1024, f"one callback needed {meter.peak / 2**20:.1f} MiB"


@pytest.mark.parametrize("answered_id", [b"1e400", b"1.5", b"true", b'"7a"'])
def test_a_hub_answer_with_an_approval_id_that_is_no_integer_raises_hub_error(check, answered_id):
    body = b'{"ok":true,"status":"approved","id":' + answered_id + b"}"
    outcome = check(callbacks.CallbackCase("answer", {"status": 200, "body": body, "headers": [],
                                                      "auth": "signature"}))
    assert outcome.ok and outcome.label == "HubError", str(outcome)


@pytest.mark.parametrize("field", ["approver", "comment", "decided_at"])
def test_a_decision_with_a_lone_surrogate_is_refused_before_it_is_sent(field):
    values = {"approver": "u1", "decision_id": "biz-7", "comment": None, "decided_at": None}
    values[field] = "ok\ud800"
    with pytest.raises(PayloadError, match="lone surrogate"):
        build_decision(callbacks._approval(), "approved", **values)

