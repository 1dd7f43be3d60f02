"""Typed views of what BailingHub really POSTs to the business, and of the
approval decision the business sends back.

The hub's docs and JSON schemas describe shapes the hub never sends
(the hub's documentation shows ``approval_id:"appr_…"``, ``args_hash:"sha256:…"``,
``route`` as a key, ``approve``/``deny``). These models follow the hub's
code instead, so a payload in the documented-but-wrong shape fails loudly
here rather than producing a decision the hub refuses.

Everything the hub adds later is ignored (``extra="ignore"``): payloads are
consumed defensively. Only the fields a decision must echo
(``approval_id``, ``job_id``, ``request_id``, ``args_hash``) are validated
strictly, because the hub compares them verbatim.

Parse only bodies whose signature was verified first
(:class:`~bailing_flask.wire.signing.CallbackVerifier`).
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bailing_flask.wire.jsenc import js_trim as _js_trim, utf16_len as _utf16_len
from bailing_flask.wire.jsenc import json_stringify
from bailing_flask.errors import BailingError

__all__ = [
    "APPROVAL_DECISION_KIND",
    "APPROVAL_DECISION_SCHEMA",
    "DECISION_VALUES",
    "TERMINAL_JOB_STATUSES",
    "PayloadError",
    "JobUsage",
    "JobRecord",
    "Attachment",
    "DeliveryWebhook",
    "ConfirmWhen",
    "ApprovalIntent",
    "ToolApprovalRequestPayload",
    "ToolApprovalPayload",
    "ApprovalRequest",
    "ApprovalDecision",
    "build_decision",
    "parse_job_record",
    "parse_delivery",
    "parse_approval_request",
    "parse_hub_post",
    "dedupe_key",
]

APPROVAL_DECISION_KIND = "tool_approval_decision"
APPROVAL_DECISION_SCHEMA = "bailing.approval-decision.v1"
DECISION_VALUES = ("approved", "denied")
#: Statuses after which the hub POSTs ``callback_url``.
TERMINAL_JOB_STATUSES = frozenset({"done", "error", "rejected"})

#: The hub's limits on decision fields, in UTF-16 units (it ``slice``s them;
#: here they are refused instead of silently cut).
_MAX_APPROVER = 64
_MAX_COMMENT = 1000
_MAX_DECIDED_AT = 64

#: The hub's approval ids are positive integers (never strings such as ``appr_1``).
ApprovalId = Annotated[int, Field(strict=True, ge=1)]
#: The canonical-arguments hash: bare lowercase hex, no ``sha256:`` prefix.
ArgsHash = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
NonEmpty = Annotated[str, Field(min_length=1)]
DecisionId = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:-]{1,128}$")]
JsonObject = dict[str, Any]


class PayloadError(BailingError, ValueError):
    """A hub payload or a decision does not have the shape the hub uses.

    The message names the fields at fault but never repeats their values
    (payloads carry subjects and business arguments).
    """






def _unicode(value: str, name: str) -> str:
    """``value`` if it is valid Unicode text; a lone surrogate would make a body no JSON parser reads back."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{name} must be valid Unicode text (no lone surrogates)") from None
    return value


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors()[:5]:
        location = ".".join(str(part) for part in item["loc"]) or "body"
        parts.append(f"{location}: {item['msg']}")
    more = error.error_count() - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


class _HubModel(BaseModel):
    """Read-only, and tolerant of keys a newer hub adds."""

    model_config = ConfigDict(extra="ignore", frozen=True)


# --- flow E: the job record POSTed to callback_url (and returned by GET /jobs/{id})


class JobUsage(_HubModel):
    duration_ms: int | float | None = None
    num_turns: int | float | None = None
    cost_usd: int | float | None = None
    tokens: int | float | None = None


class JobRecord(_HubModel):
    """The hub's complete job record.

    ``callback_url`` receives it when the job ends (``done``, ``error`` or
    ``rejected``); ``GET /jobs/{job_id}`` returns it at any time. The same job
    can call back more than once (an approval re-runs it under the same
    ``job_id``): de-duplicate by ``job_id`` and keep the latest ``updated_at``.
    """

    job_id: NonEmpty
    request_id: str
    status: str
    target: str | None = None
    profile: str | None = None
    project: str | None = None
    source: str | None = None
    client_app_id: str | None = None
    thread_id: int | None = None
    session_id: str | None = None
    input_preview: str | None = None
    input: str | None = None
    report: JsonObject | None = None
    result: JsonObject | None = None
    raw_result: str | None = None
    usage: JobUsage | None = None
    error: str | None = None
    metadata: JsonObject = Field(default_factory=dict)
    callback_url: str | None = None
    dispatch: JsonObject | None = None
    attempts: int | None = None
    run_after: str | None = None
    created_at: str | None = None
    updated_at: str | None = None

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_JOB_STATUSES

    @property
    def text(self) -> str | None:
        """The AI's reply (``result.text``), if the job produced text."""
        value = (self.result or {}).get("text")
        return value if isinstance(value, str) else None

    @property
    def route_name(self) -> str | None:
        """The route's display name from the dispatch snapshot."""
        value = (self.dispatch or {}).get("route_name")
        return value if isinstance(value, str) else None


# --- flow F: route delivery of type "webhook"


class Attachment(_HubModel):
    """A link the hub extracted from the reply: ``image``, ``file`` or ``audio``."""

    type: str
    url: str
    caption: str | None = None
    name: str | None = None


class DeliveryWebhook(_HubModel):
    """The body of a route's ``delivery.type = "webhook"`` POST."""

    kind: Literal["delivery"]
    job_id: NonEmpty
    #: Always sent by the hub; optional so minimal vectors (V3) parse too.
    request_id: str = ""
    #: The route's display name (``""`` if none).
    route_name: str = ""
    #: ``done`` or ``error``.
    status: str
    #: Ready-to-forward notification text.
    message: str = ""
    #: The raw AI reply (markdown); ``None`` on error.
    text: str | None = None
    attachments: list[Attachment] = Field(default_factory=list)
    report: JsonObject | None = None
    error: str | None = None
    metadata: JsonObject = Field(default_factory=dict)
    #: The job's ``updated_at`` (ISO 8601).
    finished_at: str | None = None


# --- flow G: approval requests


class ConfirmWhen(_HubModel):
    """Which ``approval.when`` condition sent the call to approval."""

    param: str
    op: str
    value: Any = None
    actual: Any = None
    reason: str = ""


class _ApprovalCore(_HubModel):
    """What every approval shape carries: the ids and the governance verdict."""

    approval_id: ApprovalId
    job_id: NonEmpty
    request_id: NonEmpty
    tool: NonEmpty
    scope: str | None = None
    risk: str | None = None
    policy: str | None = None
    reason: str | None = None


class _ApprovalCall(_ApprovalCore):
    """The call awaiting approval, as the intent and the request variant describe it."""

    subject: str | None = None
    provider: str | None = None
    method: str | None = None
    #: The tool's template path, e.g. ``/inventory/{store_id}/adjust``.
    path: str | None = None
    #: The arguments; a *string* (cut at 1000 characters) when they were too long.
    args: JsonObject | str = Field(default_factory=dict)
    args_hash: ArgsHash
    summary: str | None = None
    metadata: JsonObject = Field(default_factory=dict)


class ApprovalIntent(_ApprovalCall):
    """The ``intent`` snapshot embedded in both approval request variants."""

    kind: str = "tool_approval_intent"
    schema_version: str | None = None
    route_key: str | None = None
    route_name: str | None = None
    source: str | None = None
    subject_field: str | None = None
    confirm_when: ConfirmWhen | None = None


class ToolApprovalRequestPayload(_ApprovalCall):
    """``kind: "tool_approval_request"``: route ``tools.approval.type`` is
    ``business_webhook`` or ``approval_webhook``."""

    kind: Literal["tool_approval_request"]
    #: The route's display name, not its key (``intent.route_key`` has the key).
    route: str | None = None
    intent: ApprovalIntent | None = None
    decision_path: str | None = None
    decision_contract: JsonObject | None = None


class ToolApprovalPayload(_ApprovalCore):
    """``kind: "tool_approval"``: route ``tools.approval.type`` is ``webhook``
    (or the hub's alert webhook). ``args`` is the argument JSON text cut at
    1000 characters, and ``args_hash`` exists only inside ``intent``."""

    kind: Literal["tool_approval"]
    args: Annotated[str, Field(max_length=1000)] = ""
    intent: ApprovalIntent
    message: str = ""


_Variant = ToolApprovalRequestPayload | ToolApprovalPayload


def _arguments(text: str) -> JsonObject | str:
    """Parse the argument text like the hub does: an object, or the text as is."""
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return text
    return value if isinstance(value, dict) else text


def _check_intent_matches(payload: _Variant, intent: ApprovalIntent) -> None:
    for name in ("approval_id", "job_id", "request_id"):
        if getattr(payload, name) != getattr(intent, name):
            raise PayloadError(f"{name} differs between the approval request and its intent.")
    if isinstance(payload, ToolApprovalRequestPayload) and payload.args_hash != intent.args_hash:
        raise PayloadError("args_hash differs between the approval request and its intent.")


class ApprovalRequest(_HubModel):
    """One approval request, whichever variant the hub sent.

    Build it with :func:`parse_approval_request`; answer it with
    :meth:`decide` and :meth:`bailing_flask.hub.client.HubClient.decide_approval`.
    Approving lets the hub re-run the same job, and only a call with the same
    tool and the same canonical arguments (``args_hash``) consumes it.
    """

    #: ``"tool_approval_request"`` or ``"tool_approval"``.
    variant: Literal["tool_approval_request", "tool_approval"]
    approval_id: ApprovalId
    job_id: NonEmpty
    request_id: NonEmpty
    args_hash: ArgsHash
    tool: NonEmpty
    scope: str | None = None
    risk: str | None = None
    #: ``risk_high``, ``confirm_required`` or ``confirm_when``.
    policy: str | None = None
    reason: str | None = None
    #: The acting subject (the tool call's On-Behalf-Of), if any.
    subject: str | None = None
    #: The route's display name.
    route: str | None = None
    route_key: str | None = None
    provider: str | None = None
    method: str | None = None
    path: str | None = None
    #: The arguments, or their JSON text cut at 1000 characters (see
    #: :attr:`args_truncated`); ``args_hash`` always covers all of them.
    args: JsonObject | str = Field(default_factory=dict)
    summary: str | None = None
    confirm_when: ConfirmWhen | None = None
    metadata: JsonObject = Field(default_factory=dict)
    #: The hub's ready-made notification text (``tool_approval`` variant).
    message: str | None = None
    #: Where to POST the decision, relative to the hub's base URL.
    decision_path: str | None = None

    @property
    def args_truncated(self) -> bool:
        """True when the arguments were too long to be sent whole."""
        return isinstance(self.args, str)

    @classmethod
    def from_payload(cls, payload: _Variant) -> ApprovalRequest:
        """Normalise either variant; fields missing at the top come from ``intent``."""
        intent = payload.intent
        if intent is not None:
            _check_intent_matches(payload, intent)
        if isinstance(payload, ToolApprovalRequestPayload):
            args: JsonObject | str = payload.args
            args_hash = payload.args_hash
            extra: dict[str, Any] = {
                "subject": payload.subject,
                "route": payload.route,
                "provider": payload.provider,
                "method": payload.method,
                "path": payload.path,
                "summary": payload.summary,
                "metadata": payload.metadata,
                "decision_path": payload.decision_path,
            }
        else:
            assert intent is not None  # required by ToolApprovalPayload
            args = _arguments(payload.args)
            args_hash = intent.args_hash
            extra = {"message": payload.message}
        fallback: dict[str, Any] = {}
        if intent is not None:
            fallback = {
                "subject": intent.subject,
                "route": intent.route_name,
                "provider": intent.provider,
                "method": intent.method,
                "path": intent.path,
                "summary": intent.summary,
                "metadata": intent.metadata,
            }
        merged: dict[str, Any] = {}
        for key in set(extra) | set(fallback):
            value = extra.get(key) if extra.get(key) is not None else fallback.get(key)
            if value is not None:
                merged[key] = value
        return cls(
            variant=payload.kind,
            approval_id=payload.approval_id,
            job_id=payload.job_id,
            request_id=payload.request_id,
            args_hash=args_hash,
            tool=payload.tool,
            scope=payload.scope,
            risk=payload.risk,
            policy=payload.policy,
            reason=payload.reason,
            route_key=intent.route_key if intent is not None else None,
            args=args,
            confirm_when=intent.confirm_when if intent is not None else None,
            **merged,
        )

    def decide(
        self,
        decision: str,
        *,
        approver: str,
        decision_id: str,
        comment: str | None = None,
        decided_at: str | _dt.datetime | None = None,
    ) -> ApprovalDecision:
        """Build the decision envelope answering this request."""
        return ApprovalDecision.for_request(
            self,
            decision,
            approver=approver,
            decision_id=decision_id,
            comment=comment,
            decided_at=decided_at,
        )


# --- flow I: the decision envelope


class ApprovalDecision(_HubModel):
    """``POST {hub}/approvals/{approval_id}/decision`` body.

    Fields are declared in the order the hub's frozen vector V6 uses, and
    :meth:`to_json` serialises them compactly in that order, so the bytes
    (and therefore the ``ts.body`` signature) are reproducible.
    ``approval_id``, ``job_id``, ``request_id`` and ``args_hash`` must be the
    request's values verbatim; ``decision_id`` is this business's
    idempotency key: repeating the same decision with the same id is
    answered as an idempotent success, anything else on a decided approval
    is a conflict.
    """

    kind: Literal["tool_approval_decision"] = "tool_approval_decision"
    schema_version: Literal["bailing.approval-decision.v1"] = "bailing.approval-decision.v1"
    approval_id: ApprovalId
    job_id: NonEmpty
    request_id: NonEmpty
    args_hash: ArgsHash
    decision_id: DecisionId
    decision: Literal["approved", "denied"]
    approver: str
    comment: str | None = None
    decided_at: str | None = None

    @field_validator("decision", mode="before")
    @classmethod
    def _normalise_decision(cls, value: Any) -> Any:
        # The hub accepts any case; send the canonical lower-case form.
        return _js_trim(value).lower() if isinstance(value, str) else value

    @field_validator("approver")
    @classmethod
    def _check_approver(cls, value: str) -> str:
        value = _js_trim(_unicode(value, "approver"))
        if not value:
            raise ValueError("approver must name the business user who decided")
        if _utf16_len(value) > _MAX_APPROVER:
            raise ValueError(f"approver must be at most {_MAX_APPROVER} characters")
        return value

    @field_validator("comment")
    @classmethod
    def _check_comment(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = _js_trim(_unicode(value, "comment"))
        if _utf16_len(value) > _MAX_COMMENT:
            raise ValueError(f"comment must be at most {_MAX_COMMENT} characters")
        return value or None

    @field_validator("decided_at", mode="before")
    @classmethod
    def _check_decided_at(cls, value: Any) -> Any:
        if isinstance(value, _dt.datetime):
            value = value.isoformat()
        if isinstance(value, str):
            value = _js_trim(_unicode(value, "decided_at"))
            if _utf16_len(value) > _MAX_DECIDED_AT:
                raise ValueError(f"decided_at must be at most {_MAX_DECIDED_AT} characters")
            return value or None
        return value

    @classmethod
    def for_request(
        cls,
        request: ApprovalRequest,
        decision: str,
        *,
        approver: str,
        decision_id: str,
        comment: str | None = None,
        decided_at: str | _dt.datetime | None = None,
    ) -> ApprovalDecision:
        """Answer ``request``, echoing its identifiers verbatim.

        :raises PayloadError: for a decision the hub would refuse or alter.
        """
        try:
            return cls.model_validate(
                {
                    "approval_id": request.approval_id,
                    "job_id": request.job_id,
                    "request_id": request.request_id,
                    "args_hash": request.args_hash,
                    "decision_id": decision_id,
                    "decision": decision,
                    "approver": approver,
                    "comment": comment,
                    "decided_at": decided_at,
                }
            )
        except ValidationError as exc:
            raise PayloadError(f"Invalid approval decision: {_describe(exc)}") from None

    def to_dict(self) -> dict[str, Any]:
        """The envelope as sent (absent optional fields omitted)."""
        return self.model_dump(exclude_none=True)

    def to_json(self) -> str:
        """Compact JSON in V6 key order, non-ASCII unescaped (like ``JSON.stringify``)."""
        return json_stringify(self.to_dict())

    def body(self) -> bytes:
        """The exact request body to sign and send."""
        return self.to_json().encode("utf-8")

    @property
    def path(self) -> str:
        """The decision endpoint, relative to the hub's base URL."""
        return f"/approvals/{self.approval_id}/decision"


def build_decision(
    request: ApprovalRequest | Mapping[str, Any] | bytes | str,
    decision: str,
    *,
    approver: str,
    decision_id: str,
    comment: str | None = None,
    decided_at: str | _dt.datetime | None = None,
) -> ApprovalDecision:
    """Build the decision for a parsed or raw approval request."""
    if not isinstance(request, ApprovalRequest):
        request = parse_approval_request(request)
    return ApprovalDecision.for_request(
        request,
        decision,
        approver=approver,
        decision_id=decision_id,
        comment=comment,
        decided_at=decided_at,
    )


# --- parsing raw bodies


def _load(data: Mapping[str, Any] | bytes | str) -> dict[str, Any]:
    if isinstance(data, Mapping):
        return dict(data)
    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
        value = json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError, AttributeError):
        raise PayloadError("The body is not UTF-8 JSON.") from None
    if not isinstance(value, dict):
        raise PayloadError("The body is not a JSON object.")
    return value


_Model = TypeVar("_Model", bound=_HubModel)


def _validate(model: type[_Model], value: dict[str, Any], what: str) -> _Model:
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise PayloadError(f"Not a valid {what}: {_describe(exc)}") from None


def parse_job_record(data: Mapping[str, Any] | bytes | str) -> JobRecord:
    """Parse a ``callback_url`` body or a ``GET /jobs/{id}`` answer."""
    return _validate(JobRecord, _load(data), "job record")


def parse_delivery(data: Mapping[str, Any] | bytes | str) -> DeliveryWebhook:
    """Parse a delivery-webhook body (``kind: "delivery"``)."""
    return _validate(DeliveryWebhook, _load(data), "delivery webhook")


def parse_approval_request(data: Mapping[str, Any] | bytes | str) -> ApprovalRequest:
    """Parse either approval request variant, chosen by ``kind``, and normalise it."""
    value = _load(data)
    kind = value.get("kind")
    payload: _Variant
    if kind == "tool_approval_request":
        payload = _validate(ToolApprovalRequestPayload, value, "tool_approval_request")
    elif kind == "tool_approval":
        payload = _validate(ToolApprovalPayload, value, "tool_approval notification")
    else:
        raise PayloadError(
            "Not an approval request: kind must be 'tool_approval_request' or 'tool_approval'."
        )
    try:
        return ApprovalRequest.from_payload(payload)
    except ValidationError as exc:
        raise PayloadError(f"Not a valid approval request: {_describe(exc)}") from None


def parse_hub_post(
    data: Mapping[str, Any] | bytes | str,
) -> JobRecord | DeliveryWebhook | ApprovalRequest:
    """Parse any body the hub POSTs to the business, told apart by ``kind``.

    A ``callback_url`` job record has no ``kind``; a delivery webhook has
    ``"delivery"``; approval requests have ``"tool_approval_request"`` or
    ``"tool_approval"``. Anything else (e.g. the operator's ``"alert"``) is
    refused.
    """
    value = _load(data)
    kind = value.get("kind")
    if kind is None:
        return parse_job_record(value)
    if kind == "delivery":
        return parse_delivery(value)
    if kind in ("tool_approval_request", "tool_approval"):
        return parse_approval_request(value)
    raise PayloadError("Unknown kind: this is not a body the hub sends to a business.")


def dedupe_key(payload: JobRecord | DeliveryWebhook | ApprovalRequest) -> str:
    """One key per event the hub POSTs, under which the package runs its handler once.

    A finished job by id, status and update time (a re-run of the same job after an
    approval is a new event), a delivery by job, status and finish time, an approval
    request by its id.
    """
    if isinstance(payload, ApprovalRequest):
        return f"callback:approval:{payload.approval_id}"
    if isinstance(payload, DeliveryWebhook):
        return f"callback:delivery:{payload.job_id}:{payload.status}:{payload.finished_at or ''}"
    if isinstance(payload, JobRecord):
        return f"callback:job:{payload.job_id}:{payload.status}:{payload.updated_at or ''}"
    raise TypeError(f"unknown callback payload {type(payload).__name__}")
