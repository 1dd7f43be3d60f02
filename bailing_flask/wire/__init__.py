"""The wire: what the hub sends, byte for byte, with no web framework involved.

Signing and verifying (:mod:`~bailing_flask.wire.signing`), the verifying
WSGI middleware (:mod:`~bailing_flask.wire.middleware`), reading a body once
(:mod:`~bailing_flask.wire.body`), JavaScript's encoders
(:mod:`~bailing_flask.wire.jsenc`), the hub's ``base_url``
(:mod:`~bailing_flask.wire.base_url`) and the response headers a WSGI
application may send (:mod:`~bailing_flask.wire.headers`). Nothing here
imports Flask; everything above builds on it.

The primitives are importable from here: the middleware and what it puts in
the environ (:class:`BailingMiddleware`, :class:`VerifiedCall`,
:class:`UnsignedHeaders`), signing and verifying tool calls and callbacks,
and :class:`SignatureError`, which the verifiers raise.
"""

from __future__ import annotations

from bailing_flask.errors import SignatureError
from bailing_flask.wire.middleware import BailingMiddleware, UnsignedHeaders, VerifiedCall
from bailing_flask.wire.signing import (
    CallbackVerifier,
    Verifier,
    canonical_callback,
    canonical_tool_call,
    sign_callback,
    sign_tool_call,
    verify_callback,
)

__all__ = [
    "BailingMiddleware",
    "VerifiedCall",
    "UnsignedHeaders",
    "Verifier",
    "CallbackVerifier",
    "SignatureError",
    "canonical_tool_call",
    "canonical_callback",
    "sign_tool_call",
    "sign_callback",
    "verify_callback",
]
