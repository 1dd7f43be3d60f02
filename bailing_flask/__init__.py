"""bailing_flask: expose selected Flask (or any WSGI) endpoints as governed AI tools
to BailingHub.

The public API is re-exported here; everything else is an implementation
detail.
"""

from __future__ import annotations

from .errors import (
    BailingError,
    ConfigurationError,
    NotVerifiedError,
    SignatureError,
    ToolDeclarationError,
)
from .signing import (
    CallbackVerifier,
    Verifier,
    canonical_callback,
    canonical_tool_call,
    sign_callback,
    sign_tool_call,
    verify_callback,
)
from .wsgi import BailingMiddleware, UnsignedHeaders, VerifiedCall

__version__ = "0.1.0"

__all__ = [
    "BailingError",
    "BailingMiddleware",
    "CallbackVerifier",
    "ConfigurationError",
    "NotVerifiedError",
    "SignatureError",
    "ToolDeclarationError",
    "UnsignedHeaders",
    "VerifiedCall",
    "Verifier",
    "canonical_callback",
    "canonical_tool_call",
    "sign_callback",
    "sign_tool_call",
    "verify_callback",
]
