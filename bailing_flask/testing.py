"""Call your tools exactly as BailingHub does, in tests and from the CLI.

:class:`HubSimulator` reads the catalog the app really serves, compiles it
the way the hub does (:func:`bailing_flask.lint.compile_tools`), and builds
each request with the hub's rules: JS property order,
``encodeURIComponent`` for path parameters, ``URLSearchParams`` for the
query, a ``JSON.stringify`` body of at least ``{}`` on every non-GET call,
the hub's headers, the idempotency key for side-effecting tools, and the
signature. It talks to a Flask app in-process or to a live URL.

The other direction too: it POSTs what the hub POSTs to a business (a
finished job's record, a delivery webhook, an approval request in either
variant, see :mod:`bailing_flask.hub.posts`), signed with the client
token over ``"<milliseconds>.<body>"``, and re-sends any of them the way the
hub retries: the identical body with a fresh timestamp and signature.
"""

from __future__ import annotations

import hashlib
import http.client
import itertools
import json
import math
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from bailing_flask.wire.jsenc import (
    canonical_json,
    encode_uri_component,
    js_property_order,
    js_string,
    json_stringify,
    url_search_params,
    whatwg_target,
)
from bailing_flask.hub import posts as hub_payloads
from bailing_flask.wire.signing import sign_callback, sign_tool_call

__all__ = [
    "PROBE_SUBJECT",
    "PROBE_BODY",
    "HubRequest",
    "HubResponse",
    "HubSimulator",
    "signed_headers",
    "catalog_headers",
    "idempotency_key",
    "canonical_json",
]

#: The synthetic subject of the hub's authorization probe.
PROBE_SUBJECT = "__bailing_authz_probe__:nobody"
#: The exact body the hub POSTs to a dedicated authz-probe endpoint.
PROBE_BODY = (
    '{"subject":"__bailing_authz_probe__:nobody","reason":"bailing-authz-probe","expect":"deny"}'
)
ZERO_SIGNATURE = "sha256=" + "0" * 64


def signed_headers(
    secret: str,
    method: str,
    path_with_query: str,
    body: bytes | str = b"",
    *,
    subject: str | None = None,
    job_id: str | None = "job-test-001",
    client: str | None = "",
    tool_scope: str | None = None,
    idempotency_key: str | None = None,
    ts: int | str | None = None,
) -> dict[str, str]:
    """The ``X-Bailing-*`` headers of a tool call.

    ``subject=None`` omits On-Behalf-Of (anonymous call); ``job_id=None``
    omits the Job-Id header. Header values are returned as text; characters
    U+0080-U+00FF go on the wire as single ISO-8859-1 bytes, as the hub sends them.
    """
    stamp = str(int(time.time()) if ts is None else ts)
    headers = {
        "X-Bailing-Timestamp": stamp,
        "X-Bailing-Signature": sign_tool_call(
            secret, stamp, method, path_with_query, body, subject or "", job_id or ""
        ),
    }
    if job_id is not None:
        headers["X-Bailing-Job-Id"] = job_id
    if client is not None:
        headers["X-Bailing-Client"] = client
    if subject:
        headers["X-Bailing-On-Behalf-Of"] = subject
    if tool_scope is not None:
        headers["X-Bailing-Tool-Scope"] = tool_scope
    if idempotency_key is not None:
        headers["X-Bailing-Idempotency-Key"] = idempotency_key
    return headers


def catalog_headers(secret: str, path_with_query: str, *, ts: int | str | None = None) -> dict[str, str]:
    """The only two headers of a signed catalog fetch."""
    stamp = str(int(time.time()) if ts is None else ts)
    return {
        "X-Bailing-Timestamp": stamp,
        "X-Bailing-Signature": sign_tool_call(secret, stamp, "GET", path_with_query),
    }


def idempotency_key(tool: str, args: Mapping[str, Any], job_id: str, subject: str | None) -> str:
    """``X-Bailing-Idempotency-Key`` as the hub derives it."""
    args_hash = hashlib.sha256(canonical_json(args).encode("utf-8")).hexdigest()
    envelope = {"args_hash": args_hash, "job_id": job_id, "on_behalf_of": subject or "", "tool": tool}
    return hashlib.sha256(canonical_json(envelope).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class HubRequest:
    """One request as the hub would put it on the wire (relative to base_url)."""

    method: str
    #: what is signed (and, after the base_url prefix, requested)
    path_with_query: str
    headers: dict[str, str]
    body: bytes = b""

    def json(self) -> Any:
        """The body as JSON (the payload of a hub POST)."""
        return json.loads(self.body)


@dataclass
class HubResponse:
    status: int
    headers: dict[str, str]
    body: bytes
    request: HubRequest | None = None

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class _ToolShape:
    name: str
    method: str
    path: str
    scope: str
    side_effecting: bool
    param_in: dict[str, str] = field(default_factory=dict)


def _compiled(document: dict[str, Any]) -> list[Any]:
    from bailing_flask.lint import compile_tools

    return compile_tools(document)


class HubSimulator:
    """Sign and send requests the way BailingHub does.

    :param target: a Flask app (called in-process through its test client)
        or the base URL of a live deployment (the hub's ``base_url``).
    :param secret: the provider secret.
    :param catalog_url: path (or full URL) of the catalog; defaults to the
        well-known path under the base URL.
    :param client: the ``X-Bailing-Client`` value of calls (``""`` if none).
    :param clock: current Unix time, to test the window.
    :param client_token: the client token the hub signs its POSTs with;
        defaults to the app's first ``BAILING_CLIENT_TOKENS``.
    :param https: in-process, send the requests as arriving over HTTPS
        (``wsgi.url_scheme`` ``https``, ``HTTPS=on``, port 443), as the app
        sees them behind TLS. The default follows the scheme of the app's
        ``BAILING_BASE_URL``, else the test client's (Flask's
        ``PREFERRED_URL_SCHEME``). For a URL target its scheme decides.
    """

    def __init__(
        self,
        target: Any,
        secret: str,
        *,
        catalog_url: str | None = None,
        client: str = "crm",
        clock: Any = time.time,
        timeout: float = 30.0,
        client_token: str | None = None,
        https: bool | None = None,
    ) -> None:
        self.secret = secret
        self._client_token = client_token
        #: a :class:`~bailing_flask.hub.fake.FakeHub` that approval requests are
        #: registered with, so the app's decisions can be sent to it
        self.fake_hub: Any = None
        self._approval_ids = itertools.count(9001)
        self.client = client
        self.clock = clock
        self.timeout = timeout
        if isinstance(target, str):
            parts = urlsplit(target)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise ValueError(f"not an http(s) base URL: {target!r}")
            if https is not None and https != (parts.scheme == "https"):
                raise ValueError(f"https={https} contradicts the scheme of {target!r}")
            self._app = None
            self._scheme, self._netloc = parts.scheme, parts.netloc
            self._prefix = parts.path.rstrip("/")
        else:
            self._app = target
            self._scheme, self._netloc, self._prefix = "http", "localhost", ""
        #: in-process: the environ of a request that arrived over HTTPS (or over HTTP), when
        #: stated; otherwise the test client's default scheme
        self._scheme_environ: dict[str, str] = {}
        # in-process: the test client serves the app under APPLICATION_ROOT (its
        # SCRIPT_NAME); a public prefix in front of that is removed like a proxy would
        self._script_name = ""
        self._mount = ""
        if self._app is not None:
            self._in_process_paths()
            self._in_process_scheme(https)
        self.catalog_path = self._catalog_path(catalog_url)
        self._document: dict[str, Any] | None = None

    # -- transport -------------------------------------------------------------------

    def _in_process_paths(self) -> None:
        """Public paths of an in-process app: its mount prefix and its ``BAILING_BASE_URL``."""
        from bailing_flask._pipeline.mount import application_root
        from bailing_flask._state import state_of

        app = self._app
        assert app is not None
        middleware = state_of(app).middleware
        self._script_name = application_root(app)
        prefix = middleware.public_prefix
        self._mount = prefix if prefix is not None else self._script_name
        # tool calls go to base_url + catalog path; without BAILING_BASE_URL the
        # base URL is where the app's root is served
        self._prefix = middleware.base_url.path if middleware.base_url is not None else self._mount

    def _in_process_scheme(self, https: bool | None) -> None:
        """How an in-process request arrives: ``https=``, else the scheme of ``BAILING_BASE_URL``.

        The hub signs only the path and query, so the scheme changes nothing
        it signs; it changes what the app's own hooks see (``request.is_secure``,
        ``request.url``): an HTTPS-only app redirects every ``http`` request.
        """
        from bailing_flask._state import state_of

        if https is None:
            base_url = state_of(self._app).middleware.base_url  # type: ignore[arg-type]
            if base_url is None:
                return  # the test client's default (PREFERRED_URL_SCHEME)
            https = base_url.origin.startswith("https:")
        self._scheme = "https" if https else "http"
        self._scheme_environ = ({"wsgi.url_scheme": "https", "HTTPS": "on", "SERVER_PORT": "443"}
                                if https else {"wsgi.url_scheme": "http", "SERVER_PORT": "80"})

    @property
    def scheme(self) -> str:
        """``https`` or ``http``: how the requests arrive (in-process: as the app sees them)."""
        if self._app is not None and not self._scheme_environ:
            from bailing_flask._state import state_of

            return state_of(self._app).config.preferred_url_scheme or "http"
        return self._scheme

    def _catalog_path(self, catalog_url: str | None) -> str:
        if catalog_url is None:
            if self._app is not None:
                from bailing_flask._state import state_of

                return self._mount + state_of(self._app).config.catalog_path
            from bailing_flask.settings import Config

            return self._prefix + Config().catalog_path  # the default path
        parts = urlsplit(catalog_url)
        return parts.path + ("?" + parts.query if parts.query else "") if parts.scheme else catalog_url

    def send(self, method: str, wire_target: str, headers: Mapping[str, str], body: bytes = b"",
             request: HubRequest | None = None, *, environ: Mapping[str, Any] | None = None
             ) -> HubResponse:
        """Send one request with the request-target exactly as given.

        ``environ`` adds WSGI environ keys (in-process only: a client on the
        network can set none).
        """
        if self._app is not None:
            client = self._app.test_client()
            target = wire_target
            mount = self._mount
            if mount and (target == mount or target.startswith((mount + "/", mount + "?"))):
                target = target[len(mount):] or "/"
            path, _, query = target.partition("?")
            raw_target = self._script_name + target
            response = client.open(
                path, method=method, query_string=query, data=body, headers=dict(headers),
                environ_overrides={"REQUEST_URI": raw_target, "RAW_URI": raw_target,
                                   **self._scheme_environ, **(environ or {})},
            )
            return HubResponse(response.status_code, dict(response.headers), response.get_data(), request)
        connection_class = (
            http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
        )
        if environ:
            raise ValueError("environ keys can only be set for an in-process app")
        conn = connection_class(self._netloc, timeout=self.timeout)
        try:
            conn.putrequest(method, wire_target, skip_accept_encoding=True)
            for name, value in headers.items():
                conn.putheader(name, value.encode("latin-1"))
            if body or method not in ("GET", "HEAD"):
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body or None)
            raw = conn.getresponse()
            data = raw.read()
            return HubResponse(raw.status, {k: v for k, v in raw.getheaders()}, data, request)
        finally:
            conn.close()

    def _now(self) -> str:
        return str(int(self.clock()))

    # -- the catalog -----------------------------------------------------------------

    def fetch_catalog(self, signature: str | None = "valid") -> HubResponse:
        """``GET`` the catalog signed (``"valid"``), unsigned (``None``) or with 64 zeros (``"zeros"``)."""
        headers: dict[str, str] = {}
        if signature is not None:
            headers = catalog_headers(self.secret, self.catalog_path, ts=self._now())
            if signature == "zeros":
                headers["X-Bailing-Signature"] = ZERO_SIGNATURE
        return self.send("GET", self.catalog_path, headers)

    def document(self, refresh: bool = False) -> dict[str, Any]:
        """The catalog as the hub reads it (fetched signed once, then cached)."""
        if self._document is None or refresh:
            response = self.fetch_catalog()
            if response.status != 200:
                raise AssertionError(f"catalog fetch answered {response.status}: {response.text[:300]}")
            self._document = response.json()
        return self._document

    def _shape(self, name: str) -> _ToolShape:
        document = self.document()
        for compiled in _compiled(document):
            if compiled.name == name:
                operation = document["paths"][compiled.path][compiled.method.lower()]
                execution = operation.get("x-agent-capability", {}).get("execution") or {}
                idempotent = compiled.method == "GET" or execution.get("idempotent") is True
                return _ToolShape(
                    name=compiled.name, method=compiled.method, path=compiled.path,
                    scope=compiled.scope, side_effecting=not compiled.readonly and not idempotent,
                    param_in=dict(compiled.param_in),
                )
        raise KeyError(f"no tool named {name!r} in the served catalog")

    # -- tool calls --------------------------------------------------------------------

    def build_call(
        self,
        tool: str,
        args: Mapping[str, Any] | None = None,
        *,
        subject: str | None = None,
        job_id: str | None = None,
        client: str | None = None,
        idempotency: bool = True,
    ) -> HubRequest:
        """Build the exact request the hub would send for ``tool(**args)``."""
        shape = self._shape(tool)
        normalized = json.loads(json.dumps(dict(args or {})))  # the hub's JSON round trip
        job = job_id if job_id is not None else str(uuid.uuid4())
        path = shape.path
        query: dict[str, str] = {}
        extra_headers: dict[str, str] = {}
        body: dict[str, Any] = {}
        for key in js_property_order(normalized):
            value = normalized[key]
            if value is None:
                continue
            location = shape.param_in.get(key) or ("query" if shape.method == "GET" else "body")
            if location == "path":
                path = path.replace("{" + key + "}", encode_uri_component(js_string(value)))
            elif location == "header":
                extra_headers[key] = js_string(value)
            elif location == "query":
                query[key] = js_string(value)
            else:
                body[key] = value
        qs = url_search_params(query.items())
        path_with_query = path + ("?" + qs if qs else "")
        raw_body = b"" if shape.method == "GET" else json_stringify(body).encode("utf-8")
        idem_key: str | None = None
        if shape.side_effecting and idempotency:
            idem_key = idempotency_key(shape.name, normalized, job, subject)
        headers = signed_headers(
            self.secret, shape.method, path_with_query, raw_body, subject=subject, job_id=job,
            client=self.client if client is None else client, tool_scope=shape.scope.strip(),
            idempotency_key=idem_key, ts=self._now(),
        )
        if raw_body:
            headers["Content-Type"] = "application/json"
        headers.update(extra_headers)  # declared header parameters come last, like the hub
        return HubRequest(shape.method, path_with_query, headers, raw_body)

    def missing_path_arguments(self, tool: str, args: Mapping[str, Any] | None = None) -> list[str]:
        """Path parameters of ``tool`` that ``args`` leaves out (or sets to ``null``).

        The hub would send such a call anyway, with the placeholder itself
        (signed as ``{order_id}``, sent as ``%7Border_id%7D``, as this
        simulator sends it too), which the app refuses with ``422
        missing_path_argument``: check first to say which argument is missing.
        """
        import re

        shape = self._shape(tool)
        given = {key for key, value in (args or {}).items() if value is not None}
        names = re.findall(r"\{([^{}]+)\}", shape.path)
        return [name for name in dict.fromkeys(names) if name not in given]

    def call(self, tool: str, args: Mapping[str, Any] | None = None, **options: Any) -> HubResponse:
        """Call a tool as the hub does and return the response."""
        request = self.build_call(tool, args, **options)
        return self.replay(request)

    def replay(self, request: HubRequest, **header_changes: str | None) -> HubResponse:
        """Send a request again, optionally changing (or, with ``None``, dropping) headers."""
        headers = dict(request.headers)
        for name, value in header_changes.items():
            header = "X-Bailing-" + name.replace("_", "-").title()
            if value is None:
                headers.pop(header, None)
            else:
                headers[header] = value
        # the request line the hub's fetch sends: its URL parser may change what was signed
        return self.send(request.method, self._prefix + whatwg_target(request.path_with_query), headers,
                         request.body, request)

    # -- the authorization probe --------------------------------------------------------

    def probe(self, subject: str = PROBE_SUBJECT) -> HubResponse:
        """Send the hub's authorization probe (dedicated endpoint, else a GET tool)."""
        from bailing_flask.lint import authz_probe_target

        target = authz_probe_target(self.document())
        if target is None:
            raise AssertionError("the catalog offers no probe target")
        body = b""
        if target.mode == "dedicated" and target.method == "POST":
            body = PROBE_BODY.replace(PROBE_SUBJECT, subject).encode("utf-8")
        scope = "__probe__.authz"
        if target.mode == "tool":
            scope = next((t.scope.strip() for t in _compiled(self.document()) if t.name == target.name),
                         "")
        headers = signed_headers(
            self.secret, target.method, target.path, body, subject=subject, job_id="probe",
            client="__probe__", ts=self._now(), tool_scope=scope,
        )
        if target.mode == "dedicated":
            headers["Content-Type"] = "application/json"
        request = HubRequest(target.method, target.path, headers, body)
        return self.send(target.method, self._prefix + whatwg_target(target.path), headers, body, request)

    # -- what the hub POSTs to the business ------------------------------------------------

    @property
    def client_token(self) -> str:
        """The key of the hub's POSTs (the app's first client token by default)."""
        if self._client_token is None and self._app is not None:
            from bailing_flask.wire.signing import primary_secret

            from bailing_flask._state import state_of

            self._client_token = primary_secret(state_of(self._app).config.client_tokens)
        if not self._client_token:
            raise AssertionError("no client token: pass client_token= or set BAILING_CLIENT_TOKENS")
        return self._client_token

    def _post_path(self, kind: str) -> str:
        from bailing_flask.settings import Config

        if self._app is not None:
            from bailing_flask._state import state_of

            return state_of(self._app).config.callback_path(kind)
        return self._prefix + Config().callback_path(kind)  # the default paths

    def sign_post(self, path: str, payload: Mapping[str, Any] | bytes | str) -> HubRequest:
        """A hub POST to ``path``: the body as ``JSON.stringify`` writes it, signed now."""
        if isinstance(payload, Mapping):
            body = json_stringify(payload).encode("utf-8")
        else:
            body = payload.encode("utf-8") if isinstance(payload, str) else bytes(payload)
        return self._signed_post(HubRequest("POST", path, {}, body))

    def _signed_post(self, request: HubRequest) -> HubRequest:
        ts = str(math.floor(self.clock() * 1000))
        headers = {
            "Content-Type": "application/json",
            "X-Bailing-Timestamp": ts,
            "X-Bailing-Signature": sign_callback(self.client_token, ts, request.body),
        }
        return HubRequest("POST", request.path_with_query, headers, request.body)

    def post(self, path: str, payload: Mapping[str, Any] | bytes | str) -> HubResponse:
        """Sign and send one hub POST."""
        request = self.sign_post(path, payload)
        return self.send("POST", request.path_with_query, request.headers, request.body, request)

    def retry(self, request: HubRequest) -> HubResponse:
        """Send a hub POST again as the hub retries it: same body, fresh timestamp and signature.

        A duplicate delivery (the hub tried again after a timeout, or a
        re-run of the same job) looks exactly the same.
        """
        again = self._signed_post(request)
        return self.send("POST", again.path_with_query, again.headers, again.body, again)

    def send_job_finished(self, job: Mapping[str, Any] | None = None, **fields: Any) -> HubResponse:
        """POST a finished job's record to the app's callback path.

        ``job`` is a record from :func:`~bailing_flask.hub.posts.job_record`
        (made from ``fields`` when not given).
        """
        record = dict(job) if job is not None else hub_payloads.job_record(**fields)
        return self.post(
            self._post_path("job"), record)

    def send_delivery(self, job: Mapping[str, Any] | None = None, **fields: Any) -> HubResponse:
        """POST the delivery webhook of a finished job to the app's delivery path."""
        record = dict(job) if job is not None else hub_payloads.job_record(**fields)
        return self.post(
            self._post_path("delivery"),
            hub_payloads.delivery_webhook(record),
        )

    def approval_payload(
        self,
        tool: str,
        args: Mapping[str, Any] | None = None,
        *,
        subject: str | None = None,
        job_id: str | None = None,
        approval_id: int | None = None,
        variant: str = "tool_approval_request",
        job: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """The approval request the hub would send for ``tool(**args)`` (not sent).

        Scope, method, template path, risk, policy and the rendered prompt
        come from the catalog the app serves.
        """
        shape = self._shape(tool)
        operation = self.document()["paths"][shape.path][shape.method.lower()]
        capability = operation.get("x-agent-capability") or {}
        risk = str((capability.get("risk") or {}).get("level") or "medium").lower()
        approval = capability.get("approval") or {}
        if "policy" not in fields and risk != "high":
            fields["policy"] = "confirm_required" if approval.get("required") else "confirm_when"
        record = dict(job) if job is not None else hub_payloads.job_record(
            job_id=job_id, subject=subject, status="done")
        return hub_payloads.approval_request(
            approval_id=approval_id if approval_id is not None else next(self._approval_ids),
            job=record, tool=shape.name, scope=shape.scope.strip(), method=shape.method,
            path=shape.path, args=dict(args or {}), risk=risk, prompt=approval.get("prompt"),
            subject=subject, variant=variant,  # type: ignore[arg-type]
            **fields,
        )

    def send_approval_request(
        self, tool: str, args: Mapping[str, Any] | None = None, **options: Any
    ) -> HubResponse:
        """POST an approval request for ``tool(**args)`` to the app's approval path.

        Takes the options of :meth:`approval_payload`. When linked to a fake
        hub (the pytest plugin's ``bailing_fake_hub``), the approval is
        registered there first, so the app's decision can be sent to it.
        """
        payload = options.pop("payload", None) or self.approval_payload(tool, args, **options)
        if self.fake_hub is not None:
            self.fake_hub.register_approval_request(
                payload, client_token=self.client_token,
                client_app_id=(payload.get("intent") or {}).get("source") or None,
            )
        return self.post(
            self._post_path("approval"),
            payload,
        )
