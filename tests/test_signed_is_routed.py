"""What runs is the request that was signed.

A WSGI middleware installed inside the verifier (before ``Bailing(app)``
wrapped ``app.wsgi_app``) sees the request after its signature was checked
and can change it. The gate compares the routed method, path, query and
body with the verified ones and refuses a call that differs
(``request_altered``), while ``%2F``, non-ASCII paths and prefix mounts,
which only look different, keep passing.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from flask import Flask, jsonify, request
from werkzeug.middleware.dispatcher import DispatcherMiddleware
from werkzeug.middleware.proxy_fix import ProxyFix

from bailing_flask import Bailing, get_current_call, tool
from bailing_flask.integrations import exempt_hub_requests
from bailing_flask.testing import HubSimulator, signed_headers

from .helpers import STRONG_SECRET, raw_request


class HTTPMethodOverrideMiddleware:
    """The method-override middleware of Flask's documentation patterns."""

    allowed_methods = frozenset(["GET", "HEAD", "POST", "DELETE", "PUT", "PATCH", "OPTIONS"])
    bodyless_methods = frozenset(["GET", "HEAD", "OPTIONS", "DELETE"])

    def __init__(self, app: Any) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        method = environ.get("HTTP_X_HTTP_METHOD_OVERRIDE", "").upper()
        if method in self.allowed_methods:
            environ["REQUEST_METHOD"] = method
        if method in self.bodyless_methods:
            environ["CONTENT_LENGTH"] = "0"
        return self.app(environ, start_response)


class Rewrite:
    """A middleware that changes one environ key after verification."""

    def __init__(self, app: Any, key: str, value: Any) -> None:
        self.app, self.key, self.value = app, key, value

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        environ[self.key] = self.value(environ) if callable(self.value) else self.value
        return self.app(environ, start_response)


def make_app(inner: Any = None) -> tuple[Flask, list[str]]:
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    ran: list[str] = []
    if inner is not None:
        app.wsgi_app = inner(app.wsgi_app)  # installed before Bailing: inside the verifier
    bailing = Bailing(app)
    bailing.authorizer(lambda call: True)

    @app.post("/mo/item")
    @tool(scope="item.write", name="item_update")
    def item_update():
        ran.append("update")
        return jsonify(ok=True)

    @app.delete("/mo/item")
    @tool(scope="item.delete", name="item_delete", risk="high")
    def item_delete():
        ran.append("DELETE")
        return jsonify(deleted=True)

    @app.get("/files/<path:name>")
    @tool(scope="file.read")
    def file_get(name):
        ran.append(name)
        return jsonify(name=name)

    @app.get("/other")
    @tool(scope="file.read")
    def other():
        ran.append("other")
        return jsonify(other=True)

    return app, ran


def test_method_override_middleware_inside_the_verifier_cannot_run_the_delete_tool(live_server):
    app, ran = make_app(HTTPMethodOverrideMiddleware)
    base = live_server(app)
    headers = signed_headers(STRONG_SECRET, "POST", "/mo/item", b"{}", subject="t1:u1")
    headers.update({"Content-Type": "application/json", "X-HTTP-Method-Override": "DELETE"})
    response = raw_request(base, "POST", "/mo/item", headers, b"{}")
    assert response.status == 401
    assert b'"request_altered"' in response.body
    assert b'"part":"method"' in response.body
    assert ran == []
    # without the override header the same middleware changes nothing, and the call runs
    del headers["X-HTTP-Method-Override"]
    assert raw_request(base, "POST", "/mo/item", headers, b"{}").status == 200
    assert ran == ["update"]


def test_method_override_outside_the_verifier_breaks_the_signature():
    app, ran = make_app()
    app.wsgi_app = HTTPMethodOverrideMiddleware(app.wsgi_app)  # after Bailing: outside
    headers = signed_headers(STRONG_SECRET, "POST", "/mo/item", b"{}", subject="t1:u1")
    headers["X-HTTP-Method-Override"] = "DELETE"
    response = app.test_client().post("/mo/item", data=b"{}", headers=headers,
                                      content_type="application/json")
    assert response.status_code == 401
    assert response.get_json()["reason"] == "bad_signature"
    assert ran == []


@pytest.mark.parametrize("key,value,part", [
    ("PATH_INFO", "/other", "path"),
    ("QUERY_STRING", "extra=1", "query"),
    ("wsgi.input", lambda environ: io.BytesIO(b'{"x":1}'), "body"),
    ("CONTENT_LENGTH", "1", "body"),
])
def test_a_middleware_that_rewrites_the_request_after_verification_is_refused(key, value, part):
    app, ran = make_app(lambda wsgi: Rewrite(wsgi, key, value))
    headers = signed_headers(STRONG_SECRET, "POST", "/mo/item", b"{}", subject="t1:u1")
    response = app.test_client().post("/mo/item", data=b"{}", headers=headers,
                                      content_type="application/json",
                                      environ_overrides={"RAW_URI": "/mo/item"})
    if part == "path":  # now routed to GET-only /other: Flask says 405 before any tool runs
        assert response.status_code in (401, 405)
    else:
        assert response.status_code == 401
        assert response.get_json() == {**response.get_json(), "reason": "request_altered", "part": part}
    assert ran == []


def test_a_path_rewrite_to_another_tool_is_refused(live_server):
    app, ran = make_app(lambda wsgi: Rewrite(wsgi, "PATH_INFO", "/other"))
    base = live_server(app)
    response = raw_request(base, "GET", "/files/a.txt",
                           signed_headers(STRONG_SECRET, "GET", "/files/a.txt", subject="t1:u1"))
    assert response.status == 401
    assert b'"part":"path"' in response.body
    assert ran == []


@pytest.mark.parametrize("wire", [
    "/files/reports%2F2024%3Fv%3D1%20final%232.pdf",
    "/files/%E5%95%86%E5%93%81.txt",
    "/files/a+b~c.txt",
])
def test_encoded_paths_still_compare_equal(live_server, wire):
    app, ran = make_app()
    base = live_server(app)
    response = raw_request(base, "GET", wire, signed_headers(STRONG_SECRET, "GET", wire, subject="t1:u1"))
    assert response.status == 200, response.body
    assert len(ran) == 1


def test_a_prefix_mount_still_compares_equal(live_server):
    app, ran = make_app()
    mounted = DispatcherMiddleware(lambda e, s: [], {"/api": app})
    base = live_server(mounted)
    headers = signed_headers(STRONG_SECRET, "GET", "/files/x.txt", subject="t1:u1")
    response = raw_request(base, "GET", "/api/files/x.txt", headers)
    assert response.status == 200, response.body
    assert ran == ["x.txt"]


def test_proxy_fix_inside_the_verifier_changes_nothing_that_is_signed(live_server):
    app, ran = make_app(lambda wsgi: ProxyFix(wsgi, x_for=1, x_proto=1, x_host=1, x_prefix=1))
    base = live_server(app)
    headers = signed_headers(STRONG_SECRET, "GET", "/files/x.txt", subject="t1:u1")
    headers.update({"X-Forwarded-For": "203.0.113.9", "X-Forwarded-Prefix": "/api",
                    "X-Forwarded-Proto": "https"})
    response = raw_request(base, "GET", "/files/x.txt", headers)
    assert response.status == 200, response.body
    assert ran == ["x.txt"]


def test_the_hub_simulator_still_calls_every_tool():
    app, ran = make_app(HTTPMethodOverrideMiddleware)
    hub = HubSimulator(app, STRONG_SECRET)
    assert hub.call("item_delete", subject="t1:u1").status == 200
    assert hub.call("file_get", {"name": "a/b c.txt"}, subject="t1:u1").status == 200
    assert ran == ["DELETE", "a/b c.txt"]


def test_a_forged_verified_call_without_the_middleware_snapshot_is_refused():
    """Something that puts a VerifiedCall into the environ by hand does not get past the gate."""
    from bailing_flask.wire.middleware import ENVIRON_KEY, UnsignedHeaders, VerifiedCall

    app, ran = make_app()

    class Inject:
        def __init__(self, wsgi: Any) -> None:
            self.wsgi = wsgi

        def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
            environ[ENVIRON_KEY] = VerifiedCall("tool", "t1:u1", "job", "0", "1", "GET", "/other",
                                                "e3b0", "sha256=" + "0" * 64, UnsignedHeaders())
            return self.wsgi(environ, start_response)

    app.wsgi_app = Inject(app.wsgi_app.app)  # type: ignore[attr-defined]  # replace the verifier
    response = app.test_client().get("/other")
    assert response.status_code == 401
    assert response.get_json()["part"] == "request"
    assert ran == []


def _rerouted_app() -> tuple[Flask, list[str]]:
    """A tool route's signed request rerouted, inside the verifier, to an ordinary route."""
    app, ran = make_app(lambda wsgi: Rewrite(wsgi, "PATH_INFO", "/account/delete"))

    @app.before_request
    def require_session() -> Any:  # another package's guard, exempted for hub requests
        if request.path.startswith("/account/"):
            return jsonify(error="login required"), 401
        return None

    exempt_hub_requests(app, require_session)

    @app.get("/account/delete")
    def account_delete() -> Any:  # an ordinary route that trusts a verified caller
        call = get_current_call()
        ran.append(f"account_delete for {call.subject if call else None}")
        return jsonify(subject=call.subject if call else None)

    return app, ran


def test_a_signed_request_rerouted_to_an_ordinary_route_carries_no_verified_call():
    app, ran = _rerouted_app()
    app.before_request_funcs[None].clear()  # no guard: the route itself reads the call
    headers = signed_headers(STRONG_SECRET, "GET", "/files/a.txt", subject="t1:alice")
    response = app.test_client().get("/files/a.txt", headers=headers,
                                     environ_overrides={"RAW_URI": "/files/a.txt"})
    assert response.get_json() == {"subject": None}
    assert ran == ["account_delete for None"]


def test_a_signed_request_rerouted_to_an_ordinary_route_meets_the_exempted_guard(live_server):
    app, ran = _rerouted_app()
    base = live_server(app)
    response = raw_request(base, "GET", "/files/a.txt",
                           signed_headers(STRONG_SECRET, "GET", "/files/a.txt", subject="t1:alice"))
    assert response.status == 401
    assert b"login required" in response.body
    assert ran == []


def test_the_exempted_guard_still_steps_aside_for_the_signed_call_itself(live_server):
    app, ran = make_app()

    @app.before_request
    def require_session() -> Any:
        return jsonify(error="login required"), 401

    exempt_hub_requests(app, require_session)
    base = live_server(app)
    response = raw_request(base, "GET", "/files/a.txt",
                           signed_headers(STRONG_SECRET, "GET", "/files/a.txt", subject="t1:alice"))
    assert response.status == 200, response.body
    assert ran == ["a.txt"]
