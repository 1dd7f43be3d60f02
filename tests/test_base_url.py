"""BAILING_BASE_URL: the hub's base_url stated once, catalog paths and signed paths derived from it.

The hub requests ``base_url + catalog path`` and signs the catalog path.
These tests deploy one shop app under ``/api`` in the three ways the issue
names -- Werkzeug's ``DispatcherMiddleware``, a real prefix-stripping proxy,
gunicorn with ``SCRIPT_NAME`` -- with the hub's base_url either the bare
origin or origin + ``/api``, and call it over sockets exactly as the hub does.
"""

from __future__ import annotations

import json

import pytest
from flask import Blueprint, Flask, jsonify
from werkzeug.exceptions import NotFound
from werkzeug.middleware.dispatcher import DispatcherMiddleware

from bailing_flask import Bailing, ConfigurationError, tool
from bailing_flask.doctor import run_doctor
from bailing_flask.testing import HubSimulator

from .helpers import STRONG_SECRET
from .apps.doctor_apps import ForwardingProxy, create_shop_app, strip_prefix
from bailing_flask._state import state_of
from bailing_flask._pipeline.catalog import catalog_of

ORIGIN = "https://shop.example.com"
CATALOG = "/.well-known/bailing/tools.json"
PROBE = "/.well-known/bailing/authz-probe"


def exercise(hub: HubSimulator, tool_prefix: str) -> None:
    """A read, a side effect and its replay, and the probe: all as the hub sends them."""
    document = hub.document()
    assert sorted(document["paths"]) == [tool_prefix + p for p in ("/me", "/orders", "/refunds")]
    assert document["x-bailing-authz-probe"]["path"] == tool_prefix + PROBE
    read = hub.call("order_search", {"keyword": "lamp"}, subject="t1:u1")
    assert read.status == 200, read.text
    assert hub.call("who_am_i", subject="t1:u1").json() == {"subject": "t1:u1"}
    request = hub.build_call("refund_create", {"order_id": 5, "reason": "late"}, subject="t1:u1")
    assert request.path_with_query == tool_prefix + "/refunds"  # what is signed
    first, again = hub.replay(request), hub.replay(request)
    assert (first.status, again.status) == (201, 201), again.text
    assert again.headers.get("Idempotent-Replayed") == "true"
    probe = hub.probe()
    assert probe.status == 200 and probe.json() == {"authorized": False}


# --- the setting ---------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [
    "shop.example.com/api", "ftp://shop.example.com", "https://", "https://shop.example.com/api?v=1",
    "https://user:pw@shop.example.com", "https://shop.example.com/a b", "https://shop.example.com/./api",
    "https://shop.example.com/商品", 42,
])
def test_a_base_url_the_hub_would_send_differently_is_refused_at_start_up(value):
    with pytest.raises(ConfigurationError) as info:
        create_shop_app(BAILING_BASE_URL=value)
    assert "BAILING_BASE_URL" in str(info.value)
    assert "pw" not in str(info.value)


def test_a_base_url_that_matches_the_mount_changes_nothing():
    plain = catalog_of(state_of(create_shop_app())).served_bytes
    for value in (ORIGIN, ORIGIN + "/", "http://127.0.0.1:8000"):
        app = create_shop_app(BAILING_BASE_URL=value)
        assert catalog_of(state_of(app)).served_bytes == plain


# --- DispatcherMiddleware ---------------------------------------------------------------------------


@pytest.mark.parametrize("base_path", ["", "/api"])
def test_dispatcher_mount_with_either_base_url(live_server, base_path):
    app = create_shop_app(BAILING_BASE_URL=ORIGIN + base_path)
    base = live_server(DispatcherMiddleware(NotFound(), {"/api": app}))
    hub = HubSimulator(base + base_path, STRONG_SECRET, catalog_url=base + "/api" + CATALOG)
    exercise(hub, "/api" if base_path == "" else "")


def test_without_the_setting_an_origin_base_url_misses_every_tool(live_server):
    """The silent failure: the catalog verifies and compiles, every call then 404s."""
    base = live_server(DispatcherMiddleware(NotFound(), {"/api": create_shop_app()}))
    hub = HubSimulator(base, STRONG_SECRET, catalog_url=base + "/api" + CATALOG)
    assert sorted(hub.document()["paths"]) == ["/me", "/orders", "/refunds"]
    assert hub.call("order_search", {}, subject="t1:u1").status == 404


# --- a prefix-stripping proxy ---------------------------------------------------------------------


@pytest.mark.parametrize("base_path", ["", "/api"])
def test_prefix_stripping_proxy_with_either_base_url(live_server, base_path):
    app = create_shop_app(BAILING_BASE_URL=ORIGIN + base_path, BAILING_PUBLIC_PREFIX="/api")
    proxy = live_server(ForwardingProxy(live_server(app), strip_prefix("/api")))
    hub = HubSimulator(proxy + base_path, STRONG_SECRET, catalog_url=proxy + "/api" + CATALOG)
    exercise(hub, "/api" if base_path == "" else "")


def test_prefix_stripping_wsgi_wrapper_in_process():
    """The same, with the proxy as a WSGI wrapper and the hub in-process."""
    app = create_shop_app(BAILING_BASE_URL=ORIGIN, BAILING_PUBLIC_PREFIX="/api")
    exercise(HubSimulator(app, STRONG_SECRET), "/api")


# --- gunicorn with SCRIPT_NAME -------------------------------------------------------------------


@pytest.mark.parametrize("base_path", ["", "/api"])
def test_gunicorn_script_name_with_either_base_url(gunicorn, base_path):
    spec = f"tests.apps.doctor_apps:create_shop_app(BAILING_BASE_URL={ORIGIN + base_path!r})"
    base = gunicorn(spec, env={"SCRIPT_NAME": "/api"})
    hub = HubSimulator(base + base_path, STRONG_SECRET, catalog_url=base + "/api" + CATALOG)
    exercise(hub, "/api" if base_path == "" else "")


# --- a base URL deeper than the mount ---------------------------------------------------------------


def deep_app() -> Flask:
    """The app at the root, its tools in an /api blueprint, the hub's base_url origin + /api."""
    app = Flask("deep")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://",
                      BAILING_BASE_URL=ORIGIN + "/api")
    bailing = Bailing(app)
    bailing.authorizer(lambda call: call.subject == "t1:u1")
    api = Blueprint("api", __name__, url_prefix="/api")

    @api.get("/orders")
    @tool(name="order_list", scope="order.read")
    def order_list():
        """List orders."""
        return jsonify(orders=[])

    @app.get("/health")
    @tool(scope="ops.read")
    def health():
        """Outside the base URL: the hub cannot reach it."""
        return jsonify(ok=True)

    app.register_blueprint(api)
    return app


def test_routes_under_a_deeper_base_url_lose_its_path_and_the_rest_are_errors(live_server):
    app = deep_app()
    catalog = catalog_of(state_of(app))
    assert list(catalog.served["paths"]) == ["/orders"]
    assert "x-bailing-authz-probe" not in catalog.served
    codes = {(f.code, f.path) for f in catalog.findings}
    assert ("outside_base_url", "GET /health") in codes
    assert ("authz_probe_outside_base_url", "-") in codes
    assert catalog.excluded == ["GET /health"]
    base = live_server(app)
    hub = HubSimulator(base + "/api", STRONG_SECRET, catalog_url=base + CATALOG)
    response = hub.call("order_list", subject="t1:u1")
    assert response.status == 200, response.text
    assert HubSimulator(app, STRONG_SECRET).call("order_list", subject="t1:u1").status == 200


# --- what to register ---------------------------------------------------------------------------------


def test_check_prints_the_base_url_and_spec_url_to_register():
    runner = create_shop_app(BAILING_BASE_URL=ORIGIN, APPLICATION_ROOT="/api").test_cli_runner()
    result = runner.invoke(args=["bailing", "check"])
    assert result.exit_code == 0, result.output
    assert f"register in the hub: base_url {ORIGIN}  (BAILING_BASE_URL)" in result.output
    assert f"spec_url {ORIGIN}/api{CATALOG}" in result.output
    plain = create_shop_app(BAILING_PUBLIC_PREFIX="/api").test_cli_runner()
    result = plain.invoke(args=["bailing", "check"])
    assert "base_url https://<public host>/api  (where the app's root is served" in result.output
    listing = runner.invoke(args=["bailing", "tools"]).output
    assert "/api/orders" in listing


def test_cli_call_against_an_origin_base_url_with_the_spec_url(live_server):
    app = create_shop_app(BAILING_BASE_URL=ORIGIN)
    base = live_server(DispatcherMiddleware(NotFound(), {"/api": app}))
    result = app.test_cli_runner().invoke(args=[
        "bailing", "call", "order_search", "{}", "--subject", "t1:u1", "--url", base,
        "--catalog-url", base + "/api" + CATALOG])
    assert result.exit_code == 0, result.output
    assert "> GET /api/orders" in result.output and "< HTTP 200" in result.output


def test_doctor_prints_and_checks_the_base_url_to_register(live_server):
    """The doctor of the app itself knows BAILING_BASE_URL and fails a base_url that misses it."""
    holder: dict[str, Flask] = {}
    base = live_server(lambda environ, start: holder["site"](environ, start))
    app = create_shop_app(BAILING_BASE_URL=base)
    holder["site"] = DispatcherMiddleware(NotFound(), {"/api": app})
    runner = app.test_cli_runner()
    good = runner.invoke(args=["bailing", "doctor", "--catalog-url", base + "/api" + CATALOG,
                               "--subject", "t1:u1", "--json"])
    assert good.exit_code == 0, good.output
    report = json.loads(good.output)
    assert report["base_url"] == base and report["base_url_to_register"] == base
    assert report["checks"][0]["name"] == "base_url" and report["checks"][0]["status"] == "pass"
    wrong = runner.invoke(args=["bailing", "doctor", "--url", base + "/api",
                                "--catalog-url", base + "/api" + CATALOG])
    assert wrong.exit_code == 1
    assert f"register base_url {base}  (BAILING_BASE_URL)" in wrong.output
    assert "FAIL  base_url" in wrong.output and f"Register base_url {base} in the hub" in wrong.output


def test_doctor_without_the_setting_reads_the_base_url_off_the_catalog_url(live_server):
    app = create_shop_app()
    base = live_server(DispatcherMiddleware(NotFound(), {"/api": app}))
    result = app.test_cli_runner().invoke(
        args=["bailing", "doctor", "--url", base, "--catalog-url", base + "/api" + CATALOG])
    assert result.exit_code == 1
    assert f"register base_url {base}/api" in result.output
    assert "FAIL  base_url" in result.output
    report = run_doctor(base + "/api", STRONG_SECRET, catalog_url=base + "/api" + CATALOG,
                        expected_base_url=base + "/api", subject="t1:u1")
    assert report.ok, report.render()
