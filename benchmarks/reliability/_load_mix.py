"""The requests of the load run, each with the outcome it must get.

Every request the load generator sends is a :class:`Req`: the exact bytes,
a class name (``valid.search``, ``tamper.body``, ...) and an :class:`Expect`
saying whether it is a request the example app must serve (``valid``) or
refuse, and with which status and reason code. :class:`Mix` builds them the
way BailingHub builds its requests (signed per request, ``JSON.stringify``
bodies, ``URLSearchParams`` queries, the idempotency key of side-effecting
tools), for the example app's seeded data (``example_app/seed.py``).

Side effects are tracked in a ledger: each request that can cause one
names its key (a refund request's job id, a phone update's job id, an
approval id); the run checks afterwards that every key that was sent as a
valid call took effect exactly once, and that no refused one did.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
import uuid
from dataclasses import dataclass
from typing import Any

from bailing_flask.hub import posts
from bailing_flask.wire import sign_callback, sign_tool_call
from bailing_flask.testing import PROBE_BODY, PROBE_SUBJECT, catalog_headers, idempotency_key, signed_headers

__all__ = ["Expect", "Req", "Step", "Mix", "TOOLS", "FULL_WEIGHTS", "SIGNED_WEIGHTS", "classify",
           "ledger_detail", "MAX_BODY", "CALLBACK_MAX_BODY"]

#: The example app's limits: the package defaults, which it does not change.
MAX_BODY = 10 * 1024 * 1024
CALLBACK_MAX_BODY = 4 * 1024 * 1024
WINDOW = 300

CATALOG_PATH = "/.well-known/bailing/tools.json"
PROBE_PATH = "/.well-known/bailing/authz-probe"
APPROVAL_PATH = "/.well-known/bailing/callbacks/approval"
JOB_CALLBACK_PATH = "/.well-known/bailing/callbacks/job"

FULL = "t1:u1"        # every permission in t1
READ_ONLY = "t1:u2"   # order.read and refund.read only
OTHER = "t2:u9"       # every permission in t2
CLIENT = "crm"

#: name -> (method, path template, scope, side-effecting as the hub sees it)
TOOLS: dict[str, tuple[str, str, str, bool]] = {
    "order_search": ("GET", "/api/orders", "order.read", False),
    "order_get": ("GET", "/api/orders/{order_id}", "order.read", False),
    "refund_preview": ("POST", "/api/refunds/preview", "refund.read", False),      # readonly=True
    "refund_request_create": ("POST", "/api/refunds/requests", "refund.write", True),
    "refund_execute": ("POST", "/api/refunds/{request_id}/execute", "refund.execute", True),
    "customer_update_phone": ("PUT", "/api/customers/{customer_id}/phone", "customer.write", True),
}

# The seeded data (example_app/seed.py). Refunds go to large orders that nothing else reads in
# full (order_get lists every refund request of an order); reads go to the others.
SEARCHES = {
    FULL: [{"keyword": "耳机"}, {"keyword": "T1-100"}, {"keyword": "Li Wei", "status": "paid"},
           {"keyword": "张三 耳机"}, {}, {"status": "shipped"}],
    READ_ONLY: [{"keyword": "Webcam"}, {"status": "paid"}],
    OTHER: [{"keyword": "Coffee"}, {"keyword": "王五"}, {}],
}
READ_ORDERS = {FULL: [1001, 1003, 1005, 1006, 1008], READ_ONLY: [1003, 1005], OTHER: [2001, 2003, 2004]}
PREVIEWS = {FULL: [(1001, 10.5), (1005, None), (1001, 299.0)], OTHER: [(2001, 3.25), (2004, None)]}
REFUND_ORDERS = {FULL: [1002, 1004, 1007], OTHER: [2002]}
CUSTOMERS = {FULL: [101, 102, 103], OTHER: [201, 202]}
OWN_REFUND_REQUEST = 1  # t1's executed webcam refund


@dataclass(frozen=True)
class Expect:
    """What a request must get.

    ``valid``: a request the app must serve; otherwise one it must refuse.
    ``ok``: the acceptable ``(status, reason)`` pairs (``reason`` ``None``
    matches any); ``body``: bytes the answer must contain.
    """

    valid: bool
    ok: tuple[tuple[int, str | None], ...]
    body: bytes | None = None

    def describe(self) -> str:
        answers = " or ".join(f"{s}" + (f" {r}" if r else "") for s, r in self.ok)
        return ("serve: " if self.valid else "refuse: ") + answers


def accept(*statuses: int, body: bytes | None = None) -> Expect:
    return Expect(True, tuple((s, None) for s in statuses), body)


def refuse(status: int, reason: str) -> Expect:
    return Expect(False, ((status, reason),))


@dataclass
class Req:
    """One request on the wire and what it must get."""

    cls: str
    data: bytes
    expect: Expect
    #: ``(kind, key)`` pairs for requests that can cause a side effect: kinds ``refund``,
    #: ``phone``, ``approval`` (must take effect exactly once), ``refund_none``,
    #: ``approval_none`` (must never take effect)
    ledger: tuple[tuple[str, str], ...] = ()
    #: a chunked upload of this many body bytes follows ``data`` (the head only)
    chunked: int = 0
    #: the connection is closed after the answer (``data`` promised a body it does not send)
    close: bool = False
    #: a signed tool call the hub sends: its latency is part of the signed mix
    signed: bool = False


@dataclass
class Step:
    """Requests sent one after another (``burst=False``) or all at once on their own connections."""

    reqs: list[Req]
    burst: bool = False


@dataclass
class Wire:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes
    job: str = ""
    subject: str | None = None


def form_encode(pairs: list[tuple[str, str]]) -> str:
    """``URLSearchParams.toString()``: ``*-._`` and alphanumerics kept, space as ``+``."""
    out = []
    for name, value in pairs:
        parts = []
        for text in (name, value):
            encoded = []
            for byte in text.encode("utf-8"):
                char = chr(byte)
                if char.isascii() and (char.isalnum() or char in "*-._"):
                    encoded.append(char)
                elif char == " ":
                    encoded.append("+")
                else:
                    encoded.append(f"%{byte:02X}")
            parts.append("".join(encoded))
        out.append("=".join(parts))
    return "&".join(out)


def js_json(value: Any) -> bytes:
    """``JSON.stringify`` for the plain values used here (no floats with ``.0``)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def head(wire: Wire, host: str, *, length: int | None = None, chunked: bool = False) -> bytes:
    lines = [f"{wire.method} {wire.target} HTTP/1.1", f"Host: {host}", "User-Agent: node",
             "Accept: */*"]
    lines += [f"{name}: {value}" for name, value in wire.headers.items()]
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    elif length is not None:
        lines.append(f"Content-Length: {length}")
    elif wire.body or wire.method not in ("GET", "HEAD"):
        lines.append(f"Content-Length: {len(wire.body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def to_bytes(wire: Wire, host: str) -> bytes:
    return head(wire, host) + wire.body


def _sha(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


#: class name -> weight in the full mix (phase one); the weights are relative
FULL_WEIGHTS: dict[str, float] = {
    # requests the hub sends, which must be served
    "valid.search": 14, "valid.get": 8, "valid.preview": 6,
    "valid.refund": 8, "valid.refund_repeat": 3, "valid.refund_burst": 2,
    "valid.phone": 3, "valid.phone_once": 1, "valid.phone_burst": 1, "valid.refund_chunked": 1,
    "valid.refund_key_changed": 1, "valid.refund_too_much": 1, "valid.search_dots": 2,
    "valid.catalog": 1, "valid.probe": 1,
    "valid.approval": 2, "valid.approval_retry": 1, "valid.approval_burst": 1,
    "valid.page": 4,
    # one signed element changed at a time
    "tamper.timestamp": 2, "tamper.method": 2, "tamper.path": 2, "tamper.query": 2,
    "tamper.body": 2, "tamper.subject": 2, "tamper.subject_dropped": 1, "tamper.job": 2,
    "tamper.signature": 2, "tamper.signature_case": 1, "tamper.wrong_key": 1,
    "tamper.path_encoding": 1, "tamper.double_slash": 1, "tamper.subject_twice": 1,
    "tamper.timestamp_padded": 1,
    # the canonical string read another way
    "shift.body_hash": 2, "shift.query_lengthened": 1, "shift.subject_job": 1,
    # outside the window, unsigned, oversized, a body on a GET
    "window.expired": 2, "window.future": 2, "window.milliseconds": 1,
    "window.expired_large_body": 0.2,
    "unsigned.tool": 3, "get_with_body": 1,
    "oversize.declared": 1, "oversize.chunked": 0.05, "oversize.callback": 0.5,
    # signed by the hub, refused by the app's own rules
    "deny.read_only_user": 1, "deny.other_tenant": 1, "deny.unknown_subject": 1,
    "deny.anonymous": 1, "deny.unapproved_payout": 1, "deny.latin1_subject": 0.5,
    "args.unknown": 1, "args.invalid": 1, "args.not_json": 0.5, "args.spooled_body": 0.2,
    # catalog and callbacks signed wrongly
    "catalog.unsigned": 0.5, "catalog.zero_signature": 0.5,
    "callback.bad_signature": 1, "callback.wrong_key": 1, "callback.seconds": 0.5,
    "callback.expired": 0.5, "callback.unsigned": 0.5, "callback.no_handler": 0.5,
}

#: the signed mix of the comparison with the bare app: the hub's valid tool calls, each sent once.
#: No duplicates: the shop without the package runs a duplicate again (four concurrent copies are
#: four refund requests queueing for SQLite's write lock), where the package answers it from its
#: record without touching the shop's database, so a mix with duplicates compares different
#: database work (duplicates are part of the full mix, where every answer is checked)
SIGNED_WEIGHTS: dict[str, float] = {
    "valid.search": 14, "valid.get": 8, "valid.preview": 6, "valid.refund": 8, "valid.phone_once": 3,
}


class Mix:
    """Builds the requests of one generator process (its own job ids, approval ids, randomness)."""

    def __init__(self, secret: str, client_token: str, host: str, *, index: int, seed: int,
                 clock: Any = time.time) -> None:
        self.secret = secret
        self.client_token = client_token
        self.host = host
        self.rng = random.Random(seed)
        self.clock = clock
        # ids of different mixes never meet (each draws at most a million)
        self._approval_ids = iter(range((index + 1) * 1_000_000, (index + 2) * 1_000_000))
        self._job_prefix = f"load{index}-"

    # -- building blocks -------------------------------------------------------------------

    def job(self) -> str:
        return self._job_prefix + str(uuid.uuid4())

    def now(self) -> int:
        return int(self.clock())

    def call(self, tool: str, args: dict[str, Any], subject: str | None, *, job: str | None = None,
             ts: int | None = None, secret: str | None = None) -> Wire:
        """The request the hub sends for ``tool(**args)``, signed now."""
        method, template, scope, side_effecting = TOOLS[tool]
        path = template
        rest: dict[str, Any] = {}
        for name, value in args.items():
            if "{" + name + "}" in path:
                path = path.replace("{" + name + "}", str(value))
            elif value is not None:
                rest[name] = value
        if method == "GET":
            query = form_encode([(k, str(v)) for k, v in rest.items()])
            body = b""
        else:
            query = ""
            body = js_json(rest)
        target = path + ("?" + query if query else "")
        job = job or self.job()
        key = idempotency_key(tool, args, job, subject) if side_effecting else None
        headers = signed_headers(secret or self.secret, method, target, body, subject=subject,
                                 job_id=job, client=CLIENT, tool_scope=scope, idempotency_key=key,
                                 ts=self.now() if ts is None else ts)
        if body:
            headers["Content-Type"] = "application/json"
        return Wire(method, target, headers, body, job, subject)

    def req(self, cls: str, wire: Wire, expect: Expect, **extra: Any) -> Req:
        return Req(cls, to_bytes(wire, self.host), expect, **extra)

    def resign(self, wire: Wire) -> Wire:
        """The same call signed again with a fresh timestamp (the same job: the same call)."""
        headers = dict(wire.headers)
        stamp = self.now()
        headers["X-Bailing-Timestamp"] = str(stamp)
        headers["X-Bailing-Signature"] = sign_tool_call(
            self.secret, stamp, wire.method, wire.target, wire.body, wire.subject or "", wire.job)
        return Wire(wire.method, wire.target, headers, wire.body, wire.job, wire.subject)

    # -- valid arguments ---------------------------------------------------------------------

    def _search(self) -> tuple[dict[str, Any], str]:
        subject = self.rng.choice([FULL, FULL, READ_ONLY, OTHER])
        return dict(self.rng.choice(SEARCHES[subject])), subject

    def _get(self) -> tuple[dict[str, Any], str]:
        subject = self.rng.choice([FULL, FULL, READ_ONLY, OTHER])
        return {"order_id": self.rng.choice(READ_ORDERS[subject])}, subject

    def _preview(self) -> tuple[dict[str, Any], str]:
        subject = self.rng.choice([FULL, FULL, OTHER])
        order, amount = self.rng.choice(PREVIEWS[subject])
        args: dict[str, Any] = {"order_id": order}
        if amount is not None:
            args["amount"] = amount
        return args, subject

    def _refund(self) -> tuple[dict[str, Any], str]:
        subject = self.rng.choice([FULL, FULL, FULL, OTHER])
        order = self.rng.choice(REFUND_ORDERS[subject])
        return {"order_id": order, "amount": 0.01,
                "reason": f"load test {self.rng.randrange(10**6)}"}, subject

    def _phone(self) -> tuple[dict[str, Any], str]:
        subject = self.rng.choice([FULL, OTHER])
        customer = self.rng.choice(CUSTOMERS[subject])
        digits = "".join(self.rng.choice("0123456789") for _ in range(8))
        return {"customer_id": customer, "phone": f"+86 13{digits[:1]} {digits[1:5]} {digits[5:]}0"}, subject

    def _approval(self, ts_ms: int | None = None, *, key: str | None = None) -> tuple[Wire, int]:
        approval_id = next(self._approval_ids)
        job = self.job()
        payload = posts.approval_request(
            approval_id=approval_id,
            job=posts.job_record(job_id=job, subject=FULL, status="done"),
            tool="refund_execute", scope="refund.execute", method="POST",
            path="/api/refunds/{request_id}/execute", args={"request_id": OWN_REFUND_REQUEST},
            risk="high", subject=FULL,
        )
        body = js_json(payload)
        return self._callback_wire(APPROVAL_PATH, body, ts_ms, key), approval_id

    def _callback_wire(self, path: str, body: bytes, ts_ms: int | None = None,
                       key: str | None = None) -> Wire:
        stamp = str(int(self.clock() * 1000) if ts_ms is None else ts_ms)
        headers = {"Content-Type": "application/json", "X-Bailing-Timestamp": stamp,
                   "X-Bailing-Signature": sign_callback(key or self.client_token, stamp, body)}
        return Wire("POST", path, headers, body)

    # -- the scenarios -------------------------------------------------------------------------

    def step(self, weights: dict[str, float]) -> Step:
        names = list(weights)
        name = self.rng.choices(names, weights=[weights[n] for n in names])[0]
        built = getattr(self, "s_" + name.replace(".", "_"))()
        return built if isinstance(built, Step) else Step([built])

    # valid ------------------------------------------------------------------------------------

    def s_valid_search(self) -> Req:
        args, subject = self._search()
        return self.req("valid.search", self.call("order_search", args, subject), accept(200),
                        signed=True)

    def s_valid_get(self) -> Req:
        args, subject = self._get()
        return self.req("valid.get", self.call("order_get", args, subject), accept(200), signed=True)

    def s_valid_preview(self) -> Req:
        args, subject = self._preview()
        return self.req("valid.preview", self.call("refund_preview", args, subject), accept(200),
                        signed=True)

    def s_valid_refund(self) -> Req:
        args, subject = self._refund()
        wire = self.call("refund_request_create", args, subject)
        return self.req("valid.refund", wire, accept(201), ledger=(("refund", wire.job),), signed=True)

    def s_valid_refund_repeat(self) -> Step:
        """The same call three times in a row: the same bytes again, then signed again (same job)."""
        args, subject = self._refund()
        wire = self.call("refund_request_create", args, subject)
        ledger = (("refund", wire.job),)
        again = self.resign(wire)
        return Step([self.req("valid.refund_repeat", w, accept(201), ledger=ledger, signed=True)
                     for w in (wire, wire, again)])

    def s_valid_refund_burst(self) -> Step:
        """The same call four times at once, on four connections."""
        args, subject = self._refund()
        wire = self.call("refund_request_create", args, subject)
        expect = Expect(True, ((201, None), (409, "idempotency_in_progress")))
        wires = [wire, wire, self.resign(wire), self.resign(wire)]
        return Step([self.req("valid.refund_burst", w, expect, ledger=(("refund", wire.job),), signed=True)
                     for w in wires], burst=True)

    def s_valid_phone(self) -> Step:
        """A phone update, then the same call again (replayed from the record)."""
        args, subject = self._phone()
        wire = self.call("customer_update_phone", args, subject)
        ledger = (("phone", wire.job),)
        return Step([self.req("valid.phone", w, accept(200), ledger=ledger, signed=True)
                     for w in (wire, self.resign(wire))])

    def s_valid_phone_once(self) -> Req:
        """A phone update, sent once."""
        args, subject = self._phone()
        wire = self.call("customer_update_phone", args, subject)
        return self.req("valid.phone_once", wire, accept(200), ledger=(("phone", wire.job),), signed=True)

    def s_valid_phone_burst(self) -> Step:
        args, subject = self._phone()
        wire = self.call("customer_update_phone", args, subject)
        expect = Expect(True, ((200, None), (409, "idempotency_in_progress")))
        return Step([self.req("valid.phone_burst", w, expect, ledger=(("phone", wire.job),), signed=True)
                     for w in (wire, wire, self.resign(wire))], burst=True)

    def s_valid_refund_chunked(self) -> Req:
        """A signed refund whose body arrives chunked (the hub sends a Content-Length; a proxy may not)."""
        args, subject = self._refund()
        wire = self.call("refund_request_create", args, subject)
        middle = len(wire.body) // 2
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part)
                          for part in (wire.body[:middle], wire.body[middle:]))
        return Req("valid.refund_chunked", head(wire, self.host, chunked=True) + chunks + b"0\r\n\r\n",
                   accept(201), ledger=(("refund", wire.job),), signed=True)

    def s_valid_refund_key_changed(self) -> Step:
        """The same signed call again with another (unsigned) idempotency key: still the same call."""
        args, subject = self._refund()
        wire = self.call("refund_request_create", args, subject)
        changed = self.resign(wire)
        changed.headers["X-Bailing-Idempotency-Key"] = _sha(wire.job.encode())
        ledger = (("refund", wire.job),)
        return Step([self.req("valid.refund_key_changed", w, accept(201), ledger=ledger, signed=True)
                     for w in (wire, changed)])

    def s_valid_refund_too_much(self) -> Step:
        """A refund the shop's rules refuse (more than the order's amount): the refusal is the
        answer, recorded and replayed like any other, and nothing is filed."""
        subject = self.rng.choice([FULL, OTHER])
        order = {FULL: 1005, OTHER: 2004}[subject]
        wire = self.call("refund_request_create",
                         {"order_id": order, "amount": 5000, "reason": "more than was paid"}, subject)
        expect = Expect(True, ((409, "amount_exceeds_refundable"),))
        ledger = (("refund_none", wire.job),)
        return Step([self.req("valid.refund_too_much", w, expect, ledger=ledger, signed=True)
                     for w in (wire, self.resign(wire))])

    def s_valid_search_dots(self) -> Req:
        """Query values with dots and hex strings, as models write them: they must pass."""
        keyword = self.rng.choice([
            "T1-100.5", "v1.2.3", "a.b.c.d", _sha(b"x"), "x." + _sha(b"y")[:40] + ".z", "Li.Wei",
        ])
        return self.req("valid.search_dots", self.call("order_search", {"keyword": keyword}, FULL),
                        accept(200), signed=True)

    def s_valid_catalog(self) -> Req:
        wire = Wire("GET", CATALOG_PATH, catalog_headers(self.secret, CATALOG_PATH, ts=self.now()), b"")
        return self.req("valid.catalog", wire, accept(200, body=b'"openapi"'))

    def s_valid_probe(self) -> Req:
        body = PROBE_BODY.encode("utf-8")
        headers = signed_headers(self.secret, "POST", PROBE_PATH, body, subject=PROBE_SUBJECT,
                                 job_id="probe", client="__probe__", tool_scope="__probe__.authz",
                                 ts=self.now())
        headers["Content-Type"] = "application/json"
        return self.req("valid.probe", Wire("POST", PROBE_PATH, headers, body),
                        accept(200, body=b'"authorized":false'))

    def s_valid_approval(self) -> Req:
        wire, approval_id = self._approval()
        return self.req("valid.approval", wire, accept(200, body=b'"ok":true'),
                        ledger=(("approval", str(approval_id)),))

    def s_valid_approval_retry(self) -> Step:
        """The hub's retry of one approval request: the identical body, a fresh signature."""
        wire, approval_id = self._approval()
        again = self._callback_wire(APPROVAL_PATH, wire.body)
        ledger = (("approval", str(approval_id)),)
        return Step([self.req("valid.approval_retry", w, accept(200, body=b'"ok":true'), ledger=ledger)
                     for w in (wire, again)])

    def s_valid_approval_burst(self) -> Step:
        wire, approval_id = self._approval()
        expect = Expect(True, ((200, None), (503, "in_progress")))
        wires = [wire, self._callback_wire(APPROVAL_PATH, wire.body),
                 self._callback_wire(APPROVAL_PATH, wire.body)]
        return Step([self.req("valid.approval_burst", w, expect, ledger=(("approval", str(approval_id)),))
                     for w in wires], burst=True)

    def s_valid_page(self) -> Req:
        """The back office's own pages, unsigned: they work as without the package."""
        path, status = self.rng.choice([("/login", 200), ("/login", 200), ("/", 302), ("/orders", 302)])
        return self.req("valid.page", Wire("GET", path, {}, b""), accept(status))

    # one signed element tampered -----------------------------------------------------------------

    def _any_call(self) -> Wire:
        """A valid call of a random tool, never sent as it is."""
        kind = self.rng.choice(["search", "get", "refund", "phone"])
        if kind == "search":
            args, subject = self._search()
            return self.call("order_search", args, subject)
        if kind == "get":
            args, subject = self._get()
            return self.call("order_get", args, subject)
        if kind == "refund":
            args, subject = self._refund()
            return self.call("refund_request_create", args, subject)
        args, subject = self._phone()
        return self.call("customer_update_phone", args, subject)

    def _tampered(self, cls: str, wire: Wire, reason: str = "bad_signature", status: int = 401) -> Req:
        refund = wire.target.startswith("/api/refunds/requests") or b'"reason":' in wire.body
        ledger = (("refund_none", wire.job),) if refund and wire.job else ()
        return self.req(cls, wire, refuse(status, reason), ledger=ledger)

    def s_tamper_timestamp(self) -> Req:
        wire = self._any_call()
        wire.headers["X-Bailing-Timestamp"] = str(int(wire.headers["X-Bailing-Timestamp"]) - 1)
        return self._tampered("tamper.timestamp", wire)

    def s_tamper_method(self) -> Req:
        wire = self._any_call()
        wire.method = {"GET": "DELETE", "POST": "PUT", "PUT": "POST"}[wire.method]
        return self._tampered("tamper.method", wire)

    def s_tamper_path(self) -> Req:
        wire = self._any_call()
        path, sep, query = wire.target.partition("?")
        if path.startswith("/api/orders/"):
            path = "/api/orders/" + str(int(path.rsplit("/", 1)[1]) + 1)
        elif path == "/api/orders":
            path = "/api/orders/1003"
        elif path == "/api/refunds/requests":
            path = "/api/refunds/preview"
        else:  # /api/customers/<id>/phone
            parts = path.split("/")
            parts[3] = str(int(parts[3]) + 1)
            path = "/".join(parts)
        wire.target = path + sep + query
        return self._tampered("tamper.path", wire)

    def s_tamper_query(self) -> Req:
        wire = self._any_call()
        path, _, query = wire.target.partition("?")
        wire.target = path + "?" + (query.replace("=", "=x", 1) if query else "status=paid")
        return self._tampered("tamper.query", wire)

    def s_tamper_body(self) -> Req:
        kind = self.rng.choice(["refund", "phone"])
        if kind == "refund":
            args, subject = self._refund()
            wire = self.call("refund_request_create", args, subject)
            wire.body = wire.body.replace(b'"amount":0.01', b'"amount":900')
        else:
            args, subject = self._phone()
            wire = self.call("customer_update_phone", args, subject)
            wire.body = js_json({"phone": "+1 555 0199"})
        return self._tampered("tamper.body", wire)

    def s_tamper_subject(self) -> Req:
        """A read-only user's call re-sent as the user who may do everything."""
        args, _ = self._refund()
        args["order_id"] = self.rng.choice(REFUND_ORDERS[FULL])
        wire = self.call("refund_request_create", args, READ_ONLY)
        wire.headers["X-Bailing-On-Behalf-Of"] = FULL
        return self._tampered("tamper.subject", wire)

    def s_tamper_subject_dropped(self) -> Req:
        wire = self._any_call()
        del wire.headers["X-Bailing-On-Behalf-Of"]
        return self._tampered("tamper.subject_dropped", wire)

    def s_tamper_job(self) -> Req:
        wire = self._any_call()
        other = self.job()
        wire.headers["X-Bailing-Job-Id"] = other
        req = self._tampered("tamper.job", wire)
        if req.ledger:  # neither job may get a refund
            req.ledger += (("refund_none", other),)
        return req

    def s_tamper_signature(self) -> Req:
        wire = self._any_call()
        signature = wire.headers["X-Bailing-Signature"]
        position = self.rng.randrange(7, len(signature))
        flipped = "0" if signature[position] != "0" else "1"
        wire.headers["X-Bailing-Signature"] = signature[:position] + flipped + signature[position + 1:]
        return self._tampered("tamper.signature", wire)

    def s_tamper_signature_case(self) -> Req:
        wire = self._any_call()
        signature = wire.headers["X-Bailing-Signature"]
        upper = "sha256=" + signature[7:].upper()
        if upper == signature:  # all digits: cannot happen in practice, but stay exact
            upper = "sha256=" + "A" + signature[8:]
        wire.headers["X-Bailing-Signature"] = upper
        return self._tampered("tamper.signature_case", wire, "malformed_signature")

    def s_tamper_wrong_key(self) -> Req:
        """Signed with the client token instead of the provider secret."""
        args, subject = self._search()
        wire = self.call("order_search", args, subject, secret=self.client_token)
        return self._tampered("tamper.wrong_key", wire)

    def s_tamper_path_encoding(self) -> Req:
        """The signed path sent in another, equivalent spelling (``%6F`` for ``o``)."""
        wire = self._any_call()
        wire.target = wire.target.replace("/api/o", "/api/%6F", 1).replace("/api/r", "/api/%72", 1).replace(
            "/api/c", "/api/%63", 1)
        return self._tampered("tamper.path_encoding", wire)

    def s_tamper_double_slash(self) -> Req:
        wire = self._any_call()
        wire.target = "/" + wire.target
        return self._tampered("tamper.double_slash", wire)

    def s_tamper_subject_twice(self) -> Req:
        """The signed subject, and a second On-Behalf-Of header naming another user."""
        wire = self.call("order_get", {"order_id": self.rng.choice(READ_ORDERS[FULL])}, READ_ONLY)
        req = self._tampered("tamper.subject_twice", wire)
        marker = b"X-Bailing-On-Behalf-Of: " + READ_ONLY.encode() + b"\r\n"
        req.data = req.data.replace(marker, marker + b"X-Bailing-On-Behalf-Of: " + FULL.encode() + b"\r\n", 1)
        return req

    def s_tamper_timestamp_padded(self) -> Req:
        """The signed timestamp with a leading zero: the same number, other signed bytes."""
        wire = self._any_call()
        wire.headers["X-Bailing-Timestamp"] = "0" + wire.headers["X-Bailing-Timestamp"]
        return self._tampered("tamper.timestamp_padded", wire)

    # the canonical string read another way -------------------------------------------------------

    def s_shift_body_hash(self) -> Req:
        """The captured call had ``.<sha256 of B>.`` in a query value: cut the query, send ``B``,
        lengthen the subject. The signed bytes are identical."""
        args, _ = self._refund()
        forged_body = js_json(args)  # a refund the hub never asked for
        original_body = js_json({"order_id": args["order_id"], "amount": 0.01, "reason": "original"})
        job = self.job()
        stamp = self.now()
        original_target = f"/api/refunds/requests?note=x.{_sha(forged_body)}.junk"
        signature = sign_tool_call(self.secret, stamp, "POST", original_target, original_body, FULL, job)
        headers = {"X-Bailing-Timestamp": str(stamp), "X-Bailing-Signature": signature,
                   "X-Bailing-Job-Id": job, "X-Bailing-Client": CLIENT,
                   "X-Bailing-On-Behalf-Of": f"junk.{_sha(original_body)}.{FULL}",
                   "X-Bailing-Tool-Scope": "refund.write", "Content-Type": "application/json"}
        wire = Wire("POST", "/api/refunds/requests?note=x", headers, forged_body, job)
        return self._tampered("shift.body_hash", wire, "ambiguous_signature")

    def s_shift_query_lengthened(self) -> Req:
        """The other direction, on a read: the subject's start moved into the query.

        (On a write the same reading needs the hub to have signed a subject holding
        ``.<sha256>.``, which is refused on every call; that write is not refused.)
        """
        job = self.job()
        stamp = self.now()
        empty = _sha(b"")
        original_subject = f"zz.{empty}.{FULL}"
        signature = sign_tool_call(self.secret, stamp, "GET", "/api/orders?keyword=a", b"",
                                   original_subject, job)
        headers = {"X-Bailing-Timestamp": str(stamp), "X-Bailing-Signature": signature,
                   "X-Bailing-Job-Id": job, "X-Bailing-Client": CLIENT,
                   "X-Bailing-On-Behalf-Of": FULL, "X-Bailing-Tool-Scope": "order.read"}
        target = f"/api/orders?keyword=a.{empty}.zz"
        return self._tampered("shift.query_lengthened", Wire("GET", target, headers, b"", job),
                              "ambiguous_signature")

    def s_shift_subject_job(self) -> Req:
        """A subject with a '.' signed for one user, re-split so the subject is another one."""
        args, _ = self._refund()
        job = self.job()
        wire = self.call("refund_request_create", args, FULL + ".ops", job=job)
        wire.headers["X-Bailing-On-Behalf-Of"] = FULL
        wire.headers["X-Bailing-Job-Id"] = "ops." + job
        req = self._tampered("shift.subject_job", wire, "malformed_job_id")
        req.ledger += (("refund_none", "ops." + job),)
        return req

    # window, unsigned, oversized ---------------------------------------------------------------------

    def s_window_expired(self) -> Req:
        args, subject = self._get()
        wire = self.call("order_get", args, subject, ts=self.now() - WINDOW - self.rng.randrange(1, 3600))
        return self._tampered("window.expired", wire, "timestamp_out_of_window")

    def s_window_future(self) -> Req:
        args, subject = self._refund()
        wire = self.call("refund_request_create", args, subject,
                         ts=self.now() + WINDOW + self.rng.randrange(1, 3600))
        return self._tampered("window.future", wire, "timestamp_out_of_window")

    def s_window_expired_large_body(self) -> Req:
        """Outside the window with a 4 MiB body: refused before the body is read, and the
        refusal still reaches the client."""
        args, subject = self._refund()
        args["reason"] = "r" * (4 * 1024 * 1024)
        wire = self.call("refund_request_create", args, subject, ts=self.now() - WINDOW - 60)
        req = self._tampered("window.expired_large_body", wire, "timestamp_out_of_window")
        req.close = True
        return req

    def s_window_milliseconds(self) -> Req:
        args, subject = self._search()
        wire = self.call("order_search", args, subject, ts=int(self.clock() * 1000))
        return self._tampered("window.milliseconds", wire, "malformed_timestamp")

    def s_unsigned_tool(self) -> Req:
        wire = self._any_call()
        for name in list(wire.headers):
            if name.startswith("X-Bailing-"):
                del wire.headers[name]
        return self._tampered("unsigned.tool", wire, "missing_signature")

    def s_get_with_body(self) -> Req:
        """A GET tool call carrying a body, signed over that body: the hub never sends one."""
        args, subject = self._search()
        wire = self.call("order_search", args, subject)
        body = js_json({"keyword": "x"})
        wire.headers = signed_headers(self.secret, "GET", wire.target, body, subject=subject,
                                      job_id=wire.job, client=CLIENT, tool_scope="order.read",
                                      ts=self.now())
        wire.body = body
        return self._tampered("get_with_body", wire, "unexpected_body")

    def s_oversize_declared(self) -> Req:
        """A signed POST announcing a body past the limit; refused before any of it is read."""
        args, subject = self._refund()
        wire = self.call("refund_request_create", args, subject)
        return Req("oversize.declared", head(wire, self.host, length=MAX_BODY + 1),
                   refuse(413, "body_too_large"), ledger=(("refund_none", wire.job),), close=True)

    def s_oversize_chunked(self) -> Req:
        """A chunked signed POST that never ends: refused once past the limit."""
        args, subject = self._refund()
        wire = self.call("refund_request_create", args, subject)
        return Req("oversize.chunked", head(wire, self.host, chunked=True), refuse(413, "body_too_large"),
                   ledger=(("refund_none", wire.job),), chunked=MAX_BODY + 2 * 1024 * 1024, close=True)

    def s_oversize_callback(self) -> Req:
        wire, approval_id = self._approval()
        return Req("oversize.callback", head(wire, self.host, length=CALLBACK_MAX_BODY + 1),
                   refuse(413, "body_too_large"), ledger=(("approval_none", str(approval_id)),), close=True)

    # signed by the hub, refused by the app's rules ---------------------------------------------------

    def s_deny_read_only_user(self) -> Req:
        args, _ = self._refund()
        args["order_id"] = self.rng.choice(REFUND_ORDERS[FULL])
        wire = self.call("refund_request_create", args, READ_ONLY)
        return self._tampered("deny.read_only_user", wire, "forbidden", 403)

    def s_deny_other_tenant(self) -> Req:
        wire = self.call("order_get", {"order_id": self.rng.choice(READ_ORDERS[FULL])}, OTHER)
        return self._tampered("deny.other_tenant", wire, "forbidden", 403)

    def s_deny_unknown_subject(self) -> Req:
        wire = self.call("order_search", {}, self.rng.choice(["t3:nobody", PROBE_SUBJECT, "t1:"]))
        return self._tampered("deny.unknown_subject", wire, "forbidden", 403)

    def s_deny_anonymous(self) -> Req:
        wire = self.call("order_search", {}, None)
        return self._tampered("deny.anonymous", wire, "subject_required", 403)

    def s_deny_unapproved_payout(self) -> Req:
        wire = self.call("refund_execute", {"request_id": OWN_REFUND_REQUEST}, FULL)
        return self._tampered("deny.unapproved_payout", wire, "business_approval_required", 403)

    def s_deny_latin1_subject(self) -> Req:
        """A subject with a Latin-1 letter (signed as UTF-8, sent as one byte): verified, then
        refused by the shop, which has no such user."""
        wire = self.call("order_search", {}, "t1:j\u00fcrgen")
        return self._tampered("deny.latin1_subject", wire, "forbidden", 403)

    def s_args_spooled_body(self) -> Req:
        """A correctly signed 2 MiB body: spooled to a temporary file while it is verified, then
        refused by the tool's declaration (the reason is too long)."""
        args, subject = self._refund()
        args["reason"] = "r" * (2 * 1024 * 1024)
        wire = self.call("refund_request_create", args, subject)
        return self._tampered("args.spooled_body", wire, "invalid_parameter", 422)

    def s_args_unknown(self) -> Req:
        wire = self.call("order_search", {"keyword": "耳机", "limit": 5}, FULL)
        return self._tampered("args.unknown", wire, "unknown_parameter", 422)

    def s_args_invalid(self) -> Req:
        if self.rng.random() < 0.5:
            wire = self.call("order_search", {"status": "lost"}, FULL)
        else:
            args, subject = self._refund()
            args["amount"] = 0.001
            wire = self.call("refund_request_create", args, subject)
        return self._tampered("args.invalid", wire, "invalid_parameter", 422)

    def s_args_not_json(self) -> Req:
        """A signed body that is not a JSON object (the hub always sends one)."""
        args, subject = self._refund()
        wire = self.call("refund_request_create", args, subject)
        body = self.rng.choice([b"[]", b"not json", b'"text"'])
        wire.body = body
        wire.headers = signed_headers(self.secret, "POST", wire.target, body, subject=subject,
                                      job_id=wire.job, client=CLIENT, tool_scope="refund.write",
                                      ts=self.now())
        wire.headers["Content-Type"] = "application/json"
        return self._tampered("args.not_json", wire, "invalid_body", 422)

    # catalog and callbacks signed wrongly -------------------------------------------------------------

    def s_catalog_unsigned(self) -> Req:
        return self.req("catalog.unsigned", Wire("GET", CATALOG_PATH, {}, b""),
                        refuse(401, "missing_signature"))

    def s_catalog_zero_signature(self) -> Req:
        headers = catalog_headers(self.secret, CATALOG_PATH, ts=self.now())
        headers["X-Bailing-Signature"] = "sha256=" + "0" * 64  # the hub's own negative probe
        return self.req("catalog.zero_signature", Wire("GET", CATALOG_PATH, headers, b""),
                        refuse(401, "bad_signature"))

    def _bad_callback(self, cls: str, wire: Wire, approval_id: int, reason: str,
                      status: int = 401) -> Req:
        return self.req(cls, wire, refuse(status, reason), ledger=(("approval_none", str(approval_id)),))

    def s_callback_bad_signature(self) -> Req:
        wire, approval_id = self._approval()
        wire.body = wire.body.replace(b'"risk":"high"', b'"risk":"low"')
        return self._bad_callback("callback.bad_signature", wire, approval_id, "bad_signature")

    def s_callback_wrong_key(self) -> Req:
        wire, approval_id = self._approval(key=self.secret)  # the provider secret: the wrong key
        return self._bad_callback("callback.wrong_key", wire, approval_id, "wrong_key")

    def s_callback_seconds(self) -> Req:
        wire, approval_id = self._approval(ts_ms=self.now())  # seconds where milliseconds belong
        return self._bad_callback("callback.seconds", wire, approval_id, "timestamp_out_of_window")

    def s_callback_expired(self) -> Req:
        stamp = int(self.clock() * 1000) - WINDOW * 1000 - self.rng.randrange(1, 3_600_000)
        wire, approval_id = self._approval(ts_ms=stamp)
        return self._bad_callback("callback.expired", wire, approval_id, "timestamp_out_of_window")

    def s_callback_unsigned(self) -> Req:
        wire, approval_id = self._approval()
        del wire.headers["X-Bailing-Signature"], wire.headers["X-Bailing-Timestamp"]
        return self._bad_callback("callback.unsigned", wire, approval_id, "missing_signature")

    def s_callback_no_handler(self) -> Req:
        """A finished job's record: the example app registers no handler for it."""
        record = posts.job_record(job_id=self.job(), subject=FULL)
        wire = self._callback_wire(JOB_CALLBACK_PATH, js_json(record))
        return self.req("callback.no_handler", wire, refuse(404, "no_handler"))


def ledger_detail(kind: str, status: int, reason: str | None, replayed: bool, body: bytes) -> str:
    """What one answer means for its side effect: ``fresh`` (it ran), ``replayed`` (answered from
    the record), ``in_progress`` (a concurrent duplicate), or ``refused``."""
    if kind == "approval":
        if status == 200:
            return "replayed" if b'"duplicate":true' in body else "fresh"
        if status == 503 and reason == "in_progress":
            return "in_progress"
        return "refused"
    if 200 <= status < 300:
        return "replayed" if replayed else "fresh"
    if status == 409 and reason == "idempotency_in_progress":
        return "in_progress"
    return "refused"


def classify(expect: Expect, status: int, reason: str | None, body: bytes) -> str:
    """``ok``, ``server_error`` (5xx), ``false_accept``, ``false_reject``, ``unexpected``
    (answered otherwise than expected, neither of the two), or ``transport_error`` (no answer)."""
    if status == 0:
        return "transport_error"
    if status >= 500 and not any(s == status for s, _ in expect.ok):
        return "server_error"
    matched = any(s == status and (r is None or r == reason) for s, r in expect.ok) and (
        expect.body is None or expect.body in body)
    if matched:
        return "ok"
    if expect.valid:
        return "false_reject" if status >= 400 else "unexpected"
    if status < 400:
        return "false_accept"
    return "unexpected"
