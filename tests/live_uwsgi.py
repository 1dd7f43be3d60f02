"""The echo app of :mod:`tests.live_apps` as a module uWSGI can load (``--module``)."""

from __future__ import annotations

from .live_apps import middleware_app

application = middleware_app()
