"""The exceptions bailing_flask raises, under one base class.

Every refusal carries a stable, machine-readable ``reason`` code. The codes
are part of the public API: the hub shows error bodies of tool calls to the
model, operators grep logs for them, and apps restyle responses by them.
None of them ever carries a secret, a signature or a request body.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from bailing_flask.reasons import REASONS

__all__ = [
    "BailingError",
    "ConfigurationError",
    "SignatureError",
    "NotVerifiedError",
    "ToolDeclarationError",
    "REASON_MESSAGES",
]


#: The message of each refusal reason, from the one table in :mod:`bailing_flask.reasons`.
REASON_MESSAGES: Mapping[str, str] = MappingProxyType({r.code: r.message for r in REASONS.values()})


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
    :param detail: a more precise explanation than the reason's, written by
        this package (never request data); it becomes :attr:`message`.
    """

    def __init__(self, reason: str, status: int | None = None, detail: str | None = None) -> None:
        self.reason = reason
        entry = REASONS.get(reason)
        self.status = status if status is not None else (entry.status if entry else 401)
        self.detail = detail
        super().__init__(detail or REASON_MESSAGES.get(reason, reason))

    @property
    def message(self) -> str:
        """The explanation shown to the caller (never contains request data)."""
        return self.detail or REASON_MESSAGES.get(self.reason, self.reason)

    @property
    def sdk_error(self) -> str:
        """The coarse code the hub's own SDKs return for this refusal.

        The hub's SDKs only know ``timestamp_out_of_window`` (also for a
        missing or non-numeric timestamp) and ``bad_signature``; the precise
        code stays in :attr:`reason`.
        """
        entry = REASONS.get(self.reason)
        return entry.sdk_error if entry is not None else "bad_signature"
