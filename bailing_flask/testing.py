"""Helpers to send requests exactly as BailingHub sends them, for tests and tools.

Everything here signs through :mod:`bailing_flask.signing`, so a test that
passes with these helpers passes for the same bytes the hub produces.
"""

from __future__ import annotations

import time

from .signing import sign_tool_call

__all__ = ["signed_headers", "catalog_headers", "PROBE_SUBJECT", "PROBE_BODY"]

#: The synthetic subject of the hub's authorization probe (``CONTRACT.md`` §5.3).
PROBE_SUBJECT = "__bailing_authz_probe__:nobody"
#: The exact body the hub POSTs to a dedicated authz-probe endpoint.
PROBE_BODY = (
    '{"subject":"__bailing_authz_probe__:nobody","reason":"bailing-authz-probe","expect":"deny"}'
)


def signed_headers(
    secret: str,
    method: str,
    path_with_query: str,
    body: bytes | str = b"",
    *,
    subject: str | None = None,
    job_id: str | None = "job-test-001",
    client: str | None = "",
    tool_scope: str | None = None,
    idempotency_key: str | None = None,
    ts: int | str | None = None,
) -> dict[str, str]:
    """The ``X-Bailing-*`` headers of a tool call (``CONTRACT.md`` §3.7).

    ``subject=None`` omits On-Behalf-Of (anonymous call); ``job_id=None``
    omits the Job-Id header. Header values are returned as text; characters
    U+0080-U+00FF go on the wire as single ISO-8859-1 bytes, as the hub sends them.
    """
    stamp = str(int(time.time()) if ts is None else ts)
    headers = {
        "X-Bailing-Timestamp": stamp,
        "X-Bailing-Signature": sign_tool_call(
            secret, stamp, method, path_with_query, body, subject or "", job_id or ""
        ),
    }
    if job_id is not None:
        headers["X-Bailing-Job-Id"] = job_id
    if client is not None:
        headers["X-Bailing-Client"] = client
    if subject:
        headers["X-Bailing-On-Behalf-Of"] = subject
    if tool_scope is not None:
        headers["X-Bailing-Tool-Scope"] = tool_scope
    if idempotency_key is not None:
        headers["X-Bailing-Idempotency-Key"] = idempotency_key
    return headers


def catalog_headers(secret: str, path_with_query: str, *, ts: int | str | None = None) -> dict[str, str]:
    """The only two headers of a signed catalog fetch (``CONTRACT.md`` §4.2)."""
    stamp = str(int(time.time()) if ts is None else ts)
    return {
        "X-Bailing-Timestamp": stamp,
        "X-Bailing-Signature": sign_tool_call(secret, stamp, "GET", path_with_query),
    }
