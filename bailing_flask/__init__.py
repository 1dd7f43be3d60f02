"""bailing_flask: expose selected Flask (or any WSGI) endpoints as governed AI tools
to BailingHub.

The public API is re-exported here; everything else is an implementation
detail.
"""

from __future__ import annotations

from bailing_flask.context import (
    Arguments,
    ToolCall,
    ToolInfo,
    current_call,
    current_subject,
    get_arguments,
    get_current_call,
    get_current_subject,
)
from bailing_flask.errors import (
    BailingError,
    ConfigurationError,
    NotVerifiedError,
    SignatureError,
    ToolDeclarationError,
)
from bailing_flask._version import __version__
from bailing_flask._pipeline.callbacks import dedupe_key
from bailing_flask._pipeline.idempotency import REPLAY_HEADER, call_key
from bailing_flask.extension import Bailing
from bailing_flask.integrations import cache_key, exempt_hub_requests, is_hub_request, is_tool_call, rate_limit_key
from bailing_flask.responses import ErrorInfo, tool_result
from bailing_flask.wire.signing import (
    CallbackVerifier,
    Verifier,
    canonical_callback,
    canonical_tool_call,
    sign_callback,
    sign_tool_call,
    verify_callback,
)
from bailing_flask.declare import Param, tool, tool_defaults
from bailing_flask.wire.middleware import BailingMiddleware, UnsignedHeaders, VerifiedCall


__all__ = [
    "REPLAY_HEADER",
    "call_key",
    "dedupe_key",
    "Arguments",
    "Bailing",
    "BailingError",
    "ErrorInfo",
    "Param",
    "ToolCall",
    "ToolInfo",
    "current_call",
    "current_subject",
    "get_arguments",
    "get_current_call",
    "get_current_subject",
    "is_hub_request",
    "is_tool_call",
    "rate_limit_key",
    "cache_key",
    "exempt_hub_requests",
    "tool",
    "tool_defaults",
    "tool_result",
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
