"""The echo app of :mod:`tests.apps.live_apps` as a module uWSGI can load (``--module``)."""

from __future__ import annotations

from .apps.live_apps import middleware_app

application = middleware_app()
