"""A stand-in for BailingHub's client-facing HTTP surface, for testing the business side.

It re-implements, independently of the rest of ``bailing_flask`` (it imports
nothing from it, so it can check the package's own client), the rules of the
hub's handlers that a business client meets:

* ``POST /approvals/{id}/decision``: 404 for an unknown approval or job
  before anything else, then the body (at most 64 KiB of JSON), then
  authentication (a Bearer token of the client that started the job, or of
  the job's chat entry's ticket client, or the hub's own token; or the body
  signed with that client's token over ``"<milliseconds>.<body>"``, within
  300,000 ms either way), then the envelope (``kind``, ``schema_version``,
  ``approval_id`` equal to the URL's, ``job_id``, ``request_id`` and
  ``args_hash`` equal to the approval's, ``decision`` ``approved`` or
  ``denied``, a machine ``decision_id``, an ``approver``), then the outcome:
  the same decision with the same ``decision_id`` again is an idempotent
  200, anything else on a decided approval is 409, and a ``decision_id``
  already used by another approval is 409;
* ``POST /run``: authentication, 503 when paused, the field rules, 400 on
  undeclared fields, 403, 429, 409, 202;
* ``GET /jobs/{job_id}``: only the caller's jobs.

Use it through the pytest plugin's ``bailing_fake_hub`` fixture (served on
a loopback port, the app's ``BAILING_HUB_URL`` pointed at it), or serve it
yourself with :func:`serve`. Approval requests sent by
:class:`~bailing_flask.testing.HubSimulator` are registered here
automatically when the two are linked, so an app's approver can be tested
end to end: :attr:`FakeHub.decisions` holds every decision it accepted,
:attr:`FakeHub.requests` every request's exact bytes.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from werkzeug.wrappers import Request, Response

__all__ = ["Client", "Recorded", "FakeHub", "serve"]

#: JavaScript's String.prototype.trim set.
_JS_WS = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_CLIENT_ROUTE = re.compile(r"^[a-z0-9][a-z0-9_-]{1,63}$")
_CLIENT_RUN_FIELDS = {"request_id", "route", "input", "metadata", "callback_url"}
_MACHINE_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
_JS_DECIMAL = re.compile(r"^[+-]?(?:Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)$")
_DECISION_MAX_BODY = 64 * 1024
_JSON_MAX_BODY = 1024 * 1024
_WINDOW_MS = 5 * 60 * 1000


def _utf16(value: str) -> int:
    return len(value.encode("utf-16-le", "surrogatepass")) // 2


def _js_string(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float, str)):
        return str(value)
    if isinstance(value, list):
        return ",".join("" if item is None else _js_string(item) for item in value)
    return "[object Object]"


def _field(value: Any) -> str:
    """``String(v ?? '').trim()``."""
    return ("" if value is None else _js_string(value)).strip(_JS_WS)


def _js_number(value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip(_JS_WS)
        if not text:
            return 0.0
        if _JS_DECIMAL.match(text):
            return float(text.replace("Infinity", "inf"))
    return math.nan


@dataclass
class Client:
    app_id: str
    token: str
    enabled: bool = True
    allowed_routes: tuple[str, ...] = ("*",)
    rate_limit_per_min: int = 0


@dataclass
class Recorded:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class FakeHub:
    server_token: str = "hub-admin-token-0123456789abcdef"
    clock: Callable[[], float] = time.time
    clients: dict[str, Client] = field(default_factory=dict)
    #: chat entry key -> app_id of its ticket_client
    chat_entries: dict[str, str] = field(default_factory=dict)
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    approvals: dict[int, dict[str, Any]] = field(default_factory=dict)
    routes: set[str] = field(default_factory=lambda: {"ticket-triage", "store_ops"})
    auto_ambiguous: bool = False
    paused: bool = False
    #: path prefix -> Location: answer 307 there (to check redirects are not followed)
    redirects: dict[str, str] = field(default_factory=dict)
    #: (status, content type, body) answered to every request when set
    canned: tuple[int, str, bytes] | None = None
    requests: list[Recorded] = field(default_factory=list)
    #: every decision the hub accepted (not the idempotent repeats), in order
    decisions: list[dict[str, Any]] = field(default_factory=list)
    _rate: dict[str, list[float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # --- setup helpers

    def add_client(self, app_id: str, token: str, **options: Any) -> Client:
        client = Client(app_id, token, **options)
        self.clients[app_id] = client
        return client

    def add_job(
        self,
        job_id: str,
        *,
        client_app_id: str | None = None,
        status: str = "done",
        request_id: str = "req-1",
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        job: dict[str, Any] = {
            "job_id": job_id,
            "request_id": request_id,
            "status": status,
            "profile": "default",
            "project": "",
            "source": client_app_id or "chat",
            "input_preview": "",
            "metadata": metadata or {},
            "attempts": 0,
            "created_at": "2024-06-10T06:13:20.000Z",
            "updated_at": "2024-06-10T06:13:21.000Z",
        }
        if client_app_id:
            job["client_app_id"] = client_app_id
        self.jobs[job_id] = job
        return job

    def add_approval(
        self,
        approval_id: int,
        job_id: str,
        *,
        args_hash: str,
        request_id: str | None = None,
        status: str = "pending",
        decision_id: str | None = None,
    ) -> dict[str, Any]:
        approval = {
            "id": approval_id,
            "job_id": job_id,
            "request_id": request_id or self.jobs[job_id]["request_id"],
            "args_hash": args_hash,
            "status": status,
            "decision_id": decision_id,
            "decided_by": None,
            "comment": None,
        }
        self.approvals[approval_id] = approval
        return approval

    def register_approval_request(
        self, payload: Mapping[str, Any], *, client_token: str, client_app_id: str | None = None,
    ) -> dict[str, Any]:
        """Make an approval request the hub sent (a ``tool_approval_request`` or
        ``tool_approval`` body) known here, as pending, with its job and client."""
        intent = payload.get("intent") or {}
        args_hash = payload.get("args_hash") or intent.get("args_hash")
        app_id = client_app_id or "business"
        existing = self.clients.get(app_id)
        if existing is None or existing.token != client_token:
            self.add_client(app_id, client_token)
        job_id = str(payload["job_id"])
        if job_id not in self.jobs:
            self.add_job(job_id, client_app_id=app_id, status="done",
                         request_id=str(payload["request_id"]),
                         metadata=dict(payload.get("metadata") or intent.get("metadata") or {}))
        approval_id = int(payload["approval_id"])
        if approval_id in self.approvals:
            return self.approvals[approval_id]
        return self.add_approval(approval_id, job_id, args_hash=str(args_hash),
                                 request_id=str(payload["request_id"]))

    def now_ms(self) -> int:
        return math.floor(self.clock() * 1000)

    # --- WSGI

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        body = request.get_data(cache=True)
        with self._lock:
            self.requests.append(
                Recorded(
                    request.method,
                    request.path,
                    environ.get("QUERY_STRING", ""),
                    dict(request.headers.items()),
                    body,
                )
            )
            response = self._dispatch(request, body)
        return response(environ, start_response)

    def _dispatch(self, request: Request, body: bytes) -> Response:
        if self.canned is not None:
            status, content_type, payload = self.canned
            return Response(payload, status=status, content_type=content_type)
        for prefix, location in self.redirects.items():
            if request.path.startswith(prefix):
                return Response(b"", status=307, headers={"Location": location})
        path = request.path
        match = re.fullmatch(r"/approvals/(\d+)/decision", path)
        if request.method == "POST" and match:
            return self._decision(request, body, int(match.group(1)))
        principal = self._authenticate(request)
        if principal is None:
            return _send(401, {"error": "unauthorized"})
        if request.method == "POST" and path == "/run":
            return self._run(body, principal)
        if request.method == "GET" and path.startswith("/jobs/"):
            job = self.jobs.get(path[len("/jobs/"):])
            if job is None or (
                isinstance(principal, Client) and job.get("client_app_id") != principal.app_id
            ):
                return _send(404, {"error": "not found"})
            return _send(200, job)
        return _send(404, {"error": "not found"})

    # --- auth (src/app/auth.ts)

    @staticmethod
    def _presented_token(request: Request) -> str:
        bearer = re.sub(r"^Bearer\s+", "", request.headers.get("Authorization", ""), flags=re.I)
        return bearer or request.args.get("token", "")

    def _client_by_token(self, token: str) -> Client | None:
        for client in self.clients.values():
            if hmac.compare_digest(client.token.encode(), token.encode()):
                return client
        return None

    def _authenticate(self, request: Request) -> Client | str | None:
        token = self._presented_token(request)
        if not token:
            return None
        if token == self.server_token:
            return "admin"
        client = self._client_by_token(token)
        return client if client is not None and client.enabled else None

    # --- POST /approvals/{id}/decision

    def _owns(self, client: Client, job: dict[str, Any]) -> bool:
        if job.get("client_app_id") and job["client_app_id"] == client.app_id:
            return True
        entry = _js_string(job.get("metadata", {}).get("chat_entry") or "")
        return bool(entry) and self.chat_entries.get(entry) == client.app_id

    def _secret_for_job(self, job: dict[str, Any]) -> str:
        # src/app/outbound.ts: no "enabled" check on this path.
        owner = self.clients.get(job.get("client_app_id") or "")
        if owner is not None:
            return owner.token
        entry = _js_string(job.get("metadata", {}).get("chat_entry") or "")
        ticket_client = self.clients.get(self.chat_entries.get(entry, ""))
        if entry and ticket_client is not None:
            return ticket_client.token
        return self.server_token

    def _bearer_ok(self, request: Request, job: dict[str, Any]) -> bool:
        token = self._presented_token(request)
        if not token:
            return False
        if token == self.server_token:
            return True
        client = self._client_by_token(token)
        return client is not None and client.enabled and self._owns(client, job)

    def _signature_ok(self, request: Request, job: dict[str, Any], raw: str) -> bool:
        ts = request.headers.get("X-Bailing-Timestamp", "")
        sig = request.headers.get("X-Bailing-Signature", "")
        if not ts or not sig.startswith("sha256="):
            return False
        number = _js_number(ts)
        if not math.isfinite(number) or abs(self.now_ms() - number) > _WINDOW_MS:
            return False
        mac = hmac.new(
            self._secret_for_job(job).encode(), f"{ts}.{raw}".encode(), hashlib.sha256
        ).hexdigest()
        return hmac.compare_digest(sig.encode(), f"sha256={mac}".encode())

    def _decision(self, request: Request, body: bytes, approval_id: int) -> Response:
        approval = self.approvals.get(approval_id)
        if approval is None:
            return _send(404, {"error": "no such approval"})
        job = self.jobs.get(approval["job_id"])
        if job is None:
            return _send(404, {"error": "the approval's job is gone"})
        if len(body) > _DECISION_MAX_BODY:
            return _send(400, {"error": "body is not valid JSON: too large"})
        raw = body.decode("utf-8", "replace")
        try:
            parsed = json.loads(raw) if raw else {}
        except ValueError as exc:
            return _send(400, {"error": f"body is not valid JSON: {exc}"})
        envelope = parsed if isinstance(parsed, dict) else {}
        if not (self._bearer_ok(request, job) or self._signature_ok(request, job, raw)):
            return _send(401, {"error": "bad signature, or this token may not decide this job"})
        error, decision = self._parse_envelope(envelope, approval)
        if error:
            return _send(400, {"error": error})
        assert decision is not None
        same = (
            approval["status"] == decision["decision"]
            and approval["decision_id"] == decision["decision_id"]
        )
        if approval["status"] != "pending":
            if same:
                return _send(200, {
                    "ok": True, "id": approval_id, "status": approval["status"],
                    "decision_id": decision["decision_id"], "idempotent": True, "rerun": False,
                })
            return _send(409, {
                "error": f"approval already {approval['status']}",
                "status": approval["status"], "decision_id": approval["decision_id"],
            })
        for other in self.approvals.values():
            # MySQL's default collation compares decision_id case-insensitively.
            if (
                other["id"] != approval_id
                and other["decision_id"] is not None
                and other["decision_id"].lower() == decision["decision_id"].lower()
            ):
                return _send(409, {
                    "error": "decision_id already used by another approval",
                    "decision_id": decision["decision_id"], "approval_id": other["id"],
                })
        approval.update(
            status=decision["decision"], decision_id=decision["decision_id"],
            decided_by=decision["approver"], comment=decision.get("comment"),
        )
        self.decisions.append({"approval_id": approval_id, **decision})
        rerun = False
        if decision["decision"] == "approved" and job["status"] in ("done", "error", "rejected"):
            job["status"] = "queued"
            rerun = True
        return _send(200, {
            "ok": True, "id": approval_id, "status": decision["decision"],
            "decision_id": decision["decision_id"], "idempotent": False, "rerun": rerun,
        })

    @staticmethod
    def _parse_envelope(
        body: dict[str, Any], approval: dict[str, Any]
    ) -> tuple[str | None, dict[str, Any] | None]:
        if _field(body.get("kind")) != "tool_approval_decision":
            return "kind must be tool_approval_decision", None
        if _field(body.get("schema_version")) != "bailing.approval-decision.v1":
            return "wrong schema_version", None
        number = _js_number(body["approval_id"]) if "approval_id" in body else math.nan
        if not (math.isfinite(number) and number.is_integer()) or int(number) != approval["id"]:
            return "approval_id does not match the URL", None
        for name in ("job_id", "request_id", "args_hash"):
            if _field(body.get(name)) != approval[name]:
                return f"{name} does not match the approval", None
        decision = _field(body.get("decision")).lower()
        if decision not in ("approved", "denied"):
            return "decision must be approved or denied", None
        decision_id = _field(body.get("decision_id"))
        if not _MACHINE_ID.match(decision_id):
            return "decision_id is not a machine id", None
        approver_raw = body.get("approver")
        approver = _field(approver_raw if approver_raw is not None else body.get("operator"))
        approver = approver[:64]
        if not approver:
            return "approver is required", None
        result = {"decision": decision, "decision_id": decision_id, "approver": approver}
        comment = _field(body.get("comment"))[:1000]
        if comment:
            result["comment"] = comment
        return None, result

    # --- POST /run

    def _rate_limited(self, client: Client) -> bool:
        if not client.rate_limit_per_min:
            return False
        now = self.clock()
        window = [t for t in self._rate.get(client.app_id, []) if now - t < 60]
        limited = len(window) >= client.rate_limit_per_min
        if not limited:
            window.append(now)
        self._rate[client.app_id] = window
        return limited

    def _run(self, body: bytes, principal: Client | str) -> Response:
        if self.paused:
            return _send(503, {"status": "paused"})
        if len(body) > _JSON_MAX_BODY:
            return _send(413, {"error": "payload too large", "max_bytes": _JSON_MAX_BODY})
        try:
            data = json.loads(body.decode("utf-8")) if body else {}
        except ValueError:
            return _send(500, {"error": "internal_error", "request_id": str(uuid.uuid4())})
        if not isinstance(data, dict):
            return _send(400, {"error": "body must be a JSON object"})
        request_id, text = data.get("request_id"), data.get("input")
        if (
            not isinstance(request_id, str) or not request_id.strip(_JS_WS)
            or _utf16(request_id) > 128
            or not isinstance(text, str) or not text.strip(_JS_WS) or _utf16(text) > 100_000
        ):
            return _send(400, {"error": "request_id and input are required"})
        if "metadata" in data and not isinstance(data["metadata"], dict):
            return _send(400, {"error": "metadata must be an object"})
        if "callback_url" in data:
            url = data["callback_url"]
            if (
                not isinstance(url, str) or _utf16(url) > 2048
                or not re.match(r"^https?://[^/\s]", url, re.I)
            ):
                return _send(400, {"error": "bad callback_url"})
        client = principal if isinstance(principal, Client) else None
        route = data.get("route")
        if client is not None:
            if not isinstance(route, str) or not _CLIENT_ROUTE.match(route):
                return _send(400, {"error": "bad route key"})
            if data.get("project") or data.get("profile"):
                return _send(403, {"error": "project/profile are not for clients"})
            unknown = [key for key in data if key not in _CLIENT_RUN_FIELDS]
            if unknown:
                return _send(400, {
                    "error": f"undeclared fields: {', '.join(unknown)}"
                })
            if route != "auto" and not self._allows(client, route):
                return _send(403, {"error": f"route {route} not allowed for {client.app_id}"})
            if self._rate_limited(client):
                limit = client.rate_limit_per_min
                return _send(429, {
                    "error": f"rate limited ({limit}/min); retry with the same request_id"
                })
        if route == "auto":
            if self.auto_ambiguous:
                return _send(409, {"error": "route=auto is ambiguous"})
            route = sorted(self.routes)[0]
        if route not in self.routes:
            return _send(400, {"error": f"unknown route {route}"})
        if client is not None and not self._allows(client, route):
            return _send(403, {"error": f"route {route} not allowed for {client.app_id}"})
        for job in self.jobs.values():
            if job["request_id"] == request_id:
                if client is not None and job.get("client_app_id") != client.app_id:
                    return _send(409, {"error": "request_id belongs to another client"})
                return _send(202, {
                    "job_id": job["job_id"], "status": job["status"], "request_id": request_id,
                })
        job = self.add_job(
            str(uuid.uuid4()),
            client_app_id=client.app_id if client else None,
            status="queued",
            request_id=request_id,
            metadata=data.get("metadata") or {},
        )
        job["input"] = text
        job["input_preview"] = text[:200]
        if data.get("callback_url"):
            job["callback_url"] = data["callback_url"]
        job["dispatch"] = {"route_key": route, "route_name": f"Route {route}"}
        return _send(202, {
            "job_id": job["job_id"], "status": "queued", "request_id": request_id,
            "route": route, "target": "llm", "session_id": str(uuid.uuid4()), "continue": False,
        })

    @staticmethod
    def _allows(client: Client, route: str) -> bool:
        return "*" in client.allowed_routes or route in client.allowed_routes


def _send(status: int, body: Any) -> Response:
    return Response(
        json.dumps(body, ensure_ascii=False, separators=(",", ":")),
        status=status,
        headers={"Cache-Control": "no-store"},
        content_type="application/json; charset=utf-8",
    )


@contextmanager
def serve(hub: FakeHub | None = None) -> Iterator[tuple[FakeHub, str]]:
    """Serve ``hub`` (a new one by default) on a loopback port: ``(hub, base_url)``."""
    from werkzeug.serving import make_server

    hub = hub if hub is not None else FakeHub()
    server = make_server("127.0.0.1", 0, hub, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01},
                              daemon=True)
    thread.start()
    try:
        yield hub, f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=5)
        server.server_close()
