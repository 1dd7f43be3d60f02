"""Whose ``before_request`` function answered a hub call, and a fix that fits it.

A guard the app wrote takes ``if bailing_flask.is_hub_request(): return None``
as its first line. A function of an installed package (Flask-Talisman's
``force_https`` redirect, say) cannot be edited: the fix for it is
:func:`bailing_flask.integrations.exempt_hub_requests`, which wraps it where the app
registered it. A redirect from ``http`` to ``https`` says the exercise's
requests arrived over plain http, which is what the hub does only where it
calls an ``http`` base URL: the fix names both ways out.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import site
import sys
import sysconfig
from typing import Any

__all__ = ["https_redirect", "https_fix", "package_of", "foreign_hook_fix"]

_REDIRECTS = frozenset({301, 302, 303, 307, 308})


@functools.lru_cache(maxsize=1)
def _installed_roots() -> tuple[str, ...]:
    roots = {sysconfig.get_paths().get(key) for key in ("purelib", "platlib")}
    try:
        roots.update(site.getsitepackages())
        roots.add(site.getusersitepackages())
    except AttributeError:  # a virtualenv's old site.py
        pass
    return tuple(os.path.realpath(root) + os.sep for root in roots if root)


@functools.lru_cache(maxsize=1)
def _distributions() -> dict[str, list[str]]:
    return dict(importlib.metadata.packages_distributions())


def package_of(func: Any) -> str | None:
    """The installed distribution a function comes from (``flask-talisman``); ``None`` for the app's own code."""
    func = getattr(func, "__func__", func)
    module_name = str(getattr(func, "__module__", "") or "")
    module = sys.modules.get(module_name)
    file = getattr(module, "__file__", None)
    if not module_name or file is None or module_name.startswith("bailing_flask"):
        return None
    if not os.path.realpath(file).startswith(_installed_roots()):
        return None
    top = module_name.split(".", 1)[0]
    names = _distributions().get(top)
    return names[0] if names else top


def hook_expression(func: Any) -> str:
    """How the app's code can name ``func``: ``talisman._force_https`` for a method of its Talisman."""
    owner = getattr(func, "__self__", None)
    name = getattr(func, "__name__", "hook")
    if owner is not None and not isinstance(owner, type):
        return f"{type(owner).__name__.lower()}.{name}"
    qualname = str(getattr(func, "__qualname__", name))
    if "<locals>" in qualname:  # made inside the extension's init_app: only Flask holds it
        return f"<the function {qualname} in app.before_request_funcs>"
    return f"{getattr(func, '__module__', '?')}.{qualname}"


def https_redirect(status: int, location: str | None, scheme: str) -> bool:
    """An answer that sends an ``http`` request to ``https``."""
    return scheme == "http" and status in _REDIRECTS and (location or "").lower().startswith("https://")


def https_fix(base_url: str | None, func: Any = None) -> str:
    """The two ways out of an HTTPS redirect of the exercise's (plain http) requests."""
    stated = (f"BAILING_BASE_URL is {base_url}" if base_url
              else "BAILING_BASE_URL is not set")
    exempt = (f"bailing_flask.integrations.exempt_hub_requests(app, {hook_expression(func)})" if func is not None
              else "bailing_flask.integrations.exempt_hub_requests(app, <the hook that redirects>)")
    owner = getattr(func, "__self__", None)
    named = (f" ({hook_expression(func).split('.', 1)[0]}: your {type(owner).__name__} object)"
             if owner is not None and not isinstance(owner, type) else "")
    return (f"the exercise sent plain http, as the hub does only for an http base URL ({stated}). "
            "If the hub calls an https URL, set BAILING_BASE_URL to it (or pass --https): the "
            "requests then arrive as behind TLS. If the hub reaches the app over plain http inside "
            f"your network, let the redirect step aside for verified hub requests: {exempt}{named}; "
            "unsigned requests are still redirected")


def foreign_hook_fix(func: Any, package: str) -> str:
    """The fix for a hook of an installed package, which cannot take the one line."""
    return (f"this function of {package} is not yours to edit: make it step aside for verified hub "
            f"requests with bailing_flask.integrations.exempt_hub_requests(app, {hook_expression(func)}), after "
            f"{package} registered it; the gate still checks the signature, subject, arguments and "
            "authorization")
