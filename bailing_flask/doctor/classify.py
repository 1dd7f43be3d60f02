"""Pure readings of a response: the refusal reason it carries, the hub's reading of a probe answer,
the server's clock, and the signs of a cache."""

from __future__ import annotations

import email.utils
import json
from typing import Any

from .._jsenc import js_trim as _js_trim
from .transport import _Exchange


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
    """The hub's reading of a dedicated probe's body (``CONTRACT.md`` §5.4)."""
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
