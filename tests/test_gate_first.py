"""The gate decides before anything in the view's stack.

The gate stands in front of the view Flask dispatches to, so decorators
between the route and ``@tool`` (Flask-Caching, a login check),
``MethodView.decorators`` and the view run only for an admitted call, while
the app's ``before_request`` functions still run first and can open what
the subject loader needs.
"""

from __future__ import annotations

import functools
import sqlite3
from typing import Any

import pytest
from flask import Blueprint, Flask, g, jsonify, request, session
from flask.views import MethodView
from flask_caching import Cache

from bailing_flask import Bailing, get_current_call, tool
from bailing_flask.testing import HubSimulator

from .helpers import STRONG_SECRET, raw_request

ALLOWED = {"t1:alice"}
DATA = {"t1:alice": "alice's orders", "t1:mallory": "mallory's orders"}


def base_app() -> tuple[Flask, Bailing]:
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://", SECRET_KEY="k")
    bailing = Bailing(app)
    bailing.subject_loader(lambda subject: subject)
    bailing.authorizer(lambda call: call.subject in ALLOWED)
    return app, bailing


def login_required(view: Any) -> Any:
    """A legacy session check that lets an admitted hub call through (it reads the gate's decision)."""

    @functools.wraps(view)
    def check(*args: Any, **kwargs: Any) -> Any:
        call = get_current_call()
        if session.get("user") or (call is not None and call.authorized):
            return view(*args, **kwargs)
        return jsonify(error="login required"), 401

    return check


def subject_data() -> Any:
    call = get_current_call()
    return jsonify(data=DATA.get(call.subject if call else "", "anonymous"))


def hub_for(app: Flask) -> HubSimulator:
    return HubSimulator(app, STRONG_SECRET)


# -- Flask-Caching between the route and @tool ---------------------------------------------


def caching_app() -> tuple[Flask, list[str]]:
    app, _ = base_app()
    cache = Cache(app, config={"CACHE_TYPE": "SimpleCache"})
    ran: list[str] = []

    @app.get("/orders/mine")
    @cache.cached(timeout=300)
    @tool(scope="order.read", subject_required=True)
    def my_orders():
        ran.append("view")
        return subject_data()

    return app, ran


def test_cached_view_between_route_and_tool_never_serves_another_subject(live_server):
    app, ran = caching_app()
    hub = hub_for(app)
    alice = hub.call("my_orders", subject="t1:alice")
    assert alice.status == 200 and alice.json()["data"] == "alice's orders"
    mallory = hub.call("my_orders", subject="t1:mallory")
    assert mallory.status == 403
    assert mallory.json()["reason"] == "forbidden"
    assert "alice" not in mallory.text
    browser = app.test_client().get("/orders/mine")
    assert browser.status_code == 401
    assert browser.get_json()["reason"] == "missing_signature"
    assert ran == ["view"]
    # and the same over a real socket
    base = live_server(app)
    live = HubSimulator(base, STRONG_SECRET)
    assert live.call("my_orders", subject="t1:mallory").status == 403
    assert raw_request(base, "GET", "/orders/mine").status == 401
    assert live.call("my_orders", subject="t1:alice").json()["data"] == "alice's orders"


# -- a login decorator between the route and @tool -----------------------------------------


def test_login_decorator_between_route_and_tool_runs_after_the_gate():
    app, _ = base_app()
    ran: list[str] = []

    @app.get("/profile")
    @login_required
    @tool(scope="profile.read")
    def profile():
        ran.append("view")
        return subject_data()

    hub = hub_for(app)
    refused = hub.call("profile", subject="t1:mallory")
    assert refused.status == 403 and refused.json()["reason"] == "forbidden"
    unsigned = app.test_client().get("/profile")
    assert unsigned.status_code == 401 and unsigned.get_json()["reason"] == "missing_signature"
    assert ran == []
    admitted = hub.call("profile", subject="t1:alice")
    assert admitted.status == 200 and admitted.json()["data"] == "alice's orders"
    assert ran == ["view"]


# -- the gate calls the declared view itself only where nothing stands between ----------------


def counted(ran: list[str], refuse: bool = False) -> Any:
    """A decorator that copies everything of the view it wraps (``functools.wraps``)."""

    def decorate(view: Any) -> Any:
        @functools.wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            ran.append("decorator")
            if refuse:
                return jsonify(error="refused by the decorator"), 429
            return view(*args, **kwargs)

        return wrapper

    return decorate


def test_a_decorator_over_the_tool_copying_its_marks_is_never_skipped():
    app, _ = base_app()
    ran: list[str] = []

    @app.get("/limited")
    @counted(ran, refuse=True)
    @tool(scope="profile.read")
    def limited():
        ran.append("view")
        return subject_data()

    response = hub_for(app).call("limited", subject="t1:alice")
    assert response.status == 429, response.text
    assert ran == ["decorator"]


def test_a_view_function_wrapped_after_the_route_is_never_skipped():
    app, _ = base_app()
    ran: list[str] = []

    @app.get("/profile")
    @tool(scope="profile.read")
    def profile():
        ran.append("view")
        return subject_data()

    app.view_functions["profile"] = counted(ran)(app.view_functions["profile"])
    admitted = hub_for(app).call("profile", subject="t1:alice")
    assert admitted.status == 200 and admitted.json()["data"] == "alice's orders"
    assert ran == ["decorator", "view"]


def test_only_the_tool_wrapper_itself_hands_the_gate_its_view():
    from bailing_flask.declare import direct_view

    def view() -> Any:
        return {}

    async def async_view() -> Any:
        return {}

    wrapper = tool(scope="x.read")(view)
    assert direct_view(wrapper) is view
    assert direct_view(counted([])(wrapper)) is None  # the copied mark names the inner wrapper
    assert direct_view(view) is None
    assert direct_view(tool(scope="x.read")(async_view)) is None  # awaited through the wrapper


# -- MethodView.decorators ------------------------------------------------------------------


def test_methodview_decorators_run_only_for_admitted_calls():
    app, _ = base_app()
    ran: list[str] = []

    def tracing(view: Any) -> Any:
        @functools.wraps(view)
        def traced(*args: Any, **kwargs: Any) -> Any:
            ran.append("decorator")
            return view(*args, **kwargs)
        return traced

    @tool(scope="item.read")
    class ItemAPI(MethodView):
        decorators = [tracing, login_required]

        def get(self, item_id: int):
            ran.append("view")
            return subject_data()

    app.add_url_rule("/items/<int:item_id>", view_func=ItemAPI.as_view("item"))
    hub = hub_for(app)
    assert hub.call("item", {"item_id": 1}, subject="t1:mallory").status == 403
    assert app.test_client().get("/items/1").status_code == 401
    assert ran == []
    assert hub.call("item", {"item_id": 1}, subject="t1:alice").status == 200
    assert ran == ["decorator", "view"]


# -- before_request runs first and sets up what the loader uses ------------------------------


def test_blueprint_before_request_opens_the_connection_the_subject_loader_uses(tmp_path):
    database = tmp_path / "users.sqlite3"
    with sqlite3.connect(database) as db:
        db.execute("CREATE TABLE users (subject TEXT PRIMARY KEY, name TEXT)")
        db.execute("INSERT INTO users VALUES ('t1:alice', 'Alice')")
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    bailing = Bailing(app)
    order: list[str] = []
    api = Blueprint("api", __name__, url_prefix="/api/v1")

    @api.before_request
    def open_db() -> None:
        order.append("before_request")
        g.db = sqlite3.connect(database)

    @api.teardown_request
    def close_db(_: Any) -> None:
        db = g.pop("db", None)
        if db is not None:
            db.close()

    @bailing.subject_loader
    def load(subject: str) -> Any:
        order.append("loader")
        row = g.db.execute("SELECT name FROM users WHERE subject = ?", (subject,)).fetchone()
        return row[0] if row else None

    @bailing.authorizer
    def authorize(call: Any) -> bool:
        return call.user is not None

    @api.get("/me")
    @tool(scope="user.read")
    def me():
        order.append("view")
        return jsonify(name=get_current_call().user)  # type: ignore[union-attr]

    app.register_blueprint(api)
    hub = hub_for(app)
    response = hub.call("api_me", subject="t1:alice")
    assert response.status == 200 and response.json() == {"name": "Alice"}
    assert order == ["before_request", "loader", "view"]
    order.clear()
    assert hub.call("api_me", subject="t1:bob").status == 403
    assert order == ["before_request", "loader"]


# -- a decorator that hides the declaration fails closed --------------------------------------


def test_a_decorator_without_functools_wraps_fails_closed(caplog):
    app, _ = base_app()
    ran: list[str] = []

    def careless(view: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:  # no functools.wraps
            return view(*args, **kwargs)
        return wrapper

    @app.get("/hidden")
    @careless
    @tool(scope="x.read")
    def hidden():
        ran.append("view")
        return "secret"

    response = app.test_client().get("/hidden")
    assert response.status_code == 500
    assert response.get_json()["reason"] == "tool_not_registered"
    assert ran == []
    assert "functools.wraps" in caplog.text


@pytest.mark.parametrize("allowed", [True, False])
def test_after_request_reads_the_decision(allowed):
    app, _ = base_app()
    seen: list[Any] = []

    @app.get("/thing")
    @tool(scope="x.read")
    def thing():
        return "ok"

    @app.after_request
    def record(response: Any) -> Any:
        call = get_current_call()
        if request.path == "/thing" and call is not None:
            seen.append((response.status_code, call.authorized, call.user))
        return response

    subject = "t1:alice" if allowed else "t1:mallory"
    hub_for(app).call("thing", subject=subject)
    expected = (200, True, subject) if allowed else (403, False, subject)
    assert seen == [expected]
