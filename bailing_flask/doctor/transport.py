"""HTTP as the hub's Node ``fetch`` does it: WHATWG URL parsing, Node's default headers, no redirects
unless asked, bodies bounded before they are decoded."""

from __future__ import annotations

import http.client
import socket
import ssl
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from bailing_flask.wire.jsenc import QUERY_ENCODE_SET, percent_encode, whatwg_pathname


#: The headers Node's fetch adds to every request the hub sends.
_NODE_HEADERS = (
    ("accept", "*/*"),
    ("accept-language", "*"),
    ("sec-fetch-mode", "cors"),
    ("user-agent", "node"),
    ("accept-encoding", "gzip, deflate"),
)
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


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
    target = whatwg_pathname(parts.path or "/")
    if parts.query:
        target += "?" + percent_encode(parts.query, QUERY_ENCODE_SET)
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
        """The body as the hub's ``Response.text()`` reads it: UTF-8, one leading BOM dropped."""
        return self.body.decode("utf-8-sig", "replace")

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


def tls_context(cacert: str | None = None) -> ssl.SSLContext:
    """How the doctor checks a server's certificate: the system's CAs, or only those in ``cacert``.

    ``cacert`` (a PEM file) is the CA the hub's own client is told to trust
    for this source (Node's ``NODE_EXTRA_CA_CERTS``): a self-signed or
    internal certificate verifies against it, and nothing else does.

    :raises ValueError: the file cannot be read or holds no certificate.
    """
    if cacert is None:
        return ssl.create_default_context()
    try:
        return ssl.create_default_context(cafile=cacert)
    except FileNotFoundError:
        raise ValueError(f"--cacert {cacert}: no such file") from None
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"--cacert {cacert}: not a PEM file of CA certificates ({exc})") from None


class _Transport:
    def __init__(self, timeout: float, clock: Callable[[], float],
                 context: ssl.SSLContext | None = None) -> None:
        self.timeout = timeout
        self.clock = clock
        self.context = context if context is not None else ssl.create_default_context()
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
                parsed.host, parsed.port, timeout=wait, context=self.context
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


def _short(exchange: _Exchange) -> str:
    if exchange.status is None:
        return f"network error ({exchange.error})"
    return str(exchange.status)
