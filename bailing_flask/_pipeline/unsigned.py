"""A tool route refusing a client that came with credentials of its own: say it, once per route.

A route that served the app's own clients (a bearer token, a session
cookie) refuses their unsigned requests once it is a tool, unless it is
declared ``allow_unsigned=True``. The refusal is right by default (an open
door is worse than a loud break), but it must not be silent: the first
such refusal of each tool logs one warning naming the route and the fix.
The credential itself is never logged, only which kind it was.

Only the refusal path of unsigned requests pays for this: no signed call
and no ordinary route looks at it.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from werkzeug.http import parse_cookie

if TYPE_CHECKING:  # pragma: no cover
    from flask import Flask

    from bailing_flask._state import BailingState
    from bailing_flask._pipeline.registry import Tool

__all__ = ["warn_refused_credentials", "credentials_kind"]

#: per app: the names of the cookies that carry a login (asked once, at the first refusal)
_COOKIES: weakref.WeakKeyDictionary[Flask, tuple[str, ...]] = weakref.WeakKeyDictionary()


def _login_cookies(app: Flask) -> tuple[str, ...]:
    names = _COOKIES.get(app)
    if names is None:
        # the session interface's own answer (Flask asks it on every request anyway), and
        # Flask-Login's default remember cookie
        names = tuple(dict.fromkeys((str(app.session_interface.get_cookie_name(app)), "remember_token")))
        _COOKIES[app] = names
    return names


def credentials_kind(app: Flask, environ: dict[str, Any]) -> str | None:
    """Which credentials of the app's own an unsigned request carries (``None``: none)."""
    authorization = environ.get("HTTP_AUTHORIZATION")
    if authorization:
        scheme = str(authorization).split(None, 1)[0][:20]
        return f"an Authorization: {scheme} header"
    cookie = environ.get("HTTP_COOKIE")
    if cookie:
        names = _login_cookies(app)
        if any(name in cookie for name in names):  # parse only when one of them may be there
            sent = parse_cookie(cookie)
            for name in names:
                if name in sent:
                    return f"the {name!r} cookie"
    return None


def warn_refused_credentials(state: BailingState, tool: Tool, environ: dict[str, Any]) -> None:
    """Before refusing an unsigned request to ``tool``: if it carried credentials, warn (once per tool)."""
    if tool.options.allow_unsigned is False:  # the route was declared the hub's alone
        return
    kind = credentials_kind(state.app, environ)
    if kind is None:
        return
    state.warn_once(
        ("unsigned_with_credentials", tool.name),
        "bailing: refused an unsigned request with %s to %s %s (tool %r): 401 missing_signature. "
        "A tool route takes only the hub's signed calls; if this route's existing clients must keep "
        "working, declare it @tool(..., allow_unsigned=True) (they then reach the view as before, "
        "through the app's own authentication), or allow_unsigned=False to say it is the hub's alone",
        kind, environ.get("REQUEST_METHOD", "GET"), tool.path, tool.name,
    )
