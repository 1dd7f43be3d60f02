"""Pure readings of responses: what the hub concludes, and what else they show.

The hub's own classifications: who can read the catalog
(:func:`_primary_access`, :func:`_negative_access`, mirroring
``fetchProviderSpecWithPolicy``), the verdict of the authorization probe
(:func:`_classify_probe`, :func:`_boolean_decision`, mirroring
``classifyDedicatedAuthzProbe``, ``booleanDecision`` and
``probeAuthorizeFor``), all in the hub's ``src/app/tool-specs.ts``, checked
against hub commit ``c6f1d24911fc47df79bb144b6d8b7ac93b381008``. Then what the
hub does not read: the refusal reason a body carries, the server's clock, and
the signs of a cache. Nothing here sends a request.
"""

from __future__ import annotations

import email.utils
import json
from typing import Any

from bailing_flask.wire.jsenc import js_trim as _js_trim
from bailing_flask.lint import ProbeTarget
from bailing_flask.doctor.report import AccessStatus, CatalogAccess, Policy, ProbeOutcome, ProbeStatus
from bailing_flask.doctor.transport import _Exchange, _short

_PROTECTED_NEGATIVE = frozenset({401, 403, 404})
_SIGNATURE_REASONS = frozenset(
    {
        "bad_signature",
        "timestamp_out_of_window",
        "missing_signature",
        "malformed_signature",
        "malformed_timestamp",
        "malformed_job_id",
        "wrong_key",
        "replayed",
    }
)
_KNOWN_REASONS = _SIGNATURE_REASONS | {
    "forbidden",
    "subject_required",
    "no_authorizer",
    "unknown_parameter",
    "invalid_parameter",
    "invalid_body",
    "method_not_allowed",
    "catalog_unavailable",
}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


def _reason_of(exchange: _Exchange) -> str | None:
    """The refusal reason a bailing_flask / SDK body carries (``None`` if it says none)."""
    if not exchange.body:
        return None
    try:
        data = _json(exchange.text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        raw: list[str] = []
        for key in ("reason", "error", "code", "msg", "message"):
            value = data.get(key)
            if isinstance(value, str) and value.strip():
                normalized = value.strip().lower().replace(" ", "_")
                if normalized in _KNOWN_REASONS:
                    return normalized
                raw.append(value.strip())
        return raw[0][:80] if raw else None
    lowered = exchange.text[:2048].lower()
    for code in sorted(_SIGNATURE_REASONS):
        if code in lowered:
            return code
    return None


def _boolean_decision(text: str) -> bool | None:
    """The hub's reading of a dedicated probe's body: the first boolean among
    ``authorized``, ``allow``, ``allowed``, ``ok`` (``booleanDecision``)."""
    if not _js_trim(text):
        return None
    try:
        body = _json(text)
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    for key in ("authorized", "allow", "allowed", "ok"):
        if isinstance(body.get(key), bool):
            return bool(body[key])
    return None


def _server_time(exchange: _Exchange) -> float | None:
    """The server's clock from ``Date`` (+ ``Age`` when a cache answered)."""
    raw = next((value for key, value in exchange.headers if key == "date"), None)
    if not raw:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if parsed is None:
        return None
    value = parsed.timestamp()
    age = exchange.header("age")
    if age and age.strip().isdigit():
        value += int(age.strip())
    return value


def _cache_hits(exchange: _Exchange) -> list[str]:
    """Headers showing that a cache (not the app) produced this response."""
    found = []
    age = exchange.header("age")
    if age is not None and age.strip().isdigit() and int(age.strip()) > 0:
        # Age: 0 is also sent on pass/miss by some caches (Varnish): only a positive age is a hit
        found.append(f"Age: {age}")
    for name in ("x-cache", "x-cache-status", "x-proxy-cache", "x-cache-lookup", "x-drupal-cache",
                 "x-varnish-cache", "cdn-cache", "x-edge-cache"):
        value = exchange.header(name)
        if value and "hit" in value.lower():
            found.append(f"{name}: {value}")
    status = exchange.header("cf-cache-status")
    if status and status.strip().upper() in ("HIT", "STALE", "REVALIDATED", "UPDATING"):
        found.append(f"cf-cache-status: {status}")
    return found


def _cache_layers(exchange: _Exchange) -> list[str]:
    """Headers showing that a caching layer is in the path (even on a miss)."""
    found = []
    for name in ("age", "x-cache", "x-cache-status", "cf-cache-status", "x-proxy-cache", "x-served-by",
                 "x-varnish", "via"):
        value = exchange.header(name)
        if value:
            found.append(f"{name}: {value}")
    return found


def _primary_access(policy: Policy, primary: _Exchange) -> CatalogAccess | None:
    """What the hub concludes from its own catalog fetch, if that alone decides.

    A failed fetch, a non-2xx answer (redirects are not followed) or a body
    over the limit is ``inconclusive``; under ``public_allowed`` a readable
    catalog is ``public``. ``None``: the two negative probes decide
    (:func:`_negative_access`). Mirrors the first half of
    ``fetchProviderSpecWithPolicy``.
    """
    if primary.status is None:
        return CatalogAccess("inconclusive", reason=f"network error: {primary.error}")
    public = policy == "public_allowed"
    signed_http, unsigned_http = (None, primary.status) if public else (primary.status, None)
    if not primary.ok:
        note = " (redirects are not followed on the catalog)" if primary.redirect else ""
        return CatalogAccess(
            "inconclusive", signed_http, unsigned_http, reason=f"HTTP {primary.status}{note}",
            primary_reason=_reason_of(primary),
        )
    if primary.too_big:
        return CatalogAccess(
            "inconclusive", signed_http, unsigned_http, reason="the catalog is larger than 5 MiB"
        )
    if public:
        return CatalogAccess(
            "public", unsigned_http=primary.status, reason="the tool source allows anonymous reads"
        )
    return None


def _negative_access(primary: _Exchange, unsigned: _Exchange, invalid: _Exchange) -> CatalogAccess:
    """The hub's verdict under ``signed_required`` once the signed fetch succeeded.

    Readable without a signature or with a bad one: ``public``; both refused
    with 401, 403 or 404: ``protected``; anything else: ``inconclusive``.
    Mirrors the second half of ``fetchProviderSpecWithPolicy``.
    """

    def access(status: AccessStatus, reason: str) -> CatalogAccess:
        return CatalogAccess(status, primary.status, unsigned.status, invalid.status, reason)

    if unsigned.ok or invalid.ok:
        readable = " and ".join(
            name for name, ex in (("unsigned", unsigned), ("bad-signature", invalid)) if ex.ok
        )
        return access("public", f"signed-only required, but {readable} requests read it")
    if unsigned.status in _PROTECTED_NEGATIVE and invalid.status in _PROTECTED_NEGATIVE:
        return access(
            "protected", "signed reads succeed; unsigned and bad-signature reads are refused"
        )
    return access(
        "inconclusive",
        f"cannot confirm protection: unsigned={_short(unsigned)}, bad signature={_short(invalid)}",
    )


def _classify_probe(target: ProbeTarget, final: _Exchange, requires_subject: bool) -> ProbeOutcome:
    """The hub's verdict on its authorization probe, from the final response.

    ``401``/``403`` pass; a 2xx from a dedicated endpoint is read for a boolean
    decision; a 2xx from a tool is ``suspect`` if the tool declares
    ``subject.required`` and ``inconclusive`` otherwise; anything else is
    ``inconclusive``. Mirrors ``classifyDedicatedAuthzProbe`` and the end of
    ``probeAuthorizeFor`` in the hub's ``src/app/tool-specs.ts``.
    """
    mode, name = target.mode, target.name

    def outcome(status: ProbeStatus, http: int | None, reason: str) -> ProbeOutcome:
        return ProbeOutcome(status, http, mode, name, requires_subject, reason)

    if final.status is None:
        return outcome("inconclusive", None, f"probe request failed: {final.error}")
    http = final.status
    if http in (401, 403):
        return outcome("pass", http, f"HTTP {http}: the synthetic subject was refused")
    if 200 <= http < 300:
        if mode == "dedicated":
            decision = _boolean_decision(final.text)
            if decision is False:
                return outcome("pass", http, "the endpoint answered authorized=false")
            if decision is True:
                return outcome("suspect", http, "the endpoint answered 'authorized' (a true "
                               "authorized/allow/allowed/ok) for the synthetic subject")
            return outcome("inconclusive", http, "2xx without a top-level boolean "
                           "authorized/allow/allowed/ok")
        if requires_subject:
            return outcome("suspect", http, f"tool {name} declares subject.required "
                           f"but answered {http} to the synthetic subject")
        return outcome("inconclusive", http, f"tool {name} answered {http} and does "
                       "not declare subject.required (public read or missing authorization?)")
    return outcome("inconclusive", http, f"HTTP {http} is neither a refusal nor a 2xx")
