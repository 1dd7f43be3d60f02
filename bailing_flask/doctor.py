"""``flask bailing doctor``: look at a live deployment the way BailingHub does.

The doctor sends the hub's own requests to a running deployment (over the
network, through every proxy, CDN and gateway in front of the app) and
says what the hub would conclude, why, and how to fix it:

* the catalog fetch of the ``signed_required`` policy (``CONTRACT.md`` §4):
  a signed ``GET spec_url`` that never follows redirects, then, after a 2xx,
  two concurrent negative probes (unsigned; same timestamp with
  ``sha256=`` + 64 zeros), classified exactly like the hub
  (``protected`` / ``public`` / ``inconclusive``);
* the catalog response itself (``Cache-Control: private, no-store``, caches
  that hand the signed copy to anyone, content type, 5 MiB, JSON object)
  and the lint of what is actually served;
* the authorization probe (§5), with the hub's target choice and
  classification, plus two stricter checks the hub does not make (a
  ``pass`` that only means "the signature was refused", and an endpoint
  that answers an invalid signature);
* the clock difference visible in the ``Date`` header (§2.3);
* one signed call to a parameter-less read tool, as the hub sends it (§3),
  with redirects followed like the hub's ``fetch`` does, so a redirect or
  a ``404`` (``base_url`` prefix) shows up;
* to every POST/PUT/PATCH/DELETE tool, the hub's request as the probe
  subject with an undeclared argument (the gate refuses it before
  authorization), so a CSRF check, a session guard or a login redirect in
  front of the write tools shows up too;
* every redirect seen on the way (trap T8).

When a signature is refused, the doctor tries a few corrected signatures
(another path prefix, the server's own clock) to name the cause instead of
listing every possibility. These diagnostic requests are marked as such;
the hub itself never sends them.

Usage::

    report = run_doctor("https://shop.example.com/openapi", secret)
    print(report.render())
    sys.exit(0 if report.ok else 1)
"""

from __future__ import annotations

import concurrent.futures
import email.utils
import http.client
import json
import math
import socket
import ssl
import textwrap
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urljoin, urlsplit

from ._jsenc import js_trim as _js_trim
from .lint import (
    CompiledTool,
    ProbeTarget,
    authz_probe_target,
    compile_tools,
    lint_document,
)
from .signing import sign_tool_call

__all__ = [
    "CHECK_NAMES",
    "CatalogAccess",
    "Check",
    "DoctorReport",
    "ProbeOutcome",
    "run_doctor",
]

CheckStatus = Literal["pass", "warn", "fail", "skip"]
Policy = Literal["signed_required", "public_allowed"]

#: Every check, in report order (``base_url`` only runs when the app's own base URL is known).
CHECK_NAMES: tuple[str, ...] = (
    "base_url",
    "catalog.access",
    "catalog.caching",
    "catalog.body",
    "catalog.lint",
    "authz_probe",
    "authz_probe.verifies",
    "clock",
    "tool_call",
    "write_tools",
    "redirects",
)

WELL_KNOWN_CATALOG = "/.well-known/bailing/tools.json"
SPEC_MAX_BYTES = 5 * 1024 * 1024
WINDOW_SECONDS = 300
#: Clock differences up to this many seconds are normal (Date has 1 s resolution).
CLOCK_TOLERANCE = 5
PROBE_SUBJECT = "__bailing_authz_probe__:nobody"
PROBE_BODY = b'{"subject":"__bailing_authz_probe__:nobody","reason":"bailing-authz-probe","expect":"deny"}'
ZERO_SIGNATURE = "sha256=" + "0" * 64
#: The undeclared argument the write-tool check adds, so the gate refuses before authorization.
_DOCTOR_MARKER = "__bailing_doctor__"
#: The headers Node's fetch adds to every hub request (CONTRACT.md §3.10).
_NODE_HEADERS = (
    ("accept", "*/*"),
    ("accept-language", "*"),
    ("sec-fetch-mode", "cors"),
    ("user-agent", "node"),
    ("accept-encoding", "gzip, deflate"),
)
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_PROTECTED_NEGATIVE = frozenset({401, 403, 404})
_SIGNATURE_REASONS = frozenset(
    {
        "bad_signature",
        "timestamp_out_of_window",
        "missing_signature",
        "malformed_signature",
        "malformed_timestamp",
        "malformed_job_id",
        "wrong_key",
        "replayed",
    }
)
_KNOWN_REASONS = _SIGNATURE_REASONS | {
    "forbidden",
    "subject_required",
    "no_authorizer",
    "unknown_parameter",
    "invalid_parameter",
    "invalid_body",
    "method_not_allowed",
    "catalog_unavailable",
}
_T8 = (
    "Trap T8: the hub follows redirects on tool calls and probes and re-sends the same "
    "X-Bailing-Signature for the new path, which the target cannot verify (301/302/303 also turn a "
    "POST into a body-less GET); on the catalog it never follows them and the refresh is "
    "inconclusive."
)


# --- the public result types ------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """The outcome of one check."""

    name: str
    status: CheckStatus
    #: one line: what was observed and what it means for the hub
    summary: str
    #: the evidence (requests and answers, the likely cause)
    detail: str | None = None
    #: what to change
    fix: str | None = None


@dataclass(frozen=True)
class CatalogAccess:
    """The hub's ``spec_access_probe`` for this deployment (``CONTRACT.md`` §4.4)."""

    status: Literal["protected", "public", "inconclusive"]
    signed_http: int | None = None
    unsigned_http: int | None = None
    invalid_http: int | None = None
    reason: str = ""
    #: the refusal reason of a non-2xx primary, read from its body (not used by the hub)
    primary_reason: str | None = None

    def evidence(self) -> str:
        parts = []
        for label, value in (("signed", self.signed_http), ("unsigned", self.unsigned_http),
                             ("bad signature", self.invalid_http)):
            if value is not None:
                parts.append(f"{label} {value}")
        return ", ".join(parts)


@dataclass(frozen=True)
class ProbeOutcome:
    """The hub's ``authz_probe`` result for this deployment (``CONTRACT.md`` §5.4)."""

    status: Literal["pass", "suspect", "inconclusive", "skipped"]
    http: int | None = None
    mode: Literal["dedicated", "tool"] | None = None
    tool: str | None = None
    requires_subject: bool | None = None
    reason: str = ""


@dataclass(frozen=True)
class DoctorReport:
    """Everything the doctor found; ``ok`` is ``False`` when any check failed."""

    checks: tuple[Check, ...]
    base_url: str = ""
    catalog_url: str = ""
    policy: str = "signed_required"
    catalog_access: CatalogAccess | None = None
    authz_probe: ProbeOutcome | None = None
    #: the base URL the app expects the hub to use, when known
    base_url_to_register: str | None = None
    #: where that came from (``BAILING_BASE_URL``, or where the catalog is served)
    base_url_source: str | None = None

    @property
    def ok(self) -> bool:
        return not any(check.status == "fail" for check in self.checks)

    def check(self, name: str) -> Check:
        """The check called ``name`` (``KeyError`` if it was not run)."""
        for check in self.checks:
            if check.name == name:
                return check
        raise KeyError(name)

    def counts(self) -> dict[str, int]:
        counts = {"pass": 0, "warn": 0, "fail": 0, "skip": 0}
        for check in self.checks:
            counts[check.status] += 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (for ``--json``)."""

        def plain(value: Any) -> Any:
            return None if value is None else dict(value.__dict__)

        return {
            "ok": self.ok,
            "base_url": self.base_url,
            "catalog_url": self.catalog_url,
            "policy": self.policy,
            "base_url_to_register": self.base_url_to_register,
            "base_url_source": self.base_url_source,
            "catalog_access": plain(self.catalog_access),
            "authz_probe": plain(self.authz_probe),
            "checks": [dict(check.__dict__) for check in self.checks],
        }

    def render(self, verbose: bool = False) -> str:
        """The report as text for a terminal (details of passing checks only if ``verbose``)."""
        lines = [f"bailing doctor  base_url {self.base_url}", f"                catalog  {self.catalog_url}"]
        if self.base_url_to_register:
            lines.append(f"                register base_url {self.base_url_to_register}"
                         f"  ({self.base_url_source})")
        if self.policy != "signed_required":
            lines.append(f"                policy   {self.policy}")
        lines.append("")
        width = max((len(check.name) for check in self.checks), default=0)
        indent = " " * (8 + width)

        def wrap(text: str, first: str = "", rest: str = "") -> list[str]:
            out: list[str] = []
            for number, paragraph in enumerate(text.splitlines() or [""]):
                out.extend(textwrap.wrap(
                    paragraph, width=max(len(indent) + 60, 110), break_long_words=False,
                    break_on_hyphens=False, initial_indent=first if number == 0 else rest,
                    subsequent_indent=rest,
                ) or [first if number == 0 else rest])
            return out

        for check in self.checks:
            head = f"{check.status.upper():4}  {check.name.ljust(width)}  "
            lines.extend(wrap(check.summary, head, indent + "  "))
            if check.detail and (verbose or check.status != "pass"):
                lines.extend(wrap(check.detail, indent, indent))
            if check.fix:
                lines.extend(wrap(check.fix, indent + "fix: ", indent + "     "))
        counts = self.counts()
        verdict = "OK" if self.ok else "NOT OK"
        lines.append("")
        lines.append(
            f"{counts['pass']} passed, {counts['warn']} warning(s), {counts['fail']} failed, "
            f"{counts['skip']} skipped: {verdict}"
        )
        return "\n".join(lines)


# --- transport ------------------------------------------------------------------------------

_PATH_ENCODE = frozenset(' "#<>?`{}')
_QUERY_ENCODE = frozenset(" \"#<>'")


def _percent_encode(text: str, encode: frozenset[str]) -> str:
    out = []
    for ch in text:
        if ord(ch) < 0x20 or ord(ch) > 0x7E or ch in encode:
            out.append("".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass")))
        else:
            out.append(ch)
    return "".join(out)


def _whatwg_path(path: str) -> str:
    """The pathname the WHATWG URL parser makes of ``path`` (http/https)."""
    path = path.replace("\\", "/")
    if not path.startswith("/"):
        path = "/" + path
    segments = path[1:].split("/")
    out: list[str] = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        lowered = segment.lower()
        if lowered in ("..", ".%2e", "%2e.", "%2e%2e"):
            if out:
                out.pop()
            if last:
                out.append("")
        elif lowered in (".", "%2e"):
            if last:
                out.append("")
        else:
            out.append(_percent_encode(segment, _PATH_ENCODE))
    return "/" + "/".join(out)


@dataclass(frozen=True)
class _Url:
    scheme: str
    host: str
    port: int | None
    #: request-target = WHATWG ``pathname + search``
    target: str
    #: the URL as fetch would request it
    href: str

    @property
    def origin(self) -> str:
        port = f":{self.port}" if self.port is not None else ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}{port}"


def _parse_url(url: str) -> _Url:
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    port = parts.port
    if (scheme, port) in (("http", 80), ("https", 443)):
        port = None
    target = _whatwg_path(parts.path or "/")
    if parts.query:
        target += "?" + _percent_encode(parts.query, _QUERY_ENCODE)
    parsed = _Url(scheme, parts.hostname, port, target, "")
    return _Url(scheme, parts.hostname, port, target, parsed.origin + target)


@dataclass(frozen=True)
class _Exchange:
    """One request and its response (``status is None``: network error)."""

    phase: str
    method: str
    url: str
    status: int | None
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    error: str | None = None
    #: the body was larger than the limit (or declared so): it was not read completely
    too_big: bool = False
    #: the doctor's clock when the response headers arrived, and when the request left
    received_at: float = 0.0
    sent_at: float = 0.0

    def header(self, name: str) -> str | None:
        name = name.lower()
        values = [value for key, value in self.headers if key == name]
        return ", ".join(values) if values else None

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    @property
    def redirect(self) -> bool:
        return self.status in _REDIRECTS

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def label(self) -> str:
        return f"HTTP {self.status}" if self.status is not None else f"network error ({self.error})"


def _decode_body(raw: bytes, encoding: str | None, limit: int) -> tuple[bytes, bool]:
    encoding = (encoding or "").strip().lower()
    if encoding in ("gzip", "x-gzip"):
        decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
    elif encoding == "deflate":
        decoder = zlib.decompressobj(zlib.MAX_WBITS if raw[:1] == b"\x78" else -zlib.MAX_WBITS)
    else:
        return raw[:limit], len(raw) > limit
    data = decoder.decompress(raw, limit + 1)
    return data[:limit], len(data) > limit or bool(decoder.unconsumed_tail)


class _Transport:
    def __init__(self, timeout: float, clock: Callable[[], float]) -> None:
        self.timeout = timeout
        self.clock = clock
        self.log: list[_Exchange] = []

    def send(
        self,
        phase: str,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes = b"",
        *,
        limit: int = 1024 * 1024,
        timeout: float | None = None,
    ) -> _Exchange:
        """One request; redirects are never followed here."""
        sent_at = self.clock()
        try:
            parsed = _parse_url(url)
        except ValueError as exc:
            exchange = _Exchange(phase, method, url, None, error=str(exc), sent_at=sent_at,
                                 received_at=sent_at)
            self.log.append(exchange)
            return exchange
        wait = self.timeout if timeout is None else timeout
        if parsed.scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                parsed.host, parsed.port, timeout=wait, context=ssl.create_default_context()
            )
        else:
            conn = http.client.HTTPConnection(parsed.host, parsed.port, timeout=wait)
        try:
            conn.putrequest(method, parsed.target, skip_accept_encoding=True)
            merged = {name.lower(): value for name, value in _NODE_HEADERS}
            merged.update({name.lower(): value for name, value in headers.items()})
            for name, value in merged.items():
                conn.putheader(name, value.encode("latin-1"))
            if body or method not in ("GET", "HEAD"):
                conn.putheader("content-length", str(len(body)))
            conn.endheaders(body or None)
            response = conn.getresponse()
            received_at = self.clock()
            response_headers = tuple((k.lower(), v) for k, v in response.getheaders())
            declared = response.getheader("content-length")
            too_big = False
            raw = b""
            if declared is not None and declared.strip().isdigit() and int(declared) > limit:
                too_big = True
            else:
                # compressed bodies are limited after decoding (like fetch); bound the raw read too
                raw_limit = limit * 8 if response.getheader("content-encoding") else limit
                raw = response.read(raw_limit + 1)
                too_big = len(raw) > raw_limit
            data, over = _decode_body(raw, response.getheader("content-encoding"), limit)
            exchange = _Exchange(
                phase, method, parsed.href, response.status, response_headers, data,
                too_big=too_big or over, received_at=received_at, sent_at=sent_at,
            )
        except TimeoutError:
            exchange = _Exchange(phase, method, parsed.href, None, error=f"timeout after {wait:g} s",
                                 sent_at=sent_at, received_at=self.clock())
        except ssl.SSLError as exc:
            exchange = _Exchange(phase, method, parsed.href, None, error=f"TLS: {exc}", sent_at=sent_at,
                                 received_at=self.clock())
        except ConnectionRefusedError:
            exchange = _Exchange(phase, method, parsed.href, None, error="connection refused",
                                 sent_at=sent_at, received_at=self.clock())
        except socket.gaierror as exc:
            exchange = _Exchange(phase, method, parsed.href, None, error=f"DNS: {exc}", sent_at=sent_at,
                                 received_at=self.clock())
        except (OSError, http.client.HTTPException, zlib.error, UnicodeEncodeError) as exc:
            exchange = _Exchange(phase, method, parsed.href, None,
                                 error=f"{type(exc).__name__}: {exc}"[:200], sent_at=sent_at,
                                 received_at=self.clock())
        finally:
            conn.close()
        self.log.append(exchange)
        return exchange

    def follow(
        self,
        phase: str,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes = b"",
        *,
        timeout: float | None = None,
    ) -> list[_Exchange]:
        """Like ``fetch`` with ``redirect: 'follow'``: the same headers go to every hop."""
        chain: list[_Exchange] = []
        headers = dict(headers)
        while True:
            exchange = self.send(phase, method, url, headers, body, timeout=timeout)
            chain.append(exchange)
            location = exchange.header("location")
            if not exchange.redirect or location is None:
                return chain
            if len(chain) > 20:
                failed = _Exchange(phase, method, url, None, error="more than 20 redirects")
                chain.append(failed)
                return chain
            url = urljoin(exchange.url, location)
            if (exchange.status == 303 and method not in ("GET", "HEAD")) or (
                exchange.status in (301, 302) and method == "POST"
            ):
                method, body = "GET", b""
                headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}


# --- small helpers ---------------------------------------------------------------------------




def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


def _reason_of(exchange: _Exchange) -> str | None:
    """The refusal reason a bailing_flask / SDK body carries (``None`` if it says none)."""
    if not exchange.body:
        return None
    try:
        data = _json(exchange.text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        raw: list[str] = []
        for key in ("reason", "error", "code", "msg", "message"):
            value = data.get(key)
            if isinstance(value, str) and value.strip():
                normalized = value.strip().lower().replace(" ", "_")
                if normalized in _KNOWN_REASONS:
                    return normalized
                raw.append(value.strip())
        return raw[0][:80] if raw else None
    lowered = exchange.text[:2048].lower()
    for code in sorted(_SIGNATURE_REASONS):
        if code in lowered:
            return code
    return None


def _boolean_decision(text: str) -> bool | None:
    """The hub's reading of a dedicated probe's body (``CONTRACT.md`` §5.4)."""
    if not _js_trim(text):
        return None
    try:
        body = _json(text)
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    for key in ("authorized", "allow", "allowed", "ok"):
        if isinstance(body.get(key), bool):
            return bool(body[key])
    return None


def _server_time(exchange: _Exchange) -> float | None:
    """The server's clock from ``Date`` (+ ``Age`` when a cache answered)."""
    raw = next((value for key, value in exchange.headers if key == "date"), None)
    if not raw:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if parsed is None:
        return None
    value = parsed.timestamp()
    age = exchange.header("age")
    if age and age.strip().isdigit():
        value += int(age.strip())
    return value


def _cache_hits(exchange: _Exchange) -> list[str]:
    """Headers showing that a cache (not the app) produced this response."""
    found = []
    age = exchange.header("age")
    if age is not None and age.strip().isdigit() and int(age.strip()) > 0:
        # Age: 0 is also sent on pass/miss by some caches (Varnish): only a positive age is a hit
        found.append(f"Age: {age}")
    for name in ("x-cache", "x-cache-status", "x-proxy-cache", "x-cache-lookup", "x-drupal-cache",
                 "x-varnish-cache", "cdn-cache", "x-edge-cache"):
        value = exchange.header(name)
        if value and "hit" in value.lower():
            found.append(f"{name}: {value}")
    status = exchange.header("cf-cache-status")
    if status and status.strip().upper() in ("HIT", "STALE", "REVALIDATED", "UPDATING"):
        found.append(f"cf-cache-status: {status}")
    return found


def _cache_layers(exchange: _Exchange) -> list[str]:
    """Headers showing that a caching layer is in the path (even on a miss)."""
    found = []
    for name in ("age", "x-cache", "x-cache-status", "cf-cache-status", "x-proxy-cache", "x-served-by",
                 "x-varnish", "via"):
        value = exchange.header(name)
        if value:
            found.append(f"{name}: {value}")
    return found


def _prefix_of(path: str, suffix: str) -> str | None:
    """``path`` minus ``suffix`` at its end, if it ends with it."""
    return path[: -len(suffix)] if suffix and path.endswith(suffix) else None


def _strip_variants(path: str, limit: int = 3) -> list[str]:
    """``path`` without its first 1, 2, ... segments (what a prefix-stripping proxy forwards)."""
    variants = []
    rest = path
    for _ in range(limit):
        cut = rest.find("/", 1)
        if cut <= 0:
            break
        rest = rest[cut:]
        variants.append(rest)
    return variants


def _unique(values: Iterable[str]) -> list[str]:
    seen: list[str] = []
    for value in values:
        if value not in seen:
            seen.append(value)
    return seen


def _describe_401(reason: str | None, exchange: _Exchange, *, catalog: bool) -> str:
    """Explain a 401 refusal of a correctly signed request."""
    what = "the signed catalog fetch" if catalog else "the signed request"
    authenticate = exchange.header("www-authenticate") or ""
    if reason == "timestamp_out_of_window":
        return (f"The server refused {what} with timestamp_out_of_window: its clock differs from the "
                f"hub's by {WINDOW_SECONDS} s or more (see the clock check).")
    if reason == "bad_signature":
        signed = "the full path of spec_url, prefix included" if catalog else (
            "the tool path WITHOUT the base_url prefix")
        return (f"The server refused {what} with bad_signature: it computed a different signature. "
                f"Either the secret differs from the hub's provider secret, or the server verified "
                f"another path than the hub signed ({signed}; a proxy that strips or adds a prefix, "
                f"or re-encodes the URL, causes this: traps T3, T5).")
    if reason == "missing_signature":
        extra = (" With bailing_flask it also means that the app did not recognise the request as its "
                 "catalog (the path it saw differs from BAILING_CATALOG_PATH under SCRIPT_NAME, e.g. a "
                 "middleware rewrote PATH_INFO without setting SCRIPT_NAME)." if catalog else "")
        return (f"The server says {what} carried no valid X-Bailing-Signature: something between the "
                f"hub and the app may drop X-Bailing-* headers.{extra}")
    if reason in ("malformed_signature", "malformed_timestamp"):
        return (f"The server says the X-Bailing headers of {what} are malformed ({reason}): a proxy "
                f"alters or duplicates them.")
    if reason is None and authenticate and not authenticate.lower().startswith("bailing"):
        return (f"{what[0].upper() + what[1:]} got 401 with WWW-Authenticate: {authenticate}: an "
                f"authentication layer in front of the app refuses it; the hub can only send "
                f"X-Bailing-* headers.")
    if reason is None:
        return (f"The server refused {what} with 401 without saying why (no reason in the body); "
                f"it was probably not refused by bailing_flask.")
    return f"The server refused {what} with 401 ({reason})."


# --- the doctor -------------------------------------------------------------------------------


@dataclass
class _Found:
    """What one diagnostic variant showed."""

    kind: Literal["prefix", "clock"]
    signed_path: str = ""
    offset: float = 0.0


@dataclass
class _State:
    checks: dict[str, Check] = field(default_factory=dict)
    document: dict[str, Any] | None = None
    #: the catalog came from a diagnostic variant, not from the hub's own request
    document_from_variant: str | None = None
    access: CatalogAccess | None = None
    probe: ProbeOutcome | None = None


class _Doctor:
    def __init__(
        self,
        base_url: str,
        secret: str,
        *,
        catalog_url: str | None,
        subject: str | None,
        timeout: float,
        clock: Callable[[], float],
        policy: Policy,
        expected_base_url: str | None = None,
        expected_source: str | None = None,
    ) -> None:
        self.expected_base_url = expected_base_url.strip().rstrip("/") if expected_base_url else None
        self.expected_source = expected_source or "BAILING_BASE_URL"
        self.base_url = base_url.strip().rstrip("/")
        self.base = _parse_url(self.base_url or "/")
        self.base_prefix = self.base.target.split("?", 1)[0].rstrip("/")
        self.catalog_url = catalog_url.strip() if catalog_url else self.base_url + WELL_KNOWN_CATALOG
        self.catalog = _parse_url(self.catalog_url)
        self.secret = secret
        self.subject = subject or None
        self.policy = policy
        self.clock = clock
        #: send the write_tools check's requests (``run_doctor(write_tools=False)`` turns them off)
        self.send_writes = True
        #: added to the doctor's clock once a clock difference is confirmed
        self.offset = 0.0
        self.http = _Transport(timeout, clock)
        self.timeout = timeout
        self.state = _State()
        #: the two negative catalog probes, once sent
        self.negatives: tuple[_Exchange, ...] = ()

    def now(self) -> str:
        return str(math.floor(self.clock() + self.offset))

    def add(self, check: Check) -> None:
        self.state.checks[check.name] = check

    def skip(self, name: str, why: str) -> None:
        self.add(Check(name, "skip", why))

    # -- 0. the base URL the app expects -----------------------------------------------

    def base_url_check(self) -> None:
        """Compare the hub's base URL with the one the app derives its paths from."""
        expected = self.expected_base_url
        if expected is None:
            return
        want = _parse_url(expected)
        want_path = want.target.split("?", 1)[0].rstrip("/")
        source = self.expected_source
        if want_path == self.base_prefix:
            note = None
            if want.origin != self.base.origin:
                note = (f"The path matches; this run checks {self.base.origin}, the hub must use "
                        f"{expected}.")
            self.add(Check("base_url", "pass",
                           f"the app's tool paths are relative to this base URL ({source})",
                           detail=note))
            return
        self.add(Check(
            "base_url", "fail",
            f"base_url has the path {self.base_prefix or '/'!r}, but the app's tool paths are "
            f"relative to {want_path or '/'!r} ({source}): the hub would accept the tool source "
            "and then send every tool call to a URL that misses the route",
            detail=(f"The hub calls base_url + catalog path and signs only the catalog path, so "
                    f"the base URL registered in the hub must be {expected}."),
            fix=f"Register base_url {expected} in the hub's tool source, or change {source}.",
        ))

    # -- 1. catalog access ---------------------------------------------------------------

    def catalog_access(self) -> _Exchange | None:
        url = self.catalog.href
        signed_path = self.catalog.target
        ts = self.now()
        if self.policy == "public_allowed":
            primary = self.http.send("catalog_primary_unsigned", "GET", url, {}, limit=SPEC_MAX_BYTES)
        else:
            headers = {
                "x-bailing-timestamp": ts,
                "x-bailing-signature": sign_tool_call(self.secret, ts, "GET", signed_path),
            }
            primary = self.http.send("catalog_signed", "GET", url, headers, limit=SPEC_MAX_BYTES)
        primary_field = "unsigned_http" if self.policy == "public_allowed" else "signed_http"

        def access(status: str, reason: str, **fields: Any) -> CatalogAccess:
            return CatalogAccess(status, reason=reason, **fields)  # type: ignore[arg-type]

        if primary.status is None:
            self.state.access = access("inconclusive", f"network error: {primary.error}")
            self.add(Check(
                "catalog.access", "fail",
                f"inconclusive: the catalog fetch failed ({primary.error}); the hub keeps its old catalog",
                detail=f"GET {url}",
                fix="Make spec_url reachable from the hub (DNS, firewall, TLS certificate, "
                    f"answer within {self.timeout:g} s).",
            ))
            return None
        if not primary.ok:
            reason_code = _reason_of(primary)
            note = " (redirects are not followed on the catalog)" if primary.redirect else ""
            self.state.access = access(
                "inconclusive", f"HTTP {primary.status}{note}", primary_reason=reason_code,
                **{primary_field: primary.status},
            )
            return self._primary_refused(primary, reason_code)
        if primary.too_big:
            self.state.access = access("inconclusive", "the catalog is larger than 5 MiB",
                                       **{primary_field: primary.status})
            self.add(Check(
                "catalog.access", "fail",
                f"inconclusive: HTTP {primary.status} but the body exceeds {SPEC_MAX_BYTES} bytes (5 MiB); "
                "the hub aborts the read and keeps its old catalog",
                fix="Serve a smaller catalog (expose fewer operations, shorten schemas and descriptions).",
            ))
            return None
        if self.policy == "public_allowed":
            self.state.access = access("public", "the tool source allows anonymous reads",
                                       unsigned_http=primary.status)
            self.add(Check("catalog.access", "pass",
                           f"public (policy public_allowed): unsigned {primary.status}",
                           detail="Anyone can read this catalog; tool calls are still signed."))
            return primary

        invalid_headers = {"x-bailing-timestamp": ts, "x-bailing-signature": ZERO_SIGNATURE}
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            unsigned_future = pool.submit(self.http.send, "catalog_unsigned", "GET", url, {},
                                          limit=SPEC_MAX_BYTES)
            invalid_future = pool.submit(self.http.send, "catalog_bad_signature", "GET", url,
                                         invalid_headers, limit=SPEC_MAX_BYTES)
            unsigned, invalid = unsigned_future.result(), invalid_future.result()
        self.negatives = (unsigned, invalid)
        fields = {"signed_http": primary.status, "unsigned_http": unsigned.status,
                  "invalid_http": invalid.status}
        evidence = (f"signed {primary.status}, unsigned {_short(unsigned)}, "
                    f"bad signature {_short(invalid)}")
        if unsigned.ok or invalid.ok:
            readable = " and ".join(
                name for name, ex in (("unsigned", unsigned), ("bad-signature", invalid)) if ex.ok
            )
            self.state.access = access("public", f"signed-only required, but {readable} requests read it",
                                       **fields)
            cache = self._cache_evidence(primary, unsigned, invalid)
            if cache:
                why = ("A cache between the hub and the app stored the signed catalog and serves it to "
                       "anyone: " + cache)
                fix = ("Make the cache honour Cache-Control: private, no-store (or bypass it for "
                       f"{self.catalog.target.split('?')[0]}), purge the stored copy, and point "
                       "spec_url at a host that reaches the origin directly (trap T5).")
            else:
                why = ("The origin itself serves the catalog without a valid signature (e.g. "
                       "BAILING_PUBLIC_CATALOG is on, or the route is not behind the verification).")
                fix = ("Serve the catalog only to signed requests (turn BAILING_PUBLIC_CATALOG off), or "
                       "switch the tool source to the public_allowed policy if that is intended.")
            self.add(Check(
                "catalog.access", "fail",
                f"public: {evidence}; under signed_required the hub refuses the refresh",
                detail=why, fix=fix,
            ))
            return primary
        if unsigned.status in _PROTECTED_NEGATIVE and invalid.status in _PROTECTED_NEGATIVE:
            self.state.access = access("protected", "signed reads succeed; unsigned and bad-signature "
                                       "reads are refused", **fields)
            self.add(Check("catalog.access", "pass", f"protected: {evidence}"))
            return primary
        self.state.access = access(
            "inconclusive",
            f"cannot confirm protection: unsigned={_short(unsigned)}, bad signature={_short(invalid)}",
            **fields,
        )
        odd = [(name, ex) for name, ex in (("unsigned", unsigned), ("bad-signature", invalid))
               if ex.status not in _PROTECTED_NEGATIVE]
        causes = []
        for name, ex in odd:
            if ex.redirect:
                where = ex.header("location") or "?"
                causes.append(f"the {name} probe was redirected ({ex.status} to {where}): a login "
                              "redirect or an auth layer in front of the app")
            elif ex.status is None:
                causes.append(f"the {name} probe failed: {ex.error}")
            elif ex.status == 429:
                causes.append(f"the {name} probe was rate-limited (429, a WAF or rate limiter)")
            elif ex.status >= 500:
                causes.append(f"the {name} probe got a server error ({ex.status})")
            else:
                causes.append(f"the {name} probe got {ex.status}")
        self.add(Check(
            "catalog.access", "fail",
            f"inconclusive: {evidence}; the hub refuses the refresh and keeps its old catalog",
            detail=("Trap T21: the negative probes must be answered 401, 403 or 404. Here " +
                    "; ".join(causes) + "."),
            fix=(f"Exempt {self.catalog.target.split('?')[0]} from login redirects, WAF rules and rate "
                 "limits, and let the app answer unsigned or badly signed requests itself (401)."),
        ))
        return primary

    def _cache_evidence(self, primary: _Exchange, unsigned: _Exchange, invalid: _Exchange) -> str:
        """Explain why a negative probe could read the catalog, if a cache did it."""
        clues = []
        for name, ex in (("signed", primary), ("unsigned", unsigned), ("bad-signature", invalid)):
            hits = _cache_hits(ex)
            if hits:
                clues.append(f"the {name} response carries {', '.join(hits)}")
        same = [name for name, ex in (("unsigned", unsigned), ("bad-signature", invalid))
                if ex.ok and ex.body == primary.body and primary.body]
        if same:
            clues.append(f"the {' and '.join(same)} probe got byte-for-byte the signed catalog")
        # bypass any cache with a query nobody asked before: the origin's own answer
        sep = "&" if "?" in self.catalog.href else "?"
        busted = self.http.send("diagnostic_cache_bypass", "GET",
                                f"{self.catalog.href}{sep}bailing_doctor={uuid.uuid4().hex[:12]}", {})
        if busted.status in _PROTECTED_NEGATIVE and (unsigned.ok or invalid.ok):
            clues.append(f"an unsigned request with a fresh query string (which no cache holds) gets "
                         f"{busted.status} from the origin")
            return "; ".join(clues) + "."
        if any(_cache_hits(ex) for ex in (unsigned, invalid)):
            return "; ".join(clues) + "."
        return ""

    def _primary_refused(self, primary: _Exchange, reason: str | None) -> _Exchange | None:
        status = primary.status
        assert status is not None
        summary = f"inconclusive: signed {status}" if self.policy == "signed_required" else (
            f"inconclusive: unsigned {status}")
        if primary.redirect:
            location = primary.header("location") or "(no Location)"
            self.add(Check(
                "catalog.access", "fail",
                f"{summary} redirect to {location}; the hub never follows redirects on the catalog "
                "and keeps its old catalog",
                detail=_T8,
                fix=(f"Serve the catalog at spec_url itself (use the final URL {urljoin(primary.url, location)} "
                     "as spec_url if that is where it lives; no http->https, trailing-slash or login "
                     "redirects)."),
            ))
            return None
        if status == 401 and self.policy == "signed_required":
            return self._diagnose_catalog_401(primary, reason)
        if status == 404:
            self.add(Check(
                "catalog.access", "fail",
                f"{summary}: nothing is served at {self.catalog.target}",
                detail="The hub keeps its old catalog.",
                fix=("Check spec_url: by default bailing_flask serves the catalog at "
                     f"<app root>{WELL_KNOWN_CATALOG} (BAILING_CATALOG_PATH); behind a prefix the "
                     "public URL includes it."),
            ))
            return None
        detail = f"Reason given: {reason}." if reason else None
        if status == 403:
            fix = "Let the signed request through every layer in front of the app (WAF, IP allow-lists)."
        elif status == 429:
            fix = f"Exempt {self.catalog.target.split('?')[0]} from rate limits."
        elif status >= 500:
            fix = "See the server log: the catalog could not be served."
        else:
            fix = "The catalog must answer 2xx to a correctly signed GET."
        self.add(Check("catalog.access", "fail", f"{summary}; the hub keeps its old catalog",
                       detail=detail, fix=fix))
        return None

    def _diagnose_catalog_401(self, primary: _Exchange, reason: str | None) -> _Exchange | None:
        signed_path = self.catalog.target
        lines = [_describe_401(reason, primary, catalog=True)]
        found: _Found | None = None
        rescued: _Exchange | None = None
        url = self.catalog.href
        server_now = _server_time(primary)
        if server_now is not None and reason in ("timestamp_out_of_window", None):
            skew = server_now - (primary.sent_at + primary.received_at) / 2
            if abs(skew) >= CLOCK_TOLERANCE:
                ts = str(math.floor(self.clock() + self.offset + skew))
                headers = {"x-bailing-timestamp": ts,
                           "x-bailing-signature": sign_tool_call(self.secret, ts, "GET", signed_path)}
                retry = self.http.send("diagnostic_server_clock", "GET", url, headers, limit=SPEC_MAX_BYTES)
                if retry.ok:
                    found, rescued = _Found("clock", offset=skew), retry
                    self.offset = skew
        if found is None and reason in ("bad_signature", None):
            candidates = _strip_variants(signed_path.split("?")[0])
            query = signed_path[len(signed_path.split("?")[0]):]
            candidates = [c + query for c in candidates]
            if self.base_prefix and not signed_path.startswith(self.base_prefix + "/"):
                candidates.append(self.base_prefix + signed_path)
            for candidate in _unique(candidates)[:4]:
                ts = self.now()
                headers = {"x-bailing-timestamp": ts,
                           "x-bailing-signature": sign_tool_call(self.secret, ts, "GET", candidate)}
                retry = self.http.send("diagnostic_signed_path", "GET", url, headers, limit=SPEC_MAX_BYTES)
                if retry.ok:
                    found, rescued = _Found("prefix", signed_path=candidate), retry
                    break
        fix: str
        if found is not None and found.kind == "clock":
            lines.append(f"Confirmed: signed with the server's own clock ({found.offset:+.0f} s from this "
                         "machine) the same request succeeds.")
            fix = ("Synchronise the server's clock with NTP (the hub and the server must agree within "
                   f"{WINDOW_SECONDS} s; aim for < 1 s).")
        elif found is not None:
            path = signed_path.split("?")[0]
            if len(found.signed_path.split("?")[0]) < len(path):
                stripped = path[: len(path) - len(found.signed_path.split("?")[0])]
                lines.append(
                    f"Confirmed: the server accepts the catalog signed for {found.signed_path!r} instead "
                    f"of {signed_path!r}. A reverse proxy strips the prefix {stripped!r} before the app, "
                    "so the app verifies a shorter path than the hub signs (trap T3: the catalog "
                    "signature covers the full public path)."
                )
                fix = (f"Tell the app its public prefix: BAILING_PUBLIC_PREFIX = {stripped!r} (or "
                       f"have the proxy send X-Forwarded-Prefix: {stripped} and wrap the app in "
                       "werkzeug's ProxyFix(x_prefix=1)); or stop the proxy from stripping it.")
            else:
                added = found.signed_path[: len(found.signed_path) - len(signed_path)]
                lines.append(
                    f"Confirmed: the server accepts the catalog signed for {found.signed_path!r} instead "
                    f"of {signed_path!r}: something adds the prefix {added!r} between the hub and the app."
                )
                fix = (f"Use the public URL the app expects as spec_url (with {added!r}), or stop the "
                       "proxy from rewriting the path.")
        elif reason == "bad_signature":
            lines.append("No prefix variant of the path was accepted either, so the secret is the most "
                         "likely cause.")
            fix = ("Copy the provider secret from the hub console (tool source -> reveal secret) into "
                   "BAILING_SECRETS exactly (no quotes or whitespace); if you rotated it, list both during "
                   "the switch. If the secret is right, look for a proxy that rewrites the path or query.")
        elif reason == "timestamp_out_of_window":
            fix = "Synchronise the server's clock with NTP."
        elif reason == "missing_signature":
            fix = ("Configure the proxy/gateway to forward X-Bailing-* headers unchanged; with bailing_flask, "
                   f"make spec_url's path exactly the public prefix + BAILING_CATALOG_PATH "
                   f"(default {WELL_KNOWN_CATALOG})")
            fix += (" without the trailing slash." if signed_path.split("?")[0].endswith("/") else ".")
        else:
            fix = ("Make sure the request reaches the app unchanged and that nothing in front of it "
                   "requires its own authentication.")
        why = f" ({reason})" if reason else ""
        self.add(Check(
            "catalog.access", "fail",
            f"inconclusive: signed 401{why}; the hub refuses the refresh and keeps its old catalog",
            detail="\n".join(lines), fix=fix,
        ))
        if rescued is not None:
            self.state.document_from_variant = (
                "the catalog below was read with a corrected signature (the hub cannot read it)"
            )
        return rescued

    # -- 2. caching / headers ------------------------------------------------------------

    def catalog_caching(self, primary: _Exchange | None) -> None:
        if primary is None:
            self.skip("catalog.caching", "no catalog response to inspect")
            return
        cache_control = primary.header("cache-control") or ""
        tokens = {t.strip().split("=")[0].lower() for t in cache_control.split(",") if t.strip()}
        hits = _cache_hits(primary)
        layers = _cache_layers(primary)
        leaked = [ex for ex in self.negatives if ex.ok]
        access = self.state.access
        cached = bool(hits) or bool(leaked and access and access.status == "public"
                                    and any(_cache_hits(ex) for ex in leaked))
        if self.policy == "public_allowed":
            self.add(Check("catalog.caching", "pass",
                           f"public catalog; Cache-Control: {cache_control or '(none)'}"))
            return
        missing = [t for t in ("private", "no-store") if t not in tokens]
        detail_lines = []
        if layers:
            detail_lines.append("Caching layer in the path: " + "; ".join(layers) + ".")
        if cached:
            evidence = _unique(hits or [h for ex in leaked for h in _cache_hits(ex)])
            self.add(Check(
                "catalog.caching", "fail",
                "a cache serves the signed catalog (" + ", ".join(evidence) + ")",
                detail=("A CDN or proxy that caches the signed fetch turns it into a public copy: anyone "
                        "who requests spec_url gets the catalog without a signature. " +
                        " ".join(detail_lines)).strip(),
                fix=("Send Cache-Control: private, no-store (bailing_flask does) and make the "
                     "cache honour it, or bypass the cache for the catalog path; purge the stored copy."),
            ))
            return
        if missing:
            self.add(Check(
                "catalog.caching", "warn",
                f"the signed catalog lacks Cache-Control {', '.join(missing)} "
                f"(got: {cache_control or 'no Cache-Control'})",
                detail=("The contract requires Cache-Control: private, no-store on the signed catalog; "
                        "the hub does not check it, but any shared cache may store the signed copy and "
                        "serve it to anyone. " + " ".join(detail_lines)).strip(),
                fix="Add Cache-Control: private, no-store to the catalog response (check that no proxy "
                    "strips or rewrites it).",
            ))
            return
        self.add(Check(
            "catalog.caching", "pass",
            f"Cache-Control: {cache_control}; no cache answered",
            detail=" ".join(detail_lines) or None,
        ))

    # -- 3. body -------------------------------------------------------------------------

    def catalog_body(self, primary: _Exchange | None) -> None:
        if primary is None:
            self.skip("catalog.body", "no catalog body")
            return
        size = len(primary.body)
        content_type = primary.header("content-type") or ""
        media = content_type.split(";")[0].strip().lower()
        is_json_type = media == "application/json" or media.endswith("+json")
        text = primary.body.decode("utf-8", "replace")
        text = text.removeprefix("\ufeff")
        text = _js_trim(text)
        prefix = (self.state.document_from_variant + ". ") if self.state.document_from_variant else ""
        if not text:
            self.add(Check("catalog.body", "fail", f"the catalog body is empty (HTTP {primary.status})",
                           detail=prefix + "The hub refuses an empty spec.",
                           fix="Serve the OpenAPI document as JSON."))
            return
        try:
            document: Any = _json(text)
            format_ = "JSON"
        except ValueError as exc:
            document, format_ = None, None
            json_error = str(exc)
            try:
                import yaml  # type: ignore[import-untyped,unused-ignore]

                loaded = yaml.safe_load(text)
            except ImportError:  # PyYAML is optional: without it YAML catalogs are not read
                loaded = None
            except yaml.YAMLError:
                loaded = None
            except (RecursionError, ValueError, TypeError):
                loaded = None
            if isinstance(loaded, dict):
                document, format_ = loaded, "YAML"
            if document is None:
                html = media == "text/html" or text[:15].lower().startswith(("<!doctype", "<html"))
                self.add(Check(
                    "catalog.body", "fail",
                    "the catalog is neither JSON nor YAML" + (" (an HTML page)" if html else "")
                    + "; the hub refuses the refresh",
                    detail=prefix + f"JSON error: {json_error}. First bytes: {text[:120]!r}",
                    fix=("Something in front of the app answers instead of it (an HTML page usually "
                         "means a login page, an error page or a default vhost)." if html
                         else "Serve the OpenAPI document as a JSON object."),
                ))
                return
        if not isinstance(document, dict):
            self.add(Check("catalog.body", "fail",
                           f"the catalog's root is a {type(document).__name__}, not an object; the hub "
                           "refuses it", detail=prefix or None,
                           fix="Serve the OpenAPI document (a JSON object) itself."))
            return
        self.state.document = document
        problems = []
        status: CheckStatus = "pass"
        if format_ == "YAML":
            problems.append("the body is YAML, not JSON (the hub accepts it, but JSON is the contract)")
            status = "warn"
        if not is_json_type:
            problems.append(f"Content-Type is {content_type or 'missing'}, not application/json "
                            "(the hub does not check it)")
            status = "warn"
        summary = f"{format_} object, {size} bytes (limit 5 MiB), Content-Type {content_type or '(none)'}"
        if problems:
            summary = "; ".join(problems)
        if self.state.document_from_variant:
            summary += " (read with a corrected signature, for diagnosis: the hub cannot read it)"
        self.add(Check(
            "catalog.body", status, summary,
            detail=(prefix.strip() or None),
            fix="Send Content-Type: application/json; charset=utf-8 and a JSON body." if problems else None,
        ))

    # -- 4. lint -------------------------------------------------------------------------

    def catalog_lint(self) -> None:
        document = self.state.document
        if document is None:
            self.skip("catalog.lint", "no catalog to lint")
            return
        findings = lint_document(document)
        errors = [f for f in findings if f.severity == "error"]
        warnings = [f for f in findings if f.severity == "warning"]
        tools = compile_tools(document)
        lines = [f"{f.severity}: {f.code} {f.path}: {f.message}" for f in (errors + warnings)[:12]]
        if len(errors) + len(warnings) > 12:
            lines.append(f"... and {len(errors) + len(warnings) - 12} more")
        summary = f"{len(tools)} tool(s), {len(errors)} error(s), {len(warnings)} warning(s)"
        if errors:
            self.add(Check("catalog.lint", "fail", summary, detail="\n".join(lines),
                           fix="Fix the errors (run `flask bailing check` on the app); the hub drops "
                               "those operations or, for some, every tool of the source."))
        elif warnings:
            self.add(Check("catalog.lint", "warn", summary, detail="\n".join(lines),
                           fix="See `flask bailing check` for each warning's suggestion."))
        else:
            self.add(Check("catalog.lint", "pass", summary))

    # -- 5. the authorization probe --------------------------------------------------------

    def _tool(self, name: str) -> CompiledTool | None:
        assert self.state.document is not None
        return next((t for t in compile_tools(self.state.document) if t.name == name), None)

    def _probe_request(
        self, target: ProbeTarget, signature: str | None = None
    ) -> tuple[str, dict[str, str], bytes]:
        ts = self.now()
        if target.mode == "dedicated":
            body = PROBE_BODY if target.method == "POST" else b""
            scope = "__probe__.authz"
        else:
            body = b""
            tool = self._tool(target.name)
            scope = tool.scope if tool else ""
        headers = {
            "x-bailing-timestamp": ts,
            "x-bailing-signature": signature or sign_tool_call(
                self.secret, ts, target.method, target.path, body, PROBE_SUBJECT, "probe"),
            "x-bailing-job-id": "probe",
            "x-bailing-client": "__probe__",
            "x-bailing-on-behalf-of": PROBE_SUBJECT,
            "x-bailing-tool-scope": scope,
        }
        if target.mode == "dedicated":
            headers = {"content-type": "application/json", **headers}
        return self.base_url + target.path, headers, body

    def authz_probe(self) -> None:
        document = self.state.document
        if document is None:
            self.skip("authz_probe", "no catalog: the hub needs one to choose the probe target")
            self.skip("authz_probe.verifies", "no probe target")
            return
        target = authz_probe_target(document)
        if target is None:
            self.state.probe = ProbeOutcome("skipped", reason="no dedicated probe and no parameter-less GET tool")
            self.add(Check(
                "authz_probe", "warn",
                "skipped by the hub: no x-bailing-authz-probe and no parameter-less GET tool",
                fix="Declare a dedicated probe endpoint (bailing_flask serves one at BAILING_PROBE_PATH "
                    "and advertises it in the catalog).",
            ))
            self.skip("authz_probe.verifies", "no probe target")
            return
        timeout = min(self.timeout, 8.0)
        url, headers, body = self._probe_request(target)
        chain = self.http.follow("authz_probe", target.method, url, headers, body, timeout=timeout)
        final = chain[-1]
        redirected = [ex for ex in chain if ex.redirect]
        tool = self._tool(target.name) if target.mode == "tool" else None
        requires_subject = True if target.mode == "dedicated" else bool(tool and tool.requires_subject)
        outcome = self._classify_probe(target, final, requires_subject)
        self.state.probe = outcome
        where = f"{target.method} {target.path}" + (
            f" (tool {target.name})" if target.mode == "tool" else " (dedicated endpoint)")
        sent = f"{where} as {PROBE_SUBJECT!r} -> {final.label()}"
        if redirected:
            sent += " after " + ", ".join(f"{ex.status} -> {ex.header('location')}" for ex in redirected)
        reason_code = _reason_of(final) if final.status is not None else None
        body_note = f"; body {final.text[:160]!r}" if final.body and final.status is not None else ""
        detail = sent + body_note
        if outcome.status == "pass":
            if final.status == 401 and reason_code in _SIGNATURE_REASONS:
                self.add(Check(
                    "authz_probe", "fail",
                    f"hub status pass, but only because the signature was refused ({reason_code})",
                    detail=detail + ("\nThe hub counts any 401 as a pass; this one means the endpoint "
                                     "could not verify the hub's signature, so it proves nothing and real "
                                     "calls fail the same way."),
                    fix=("The probe is signed like a tool call: the path WITHOUT the base_url prefix "
                         f"({target.path}), subject {PROBE_SUBJECT}, job 'probe'. Check the secret, "
                         "the clock and any proxy rewriting the path."),
                ))
            else:
                self.add(Check("authz_probe", "pass", f"hub status pass: {outcome.reason}", detail=detail))
        elif outcome.status == "suspect":
            self.add(Check(
                "authz_probe", "fail",
                f"hub status suspect: {outcome.reason}",
                detail=detail + ("\nTrap T22: the hub reads the first boolean among authorized, allow, "
                                 "allowed, ok; a generic {\"ok\": true} wrapper reads as 'authorized'. "
                                 "The hub raises an operator alert."),
                fix=("Run the real authorization for the probe subject and answer 200 "
                     "{\"authorized\": false} (or 403); never a bare {\"ok\": true}. "
                     "bailing_flask's own probe endpoint does this.") if target.mode == "dedicated" else (
                    f"Tool {target.name} must refuse unknown subjects with 401/403: wire "
                    "X-Bailing-On-Behalf-Of into the authorization (fail closed)."),
            ))
        else:
            strict = target.mode == "dedicated" or final.status is None or final.status >= 300
            fix = None
            if final.status == 404:
                fix = self._prefix_hint(target.path) or (
                    f"Serve the probe at base_url + {target.path} (the hub requests exactly that).")
            elif target.mode == "tool":
                fix = ("Declare a dedicated probe (bailing_flask: BAILING_PROBE_PATH) or mark a "
                       "subject-bound GET tool subject_required so the hub can judge it.")
            elif final.status is not None and 200 <= final.status < 300:
                fix = "Answer a top-level boolean: {\"authorized\": false} for the probe subject."
            self.add(Check(
                "authz_probe", "fail" if strict else "warn",
                f"hub status inconclusive: {outcome.reason}", detail=detail, fix=fix,
            ))
        if final.status is None or final.status == 404:
            self.skip("authz_probe.verifies", "the probe target is not reachable (see authz_probe)")
            return
        self._probe_verifies(target, timeout)

    def _classify_probe(self, target: ProbeTarget, final: _Exchange, requires_subject: bool) -> ProbeOutcome:
        mode = target.mode
        base = {"mode": mode, "tool": target.name, "requires_subject": requires_subject}
        if final.status is None:
            return ProbeOutcome("inconclusive", reason=f"probe request failed: {final.error}", **base)  # type: ignore[arg-type]
        http = final.status
        if http in (401, 403):
            return ProbeOutcome("pass", http, reason=f"HTTP {http}: the synthetic subject was refused", **base)  # type: ignore[arg-type]
        if 200 <= http < 300:
            if mode == "dedicated":
                decision = _boolean_decision(final.text)
                if decision is False:
                    return ProbeOutcome("pass", http, reason="the endpoint answered authorized=false", **base)  # type: ignore[arg-type]
                if decision is True:
                    return ProbeOutcome("suspect", http, reason="the endpoint answered 'authorized' (a true "
                                        "authorized/allow/allowed/ok) for the synthetic subject", **base)  # type: ignore[arg-type]
                return ProbeOutcome("inconclusive", http, reason="2xx without a top-level boolean "
                                    "authorized/allow/allowed/ok", **base)  # type: ignore[arg-type]
            if requires_subject:
                return ProbeOutcome("suspect", http, reason=f"tool {target.name} declares subject.required "
                                    f"but answered {http} to the synthetic subject", **base)  # type: ignore[arg-type]
            return ProbeOutcome("inconclusive", http, reason=f"tool {target.name} answered {http} and does "
                                "not declare subject.required (public read or missing authorization?)", **base)  # type: ignore[arg-type]
        return ProbeOutcome("inconclusive", http, reason=f"HTTP {http} is neither a refusal nor a 2xx", **base)  # type: ignore[arg-type]

    def _probe_verifies(self, target: ProbeTarget, timeout: float) -> None:
        url, headers, body = self._probe_request(target, signature=ZERO_SIGNATURE)
        chain = self.http.follow("diagnostic_probe_bad_signature", target.method, url, headers, body,
                                 timeout=timeout)
        final = chain[-1]
        what = "the probe endpoint" if target.mode == "dedicated" else f"tool {target.name}"
        detail = f"{target.method} {target.path} with X-Bailing-Signature: sha256=0...0 -> {final.label()}"
        if final.status == 401:
            self.add(Check("authz_probe.verifies", "pass",
                           f"{what} refuses an invalid signature with 401", detail=detail))
        elif final.ok:
            self.add(Check(
                "authz_probe.verifies", "fail",
                f"{what} answers {final.status} to an invalid signature: it does not verify signatures",
                detail=detail + ("\nAnyone can call it; its answer to the hub's probe means nothing."),
                fix="Verify X-Bailing-Signature before answering (bailing_flask's middleware does this "
                    "for every route it serves).",
            ))
        elif final.status is None:
            self.add(Check("authz_probe.verifies", "warn", f"could not test: {final.error}", detail=detail))
        else:
            self.add(Check(
                "authz_probe.verifies", "warn",
                f"{what} answers {final.status} (not 401) to an invalid signature",
                detail=detail, fix="Refuse an invalid signature with 401 before anything else.",
            ))

    # -- 6. clock ------------------------------------------------------------------------------

    def clock_check(self) -> None:
        measured: list[tuple[float, _Exchange]] = []
        for exchange in self.http.log:
            if exchange.status is None:
                continue
            server = _server_time(exchange)
            if server is None:
                continue
            # Date has one-second resolution: the true time is in [date, date + 1)
            measured.append((server + 0.5 - (exchange.sent_at + exchange.received_at) / 2, exchange))
        if not measured:
            self.skip("clock", "no response carried a Date header")
            return
        uncached = [m for m in measured if not _cache_hits(m[1])] or measured
        skews = sorted(m[0] for m in uncached)
        skew = skews[len(skews) // 2]
        magnitude = abs(skew)
        direction = "ahead of" if skew > 0 else "behind"
        detail = (f"From the Date headers of {len(uncached)} response(s): the server is about "
                  f"{magnitude:.0f} s {direction} this machine (resolution ~1 s). The hub compares with its "
                  "own clock; this assumes this machine's clock is right (NTP). A proxy may set Date "
                  "with its own clock.")
        if self.offset:
            detail += (f"\nThe later checks were signed with the server's clock ({self.offset:+.0f} s) to "
                       "look past this problem.")
        if magnitude >= WINDOW_SECONDS:
            self.add(Check(
                "clock", "fail",
                f"the server's clock is {magnitude:.0f} s {direction} this machine: every signed request "
                f"is outside the {WINDOW_SECONDS} s window (timestamp_out_of_window)",
                detail=detail, fix="Synchronise the server's clock with NTP (chrony/systemd-timesyncd).",
            ))
        elif magnitude > CLOCK_TOLERANCE:
            self.add(Check(
                "clock", "warn",
                f"the server's clock is {magnitude:.0f} s {direction} this machine (window "
                f"{WINDOW_SECONDS} s)",
                detail=detail, fix="Synchronise the server's clock with NTP before the drift grows.",
            ))
        else:
            self.add(Check("clock", "pass", f"server clock within {CLOCK_TOLERANCE} s of this machine"))

    # -- 7. one signed tool call ---------------------------------------------------------------

    def _prefix_hint(self, path: str) -> str | None:
        catalog_prefix = _prefix_of(self.catalog.target.split("?")[0], WELL_KNOWN_CATALOG)
        if catalog_prefix is not None and catalog_prefix.rstrip("/") != self.base_prefix:
            suggested = self.base.origin + catalog_prefix.rstrip("/")
            served = f"under {catalog_prefix!r}" if catalog_prefix else "at the root"
            has = f"the prefix {self.base_prefix!r}" if self.base_prefix else "no path prefix"
            return (f"The catalog is served {served} but base_url has {has}: the hub requests base_url + "
                    f"{path}. Try base_url {suggested}.")
        return (f"Check base_url: the hub requests base_url + the catalog path ({self.base_url}{path}); "
                "a missing or extra prefix (e.g. /api) answers 404.")

    def tool_call(self) -> None:
        document = self.state.document
        if document is None:
            self.skip("tool_call", "no catalog: no tool to call")
            return
        candidates = [t for t in compile_tools(document)
                      if t.method == "GET" and not t.required and t.readonly]
        if not candidates:
            self.skip("tool_call", "no parameter-less read-only GET tool to call safely")
            return
        if self.subject:
            tool = next((t for t in candidates if t.requires_subject), candidates[0])
        else:
            tool = next((t for t in candidates if not t.requires_subject), candidates[0])
        job = "doctor-" + uuid.uuid4().hex[:16]

        def request(signed_path: str, phase: str) -> list[_Exchange]:
            ts = self.now()
            headers = {
                "x-bailing-timestamp": ts,
                "x-bailing-signature": sign_tool_call(self.secret, ts, "GET", signed_path, b"",
                                                      self.subject or "", job),
                "x-bailing-job-id": job,
                "x-bailing-client": "admin-debug",
                "x-bailing-tool-scope": tool.scope,
            }
            if self.subject:
                headers["x-bailing-on-behalf-of"] = self.subject
            return self.http.follow(phase, "GET", self.base_url + tool.path, headers)

        chain = request(tool.path, "tool_call")
        final = chain[-1]
        who = f"as {self.subject!r}" if self.subject else "anonymously"
        redirected = [ex for ex in chain if ex.redirect]
        line = f"GET {self.base_url}{tool.path} (tool {tool.name}, signed path {tool.path!r}) {who} -> {final.label()}"
        if redirected:
            line += " after " + ", ".join(f"{ex.status} -> {ex.header('location')}" for ex in redirected)
        reason = _reason_of(final) if final.status is not None else None
        if final.body and final.status is not None and not final.ok:
            line += f"; body {final.text[:160]!r}"
        if redirected:
            self.add(Check(
                "tool_call", "fail",
                f"tool {tool.name} was redirected ({redirected[0].status} -> "
                f"{redirected[0].header('location')}); the redirected request cannot be verified",
                detail=line + "\n" + _T8,
                fix="Serve the tool at exactly base_url + its catalog path (no trailing-slash 308, "
                    "http->https or login redirects); fix base_url if the redirect points elsewhere.",
            ))
            return
        if final.status is None:
            self.add(Check("tool_call", "fail", f"the tool call failed: {final.error}", detail=line,
                           fix="Make base_url reachable from the hub."))
            return
        if final.status == 401:
            self._diagnose_tool_401(tool, final, reason, line, request)
            return
        content_type = (final.header("content-type") or "").lower()
        html = "text/html" in content_type or _js_trim(final.text[:64]).lower().startswith(
            ("<!doctype html", "<html"))
        if html and not final.ok:
            line += ("\nThe body is HTML: the model only sees 'HTTP "
                     f"{final.status}' and that an HTML error page came back (CONTRACT.md §3.11).")
        if final.status == 404:
            self.add(Check(
                "tool_call", "fail",
                f"tool {tool.name} answers 404 at {self.base_url}{tool.path}: the hub cannot reach it",
                detail=line, fix=self._prefix_hint(tool.path),
            ))
            return
        if final.ok:
            units = len(final.text.encode("utf-16-le")) // 2
            if units > 8192:
                self.add(Check(
                    "tool_call", "warn",
                    f"tool {tool.name} {who}: HTTP {final.status}, but the answer is {units} UTF-16 units; "
                    "the model reads only the first 8192",
                    detail=line, fix="Page or summarise large results (CONTRACT.md §3.11, T30).",
                ))
                return
            self.add(Check("tool_call", "pass",
                           f"tool {tool.name} {who}: HTTP {final.status}; the signature path works",
                           detail=line))
            return
        if final.status == 403:
            note = "" if self.subject else " (pass --subject to try a real user)"
            self.add(Check("tool_call", "pass",
                           f"tool {tool.name} {who}: 403 {reason or ''}".rstrip() +
                           f"; the signature was accepted, the subject refused{note}", detail=line))
            return
        if final.status >= 500:
            self.add(Check("tool_call", "warn",
                           f"tool {tool.name} {who}: server error {final.status}", detail=line,
                           fix="See the server log."))
            return
        self.add(Check("tool_call", "warn",
                       f"tool {tool.name} {who}: HTTP {final.status}" + (f" ({reason})" if reason else ""),
                       detail=line))

    def _diagnose_tool_401(
        self, tool: CompiledTool, final: _Exchange, reason: str | None, line: str,
        request: Callable[[str, str], list[_Exchange]],
    ) -> None:
        lines = [line, _describe_401(reason, final, catalog=False)]
        fix = None
        if reason in ("bad_signature", None):
            candidates = []
            if self.base_prefix:
                candidates.append(self.base_prefix + tool.path)
                if tool.path.startswith(self.base_prefix + "/"):
                    candidates.append(tool.path[len(self.base_prefix):])
            catalog_prefix = _prefix_of(self.catalog.target.split("?")[0], WELL_KNOWN_CATALOG)
            if catalog_prefix:
                candidates.append(catalog_prefix.rstrip("/") + tool.path)
            wire = _parse_url(self.base_url + tool.path).target
            wire_relative = wire[len(self.base_prefix):] if wire.startswith(self.base_prefix) else None
            if wire_relative:
                candidates.append(wire_relative)
            for candidate in [c for c in _unique(candidates) if c != tool.path][:3]:
                retry = request(candidate, "diagnostic_signed_path")[-1]
                if retry.status is not None and retry.status != 401 and retry.status < 500:
                    if len(candidate) > len(tool.path):
                        extra = candidate[: len(candidate) - len(tool.path)]
                        lines.append(
                            f"Confirmed: the server accepts the call signed for {candidate!r}: it puts the "
                            f"prefix {extra!r} into the signed path, but the hub signs the tool path "
                            f"{tool.path!r} WITHOUT the base_url prefix (trap T3).")
                        fix = ("Verify tool calls against the path relative to base_url: mount the app "
                               f"so SCRIPT_NAME is {extra!r} (bailing_flask strips it), or, behind a proxy "
                               "that forwards the full path, strip the prefix before the app.")
                    elif candidate == wire_relative:
                        lines.append(
                            f"Confirmed: the server verifies the path as it arrived ({candidate!r}), but the "
                            f"hub signs the catalog path {tool.path!r} before its URL parser re-encodes it "
                            "(trap T4).")
                        fix = ("Use only unreserved ASCII characters in catalog paths (see the lint), or "
                               "verify against the spec template as bailing_flask does.")
                    else:
                        lines.append(
                            f"Confirmed: the server accepts the call signed for {candidate!r} instead of "
                            f"{tool.path!r}: a proxy changes the path between the hub and the app (trap T5).")
                        fix = "Stop the proxy from rewriting the path, or correct base_url."
                    break
            else:
                if reason == "bad_signature" and self.state.access and self.state.access.status == "protected":
                    lines.append("The catalog fetch with the same secret succeeded, so the secret is right: "
                                 "the server verifies another path, subject or job than the hub signs.")
                    fix = (f"Verify against the path relative to base_url ({tool.path}), the raw query, "
                           "X-Bailing-On-Behalf-Of and X-Bailing-Job-Id; make sure no proxy rewrites the "
                           "path (traps T3, T5).")
                else:
                    fix = ("Check the secret, and that no proxy strips or adds a path prefix "
                           "(the tool signature excludes the base_url prefix).")
        elif reason == "timestamp_out_of_window":
            fix = "Synchronise the server's clock with NTP."
        elif reason == "missing_signature":
            fix = "Configure the proxy/gateway to forward X-Bailing-* headers unchanged."
        self.add(Check(
            "tool_call", "fail",
            f"tool {tool.name} refused the signed call: 401" + (f" ({reason})" if reason else ""),
            detail="\n".join(lines), fix=fix,
        ))

    # -- 8. every write tool, with the probe subject -----------------------------------------------

    def write_tools(self) -> None:
        """Send each POST/PUT/PATCH/DELETE tool the hub's request as the probe subject.

        What stands in front of a write tool (a CSRF check, a session guard,
        a login redirect, a limiter) is only seen with a write request. The
        request carries the probe subject, whose authorization must be
        denied, plus an undeclared argument, which bailing_flask's gate
        refuses (422 unknown_parameter) before it even asks the authorizer:
        nothing can run. Not sent at all when the authorization probe did
        not deny the probe subject; redirects are not followed.
        """
        document = self.state.document
        if not self.send_writes:
            self.skip("write_tools", "not asked for (--no-write-tools)")
            return
        if document is None:
            self.skip("write_tools", "no catalog: no tool to check")
            return
        writes = [t for t in compile_tools(document) if t.method in ("POST", "PUT", "PATCH", "DELETE")]
        if not writes:
            self.skip("write_tools", "no POST/PUT/PATCH/DELETE tool in the catalog")
            return
        probe = self.state.probe
        if probe is not None and (probe.status == "suspect" or (
                probe.http is not None and 200 <= probe.http < 300 and probe.status != "pass")):
            # the probe endpoint did not deny the probe subject: send it nothing that writes
            self.skip("write_tools", "the authorization probe did not deny the probe subject, so it might "
                      "be authorized somewhere: no write request was sent")
            return
        from ._samples import sample_arguments
        from .testing import HubSimulator

        hub = HubSimulator(self.base_url, self.secret, client="__probe__",
                           clock=lambda: float(self.now()))
        hub._document = document
        lines: list[str] = []
        fixes: list[str] = []
        failed = 0
        for tool in writes:
            operation = document["paths"][tool.path][tool.method.lower()]
            args = {**sample_arguments(operation), _DOCTOR_MARKER: True}
            call = hub.build_call(tool.name, args, subject=PROBE_SUBJECT, job_id="probe")
            exchange = self.http.send("write_tools", call.method, self.base_url + call.path_with_query,
                                      call.headers, call.body)
            ok, what, fix = self._classify_write(exchange, tool.path)
            lines.append(f"{'ok  ' if ok else 'FAIL'} {tool.method} {tool.path} (tool {tool.name}): {what}")
            if not ok:
                failed += 1
                if fix and fix not in fixes:
                    fixes.append(fix)
        detail = "\n".join(lines) + (
            f"\nEach request: the hub's signed call as {PROBE_SUBJECT!r} (job 'probe') with the "
            f"undeclared argument {_DOCTOR_MARKER!r}, which the gate refuses before authorization.")
        if failed:
            self.add(Check(
                "write_tools", "fail",
                f"{failed} of {len(writes)} write tool(s) were answered by something other than the gate",
                detail=detail, fix="\n".join(fixes) or None,
            ))
        else:
            self.add(Check("write_tools", "pass",
                           f"{len(writes)} write tool(s): the gate answered every one", detail=detail))

    def _classify_write(self, exchange: _Exchange, path: str) -> tuple[bool, str, str | None]:
        label = exchange.label()
        if exchange.status is None:
            return False, label, "Make base_url reachable from the hub."
        reason = exchange.header("x-bailing-reason")
        body_reason = _reason_of(exchange)
        if reason is not None or (exchange.status in (403, 409, 422) and body_reason in _KNOWN_REASONS):
            code = reason or body_reason
            if exchange.status == 401 and code in _SIGNATURE_REASONS:
                return False, f"{label} {code}: the signature was refused", (
                    "Write tools are signed like every tool call (path without the base_url prefix, the "
                    "exact body bytes); see tool_call for the read tool.")
            note = "" if reason is not None else " (no X-Bailing-Reason header: a proxy drops it?)"
            return True, f"the gate answered {exchange.status} {code}{note}", None
        text = exchange.text[:2048]
        lowered = text.lower()
        html = "text/html" in (exchange.header("content-type") or "").lower() or _js_trim(
            text[:64]).lower().startswith(("<!doctype html", "<html"))
        what = label + (" (an HTML page)" if html else (f" {text[:120]!r}" if text.strip() else ""))
        if exchange.redirect:
            return False, f"{label} redirect to {exchange.header('location')}", (
                "Something redirects write requests (a login page, http->https): hub calls must reach "
                "the gate. With Flask-Login: bailing.bridge_flask_login(login_manager); for a guard: "
                "`if bailing_flask.is_hub_request(): return None`.")
        if exchange.ok:
            return False, f"{label}: the request was ACCEPTED (a side effect may have run)", (
                "A write tool accepted the probe subject with an undeclared argument: it is not behind "
                "bailing_flask's gate (or its authorizer admits unknown subjects). Check it now.")
        if exchange.status == 400 and "csrf" in lowered:
            return False, f"{what}: a CSRF check", (
                "A CSRF check answered before the gate: with Flask-WTF's CSRFProtect leave "
                "BAILING_CSRF_EXEMPT on (it exempts verified tool calls only).")
        if exchange.status == 429:
            return False, f"{what}: a rate limit", (
                "A rate limit keyed on the address puts every hub user into one bucket: "
                "Limiter(key_func=bailing_flask.rate_limit_key).")
        if exchange.status == 404:
            return False, what, self._prefix_hint(path)
        if exchange.status == 401:
            return False, f"{what}: not the gate's refusal", (
                "An app-level check (a before_request guard, an auth decorator or a gateway) answered "
                "401 before the gate: let hub requests through with "
                "`if bailing_flask.is_hub_request(): return None`.")
        return False, what, ("Something in front of the gate answered; run `flask bailing check "
                             "--exercise` in the app to name it.")

    # -- 9. redirects --------------------------------------------------------------------------

    def redirects(self) -> None:
        seen = [ex for ex in self.http.log if ex.redirect and not ex.phase.startswith("diagnostic")]
        if not seen:
            self.add(Check("redirects", "pass", "no request was redirected"))
            return
        lines = [f"{ex.phase}: {ex.method} {ex.url} -> {ex.status} {ex.header('location')}" for ex in seen]
        phases = sorted({ex.phase for ex in seen})
        self.add(Check(
            "redirects", "fail",
            f"{len(seen)} redirect(s) on {', '.join(phases)}",
            detail="\n".join(lines) + "\n" + _T8,
            fix=("Answer hub requests directly: no http->https (use the https URL), trailing-slash "
                 "(strict_slashes) or login redirects on the catalog, the probe or any tool path; "
                 "unsigned catalog requests must get 401, not a redirect to a login page (T21)."),
        ))

    # -- run -------------------------------------------------------------------------------------

    def run(self) -> DoctorReport:
        self.base_url_check()
        primary = self.catalog_access()
        self.catalog_caching(primary)
        self.catalog_body(primary)
        self.catalog_lint()
        self.authz_probe()
        self.tool_call()
        self.write_tools()
        self.clock_check()
        self.redirects()
        checks = tuple(self.state.checks[name] for name in CHECK_NAMES if name in self.state.checks)
        return DoctorReport(
            checks=checks,
            base_url=self.base_url,
            catalog_url=self.catalog.href,
            policy=self.policy,
            catalog_access=self.state.access,
            authz_probe=self.state.probe,
            base_url_to_register=self.expected_base_url,
            base_url_source=self.expected_source if self.expected_base_url else None,
        )


def _short(exchange: _Exchange) -> str:
    if exchange.status is None:
        return f"network error ({exchange.error})"
    return str(exchange.status)


def run_doctor(
    base_url: str,
    secret: str,
    *,
    catalog_url: str | None = None,
    subject: str | None = None,
    timeout: float = 10.0,
    clock: Callable[[], float] = time.time,
    policy: Policy = "signed_required",
    expected_base_url: str | None = None,
    expected_source: str | None = None,
    write_tools: bool = True,
) -> DoctorReport:
    """Examine a live deployment the way BailingHub would, and report.

    :param base_url: the tool source's ``base_url`` in the hub (may contain a
        path prefix such as ``https://shop.example.com/openapi``).
    :param secret: the tool source's provider secret.
    :param catalog_url: the hub's ``spec_url``; defaults to
        ``base_url + /.well-known/bailing/tools.json``.
    :param subject: call the read tool as this subject (default: anonymous).
    :param timeout: seconds per request (the hub uses 10; the probe at most 8).
    :param clock: current Unix time of this machine (injectable for tests).
    :param policy: the tool source's ``spec_access_policy``.
    :param expected_base_url: the base URL the app's catalog paths are
        relative to (its ``BAILING_BASE_URL``, as ``flask bailing doctor``
        passes it); printed as the one to register, and checked against
        ``base_url`` (check ``base_url``).
    :param expected_source: where ``expected_base_url`` comes from, for the
        report (default ``"BAILING_BASE_URL"``).
    :param write_tools: ``False`` sends nothing to write tools (the
        ``write_tools`` check is skipped).

    Sends GET requests, the hub's POST authorization probe, and to each
    POST/PUT/PATCH/DELETE tool the hub's request as the probe subject with
    an undeclared argument, which the gate refuses before authorization
    (only once the probe showed that subject is denied): no side effect runs
    behind bailing_flask's gate.
    """
    if policy not in ("signed_required", "public_allowed"):
        raise ValueError("policy must be 'signed_required' or 'public_allowed'")
    _parse_url(base_url)  # ValueError early for a malformed base_url
    if catalog_url:
        _parse_url(catalog_url)
    if expected_base_url:
        _parse_url(expected_base_url)
    doctor = _Doctor(base_url, secret, catalog_url=catalog_url, subject=subject, timeout=timeout,
                     clock=clock, policy=policy, expected_base_url=expected_base_url,
                     expected_source=expected_source)
    doctor.send_writes = write_tools
    return doctor.run()
