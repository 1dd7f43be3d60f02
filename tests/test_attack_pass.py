"""Attacks on issue 10's guarantees that still get through (review branch ``attack-10``).

Each test is one reproduced attack and fails on the commit under review:

* the gate's fallback in ``run_declared_view`` runs a tool view *without*
  any decision when the request reaches it on a method the registry left
  out (an explicit ``OPTIONS``) or from another endpoint (a non-tool view or
  an error handler calling the tool's function);
* ``install_gates`` trusts a ``__bailing_gate__`` mark that
  ``functools.wraps`` copies onto any wrapper, so a caching wrapper put on
  the endpoint after the gates were installed keeps running *before* the
  gate even when the registry is rebuilt;
* the hub-callback body bound in ``BailingMiddleware._pass_elsewhere`` is
  keyed on the exact ``PATH_INFO`` and the exact method ``"POST"``, while
  Flask routes ``//path``, ``post`` and an overridden method to the same
  callback endpoint, which then reads the whole body before it checks the
  signature.
"""

from __future__ import annotations

import io
import json
import socket
import time
import urllib.request
from typing import Any

import pytest
from flask import Flask, jsonify
from flask_caching import Cache

from bailing_flask import Bailing, get_current_call, tool
from bailing_flask.testing import HubSimulator

from ._servers import post_chunked_until_refused
from .helpers import STRONG_SECRET, raw_request
from .test_callback_limits import CLIENT_TOKEN, JOB_PATH, LIMIT, CountingInput
from .test_callback_limits import make_app as callback_app
from .test_signed_is_routed import HTTPMethodOverrideMiddleware
from bailing_flask._state import state_of
from bailing_flask._pipeline.registry import registry_of

SECRET_ORDER = b"order 1 of alice: 3x gold bars"


def tool_app() -> tuple[Flask, Bailing, list[str]]:
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    bailing = Bailing(app)
    bailing.subject_loader(lambda subject: subject)
    bailing.authorizer(lambda call: call.subject == "t1:alice")
    return app, bailing, []


# -- the gate's fallback fails open ------------------------------------------------------


def test_unsigned_options_request_runs_a_tool_view_whose_route_lists_options(live_server):
    """``methods=["GET", "OPTIONS"]`` (a common hand-rolled CORS set-up) turns off
    Flask's automatic OPTIONS answer, so Flask dispatches OPTIONS to the view.
    The registry drops OPTIONS from every rule, ``gated_view`` finds no tool for
    ``(endpoint, "OPTIONS")`` and calls the registered view, and
    ``run_declared_view`` sees a declaration the registry "saw" and runs the view
    with no gate at all: an unsigned ``OPTIONS`` gets the tool's data (HTTP 200).
    """
    app, _, ran = tool_app()

    @app.route("/orders/<int:order_id>", methods=["GET", "OPTIONS"])
    @tool(scope="order.read", subject_required=True)
    def order_get(order_id: int) -> Any:
        ran.append("view")
        return SECRET_ORDER

    base = live_server(app)
    assert raw_request(base, "GET", "/orders/1").status == 401  # the gate stands in front of GET
    response = raw_request(base, "OPTIONS", "/orders/1")
    assert SECRET_ORDER not in response.body
    assert ran == []
    assert response.status in (401, 403, 405)


@pytest.mark.parametrize("caller", ["alias_view", "error_handler"])
def test_a_tool_function_called_from_another_endpoint_runs_without_the_gate(live_server, caller):
    """A tool reached without its endpoint's gate ("called the tool's function from another
    view") once ran ungated, because the package knew the declaration from a route. A legacy
    alias route that delegates to the tool, or a 404 handler that renders it, would serve the
    tool's data to an unsigned request; it fails closed instead.
    """
    app, _, ran = tool_app()

    @app.get("/orders/<int:order_id>")
    @tool(scope="order.read", subject_required=True)
    def order_get(order_id: int) -> Any:
        ran.append("view")
        return SECRET_ORDER

    if caller == "alias_view":

        @app.get("/legacy/orders/<int:order_id>")
        def legacy(order_id: int) -> Any:
            return order_get(order_id)

        target = "/legacy/orders/1"
    else:

        @app.errorhandler(404)
        def not_found(error: Any) -> Any:
            return order_get(1)

        target = "/no/such/page"

    base = live_server(app)
    assert raw_request(base, "GET", "/orders/1").status == 401
    response = raw_request(base, "GET", target)
    assert SECRET_ORDER not in response.body
    assert ran == []


def test_a_caching_wrapper_added_after_the_gates_keeps_running_before_the_gate():
    """``install_gates`` skips an endpoint whose view carries ``__bailing_gate__``.
    ``functools.wraps`` (used by Flask-Caching and every well-behaved decorator)
    copies that attribute onto the wrapper, so once the gates were installed
    (first request, ``HubSimulator``, ``flask bailing check``...), wrapping the
    endpoint's view and adding a route makes the registry rebuild, yet the
    wrapper is taken for the gate and stays in front of it. Alice's cached answer
    is then served to mallory and to an unsigned browser.
    """
    app, bailing, ran = tool_app()
    cache = Cache(app, config={"CACHE_TYPE": "SimpleCache"})

    @app.get("/orders/mine")
    @tool(scope="order.read", subject_required=True)
    def my_orders() -> Any:
        ran.append("view")
        call = get_current_call()
        return jsonify(data=f"orders of {call.subject if call else 'nobody'}")

    registry_of(state_of(app))  # the gates are installed (as on a first request)
    app.view_functions["my_orders"] = cache.cached(timeout=300)(app.view_functions["my_orders"])

    @app.get("/health")
    def health() -> Any:  # a route added later: the registry is rebuilt
        return "ok"

    hub = HubSimulator(app, STRONG_SECRET)
    assert hub.call("my_orders", subject="t1:alice").json()["data"] == "orders of t1:alice"
    mallory = hub.call("my_orders", subject="t1:mallory")
    assert mallory.status == 403, mallory.text
    browser = app.test_client().get("/orders/mine")
    assert browser.status_code == 401, browser.data
    assert ran == ["view"]


# -- hub callback bodies read past the bound -----------------------------------------------


def _wsgi_call(app: Flask, path: str, method: str, stream: Any) -> tuple[int, dict[str, Any]]:
    """Call the app's WSGI stack with the environ a server builds for this request."""
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "SCRIPT_NAME": "", "QUERY_STRING": "",
               "SERVER_NAME": "localhost", "SERVER_PORT": "80", "SERVER_PROTOCOL": "HTTP/1.1",
               "wsgi.url_scheme": "http", "wsgi.input": stream, "wsgi.errors": io.StringIO(),
               "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(stream.total),
               "HTTP_X_BAILING_TIMESTAMP": str(int(time.time() * 1000))}
    status: list[str] = []
    body = b"".join(app.wsgi_app(environ, lambda s, h, *a: status.append(s)))  # type: ignore[arg-type]
    return int(status[0].split()[0]), json.loads(body)


@pytest.mark.parametrize("path,method", [
    ("//" + JOB_PATH.lstrip("/"), "POST"),   # gunicorn keeps the leading "//" in PATH_INFO
    ("///" + JOB_PATH.lstrip("/"), "POST"),
    (JOB_PATH, "post"),                      # werkzeug's server passes the method as sent
], ids=["double-slash", "triple-slash", "lowercase-post"])
def test_callback_path_variants_flask_routes_to_the_callback_are_bounded_too(path, method):
    """Flask strips leading slashes and upper-cases the method when routing, so
    these requests reach the job callback endpoint, which reads the whole body
    before it checks the signature; the middleware bounds only ``PATH_INFO ==
    path`` with ``REQUEST_METHOD == "POST"``. An unsigned 16 MiB body is read in
    full (limit: 64 KiB).
    """
    handled: list[Any] = []
    stream = CountingInput()
    status, payload = _wsgi_call(callback_app(handled), path, method, stream)
    assert stream.read_bytes <= LIMIT + 64 * 1024, (status, payload)
    assert status == 413
    assert handled == []


def test_lowercase_post_to_a_callback_is_bounded_on_the_werkzeug_server(live_server):
    """On Werkzeug's server (which, unlike gunicorn, accepts ``post``) a 1 MiB
    unsigned callback body is read in full past the 64 KiB bound: the answer is
    the endpoint's 401 after reading it, never the middleware's 413."""
    base = live_server(callback_app([]))
    body = b"x" * (1024 * 1024)
    response = raw_request(base, "post", JOB_PATH, {"Content-Type": "application/json"}, body)
    assert response.status == 413, response.body


def test_method_override_inside_the_verifier_smuggles_an_unbounded_callback_body(live_server):
    """With Flask's documented method-override middleware inside the verifier (the
    T33 set-up the gate defends tool calls against), a ``GET`` carrying
    ``X-HTTP-Method-Override: POST`` is not bounded (not ``POST`` at the
    middleware) and becomes a POST to the callback endpoint, which reads all of it.
    """
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=STRONG_SECRET, BAILING_CLIENT_TOKENS=[CLIENT_TOKEN],
                      BAILING_STORE="memory://", BAILING_CALLBACK_MAX_BODY_SIZE=LIMIT)
    app.wsgi_app = HTTPMethodOverrideMiddleware(app.wsgi_app)  # type: ignore[method-assign]
    bailing = Bailing(app)
    bailing.job_finished(lambda job: None)
    base = live_server(app)
    body = b"x" * (1024 * 1024)
    response = raw_request(base, "GET", JOB_PATH, {"Content-Type": "application/json",
                                                   "X-HTTP-Method-Override": "POST"}, body)
    assert response.status == 413, response.body


def test_three_huge_unsigned_callbacks_with_a_double_slash_leave_a_gunicorn_worker_flat(gunicorn):
    """Issue 10's memory attack again, with ``//`` in front of the callback path
    and no signature header: gunicorn keeps ``//`` in ``PATH_INFO``, the middleware
    does not recognise the callback path, Flask routes it to the callback anyway,
    and the worker's peak memory grows by the full 120 MiB body."""
    base = gunicorn("tests.apps.live_apps:callback_app()",
                    env={"BAILING_TEST_SECRET": STRONG_SECRET, "BAILING_TEST_CLIENT_TOKEN": CLIENT_TOKEN})

    def peak_kib() -> int:
        with urllib.request.urlopen(base + "/peak-rss", timeout=60) as response:
            return int(json.load(response)["kib"])

    before = peak_kib()
    answers = [post_chunked_until_refused(base, "/" + JOB_PATH, 120 * 1024 * 1024) for _ in range(3)]
    after = peak_kib()
    assert after - before < 16 * 1024, (before, after, [a[:40] for a in answers])
    assert all(b" 413 " in answer for answer in answers), answers
