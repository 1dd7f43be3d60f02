"""bailing_flask: expose selected Flask (or any WSGI) endpoints as governed AI tools
to BailingHub.

What an application writes is importable from here: the extension, the
declarations, the current call, the helpers for a legacy app, the response
helpers and the errors. The signing primitives and the verifying WSGI
middleware are in :mod:`bailing_flask.wire`; everything else lives in the
module that owns it (see the API reference).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bailing_flask._version import __version__

if TYPE_CHECKING:
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
    from bailing_flask.declare import Param, tool, tool_defaults
    from bailing_flask.errors import (
        BailingError,
        ConfigurationError,
        NotVerifiedError,
        ToolDeclarationError,
    )
    from bailing_flask.extension import Bailing
    from bailing_flask.integrations import cache_key, is_hub_request, is_tool_call, rate_limit_key
    from bailing_flask.responses import ErrorInfo, tool_result

#: Where each exported name lives. The names are loaded on first use (PEP 562): a process that
#: imports only a part of the package (``bailing_flask.wire`` in front of a WSGI app that is not
#: Flask, the pytest plugin, the CLI's own modules) does not pay for the Flask extension, the
#: declarations and their pydantic models.
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(("Arguments", "ToolCall", "ToolInfo", "current_call", "current_subject",
                     "get_arguments", "get_current_call", "get_current_subject"),
                    "bailing_flask.context"),
    **dict.fromkeys(("Param", "tool", "tool_defaults"), "bailing_flask.declare"),
    **dict.fromkeys(("BailingError", "ConfigurationError", "NotVerifiedError",
                     "ToolDeclarationError"), "bailing_flask.errors"),
    "Bailing": "bailing_flask.extension",
    **dict.fromkeys(("cache_key", "is_hub_request", "is_tool_call", "rate_limit_key"),
                    "bailing_flask.integrations"),
    **dict.fromkeys(("ErrorInfo", "tool_result"), "bailing_flask.responses"),
}

__all__ = [
    "Bailing",
    "tool",
    "tool_defaults",
    "Param",
    "current_call",
    "current_subject",
    "get_current_call",
    "get_current_subject",
    "get_arguments",
    "ToolCall",
    "ToolInfo",
    "Arguments",
    "ErrorInfo",
    "tool_result",
    "is_tool_call",
    "is_hub_request",
    "rate_limit_key",
    "cache_key",
    "BailingError",
    "ConfigurationError",
    "NotVerifiedError",
    "ToolDeclarationError",
]

#: Names this package no longer exports, and the import that replaces each (unreleased: no
#: aliases, but a clear error instead of "cannot import name").
_MOVED: dict[str, str] = {
    **{name: f"from bailing_flask.wire import {name}" for name in (
        "BailingMiddleware", "VerifiedCall", "UnsignedHeaders", "Verifier", "CallbackVerifier",
        "SignatureError", "canonical_tool_call", "canonical_callback", "sign_tool_call",
        "sign_callback", "verify_callback",
    )},
    "REPLAY_HEADER": "from bailing_flask.responses import REPLAY_HEADER",
    "dedupe_key": "from bailing_flask.hub.payloads import dedupe_key (it takes the payload only)",
    "call_key": "an internal helper now; a call recorded under its signed identity has the key "
                "'idem:' + current_call.verified.identity (as `flask bailing idempotency list` "
                "shows it)",
}

if not TYPE_CHECKING:  # the type checker keeps refusing unknown names
    def __getattr__(name: str) -> object:
        home = _EXPORTS.get(name)
        if home is not None:
            from importlib import import_module

            value = getattr(import_module(home), name)
            globals()[name] = value  # looked up here once: later uses are a plain global
            return value
        moved = _MOVED.get(name)
        if moved is not None:
            # ImportError, not AttributeError: ``from bailing_flask import X`` would swallow the
            # message of an AttributeError into a bare "cannot import name"
            raise ImportError(f"bailing_flask.{name} is no longer exported here: {moved}",
                              name=name, path=__file__)
        raise AttributeError(f"module 'bailing_flask' has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
