"""Receiving what the hub POSTs back: finished jobs, deliveries, approval requests.

These requests are signed differently from tool calls:
``sha256=HMAC(client token, "<milliseconds>.<raw body>")``. The key is the
*client token*, not the provider secret, and the unit is milliseconds: the
two mistakes every integration makes once. A request signed with the
provider secret is refused as ``wrong_key`` so the log says which key was
expected.

The hub delivers at least once (3 attempts, retrying 5xx and 429, giving up
on any other 4xx), so each handler runs once per event: deliveries are
de-duplicated in the idempotency store by job (and update time) or approval
id, a handler that raises answers 500 so the hub tries again, and a refusal
(which the hub will not retry) is logged loudly with its likely cause.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flask import Blueprint, Response, current_app, request

from bailing_flask._sync import call_sync
from bailing_flask.errors import SignatureError
from bailing_flask.responses import REASON_HEADER, json_response, reason_response
from bailing_flask.signals import callback_received
from bailing_flask.wire.signing import CallbackVerifier
from bailing_flask.stores import EntryMeta, StoredResponse, StoreUnavailable
from bailing_flask.approvals import approvals_of
from bailing_flask._state import BailingState, Cache
from bailing_flask._pipeline.idempotency import idempotency_of

if TYPE_CHECKING:  # pragma: no cover
    from bailing_flask.hub.payloads import ApprovalRequest, DeliveryWebhook, JobRecord

__all__ = ["CALLBACK_KINDS", "make_callbacks_blueprint"]

logger = logging.getLogger("bailing_flask")

def parse_job_record(raw: bytes) -> JobRecord:
    from bailing_flask.hub.payloads import parse_job_record as parse  # loaded by the first callback

    return parse(raw)


def parse_delivery(raw: bytes) -> DeliveryWebhook:
    from bailing_flask.hub.payloads import parse_delivery as parse

    return parse(raw)


def parse_approval_request(raw: bytes) -> ApprovalRequest:
    from bailing_flask.hub.payloads import parse_approval_request as parse

    return parse(raw)


#: kind -> its parser; each kind is received at ``Config.callback_path(kind)``
CALLBACK_KINDS: dict[str, Callable[[bytes], Any]] = {
    "job": parse_job_record,
    "delivery": parse_delivery,
    "approval": parse_approval_request,
}

#: How long a handler holds its event before a retry may take it over (a worker that died
#: mid-handler). The hub gives each attempt 10 s and sends the last one about 12 s after the
#: first, then never again: a longer lease would answer every retry of a dead worker's event
#: ``503 in_progress`` and lose it. Handlers must finish within the hub's 10 s anyway.
_LEASE_SECONDS = 10.0
_LIKELY_CAUSE = {
    "timestamp_out_of_window": "clock skew between the hub and this server (sync both with NTP), "
    "or a seconds timestamp where milliseconds are expected",
    "malformed_timestamp": "a missing or non-numeric X-Bailing-Timestamp",
    "bad_signature": "BAILING_CLIENT_TOKENS does not hold the client token the hub signs with "
    "(the job's client, or the chat entry's ticket client), or a proxy changed the body",
    "wrong_key": "the request was signed with the provider secret; callbacks are signed with the "
    "client token (set BAILING_CLIENT_TOKENS)",
    "missing_signature": "the request did not come from the hub",
    "malformed_signature": "the signature header is not sha256=<64 hex>",
}


def _refused(kind: str, error: SignatureError, state: BailingState | None = None) -> Response:
    if state is not None:
        from bailing_flask.audit import callback_refusal

        callback_refusal(state, kind, error)
    logger.error(
        "bailing: REFUSED a hub %s callback at %s: %s. The hub does not retry a 4xx, so this "
        "event is lost unless fixed. Likely cause: %s.",
        kind, request.path, error.reason, _LIKELY_CAUSE.get(error.reason, "see the reason code"),
    )
    return json_response({"error": error.sdk_error, "reason": error.reason, "message": error.message},
                         error.status, {REASON_HEADER: error.reason})


def _handle(state: BailingState, kind: str) -> Response:
    handler = state.callbacks.callback_handlers.get(kind)
    if handler is None:
        return reason_response("no_handler")
    tokens = state.config.client_tokens
    if not tokens:
        logger.error("bailing: a %s handler is registered but BAILING_CLIENT_TOKENS is not set; "
                     "refusing the hub's callback", kind)
        return reason_response("not_configured")
    raw = _bounded_body(state.config.callback_max_body_size)
    if raw is None:
        return _refused(kind, SignatureError("body_too_large", status=413), state)
    try:
        callback_verifier(state).verify(
            request.headers.get("X-Bailing-Signature"), request.headers.get("X-Bailing-Timestamp"),
            raw,
        )
    except SignatureError as error:
        return _refused(kind, error, state)
    from bailing_flask.hub.payloads import PayloadError

    parse = CALLBACK_KINDS[kind]
    try:
        payload = parse(raw)
    except PayloadError as error:
        logger.error("bailing: REFUSED a signed hub %s callback: %s (the hub will not retry)",
                     kind, error)
        return reason_response("invalid_payload", message=str(error))
    return _run_once(state, kind, handler, payload)


def _bounded_body(limit: int) -> bytes | None:
    """The body, never read past ``limit`` (``None`` when it is larger).

    The middleware bounds these paths already; this holds even where a
    request reached the endpoint some other way.
    """
    if request.content_length is not None and request.content_length > limit:
        return None
    chunks: list[bytes] = []
    total = 0
    while total <= limit:
        chunk = request.stream.read(min(64 * 1024, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
    return None


def _run_once(state: BailingState, kind: str, handler: Callable[[Any], Any], payload: Any) -> Response:
    from bailing_flask.hub.payloads import dedupe_key  # loaded already: it parsed the payload

    key = dedupe_key(payload)
    token = uuid.uuid4().hex
    retention = state.config.idempotency_retention
    try:
        store = idempotency_of(state).store()
        reservation = store.reserve(key, token=token, lease_seconds=_LEASE_SECONDS,
                                    retention_seconds=retention,
                                    meta=EntryMeta(tool=f"callback:{kind}", job_id=payload.job_id))
        owned = reservation.outcome == "reserved"
        if reservation.outcome == "uncertain":
            # a handler died mid-way: at-least-once delivery means trying again
            owned = store.take_over(key, old_token=reservation.entry.token, new_token=token,
                                    lease_seconds=_LEASE_SECONDS)
    except StoreUnavailable as exc:
        logger.error("bailing: idempotency store unavailable (%s); asking the hub to retry the %s "
                     "callback", exc, kind)
        return reason_response("idempotency_store_unavailable")
    if reservation.outcome == "completed":
        return json_response({"ok": True, "duplicate": True}, 200)
    if not owned:
        # the same event is being handled right now: 503 makes the hub come back
        return reason_response("in_progress", headers={"Retry-After": "2"})
    if kind == "approval":
        unavailable = _record_approval(state, payload, key, token)
        if unavailable is not None:
            return unavailable
    try:
        call_sync(handler, payload)
    except Exception:
        logger.exception("bailing: the %s callback handler failed for job %r; answering 500 so "
                         "the hub retries", kind, payload.job_id)
        try:
            store.release(key, token=token)
        except StoreUnavailable:
            logger.error("bailing: could not release %s after a handler failure", key)
        return reason_response("handler_failed")
    answer = StoredResponse(200, (("Content-Type", "application/json"),), b'{"ok":true}')
    try:
        store.complete(key, token=token, response=answer, retention_seconds=retention)
    except StoreUnavailable:
        logger.error("bailing: handled %s but could not record it; a retry would run it again", key)
    callback_received.send(current_app._get_current_object(),  # type: ignore[attr-defined]
                           kind=kind, payload=payload)
    return json_response({"ok": True}, 200)


def _record_approval(state: BailingState, payload: ApprovalRequest, key: str, token: str
                     ) -> Response | None:
    """Keep the verified request, so ``business_approval`` tools can check it later."""
    try:
        approvals_of(state).record_request(payload)
    except NotImplementedError:
        state.warn_once("approvals_unsupported", "bailing: the idempotency store keeps no approval "
                        "records; business_approval tools will refuse every call",
                        level=logging.ERROR)
    except StoreUnavailable as exc:
        logger.error("bailing: could not record approval request %d (%s); asking the hub to retry",
                     payload.approval_id, exc)
        try:
            idempotency_of(state).store().release(key, token=token)
        except StoreUnavailable:
            pass
        return reason_response("idempotency_store_unavailable")
    return None


def make_callbacks_blueprint(state: BailingState) -> Blueprint:
    """POST endpoints for the three kinds, below ``BAILING_PATH_PREFIX``."""
    blueprint = Blueprint("bailing_callbacks", __name__)
    for kind in CALLBACK_KINDS:
        path = state.config.callback_path(kind)

        def endpoint(kind: str = kind) -> Response:
            return _handle(state, kind)

        blueprint.add_url_rule(path, f"{kind}_callback", endpoint, methods=["POST"])
    return blueprint


_VERIFIER: Cache[CallbackVerifier] = Cache("callback verifier")


def callback_verifier(state: BailingState) -> CallbackVerifier:
    """The verifier of hub -> business POSTs (the client token), built once per app."""
    return _VERIFIER.get_or_make(state, lambda: _build_verifier(state))


def _build_verifier(state: BailingState) -> CallbackVerifier:
    return CallbackVerifier(
        state.config.client_tokens,
        window=state.config.window,
        setting="BAILING_CLIENT_TOKENS",
        foreign_secrets=state.config.secrets,
    )
