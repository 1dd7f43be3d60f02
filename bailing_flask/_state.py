"""Finding an app's :class:`~bailing_flask.extension.BailingState` without importing the extension.

Every layer that needs the per-app state at run time (the ``@tool``
wrapper, the gate, the CLI, the test client, OpenTelemetry) looks it up in
``app.extensions`` here, the way flask-login's decorators find their
manager, so no module below :mod:`bailing_flask.extension` imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flask import Flask, current_app

if TYPE_CHECKING:  # pragma: no cover - a type-only back-reference
    from bailing_flask.extension import BailingState

__all__ = ["state_of", "current_state"]

EXTENSION_KEY = "bailing"


def state_of(app: Flask) -> BailingState:
    """``app``'s state; :class:`RuntimeError` when ``Bailing(app)`` was not initialised for it."""
    state = app.extensions.get(EXTENSION_KEY)
    if state is None:
        raise RuntimeError("bailing_flask: Bailing(app) was not initialised for this app")
    return state  # type: ignore[no-any-return]


def current_state() -> BailingState:
    """The state of the app handling this request (or of the current app context)."""
    return state_of(current_app._get_current_object())  # type: ignore[attr-defined]
