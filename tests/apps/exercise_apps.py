"""Small apps, each with one thing that answers hub calls instead of bailing_flask."""

from __future__ import annotations

from typing import Any

from flask import Flask, abort, jsonify, redirect, request
from flask_caching import Cache

from bailing_flask import Bailing, tool

from ..helpers import STRONG_SECRET

#: views that ran, by name (no exercise may add to it, except read tools with --subject)
RAN: list[str] = []


def base(name: str = "exercise_app", **config: Any) -> tuple[Flask, Bailing]:
    app = Flask(name)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://", **config)
    bailing = Bailing(app)
    bailing.subject_loader(lambda subject: {"t1:alice": "alice"}.get(subject))
    bailing.authorizer(lambda call: call.user is not None)
    return app, bailing


def add_tools(app: Flask, prefix: str = "/api", **route: Any) -> None:
    @app.get(f"{prefix}/items", **route)
    @tool(scope="item.read", name="item_list")
    def item_list() -> Any:
        """List items."""
        RAN.append("item_list")
        return jsonify(items=[])

    @app.delete(f"{prefix}/items/<int:item_id>", **route)
    @tool(scope="item.write", name="item_delete")
    def item_delete(item_id: int) -> Any:
        """Delete an item."""
        RAN.append("item_delete")
        return jsonify(deleted=item_id)


def redirecting() -> Flask:
    app, _ = base()

    @app.before_request
    def force_https() -> Any:
        if request.path.startswith("/api/") and not request.is_secure:
            return redirect(request.url.replace("http://", "https://", 1), 301)
        return None

    add_tools(app)
    return app


def aborting_404() -> Flask:
    app, _ = base()

    @app.before_request
    def retired_api_versions() -> None:
        if request.path.startswith("/api/"):
            abort(404)

    add_tools(app)
    return app


def method_filter_405() -> Flask:
    app, _ = base()

    @app.before_request
    def no_deletes() -> None:
        if request.method == "DELETE":
            abort(405)

    add_tools(app)
    return app


def unrouted_404() -> Flask:
    app, _ = base(SERVER_NAME="shop.test")
    add_tools(app, subdomain="admin")
    return app


def html_error_page() -> Flask:
    app, _ = base()

    @app.before_request
    def open_tenant_db() -> None:
        if request.path.startswith("/api/") and request.headers.get("X-Tenant") is None:
            raise RuntimeError("no tenant header")

    add_tools(app)
    return app


def cached() -> tuple[Flask, Cache]:
    app, _ = base(CACHE_TYPE="SimpleCache")
    cache = Cache(app)

    @app.get("/api/prices")
    @cache.cached(timeout=300)
    @tool(scope="price.read", allow_unsigned=True)
    def prices() -> Any:
        """Prices (the public page shows them too)."""
        RAN.append("prices")
        return jsonify(prices=[1, 2, 3], fresh=True)

    return app, cache


def admits_everyone() -> Flask:
    app, bailing = base()
    bailing.authorizer(lambda call: True)
    add_tools(app)
    return app


def clean() -> Flask:
    app, _ = base()
    add_tools(app)
    return app
