"""Where this app is mounted, and which paths the hub calls (Flask side of ``BAILING_BASE_URL``)."""

from __future__ import annotations

from typing import Any

from flask import Flask

from bailing_flask._state import state_of
from bailing_flask.wire.base_url import PathMap
from bailing_flask.wire.middleware import BailingMiddleware, mount_prefix

__all__ = ["application_root", "path_map_for"]


def application_root(app: Flask) -> str:
    """Flask's ``APPLICATION_ROOT`` (as ``init_app`` read it) as a mount prefix (``"/"`` is ``""``)."""
    return state_of(app).config.application_root


def path_map_for(middleware: BailingMiddleware, app: Flask,
                 environ: dict[str, Any] | None) -> PathMap | None:
    """The path map of ``app`` for this request (or, with ``environ=None``, for the CLI).

    ``None`` without a base URL: routes are catalog paths, as they always were.
    """
    base = middleware.base_url
    if base is None:
        return None
    if environ is not None:
        mount = mount_prefix(environ, middleware.public_prefix)
    elif middleware.public_prefix is not None:
        mount = middleware.public_prefix
    else:
        mount = application_root(app)
    return PathMap(mount=mount, base=base.path)
