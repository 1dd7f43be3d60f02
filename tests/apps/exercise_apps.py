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


# -- a cache in front of a read-only tool, and two subjects of two tenants --------------------

ORDERS = {"t1:alice": ["t1-order-1"], "t2:bob": ["t2-order-9"]}


def shared_cache(key: str = "path") -> tuple[Flask, Cache]:
    """``key``: ``"path"`` (Flask-Caching's default), ``"subject"`` (``bailing_flask.cache_key``),
    ``"memoize"`` (a memoized helper, by default name) or ``"memoize-subject"``."""
    import bailing_flask

    app, bailing = base(CACHE_TYPE="SimpleCache")
    cache = Cache(app)
    bailing.subject_loader(lambda subject: subject if subject in ORDERS else None)
    options: dict[str, Any] = {"key_prefix": bailing_flask.cache_key} if key == "subject" else {}

    if key.startswith("memoize"):
        memo: dict[str, Any] = {"make_name": bailing_flask.cache_key} if key == "memoize-subject" else {}
        decorator = cache.memoize(timeout=300, **memo)
    else:
        decorator = cache.cached(timeout=300, **options)

    @app.get("/api/orders")
    @decorator
    @tool(scope="order.read", name="orders")
    def orders() -> Any:
        """The acting user's orders."""
        RAN.append("orders")
        from bailing_flask import get_current_call

        call = get_current_call()
        return jsonify(orders=ORDERS[call.subject] if call and call.subject else [])

    return app, cache


def shared_cache_app(key: str = "path") -> Flask:
    """:func:`shared_cache` for the ``flask`` command line."""
    return shared_cache(key)[0]


# -- an after_request function that makes every refusal a success ------------------------------


def rewrites_refusals() -> Flask:
    app, _ = base()
    add_tools(app)

    @app.after_request
    def always_ok(response: Any) -> Any:
        if response.status_code >= 400:  # "the mobile client cannot handle errors"
            response.status_code = 200
            del response.headers["X-Bailing-Reason"]
        return response

    return app


# -- the Flask-Login bridge with a subject loader whose users Flask-Login cannot use -------------


def login_bridge_with(kind: str = "dict") -> Flask:
    """``kind``: the loader returns a ``"dict"``, a plain ``"dataclass"``, or is ``"annotated"``
    ``-> dict`` (so ``flask bailing check`` can tell before any call)."""
    from dataclasses import dataclass

    from flask_login import LoginManager, current_user, login_required

    @dataclass
    class Account:
        name: str
        tenant: str

    app, bailing = base(SECRET_KEY="k")
    login_manager = LoginManager(app)
    login_manager.user_loader(lambda user_id: None)
    bailing.bridge_flask_login(login_manager)
    accounts = {"t1:alice": ("alice", "t1")}

    if kind == "annotated":
        def load_account(subject: str) -> dict[str, str] | None:
            found = accounts.get(subject)
            return {"name": found[0], "tenant": found[1]} if found else None
    else:
        def load_account(subject: str):  # type: ignore[no-untyped-def]  # as many legacy loaders are
            found = accounts.get(subject)
            if found is None:
                return None
            return {"name": found[0], "tenant": found[1]} if kind == "dict" else Account(*found)

    bailing.subject_loader(load_account)

    @app.get("/api/me")
    @login_required
    @tool(scope="profile.read")
    def me() -> Any:
        """Who the acting user is."""
        RAN.append("me")
        return jsonify(name=current_user.name)

    return app
