"""docs/concepts/minimal.rst: the declarations it shows are an app the suite checks, calls and type-checks.

The page includes its code from ``docs/examples/minimal/`` and shows what
``flask bailing check`` and ``answers.py`` print there (the docs build
runs them). These tests hold the page's claims about that output: one
warning for the tenant the model would choose and none for the unlock that
says why the model chooses its account, the declared fields only, the cut
named, the error shape instead of the row.
"""

from __future__ import annotations

import json
import sys

import pytest

from bailing_flask.testing import HubSimulator

from .test_docs_examples import EXAMPLES, SECRET, run

MINIMAL = EXAMPLES / "minimal"


def answers(what: str) -> str:
    result = run([sys.executable, "answers.py", what], MINIMAL)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def check(app: str) -> str:
    result = run([sys.executable, "-m", "flask", "--app", app, "bailing", "check"], MINIMAL)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.fixture
def orders(monkeypatch):
    monkeypatch.setenv("BAILING_SECRET", SECRET)
    monkeypatch.syspath_prepend(str(MINIMAL))
    for name in ("orders", "backoffice"):  # a fresh back office for every test
        monkeypatch.delitem(sys.modules, name, raising=False)
    import orders as module

    yield module
    for name in ("orders", "backoffice"):
        sys.modules.pop(name, None)


def test_the_minimal_pages_examples_pass_mypy_strict():
    result = run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "reports.py", "orders.py",
                  "backoffice.py", "answers.py"], MINIMAL)
    assert result.returncode == 0, result.stdout + result.stderr


def test_check_warns_about_the_tenant_the_model_would_choose_and_not_about_the_explained_unlock():
    lines = check("reports").splitlines()
    warnings = [line for line in lines if line.startswith(("WARNING", "ERROR"))]
    assert len(warnings) == 1 and warnings[0].split()[:2] == ["WARNING", "identity_param"], lines
    assert "'tenant_id' (tenant) of 'report_get'" in warnings[0]
    assert "2 tool(s), 0 error(s), 1 warning(s)" in lines
    findings = lines[:lines.index("2 tool(s), 0 error(s), 1 warning(s)")]  # the notes after it list every tool
    assert "account_unlock" not in "\n".join(findings)


def test_the_pages_own_declarations_take_nobody_from_the_model():
    """The page once showed a profile update keyed by a ``user_id`` path parameter: the warning it explains."""
    assert "4 tool(s), 0 error(s), 0 warning(s)" in check("orders").splitlines()


def test_model_chooses_needs_a_mapping_of_reasons(orders):
    from pydantic import BaseModel

    from bailing_flask import ToolDeclarationError, tool

    class Body(BaseModel):
        user_id: str

    def unlock() -> dict[str, bool]:
        return {"unlocked": True}

    with pytest.raises(ToolDeclarationError, match="needs a reason per parameter"):
        tool(scope="account.admin", body=Body, model_chooses={"user_id"})(unlock)  # type: ignore[arg-type]
    with pytest.raises(ToolDeclarationError, match="at least 10 characters"):
        tool(scope="account.admin", body=Body, model_chooses={"user_id": "admin"})(unlock)


def test_a_list_answer_keeps_its_first_items_and_names_every_cut():
    answer = json.loads(answers("truncated"))
    assert [line["order_id"] for line in answer["orders"]] == [1008, 1007, 1006, 1005, 1004]
    assert all(set(line) == {"order_id", "note"} for line in answer["orders"])  # no internal_note
    assert answer["orders"][2]["note"].endswith("…") and len(answer["orders"][2]["note"]) == 40
    assert answer["truncated"] == {"orders": "5 of 8 items shown; more exist",
                                   "orders[2].note": "cut to 40 of 1254 characters"}
    assert "page_size" not in answer


def test_an_aborted_call_answers_the_error_shape_with_the_aborts_description():
    assert json.loads(answers("error")) == {
        "error": "conflict", "reason": "conflict",
        "message": "Order 1001 already has an open refund request."}


def test_a_result_that_does_not_match_is_withheld_and_the_log_names_fields_not_values():
    (line,) = answers("invalid").splitlines()
    assert line.startswith("ERROR bailing_flask: ") and "(500 invalid_response)" in line
    assert line.endswith("customer.email: missing; refund_requests[0].amount: float_parsing")
    assert "n/a" not in line and "Bob" not in line


def test_the_audit_record_counts_what_was_dropped():
    record = json.loads(answers("audit"))
    # internal_note, warehouse, the customer's phone and credit_limit, the refund's filed_by
    assert record == {"tool": "order_get", "status": 200, "response": {
        "fields_dropped": 5, "sensitive_dropped": 0, "items_dropped": 0, "strings_cut": 0}}


def test_the_returns_text_the_model_reads_is_written_from_the_shape():
    assert answers("returns").strip() == (
        "An object with: order_id, status, note, customer {customer_id, name, email}, refund_requests "
        '(list, at most 50) {refund_request_id, amount, status}. Anything cut is named in "truncated".')


def test_the_order_leaves_with_the_declared_fields_only(orders):
    answer = HubSimulator(orders.app, SECRET).call("order_get", {"order_id": 1001}, subject="t1:alice")
    assert answer.json() == {
        "order_id": 1001, "status": "paid", "note": "Leave at the door.",
        "customer": {"customer_id": 7, "name": "Alice Martin", "email": "alice@example.com"},
        "refund_requests": [{"refund_request_id": 12, "amount": 19.9, "status": "pending"}]}


def test_a_conflict_answers_its_declared_error_body_and_not_the_row(orders):
    hub = HubSimulator(orders.app, SECRET)
    stale = hub.call("profile_update", {"name": "Alice M.", "version": 2}, subject="t1:alice")
    assert (stale.status, stale.json()) == (409, {"error": "version_conflict", "current_version": 3})
    fresh = hub.call("profile_update", {"name": "Alice M.", "version": 3}, subject="t1:alice")
    assert fresh.json() == {"user_id": 7, "name": "Alice M.", "version": 4}  # no password_hash


def test_a_tool_result_leaves_with_the_declared_keys_only(orders):
    hub = HubSimulator(orders.app, SECRET)
    answer = hub.call("refund_request_create", {"order_id": 1002, "amount": 5}, subject="t1:alice")
    assert (answer.status, answer.json()) == (200, {
        "ok": True, "status": "submitted", "message": "Refund request 12 submitted.", "business_id": 12})
