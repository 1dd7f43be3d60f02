"""The exceptions bailing_flask raises, under one base class.

Every refusal carries a stable, machine-readable ``reason`` code. The codes
are part of the public API: the hub shows error bodies of tool calls to the
model, operators grep logs for them, and apps restyle responses by them.
None of them ever carries a secret, a signature or a request body.
"""

from __future__ import annotations

__all__ = [
    "BailingError",
    "ConfigurationError",
    "SignatureError",
    "NotVerifiedError",
    "ToolDeclarationError",
    "REASON_MESSAGES",
]


#: Human-readable explanations of each refusal reason. They describe what is
#: wrong and how to fix it, and never contain request data.
REASON_MESSAGES: dict[str, str] = {
    "missing_signature": (
        "This endpoint only answers requests signed by BailingHub "
        "(the X-Bailing-Signature header is missing)."
    ),
    "malformed_signature": (
        "X-Bailing-Signature must be 'sha256=' followed by 64 lowercase hex "
        "digits, sent once."
    ),
    "malformed_timestamp": (
        "X-Bailing-Timestamp must be a Unix time made of ASCII digits only, sent once."
    ),
    "timestamp_out_of_window": (
        "X-Bailing-Timestamp is outside the accepted window; check that the "
        "clocks of the hub and this server are synchronised (NTP)."
    ),
    "bad_signature": (
        "The signature does not match this request; check the shared secret and "
        "that no proxy rewrites the path, the query or the body."
    ),
    "malformed_job_id": "X-Bailing-Job-Id must not contain '.'.",
    "ambiguous_signature": (
        "The signed fields of this request could be read in more than one way (a '.' "
        "followed by 64 hex digits and another '.' in the subject or the path and query), "
        "so the signature cannot tell which request the hub signed."
    ),
    "unexpected_body": "A GET or HEAD request signed by the hub never carries a body.",
    "body_too_large": "The request body is larger than this endpoint accepts.",
    "malformed_body": (
        "The request body could not be read completely (bad Content-Length or "
        "an interrupted upload)."
    ),
    "not_configured": (
        "This server has no BailingHub secret configured yet, so it cannot verify any hub "
        "request; the operator must set the tool source's provider secret."
    ),
    "wrong_key": (
        "The signature was made with a different key than the one expected here "
        "(tool calls use the provider secret; callbacks, approvals and tickets "
        "use the client token)."
    ),
}


class BailingError(Exception):
    """Base class of every exception raised by bailing_flask."""


class ConfigurationError(BailingError, ValueError):
    """The integration is configured in a way that would be unsafe or cannot work.

    Raised at start-up (never per request), with a message that names the
    setting to fix.
    """


class NotVerifiedError(BailingError):
    """A request-scoped accessor was used in a request the hub did not sign.

    Raised instead of returning a guess such as ``None`` (which would read
    as "anonymous hub call"). Deliberately not a ``RuntimeError``: Werkzeug's
    proxies turn those into silent fallbacks (``bool(proxy)`` -> ``False``).
    """


class ToolDeclarationError(BailingError, ValueError):
    """A tool declaration is invalid; the message names the view and the field."""


class SignatureError(BailingError):
    """A hub signature was refused.

    :param reason: stable reason code (a key of :data:`REASON_MESSAGES`).
    :param status: the HTTP status the refusal maps to (401, or 413/400 for
        body problems).
    """

    def __init__(self, reason: str, status: int = 401, detail: str | None = None) -> None:
        self.reason = reason
        self.status = status
        self.detail = detail
        super().__init__(detail or REASON_MESSAGES.get(reason, reason))

    @property
    def message(self) -> str:
        """The explanation shown to the caller (never contains request data)."""
        return REASON_MESSAGES.get(self.reason, self.reason)

    @property
    def sdk_error(self) -> str:
        """The coarse code the hub's own SDKs return for this refusal.

        The hub's SDKs only know ``timestamp_out_of_window`` (also for a
        missing or non-numeric timestamp) and ``bad_signature``; the precise
        code stays in :attr:`reason`.
        """
        if self.reason in ("malformed_timestamp", "timestamp_out_of_window"):
            return "timestamp_out_of_window"
        if self.reason in ("body_too_large", "malformed_body"):
            return self.reason
        if self.reason == "not_configured":
            return "unavailable"
        return "bad_signature"
