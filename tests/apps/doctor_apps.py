"""Deployments for the doctor's tests: a healthy app and the things put in front of it.

Everything here runs behind real sockets (``live_server``): the proxies
forward over HTTP with ``http.client`` exactly like nginx or a CDN would,
so the doctor sees what the hub would see.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from flask import Flask, jsonify
from pydantic import BaseModel, Field

from bailing_flask import Bailing, current_call, get_current_subject, tool
from bailing_flask.wire import BailingMiddleware
from bailing_flask.wire.middleware import ENVIRON_KEY

from ..helpers import STRONG_SECRET

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

USERS = {"t1:u1": {"order.read", "order.write"}, "t1:u2": {"order.read"}}


class OrderQuery(BaseModel):
    keyword: str | None = Field(None, description="Text matched against order titles.", max_length=50)
    page: int = Field(1, ge=1, le=100, description="Page number, from 1.")


class RefundBody(BaseModel):
    order_id: int = Field(description="The order to refund.", ge=1, le=10**9)
    reason: str = Field(description="Why the customer wants a refund.", max_length=200)


def create_shop_app(**config: Any) -> Flask:
    """A small, correctly integrated shop whose catalog lints clean."""
    app = Flask("doctor_shop")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://", **config)
    bailing = Bailing(app)

    @bailing.subject_loader
    def load(subject: str) -> set[str] | None:
        return USERS.get(subject)

    @bailing.authorizer
    def authorize(call) -> bool:
        permissions = call.user
        if permissions is None:
            return False
        return call.tool.scope in permissions

    @app.get("/orders")
    @tool(scope="order.read", query=OrderQuery, subject_required=True)
    def order_search():
        """Search the acting user's orders."""
        return jsonify(keyword=current_call.query.keyword, page=current_call.query.page, orders=[])

    @app.get("/me")
    @tool(scope="order.read", subject_required=True)
    def who_am_i():
        """Who is acting (the signed subject)."""
        return jsonify(subject=get_current_subject())

    @app.post("/refunds")
    @tool(scope="order.write", body=RefundBody, subject_required=True)
    def refund_create():
        """Ask for a refund of one order."""
        return jsonify(ok=True, status="submitted", order_id=current_call.body.order_id), 201

    return app


# --- things in front of the app -------------------------------------------------------------

_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
     "proxy-authenticate", "proxy-authorization", "date", "server"}
)


def _raw_target(environ: dict[str, Any]) -> str:
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    if raw:
        return str(raw)
    query = environ.get("QUERY_STRING")
    return environ.get("PATH_INFO", "/") + ("?" + query if query else "")


def _request_headers(environ: dict[str, Any]) -> list[tuple[str, str]]:
    headers = []
    for key, value in environ.items():
        if key.startswith("HTTP_") and key not in ("HTTP_HOST", "HTTP_CONNECTION"):
            headers.append((key[5:].replace("_", "-").title(), value))
    if environ.get("CONTENT_TYPE"):
        headers.append(("Content-Type", environ["CONTENT_TYPE"]))
    return headers


class ForwardingProxy:
    """A reverse proxy: forwards to ``upstream`` over HTTP, rewriting the request-target.

    ``rewrite(target) -> new target`` (``None`` answers 404, like an nginx
    without a matching ``location``).
    """

    def __init__(self, upstream: str, rewrite: Callable[[str], str | None] = lambda t: t) -> None:
        host, port = upstream.split("//", 1)[1].split(":")
        self.host, self.port = host, int(port)
        self.rewrite = rewrite

    def forward(self, environ: dict[str, Any], target: str) -> tuple[int, str, list[tuple[str, str]], bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
        try:
            conn.putrequest(environ["REQUEST_METHOD"], target, skip_accept_encoding=True)
            for name, value in _request_headers(environ):
                conn.putheader(name, value.encode("latin-1"))
            if body or environ["REQUEST_METHOD"] not in ("GET", "HEAD"):
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body or None)
            response = conn.getresponse()
            data = response.read()
            headers = [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP]
            return response.status, response.reason, headers, data
        finally:
            conn.close()

    def respond(self, start_response: Callable[..., Any], status: int, reason: str,
                headers: list[tuple[str, str]], body: bytes) -> list[bytes]:
        headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
        headers.append(("Content-Length", str(len(body))))
        start_response(f"{status} {reason}", headers)
        return [body]

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        target = self.rewrite(_raw_target(environ))
        if target is None:
            return self.respond(start_response, 404, "Not Found", [("Content-Type", "text/html")],
                                b"<html><body><h1>404 Not Found</h1>nginx</body></html>")
        return self.respond(start_response, *self.forward(environ, target))


def strip_prefix(prefix: str) -> Callable[[str], str | None]:
    """``location /api/ { proxy_pass http://app/; }``: strip ``prefix``, 404 elsewhere."""

    def rewrite(target: str) -> str | None:
        if target == prefix or target.startswith((prefix + "/", prefix + "?")):
            rest = target[len(prefix):]
            return rest if rest.startswith("/") else "/" + rest
        return None

    return rewrite


class CachingProxy(ForwardingProxy):
    """A CDN that ignores Cache-Control: the first 200 to a GET is served to everyone."""

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream)
        self.cache: dict[str, tuple[float, int, str, list[tuple[str, str]], bytes]] = {}
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        target = _raw_target(environ)
        if environ["REQUEST_METHOD"] == "GET":
            with self.lock:
                stored = self.cache.get(target)
            if stored is not None:
                stored_at, status, reason, headers, body = stored
                age = str(int(time.time() - stored_at))
                return self.respond(start_response, status, reason,
                                    headers + [("Age", age), ("X-Cache", "HIT")], body)
        status, reason, headers, body = self.forward(environ, target)
        if environ["REQUEST_METHOD"] == "GET" and status == 200:
            with self.lock:
                self.cache.setdefault(target, (time.time(), status, reason, headers, body))
        return self.respond(start_response, status, reason, headers + [("X-Cache", "MISS")], body)


def login_redirect(app: WSGIApp) -> WSGIApp:
    """A site-wide login wall: no session cookie and no hub signature -> 302 to /login."""

    def middleware(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        has_session = "session=" in environ.get("HTTP_COOKIE", "")
        signed = "HTTP_X_BAILING_SIGNATURE" in environ
        if not has_session and not signed and environ.get("PATH_INFO") != "/login":
            start_response("302 Found", [("Location", "/login?next=" + environ.get("PATH_INFO", "/")),
                                         ("Content-Type", "text/html"), ("Content-Length", "0")])
            return [b""]
        return app(environ, start_response)

    return middleware


def redirect_path(app: WSGIApp, path: str, location: str, status: str = "308 Permanent Redirect") -> WSGIApp:
    """Redirect every request for exactly ``path`` (a trailing-slash or http->https rule)."""

    def middleware(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == path:
            start_response(status, [("Location", location), ("Content-Length", "0")])
            return [b""]
        return app(environ, start_response)

    return middleware


def _json_response(start_response: Callable[..., Any], status: str, payload: Any) -> list[bytes]:
    body = json.dumps(payload).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def generic_probe(app: WSGIApp, path: str, answer: Any, *, verify: bool = True,
                  secret: str = STRONG_SECRET) -> WSGIApp:
    """Serve the probe at ``path`` with a fixed ``answer`` (e.g. ``{"ok": True}``).

    With ``verify`` the signature is checked (bailing_flask's middleware, 401
    otherwise) but nobody is authorized: "verifies but does not authorize".
    """

    def fixed(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        if verify and environ.get(ENVIRON_KEY) is None:
            return _json_response(start_response, "401 Unauthorized", {"error": "missing_signature"})
        return _json_response(start_response, "200 OK", answer)

    endpoint = BailingMiddleware(fixed, secret, catalog_path=None) if verify else fixed

    def middleware(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == path:
            return endpoint(environ, start_response)
        return app(environ, start_response)

    return middleware


# --- a hand-written integration (no bailing_flask) that signs the wrong path ---------------------

HANDMADE_CATALOG = {
    "openapi": "3.0.3",
    "info": {"title": "handmade", "version": "1"},
    "paths": {
        "/orders": {
            "get": {
                "operationId": "order_list",
                "summary": "List the acting user's orders.",
                "responses": {"200": {"description": "OK"}},
                "x-agent-capability": {"enabled": True, "scope": "order.read",
                                       "subject": {"required": True}},
            }
        }
    },
}


def _expected(secret: str, environ: dict[str, Any], path: str, subject: str, job: str) -> str:
    ts = environ.get("HTTP_X_BAILING_TIMESTAMP", "")
    canonical = f"{ts}.{environ['REQUEST_METHOD']}.{path}.{hashlib.sha256(b'').hexdigest()}.{subject}.{job}"
    return "sha256=" + hmac.new(secret.encode(), canonical.encode(), hashlib.sha256).hexdigest()


def handmade_app(mount: str = "/api", secret: str = STRONG_SECRET) -> WSGIApp:
    """Served under ``mount`` (the proxy passes the full path), verifying the FULL request path.

    The catalog is right (its signature covers the full path); tool calls
    are wrong: the hub signs them without the base_url prefix (trap T3).
    """

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        full = _raw_target(environ)
        signature = environ.get("HTTP_X_BAILING_SIGNATURE", "")
        if full == mount + "/.well-known/bailing/tools.json":
            ok = hmac.compare_digest(signature, _expected(secret, environ, full, "", ""))
            if not ok:
                return _json_response(start_response, "401 Unauthorized", {"error": "bad signature",
                                                                           "reason": "bad_signature"})
            body = json.dumps(HANDMADE_CATALOG).encode()
            start_response("200 OK", [("Content-Type", "application/json; charset=utf-8"),
                                      ("Cache-Control", "private, no-store"),
                                      ("Content-Length", str(len(body)))])
            return [body]
        if full == mount + "/orders":
            subject = environ.get("HTTP_X_BAILING_ON_BEHALF_OF", "")
            job = environ.get("HTTP_X_BAILING_JOB_ID", "")
            if not hmac.compare_digest(signature, _expected(secret, environ, full, subject, job)):
                return _json_response(start_response, "401 Unauthorized", {"error": "bad_signature"})
            if subject != "t1:u1":
                return _json_response(start_response, "403 Forbidden", {"error": "forbidden"})
            return _json_response(start_response, "200 OK", {"orders": []})
        return _json_response(start_response, "404 Not Found", {"error": "not found"})

    return app


def drop_response_header(app: WSGIApp, name: str) -> WSGIApp:
    """A proxy rule that removes one response header (e.g. ``Cache-Control``)."""

    def middleware(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            kept = [(k, v) for k, v in headers if k.lower() != name.lower()]
            return start_response(status, kept, exc_info) if exc_info else start_response(status, kept)

        return app(environ, start)

    return middleware


def gzip_responses(app: WSGIApp) -> WSGIApp:
    """Compress every response when the client accepts gzip (like nginx ``gzip on``)."""
    import gzip

    def middleware(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if "gzip" not in environ.get("HTTP_ACCEPT_ENCODING", ""):
            return app(environ, start_response)
        captured: dict[str, Any] = {}

        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            captured["status"], captured["headers"] = status, headers
            return lambda data: None

        result = app(environ, start)
        try:
            body = b"".join(result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        packed = gzip.compress(body)
        headers = [(k, v) for k, v in captured["headers"] if k.lower() != "content-length"]
        headers += [("Content-Encoding", "gzip"), ("Content-Length", str(len(packed)))]
        start_response(captured["status"], headers)
        return [packed]

    return middleware
