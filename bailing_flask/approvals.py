"""Approvals the business can prove: ``@tool(..., business_approval=True)``.

When the business is the approver (the hub POSTs it the approval request,
it answers with a decision), the hub is trusted to run a high-risk call only
after that decision. A tool declared with ``business_approval=True`` does
not take the hub's word for it: it runs only if

1. this app *received* a signed approval request for the same job, the same
   tool and the same subject (recorded when the request arrives at the
   approval endpoint, before the app's handler runs);
2. this app *decided* it ``approved`` through
   :meth:`~bailing_flask.hub.client.HubClient.decide_approval` (a client from
   ``bailing.hub_client()``), and the hub accepted that decision;
3. the call's arguments are the approved ones: compared after both went
   through the tool's own declaration (route converters, query and body
   models), since path and query values arrive as strings. When the hub sent
   the approved arguments cut (longer than 1,000 characters, as text), the
   call's arguments are typed by the tool's schema and hashed the way the hub
   hashes them, and that hash must equal the request's ``args_hash``.

Otherwise the call is refused with ``403 business_approval_required`` (and
audited, with ``approval`` saying what was missing). Records live in the
idempotency store (memory, SQLite or Redis), for
``BAILING_APPROVAL_RETENTION`` seconds.

An approval admits exactly one call. The check above only finds the
approvals that would admit it; the approval is *spent* where the call is
reserved, in the same atomic step of the store
(:meth:`~bailing_flask.stores.IdempotencyStore.claim_approved`), and the
store records which call spent it. A repeat of that call is answered from
its idempotency record as before; any other call -- the same arguments
serialised differently, sent at the same time or later -- is refused with
``approval: used`` (``_spend_approval``). In the transaction mode the
approval is spent in the app's own transaction instead
(:mod:`bailing_flask.transactional`).

What it closes: a hub route that lets the call through without the
business's decision (a route whose approval type was changed to another
lane, a console operator approving in the hub, a stale catalog in which the
tool is no longer high-risk, or a compromised hub account replaying the
job). What it does not: a compromised hub that holds the provider secret and
the client token can forge the approval request *and* wait for the business
to approve it; the business still decides on what it was shown, so show
people the arguments. Decisions made elsewhere (another app, the hub's
console) never count.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from flask import request
from pydantic import BaseModel, ValidationError

from bailing_flask.wire.jsenc import js_string
from bailing_flask._state import BailingState, Cache
from bailing_flask.audit import APPROVAL_KEY
from bailing_flask.responses import ErrorInfo
from bailing_flask.stores import (
    ApprovalRecord,
    ApprovalStatus,
    EntryMeta,
    IdempotencyStore,
    Reservation,
    StoreUnavailable,
)

if TYPE_CHECKING:  # pragma: no cover
    from bailing_flask.context import ToolCall
    from bailing_flask.hub.client import DecisionResult, HubClient
    from bailing_flask.hub.payloads import ApprovalDecision, ApprovalRequest
    from bailing_flask._pipeline.registry import Tool

__all__ = [
    "APPROVAL_KEY",
    "BusinessApprovals",
    "check_business_approval",
    "call_arguments",
    "call_args_hash",
]

logger = logging.getLogger("bailing_flask")

#: Where the check leaves the approved records whose arguments match the call, for the step
#: that spends one of them (a tuple of :class:`ApprovalRecord`, oldest first).
_CANDIDATES_KEY = "bailing.approval_candidates"

_INTEGER = re.compile(r"-?(0|[1-9][0-9]*)")
_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")


class BusinessApprovals:
    """This app's record of the approval requests it received and decided.

    ``bailing.approvals()`` returns the one of the current app.
    """

    def __init__(self, state: BailingState) -> None:
        self.state = state

    def _store(self) -> IdempotencyStore:
        return self.state.store()

    @property
    def retention(self) -> float:
        return float(self.state.config.approval_retention)

    # -- recording ------------------------------------------------------------------

    def record_request(self, approval: ApprovalRequest) -> ApprovalRecord:
        """Keep a verified approval request (called by the approval endpoint)."""
        details = {
            name: value for name, value in (
                ("route", approval.route), ("route_key", approval.route_key),
                ("provider", approval.provider), ("scope", approval.scope),
                ("risk", approval.risk), ("policy", approval.policy),
                ("reason", approval.reason), ("summary", approval.summary),
                ("method", approval.method), ("path", approval.path),
            ) if value is not None
        }
        record = ApprovalRecord(
            approval_id=approval.approval_id, job_id=approval.job_id,
            request_id=approval.request_id, tool=approval.tool, args_hash=approval.args_hash,
            subject=approval.subject, args=approval.args, variant=approval.variant,
            details=details,
        )
        stored: ApprovalRecord = self._store().add_approval(record, retention_seconds=self.retention)
        return stored

    def record_decision(self, envelope: ApprovalDecision, result: DecisionResult) -> None:
        """Keep a decision the hub accepted (``HubClient``'s ``on_decision`` hook)."""
        status: ApprovalStatus = (
            "approved" if result.status == "approved"
            else "denied" if result.status == "denied"
            else envelope.decision
        )
        try:
            record = self._store().record_decision(
                envelope.approval_id, status=status, decision_id=envelope.decision_id,
                approver=envelope.approver, retention_seconds=self.retention,
            )
        except (StoreUnavailable, NotImplementedError) as exc:
            logger.error(
                "bailing: the hub accepted decision %s on approval %d, but it could not be recorded "
                "(%s); business_approval tools will refuse the call until the same decision is sent "
                "again", envelope.decision_id, envelope.approval_id, exc,
            )
            return
        if record is None:
            logger.warning(
                "bailing: decided approval %d, which this app never received (or it expired); "
                "business_approval tools do not accept it", envelope.approval_id,
            )
        elif record.decision_id != envelope.decision_id or record.status != status:
            logger.warning(
                "bailing: approval %d was already decided %s (%s); the new decision %s is not "
                "recorded", envelope.approval_id, record.status, record.decision_id,
                envelope.decision_id,
            )

    # -- reading and deciding -------------------------------------------------------

    def get(self, approval_id: int) -> ApprovalRecord | None:
        record: ApprovalRecord | None = self._store().get_approval(approval_id)
        return record

    def pending(self, limit: int = 100) -> list[ApprovalRecord]:
        """Approval requests waiting for this business's decision, oldest first."""
        found: list[ApprovalRecord] = self._store().list_approvals(status="pending", limit=limit)
        return found

    def all(self, limit: int = 100) -> list[ApprovalRecord]:
        found: list[ApprovalRecord] = self._store().list_approvals(limit=limit)
        return found

    def decide(
        self,
        approval_id: int,
        decision: str,
        *,
        approver: str,
        decision_id: str | None = None,
        comment: str | None = None,
        auth: Any = "signature",
    ) -> DecisionResult:
        """Send this business's decision on a recorded request to the hub, and record it.

        ``decision_id`` defaults to ``bailing:<approval_id>``: sending the
        same decision again is then a safe, idempotent retry.

        :raises KeyError: no live record of ``approval_id``.
        """
        from bailing_flask.hub.payloads import ApprovalRequest

        record = self.get(approval_id)
        if record is None:
            raise KeyError(f"no approval request {approval_id} on record")
        parsed = ApprovalRequest(
            variant=record.variant,  # type: ignore[arg-type]
            approval_id=record.approval_id, job_id=record.job_id, request_id=record.request_id,
            args_hash=record.args_hash, tool=record.tool, subject=record.subject, args=record.args,
        )
        return hub_client_of(self.state).decide_approval(
            parsed, decision, approver=approver,
            decision_id=decision_id or f"bailing:{approval_id}", comment=comment, auth=auth,
        )


# --- the check at the gate ---------------------------------------------------------------


def check_business_approval(state: BailingState, tool: Tool, call: ToolCall) -> ErrorInfo | None:
    """``None`` when this app approved exactly this call, else the refusal.

    The approvals found are only noted: one of them is spent where the call
    is reserved (``_spend_approval``), atomically with the reservation.
    """
    if not call.job_id:
        return _refusal(tool, call, "missing")
    try:
        records = state.store().find_approvals(job_id=call.job_id, tool=tool.name)
    except (StoreUnavailable, NotImplementedError) as exc:
        logger.error("bailing: approval records unavailable (%s); refusing %r", exc, tool.name)
        return ErrorInfo.make("idempotency_store_unavailable")
    mine = [record for record in records if record.subject == call.subject]
    approved = [record for record in mine if record.status == "approved"]
    matching = tuple(record for record in approved if _arguments_match(tool, call, record))
    if matching:  # spent (or found spent) where the call is reserved: _spend_approval
        request.environ[_CANDIDATES_KEY] = matching
        return None
    if approved:
        problem = "arguments_differ"
    elif any(record.status == "denied" for record in mine):
        problem = "denied"
    else:
        problem = "pending" if mine else "missing"
    return _refusal(tool, call, problem)


class _ApprovalRefused(Exception):
    """No approval could be spent on the call; the gate answers ``info`` (and audits it)."""

    def __init__(self, info: ErrorInfo) -> None:
        super().__init__(info.reason)
        self.info = info


def _approval_candidates(tool: Tool, call: ToolCall) -> tuple[ApprovalRecord, ...]:
    """The approvals :func:`check_business_approval` found for this call, oldest first.

    :raises _ApprovalRefused: there are none (the check did not run: fail closed).
    """
    found: tuple[ApprovalRecord, ...] | None = request.environ.get(_CANDIDATES_KEY)
    if not found:
        raise _ApprovalRefused(_refusal(tool, call, "missing"))
    return found


def _spend_approval(
    store: IdempotencyStore, tool: Tool, call: ToolCall, key: str, *, token: str,
    lease_seconds: float, retention_seconds: float, meta: EntryMeta, reserve: bool = True,
) -> Reservation | None:
    """Spend one of the call's approvals and reserve ``key``, in one step of the store.

    ``None``: the call owns ``key`` and an approval was spent on it (run it);
    a :class:`Reservation`: ``key`` is held (answered from its entry, no
    approval spent). A store that cannot spend approvals makes the call fail
    closed with ``503``.

    :raises _ApprovalRefused: every approval of the call was spent already
        (``approval: used``), or none is left (``missing``).
    :raises StoreUnavailable: as :meth:`~bailing_flask.stores.IdempotencyStore.claim`.
    """
    candidates = _approval_candidates(tool, call)
    try:
        claim = store.claim_approved(
            key, approval_ids=[record.approval_id for record in candidates], token=token,
            lease_seconds=lease_seconds, retention_seconds=retention_seconds, meta=meta,
            reserve=reserve,
        )
    except NotImplementedError as exc:
        logger.error("bailing: %s; refusing every call of business_approval tool %r", exc,
                     tool.name)
        raise _ApprovalRefused(ErrorInfo.make("idempotency_store_unavailable")) from None
    if claim.outcome == "reserved":
        request.environ[APPROVAL_KEY] = claim.approval_id
        return None
    if claim.outcome == "held":
        spent = [record.approval_id for record in candidates if record.used_by == key]
        if spent:  # the approval this call spent when it first ran
            request.environ[APPROVAL_KEY] = spent[0]
        return claim.reservation
    raise _ApprovalRefused(_refusal(tool, call, claim.outcome))


def _refusal(tool: Tool, call: ToolCall, problem: str) -> ErrorInfo:
    """``403 business_approval_required`` with ``approval: problem``, logged."""
    if problem == "used":
        logger.warning(
            "bailing: refused %r for job %r, subject %r: the approval of these arguments was "
            "spent already (used), by another call or by an earlier attempt of this one that "
            "`flask bailing idempotency resolve --rerun` released; one approval runs one call",
            tool.name, call.job_id, call.subject,
        )
        return ErrorInfo.make("business_approval_required", approval=problem)
    logger.warning(
        "bailing: refused %r for job %r, subject %r: no approval by this business for this call "
        "(%s)", tool.name, call.job_id, call.subject, problem,
    )
    return ErrorInfo.make("business_approval_required", approval=problem)


def _arguments_match(tool: Tool, call: ToolCall, record: ApprovalRecord) -> bool:
    if isinstance(record.args, str):  # cut by the hub: only the hash covers them all
        try:
            return call_args_hash(tool, call) == record.args_hash
        except ValueError:
            return False
    approved = _approved_view(tool, record.args)
    return approved is not None and approved == _call_view(tool, call)


def _converters() -> Mapping[str, Any]:
    rule = request.url_rule
    return getattr(rule, "_converters", None) or {}


def _dump(model: BaseModel | None) -> dict[str, Any]:
    return {} if model is None else model.model_dump(mode="json")


def _call_view(tool: Tool, call: ToolCall) -> tuple[Any, ...]:
    """The call as the gate validated it: path values, query and body models, headers."""
    path = dict(request.view_args or {})
    headers = {}
    for parameter in tool.parameters:
        if parameter.get("in") == "header":
            value = request.headers.get(parameter["name"])
            if value is not None:
                headers[parameter["name"]] = value
    return path, _dump(call.query), _dump(call.body), headers


def _locations(tool: Tool) -> tuple[dict[str, str], set[str]]:
    param_in = {str(p["name"]): str(p.get("in")) for p in tool.parameters}
    body_props = set((tool.body_schema or {}).get("properties") or {})
    return param_in, body_props


def _location(tool: Tool, name: str, param_in: Mapping[str, str], body_props: set[str]) -> str:
    """Where the hub puts an argument: a body property wins, undeclared ones by method."""
    if name in body_props:
        return "body"
    return param_in.get(name) or ("query" if tool.method == "GET" else "body")


def _approved_view(tool: Tool, args: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """The approved arguments after the same journey a call makes, or ``None`` if they cannot."""
    param_in, body_props = _locations(tool)
    converters = _converters()
    path: dict[str, Any] = {}
    query: dict[str, str] = {}
    headers: dict[str, str] = {}
    body: dict[str, Any] = {}
    for name, value in args.items():
        if value is None:
            continue  # the hub never sends null arguments
        location = _location(tool, name, param_in, body_props)
        if location == "path":
            converter = converters.get(name)
            text = js_string(value)
            if converter is None:
                return None
            if not re.fullmatch(getattr(converter, "regex", "[^/]+"), text):
                return None
            try:
                path[name] = converter.to_python(text)
            except Exception:  # werkzeug's ValidationError, ValueError
                return None
        elif location == "query":
            query[name] = js_string(value)
        elif location == "header":
            headers[name] = js_string(value)
        elif tool.method != "GET":
            body[name] = value  # a GET never carries the body arguments
    try:
        if tool.query_model is not None:
            query_view = _dump(tool.query_model.model_validate(query))
        elif query:
            return None
        else:
            query_view = {}
        if tool.method == "GET" or tool.body_model is None:
            if body:
                return None
            body_view: dict[str, Any] = {}
        else:
            body_view = _dump(tool.body_model.model_validate(body))
    except ValidationError:
        return None
    return path, query_view, body_view, headers


def _typed(text: str, schema: Mapping[str, Any]) -> Any:
    """A path, query or header string back as the JSON value the model most likely sent."""
    kind = schema.get("type")
    if kind == "integer" and _INTEGER.fullmatch(text):
        return int(text)
    if kind == "number" and _NUMBER.fullmatch(text):
        number = float(text)
        return int(number) if number.is_integer() and abs(number) < 2**53 else number
    if kind == "boolean" and text in ("true", "false"):
        return text == "true"
    return text


def call_arguments(tool: Tool, call: ToolCall) -> dict[str, Any]:
    """The call's arguments as one JSON object, typed by the tool's schema.

    This is what the hub hashes (``args_hash``) when the model sent each
    value with the type the schema declares. Path, query and header values
    arrive as strings and are turned back into numbers and booleans where the
    schema says so; the body is taken as sent.

    :raises ValueError: the body is not a JSON object.
    """
    schemas = {str(p["name"]): p.get("schema") or {} for p in tool.parameters}
    args: dict[str, Any] = {}
    for name, value in (request.view_args or {}).items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            value = _typed(str(value), schemas.get(name, {}))
        args[name] = value
    for name, text in request.args.items():
        args[name] = _typed(text, schemas.get(name, {}))
    for parameter in tool.parameters:
        if parameter.get("in") == "header":
            header = request.headers.get(parameter["name"])
            if header is not None:
                args[str(parameter["name"])] = _typed(header, parameter.get("schema") or {})
    if tool.method != "GET":
        raw = request.get_data(cache=True)
        body = json.loads(raw) if raw.strip() else {}
        if not isinstance(body, dict):
            raise ValueError("the body is not a JSON object")
        args.update(body)
    return args


def call_args_hash(tool: Tool, call: ToolCall) -> str:
    """The hub's ``args_hash`` of :func:`call_arguments`."""
    from bailing_flask.wire.jsenc import canonical_json

    canonical = canonical_json(call_arguments(tool, call))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


_APPROVALS: Cache[BusinessApprovals] = Cache("approvals")


def approvals_of(state: BailingState) -> BusinessApprovals:
    """The approval requests this app received and the decisions it sent (one per app)."""
    return _APPROVALS.get_or_make(state, lambda: BusinessApprovals(state))


def hub_client_of(state: BailingState) -> HubClient:
    """A client for this app's hub; decisions the hub accepts are recorded for ``business_approval`` tools."""
    from bailing_flask.hub.client import hub_client_for

    return hub_client_for(state.config, on_decision=approvals_of(state).record_decision)
