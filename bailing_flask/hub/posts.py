"""The bodies BailingHub POSTs to a business, built the way the hub builds them.

Three kinds of POST reach a business from the hub, each signed with the
client token over ``"<milliseconds>.<body>"``:

* the finished job's full record, to the job's ``callback_url``
  (:func:`job_record`);
* a route's delivery webhook, for jobs that end ``done`` or ``error``
  (:func:`delivery_webhook`);
* an approval request, when a call needs an approval and the route's
  approval lane is the business (:func:`approval_request`), in two variants:
  ``tool_approval_request`` (lanes ``business_webhook`` and
  ``approval_webhook``) and ``tool_approval`` (lane ``webhook``).

The keys come in the hub's order and absent values are left out, as
``JSON.stringify`` does; the arguments of an approval request are cut at
1,000 characters of JSON like the hub cuts them (they then travel as a
string), and ``args_hash`` is the hub's canonical-JSON hash of all of them.
:class:`~bailing_flask.testing.HubSimulator` signs and sends these; they
are plain dicts, so a test can change any field first.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
import uuid
from collections.abc import Mapping
from typing import Any, Literal

from bailing_flask.wire.jsenc import js_string, json_stringify, utf16_slice

__all__ = [
    "APPROVAL_ARGS_LIMIT",
    "args_hash",
    "job_record",
    "delivery_webhook",
    "approval_request",
    "render_prompt",
]

#: The hub sends at most this many characters (UTF-16 units) of argument JSON.
APPROVAL_ARGS_LIMIT = 1000
_PROMPT_FIELD = re.compile(r"\{([A-Za-z0-9_]+)\}")
_ATTACHMENT = re.compile(r"!\[([^\]]*)\]\((https?://[^)\s]+)\)|\[([^\]]+)\]\((https?://[^)\s]+)\)")


def _compact(items: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object as ``JSON.stringify`` writes it: members whose value is undefined left out."""
    return {key: value for key, value in items if value is not None}


def _iso(moment: _dt.datetime | None = None) -> str:
    moment = moment or _dt.datetime.now(_dt.timezone.utc)
    return moment.astimezone(_dt.timezone.utc).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def args_hash(args: Mapping[str, Any]) -> str:
    """The hub's hash of a call's (normalised) arguments: sha256 of canonical JSON."""
    from bailing_flask.wire.jsenc import canonical_json

    return hashlib.sha256(canonical_json(args).encode("utf-8")).hexdigest()


def render_prompt(prompt: str | None, args: Mapping[str, Any]) -> str | None:
    """``approval.prompt`` with each ``{name}`` replaced by a top-level argument."""
    if not prompt:
        return None

    def value(match: re.Match[str]) -> str:
        found = args.get(match.group(1))
        return match.group(0) if found is None else js_string(found)

    return _PROMPT_FIELD.sub(value, prompt)


def job_record(
    *,
    job_id: str | None = None,
    request_id: str | None = None,
    status: Literal["done", "error", "rejected"] = "done",
    text: str | None = "已处理完成。",
    error: str | None = None,
    input: str = "帮我查一下订单 1001 的退款进度",
    route_key: str = "store_ops",
    route_name: str = "门店运营",
    client_app_id: str | None = "crm",
    subject: str | None = None,
    subject_field: str = "uid",
    metadata: Mapping[str, Any] | None = None,
    callback_url: str | None = None,
    delivery_url: str | None = None,
    created_at: str | None = None,
    updated_at: str | None = None,
) -> dict[str, Any]:
    """A finished job's record, as the hub POSTs it to ``callback_url``."""
    meta: dict[str, Any] = dict(metadata or {})
    if subject is not None:
        meta.setdefault(subject_field, subject)
    finished = updated_at or _iso()
    dispatch: dict[str, Any] = {"route_key": route_key, "route_name": route_name}
    if delivery_url is not None:
        dispatch["delivery"] = {"type": "webhook", "url": delivery_url}
    return _compact([
        ("job_id", job_id or str(uuid.uuid4())),
        ("request_id", request_id or f"req-{uuid.uuid4().hex[:12]}"),
        ("status", status),
        ("target", "llm"),
        ("profile", "default"),
        ("project", ""),
        ("source", client_app_id or "admin"),
        ("client_app_id", client_app_id),
        ("session_id", str(uuid.uuid4())),
        ("input_preview", input[:200]),
        ("input", input),
        ("result", {"text": text} if status == "done" and text is not None else None),
        ("raw_result", text if status == "done" else None),
        ("usage", {"duration_ms": 5230, "num_turns": 3, "cost_usd": 0.0123, "tokens": 4180}
         if status != "rejected" else None),
        ("error", error if status != "done" else None),
        ("metadata", meta),
        ("callback_url", callback_url),
        ("dispatch", dispatch),
        ("attempts", 1),
        ("created_at", created_at or finished),
        ("updated_at", finished),
    ])


def _attachments(text: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for match in _ATTACHMENT.finditer(text):
        if match.group(2):
            item = {"type": "image", "url": match.group(2)}
            if match.group(1):
                item["caption"] = match.group(1)
            found.append(item)
        else:
            found.append({"type": "file", "url": match.group(4), "name": match.group(3)})
    return found


def delivery_webhook(job: Mapping[str, Any], *, brand: str = "BailingHub") -> dict[str, Any]:
    """The delivery webhook the hub sends for a finished job (``done`` or ``error``)."""
    status = job.get("status")
    if status not in ("done", "error"):
        raise ValueError("the hub delivers only jobs that ended 'done' or 'error'")
    route_name = (job.get("dispatch") or {}).get("route_name") or ""
    result = job.get("result") or {}
    text = result.get("text") if isinstance(result.get("text"), str) else None
    if status == "error":
        message = f"【{route_name or 'job'}】failed: {str(job.get('error') or 'unknown error')[:500]}"
    else:
        message = f"【{route_name or 'job'}】result\n\n{text or ''}\n\n-- {brand}"
    return {
        "kind": "delivery",
        "job_id": job["job_id"],
        "request_id": job["request_id"],
        "route_name": route_name,
        "status": status,
        "message": message,
        "text": text,
        "attachments": _attachments(text or ""),
        "report": result.get("report"),
        "error": job.get("error"),
        "metadata": dict(job.get("metadata") or {}),
        "finished_at": job.get("updated_at"),
    }


#: Why the hub asks for an approval.
_Policy = Literal["risk_high", "confirm_required", "confirm_when"]


def approval_request(
    *,
    approval_id: int,
    job: Mapping[str, Any],
    tool: str,
    scope: str,
    method: str,
    path: str,
    args: Mapping[str, Any],
    risk: str = "high",
    policy: Literal["risk_high", "confirm_required", "confirm_when"] | None = None,
    reason: str | None = None,
    prompt: str | None = None,
    confirm_when: Mapping[str, Any] | None = None,
    provider: str = "shop",
    subject: str | None = None,
    subject_field: str | None = "uid",
    variant: Literal["tool_approval_request", "tool_approval"] = "tool_approval_request",
    brand: str = "BailingHub",
) -> dict[str, Any]:
    """One approval request, as the hub POSTs it to the route's approval URL.

    ``args`` are the call's arguments after the hub's JSON round trip;
    ``policy`` and ``reason`` default from ``risk`` (``risk_high`` /
    ``risk=high``) or, with ``confirm_when``, from the condition that hit.
    """
    normalized: dict[str, Any] = json.loads(json.dumps(dict(args)))
    policy, reason = _policy_and_reason(risk, policy, reason, confirm_when)
    digest = args_hash(normalized)
    args_json, sent_args = _sent_args(normalized)
    summary = render_prompt(prompt, normalized)
    dispatch = job.get("dispatch") or {}
    metadata = dict(job.get("metadata") or {})
    intent = _compact([
        ("approval_id", approval_id),
        ("kind", "tool_approval_intent"),
        ("schema_version", "bailing.approval-intent.v1"),
        ("job_id", job["job_id"]),
        ("request_id", job["request_id"]),
        ("route_key", dispatch.get("route_key")),
        ("route_name", dispatch.get("route_name")),
        ("source", job.get("source")),
        ("subject", subject or None),
        ("subject_field", subject_field or None),
        ("provider", provider),
        ("tool", tool),
        ("scope", scope),
        ("risk", risk),
        ("policy", policy),
        ("reason", reason),
        ("method", method),
        ("path", path),
        ("args", sent_args),
        ("args_hash", digest),
        ("summary", summary),
        ("confirm_when", dict(confirm_when) if confirm_when is not None else None),
        ("metadata", metadata),
    ])
    if variant == "tool_approval":
        lines = [f"【{brand}】approval needed #{approval_id}: {tool} ({reason})"]
        if summary:
            lines.append(summary)
        lines.append(f"job {job['job_id']}, scope {scope}, risk {risk}, arguments {args_json}")
        return {
            "kind": "tool_approval", "approval_id": approval_id, "job_id": job["job_id"],
            "request_id": job["request_id"], "tool": tool, "scope": scope, "risk": risk,
            "policy": policy, "reason": reason, "args": args_json, "intent": intent,
            "message": "\n".join(lines),
        }
    match = {"approval_id": approval_id, "job_id": job["job_id"], "request_id": job["request_id"],
             "args_hash": digest}
    return _compact([
        ("kind", "tool_approval_request"),
        ("approval_id", approval_id),
        ("job_id", job["job_id"]),
        ("request_id", job["request_id"]),
        ("route", dispatch.get("route_name")),
        ("subject", subject or None),
        ("provider", provider),
        ("tool", tool),
        ("scope", scope),
        ("risk", risk),
        ("policy", policy),
        ("reason", reason),
        ("method", method),
        ("path", path),
        ("args", sent_args),
        ("args_hash", digest),
        ("summary", summary),
        ("intent", intent),
        ("decision_path", f"/approvals/{approval_id}/decision"),
        ("decision_contract", _decision_contract(approval_id, match)),
        ("metadata", metadata),
    ])


def _policy_and_reason(
    risk: str, policy: _Policy | None, reason: str | None, confirm_when: Mapping[str, Any] | None
) -> tuple[_Policy, str]:
    """``policy`` and ``reason`` as given, or as the hub derives them from the route."""
    if policy is None:
        policy = "risk_high" if risk == "high" else (
            "confirm_when" if confirm_when is not None else "confirm_required")
    if reason is None:
        reason = {"risk_high": "risk=high", "confirm_required": "confirm-required"}.get(
            policy, (confirm_when or {}).get("reason") or "confirm-when")
    return policy, reason


def _sent_args(normalized: dict[str, Any]) -> tuple[str, Any]:
    """The arguments' JSON text as the hub cuts it, and what it sends as ``args``.

    The object itself, or the cut text when the cut left no valid JSON.
    """
    args_json = utf16_slice(json_stringify(normalized), APPROVAL_ARGS_LIMIT)
    try:
        return args_json, json.loads(args_json or "{}")
    except ValueError:
        return args_json, args_json  # cut: the hub sends the text


def _decision_contract(approval_id: int, match: dict[str, Any]) -> dict[str, Any]:
    """How the business answers an approval request: the request's ``decision_contract``."""
    return {
        "kind": "tool_approval_decision",
        "schema_version": "bailing.approval-decision.v1",
        "required_fields": ["approval_id", "job_id", "request_id", "args_hash", "decision_id",
                            "decision", "approver"],
        "decision_values": ["approved", "denied"],
        "idempotency": "decision_id",
        "match": match,
        "example": {
            "kind": "tool_approval_decision",
            "schema_version": "bailing.approval-decision.v1",
            **match,
            "decision_id": f"biz-{approval_id}-<your-approval-record-id>",
            "decision": "approved",
            "approver": "<business-user-id>",
            "comment": "",
        },
    }
