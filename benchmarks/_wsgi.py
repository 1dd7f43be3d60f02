"""Driving WSGI apps in-process the way a server does, with requests signed like the hub.

No test client: each request is a shallow copy of a prebuilt environ (the
keys gunicorn puts there, ``RAW_URI`` included) with a fresh ``BytesIO``
body, handed to the WSGI callable; the response iterable is consumed and
closed, as a server would.
"""

from __future__ import annotations

import io
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from bailing_flask.testing import HubRequest, idempotency_key, signed_headers

#: Re-sign a prebuilt request once it is this old (the hub's window is 300 s).
RESIGN_AFTER_S = 120.0


def base_environ(method: str, path: str, query: str = "", body: bytes = b"") -> dict[str, Any]:
    """What a typical WSGI server (gunicorn / werkzeug) puts in the environ."""
    target = path + ("?" + query if query else "")
    env: dict[str, Any] = {
        "REQUEST_METHOD": method,
        "SCRIPT_NAME": "",
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "RAW_URI": target,
        "REQUEST_URI": target,
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "REMOTE_PORT": "50123",
        "HTTP_HOST": "127.0.0.1:8000",
        "HTTP_USER_AGENT": "node",
        "HTTP_ACCEPT": "application/json",
        "HTTP_CONNECTION": "keep-alive",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        "wsgi.input_terminated": False,
    }
    if body:
        env["CONTENT_TYPE"] = "application/json"
        env["CONTENT_LENGTH"] = str(len(body))
    return env


def add_headers(env: dict[str, Any], headers: Mapping[str, str]) -> dict[str, Any]:
    """``env`` with HTTP headers added as a WSGI server would (Content-* without HTTP_)."""
    out = dict(env)
    for name, value in headers.items():
        key = name.upper().replace("-", "_")
        if key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            out[key] = value
        else:
            out["HTTP_" + key] = value
    return out


def environ_for(request: HubRequest) -> dict[str, Any]:
    """The environ of one hub request (method, signed path+query, headers, body)."""
    path, _, query = request.path_with_query.partition("?")
    return add_headers(base_environ(request.method, path, query, request.body), request.headers)


class HubSigner:
    """Re-signs one hub request with a fresh job id (and timestamp), as the hub would.

    ``template`` comes from :meth:`bailing_flask.testing.HubSimulator.build_call`
    (the hub's own wire form: path, query, body, headers). A new call has a
    new job id, hence a new signature and - for side-effecting tools - a new
    ``X-Bailing-Idempotency-Key`` derived as the hub derives it.
    """

    def __init__(self, secret: str, template: HubRequest, tool: str, args: Mapping[str, Any],
                 subject: str | None) -> None:
        self.secret = secret
        self.template = template
        self.tool = tool
        self.args = dict(args)
        self.subject = subject
        headers = template.headers
        self.client = headers.get("X-Bailing-Client")
        self.scope = headers.get("X-Bailing-Tool-Scope")
        self.with_key = "X-Bailing-Idempotency-Key" in headers
        self.extra = {k: v for k, v in headers.items() if not k.startswith("X-Bailing-")}
        path, _, query = template.path_with_query.partition("?")
        self.base = base_environ(template.method, path, query, template.body)

    def headers(self, job_id: str, ts: int | str | None = None) -> dict[str, str]:
        t = self.template
        headers = signed_headers(
            self.secret, t.method, t.path_with_query, t.body, subject=self.subject, job_id=job_id,
            client=self.client, tool_scope=self.scope,
            idempotency_key=(idempotency_key(self.tool, self.args, job_id, self.subject)
                             if self.with_key else None),
            ts=ts,
        )
        headers.update(self.extra)
        return headers

    def environ(self, job_id: str | None = None) -> dict[str, Any]:
        return add_headers(self.base, self.headers(job_id or str(uuid.uuid4())))


class Sink:
    """``start_response`` that records status and headers."""

    __slots__ = ("headers", "status")

    def __init__(self) -> None:
        self.status = ""
        self.headers: list[tuple[str, str]] = []

    def __call__(self, status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        self.status = status
        self.headers = headers
        return None


def call_once(app: Callable[..., Any], env: dict[str, Any], body: bytes) -> tuple[str, dict[str, str], bytes]:
    """One request (outside any timing) on ``env`` itself; returns status, headers, body."""
    sink = Sink()
    env["wsgi.input"] = io.BytesIO(body)
    result = app(env, sink)
    try:
        payload = b"".join(result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    return sink.status, dict(sink.headers), payload


class SameRequest:
    """A case: the same prebuilt request on every call (re-signed between blocks when old).

    ``signer`` rebuilds the template (new job id, current timestamp) in
    ``prepare`` once it is older than :data:`RESIGN_AFTER_S`, outside the
    timing, so a long run never leaves the 300 s window.
    """

    def __init__(self, app: Callable[..., Any], make_env: Callable[[], dict[str, Any]],
                 body: bytes) -> None:
        self.app = app
        self.make_env = make_env
        self.body = body
        self.template = make_env()
        self.made = time.monotonic()
        self.sink = Sink()

    def prepare(self, loops: int) -> None:
        if time.monotonic() - self.made > RESIGN_AFTER_S:
            self.template = self.make_env()
            self.made = time.monotonic()

    def __call__(self) -> None:
        env = self.template.copy()
        env["wsgi.input"] = io.BytesIO(self.body)
        result = self.app(env, self.sink)
        try:
            for _ in result:
                pass
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()


class FreshCalls:
    """A case: one new signed call (new job id) per invocation, built in ``prepare`` (untimed).

    ``copy=True`` copies each prebuilt environ inside the timing, as
    :class:`SameRequest` does, for a comparison against one.
    """

    def __init__(self, app: Callable[..., Any], signer: HubSigner, io_bound: bool = False,
                 copy: bool = False) -> None:
        self.app = app
        self.signer = signer
        self.body = signer.template.body
        self.io_bound = io_bound
        self.copy = copy
        self.sink = Sink()
        self.pending: list[dict[str, Any]] = []
        self.calls = 0

    def prepare(self, loops: int) -> None:
        environ = self.signer.environ
        self.pending = [environ() for _ in range(loops)]

    def __call__(self) -> None:
        env = self.pending.pop()
        if self.copy:
            env = env.copy()
        env["wsgi.input"] = io.BytesIO(self.body)
        result = self.app(env, self.sink)
        try:
            for _ in result:
                pass
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        self.calls += 1
