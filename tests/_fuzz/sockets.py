"""Target ``sockets``: raw request bytes against real servers (Werkzeug and gunicorn).

A case starts from a request the hub would send (a tool call, signed or
not) and garbles how it goes on the wire: the request line (method case,
absolute-form or odd targets, unknown versions, bare LF), the headers
(duplicates, obsolete line folding, spaces before the colon, NUL and
non-ASCII bytes, conflicting ``Content-Length`` values, ``Content-Length``
together with ``Transfer-Encoding``, odd transfer codings), the chunk
framing (bad sizes, extensions, trailers, a missing last chunk) and what
follows the body (a second, unsigned request pipelined behind it). The
bytes go to the server over a fresh loopback connection; the client then
closes its sending side and reads every response until the server closes.

The oracle reads each response: no 5xx from the app (a server's own 501
or 505 for an HTTP version it does not speak is not the app's), a refusal
by the app of a signed request says why, and any tool that ran ran on
exactly the signed request; a request nobody signed (the pipelined one
included) never runs a tool.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote_to_bytes

from hypothesis import strategies as st

from . import SECRET, Outcome, hub_signature, refusal_problem
from .apps import APP_MARK, TOOL_PATHS, tool_app

__all__ = ["SocketCase", "cases", "target", "parse_responses"]

_READ_TIMEOUT = 15.0
_REFUSALS = frozenset({400, 401, 403, 409, 413, 422})


@dataclass
class SocketCase:
    server: str
    method: str
    path: str
    query: str
    body: bytes
    subject: str | None
    job: str | None
    signed: bool
    garbles: list[tuple[str, Any]] = field(default_factory=list)

    def __repr__(self) -> str:
        return (f"SocketCase({self.server}, {self.method} {self.path}?{self.query}, body={self.body!r:.120},"
                f" subject={self.subject!r}, job={self.job!r}, signed={self.signed}, garbles={self.garbles!r})")


_bodies = st.one_of(
    st.just(b""), st.just(b"{}"),
    st.fixed_dictionaries({"text": st.text(max_size=20)}, optional={"tags": st.lists(st.text(max_size=4), max_size=3)})
    .map(lambda v: json.dumps(v, ensure_ascii=False).encode()),
    st.fixed_dictionaries({"label": st.text(min_size=1, max_size=10)}).map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=64),
)


@st.composite
def _requests(draw: st.DrawFn) -> dict[str, Any]:
    method, template = draw(st.sampled_from(TOOL_PATHS))
    path = template.replace("{n}", str(draw(st.integers(0, 10**4))))
    query = ""
    if template == "/search":
        # the last two carry raw bytes (not percent-encoded): no hub sends them, a client can
        query = draw(st.sampled_from(["", "q=shoes", "q=" + quote("鞋 子"), "limit=5&q=a.b", "limit=x",
                                      "q=caf\xe9", "q=\xa0&limit=2"]))
    body = b"" if method in ("GET", "DELETE") else draw(_bodies)
    if method == "DELETE":
        body = b"{}"
    return {"method": method, "path": path, "query": query, "body": body}


_header_garbles = st.one_of(
    st.tuples(st.just("duplicate"), st.sampled_from(["X-Bailing-Signature", "X-Bailing-Timestamp",
                                                      "X-Bailing-On-Behalf-Of", "X-Bailing-Job-Id",
                                                      "Content-Length", "Host", "Transfer-Encoding"])),
    st.tuples(st.just("fold"), st.sampled_from(["X-Bailing-Signature", "X-Bailing-On-Behalf-Of",
                                                 "X-Bailing-Job-Id", "Content-Type"])),
    st.tuples(st.just("space_before_colon"), st.sampled_from(["X-Bailing-Signature", "Content-Length",
                                                               "Transfer-Encoding"])),
    st.tuples(st.just("lower_names"), st.none()),
    st.tuples(st.just("nul"), st.sampled_from(["X-Bailing-On-Behalf-Of", "X-Bailing-Job-Id"])),
    st.tuples(st.just("latin1"), st.sampled_from(["X-Bailing-On-Behalf-Of", "X-Foo"])),
    st.tuples(st.just("utf8"), st.sampled_from(["X-Bailing-On-Behalf-Of", "X-Foo"])),
    st.tuples(st.just("content_length"), st.sampled_from(["-1", "+3", " 3", "3 ", "0x3", "99999999999999999999",
                                                           "3, 3", "", "1", "1000"])),
    st.tuples(st.just("conflicting_length"), st.integers(0, 10)),
    st.tuples(st.just("drop"), st.sampled_from(["Content-Length", "Host", "X-Bailing-Timestamp"])),
    st.tuples(st.just("transfer_encoding"), st.sampled_from(["chunked", "Chunked", "chunked, identity",
                                                              "identity, chunked", "xchunked", " chunked",
                                                              "chunked\t", "gzip, chunked"])),
    st.tuples(st.just("bad_header"), st.sampled_from(["NoColon", ": empty-name", "Bad Name: x",
                                                       "X-Very-Long: " + "a" * 9000, "\tX-Lead: tab"])),
    st.tuples(st.just("expect"), st.sampled_from(["100-continue", "nonsense"])),
    st.tuples(st.just("connection"), st.sampled_from(["close", "keep-alive", "Upgrade"])),
)
_line_garbles = st.one_of(
    st.tuples(st.just("method"), st.sampled_from(["get", "post", "GET ", "G\x00T", "PROPFIND", "CONNECT",
                                                   "PRI", "GE T"])),
    st.tuples(st.just("version"), st.sampled_from(["HTTP/1.0", "HTTP/1.2", "HTTP/2.0", "HTTP/0.9", "http/1.1",
                                                    "HTTP/1.1 extra", "", "HTTP/1.10", "HTTP/11"])),
    st.tuples(st.just("target"), st.sampled_from(["absolute", "asterisk", "space", "fragment", "double_slash",
                                                  "encoded", "backslash", "nul", "utf8"])),
    st.tuples(st.just("bare_lf"), st.none()),
)
_body_garbles = st.one_of(
    st.tuples(st.just("chunked"), st.sampled_from(["ok", "bad_size", "size_mismatch", "no_last", "extension",
                                                   "trailer", "negative", "hex_prefix", "huge", "lf_only",
                                                   "short"])),
    st.tuples(st.just("smuggle"), st.sampled_from(TOOL_PATHS)),
    st.tuples(st.just("truncate"), st.integers(0, 50)),
    st.tuples(st.just("trailing_garbage"), st.binary(min_size=1, max_size=20)),
)

cases = st.builds(
    lambda server, request, subject, job, signed, garbles: SocketCase(
        server=server, subject=subject, job=job, signed=signed, garbles=garbles, **request),
    st.sampled_from(["werkzeug", "gunicorn"]),
    _requests(),
    st.sampled_from([None, "t1:u1", "alice@corp.example.com", "ü-user"]),
    st.one_of(st.uuids().map(str), st.just("probe")),
    st.sampled_from([True, True, True, False]),
    st.lists(st.one_of(_header_garbles, _header_garbles, _line_garbles, _body_garbles), max_size=4),
)


# -- the wire --------------------------------------------------------------------------------------


def _chunked(body: bytes, mode: str) -> bytes:
    half = len(body) // 2
    pieces = [body[:half], body[half:]] if body else []
    pieces = [p for p in pieces if p]
    out = b""
    for piece in pieces:
        size = b"%x" % len(piece)
        if mode == "bad_size":
            size = b"zz"
        elif mode == "size_mismatch":
            size = b"%x" % (len(piece) + 3)
        elif mode == "extension":
            size += b";name=value"
        elif mode == "negative":
            size = b"-" + size
        elif mode == "hex_prefix":
            size = b"0x" + size
        elif mode == "huge":
            size = b"f" * 20
        end = b"\n" if mode == "lf_only" else b"\r\n"
        out += size + end + piece + end
    if mode == "no_last":
        return out
    if mode == "short":
        return out[: max(0, len(out) - 3)]
    out += b"0\r\n"
    if mode == "trailer":
        out += b"X-Bailing-Signature: sha256=" + b"0" * 64 + b"\r\n"
    return out + b"\r\n"


def _smuggled(method: str, template: str, host: str) -> bytes:
    path = template.replace("{n}", "1")
    body = b"" if method == "GET" else b'{"text":"smuggled","label":"smuggled"}'
    return (f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body


def build_bytes(case: SocketCase, host: str) -> tuple[bytes, list[str], dict[str, Any] | None]:
    """The bytes to send, the methods of the requests in them, and what was signed."""
    target = case.path + ("?" + case.query if case.query else "")
    ts = str(int(time.time()))
    headers: list[tuple[str, str]] = [("Host", host)]
    signed_tuple = None
    if case.signed:
        headers.append(("X-Bailing-Timestamp", ts))
        headers.append(("X-Bailing-Signature", hub_signature(
            SECRET, ts, case.method, target, case.body, case.subject or "", case.job or "")))
        signed_tuple = {
            "method": case.method, "path_info": unquote_to_bytes(case.path).decode("latin-1"),
            "query": case.query, "subject": case.subject, "job": case.job or "",
            "body_sha256": __import__("hashlib").sha256(case.body).hexdigest(),
        }
    if case.subject is not None:
        headers.append(("X-Bailing-On-Behalf-Of", case.subject))
    if case.job is not None:
        headers.append(("X-Bailing-Job-Id", case.job))
    headers.append(("X-Bailing-Client", "crm"))
    if case.body:
        headers.append(("Content-Type", "application/json"))
    if case.body or case.method not in ("GET", "HEAD"):
        headers.append(("Content-Length", str(len(case.body))))

    method, version, eol, raw_target = case.method, "HTTP/1.1", b"\r\n", target
    body = case.body
    tail = b""
    methods = [case.method]
    extra_lines: list[bytes] = []
    for kind, value in case.garbles:
        if kind == "method":
            method = value
        elif kind == "version":
            version = value
        elif kind == "bare_lf":
            eol = b"\n"
        elif kind == "target":
            raw_target = {
                "absolute": f"http://{host}{target}", "asterisk": "*", "space": target.replace("/", "/ ", 1),
                "fragment": target + "#frag", "double_slash": "/" + target, "encoded": target.replace("/", "%2F", 2),
                "backslash": target.replace("/", "\\", 1), "nul": target + "\x00", "utf8": target + "é",
            }[value]
        elif kind == "duplicate":
            found = [h for h in headers if h[0] == value]
            headers.extend(found[:1] or [(value, "1")])
        elif kind == "fold":
            headers = [(n, v[: len(v) // 2] + "\r\n " + v[len(v) // 2:]) if n == value else (n, v)
                       for n, v in headers]
        elif kind == "space_before_colon":
            headers = [(n + " ", v) if n == value else (n, v) for n, v in headers]
        elif kind == "lower_names":
            headers = [(n.lower(), v) for n, v in headers]
        elif kind == "nul":
            headers = [(n, v + "\x00x") if n == value else (n, v) for n, v in headers]
        elif kind == "latin1":
            headers.append((value, "caf\xe9"))
        elif kind == "utf8":
            headers.append((value, "caf\xc3\xa9"))
        elif kind == "content_length":
            headers = [h for h in headers if h[0] != "Content-Length"] + [("Content-Length", value)]
        elif kind == "conflicting_length":
            headers.append(("Content-Length", str(len(body) + value + 1)))
        elif kind == "drop":
            headers = [h for h in headers if h[0] != value]
        elif kind == "transfer_encoding":
            headers.append(("Transfer-Encoding", value))
        elif kind == "bad_header":
            extra_lines.append(value.encode("latin-1"))
        elif kind == "expect":
            headers.append(("Expect", value))
        elif kind == "connection":
            headers = [h for h in headers if h[0] != "Connection"] + [("Connection", value)]
        elif kind == "chunked":
            if not any(n.lower().startswith("transfer-encoding") for n, _ in headers):
                headers = [h for h in headers if h[0] != "Content-Length"]
                headers.append(("Transfer-Encoding", "chunked"))
            body = _chunked(case.body, value)
        elif kind == "smuggle":
            tail += _smuggled(value[0], value[1], host)
            methods.append(value[0])
        elif kind == "truncate" and body:
            body = body[: value % len(body)]
        elif kind == "trailing_garbage":
            tail += value
    head = f"{method} {raw_target} {version}".rstrip(" ").encode("latin-1", "replace") + eol
    for name, value in headers:
        head += name.encode("latin-1", "replace") + b": " + value.encode("latin-1", "replace") + eol
    for line in extra_lines:
        head += line + eol
    return head + eol + body + tail, methods, signed_tuple


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes


def _dechunk(data: bytes) -> tuple[bytes, bytes] | None:
    body = b""
    while True:
        line_end = data.find(b"\r\n")
        if line_end < 0:
            return None
        try:
            size = int(data[:line_end].split(b";")[0], 16)
        except ValueError:
            return None
        data = data[line_end + 2:]
        if size == 0:
            end = data.find(b"\r\n\r\n") if not data.startswith(b"\r\n") else -2
            return body, data[end + 4:] if end >= 0 else b""
        body += data[:size]
        data = data[size + 2:]


def parse_responses(data: bytes, methods: list[str]) -> tuple[list[Response], bytes]:
    """Every complete response in ``data``; and what could not be parsed."""
    responses: list[Response] = []
    while data:
        end = data.find(b"\r\n\r\n")
        if end < 0 or not data.startswith(b"HTTP/"):
            break
        lines = data[:end].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        try:
            status = int(parts[1])
        except (IndexError, ValueError):
            break
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        rest = data[end + 4:]
        method = methods[len(responses)] if len(responses) < len(methods) else "GET"
        if 100 <= status < 200:
            data = rest
            continue
        if method == "HEAD" or status in (204, 304):
            body = b""
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            parsed = _dechunk(rest)
            if parsed is None:
                body, rest = rest, b""
            else:
                body, rest = parsed
        elif headers.get("content-length", "").isdigit():
            size = int(headers["content-length"])
            body, rest = rest[:size], rest[size:]
        else:
            body, rest = rest, b""
        responses.append(Response(status, headers, body))
        data = rest
    return responses, data


class Hung(Exception):
    """The server neither answered nor closed the connection in time."""


def exchange(base_url: str, payload: bytes) -> bytes:
    """Send ``payload`` on a fresh connection, half-close, read until the server closes.

    Raises :class:`Hung` when the server keeps the connection open without a
    word for :data:`_READ_TIMEOUT` seconds: after the half-close it has all
    the bytes it will ever get.
    """
    host, port = base_url.split("//", 1)[1].split(":")
    received = b""
    with socket.create_connection((host, int(port)), timeout=_READ_TIMEOUT) as sock:
        try:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server may answer and close before it read everything
        while True:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                raise Hung(f"no answer and no close within {_READ_TIMEOUT:g} s "
                           f"({len(received)} bytes received)") from None
            except OSError:
                break  # reset: the server closed without reading everything
            if not chunk:
                break
            received += chunk
    return received


def check_case(servers: dict[str, str], case: SocketCase) -> Outcome:
    outcome = Outcome()
    base = servers[case.server]
    host = base.split("//", 1)[1]
    payload, methods, signed = build_bytes(case, host)
    try:
        raw = exchange(base, payload)
    except Hung as exc:
        outcome.add("exception", f"the server hung: {exc}")
        return outcome
    except OSError as exc:
        outcome.label = f"no connection ({type(exc).__name__})"
        return outcome
    responses, _ = parse_responses(raw, methods)
    outcome.label = ",".join(f"{r.status}{'' if APP_MARK.lower() in r.headers else '(server)'}"
                             for r in responses) or "closed"
    for index, response in enumerate(responses):
        from_app = APP_MARK.lower() in response.headers
        if response.status >= 500 and (from_app or response.status in (500, 502, 503, 504)):
            outcome.add("server_error", f"{response.status} ({'app' if from_app else 'server'}): "
                        f"{response.body[:200]!r}")
        # the statuses of the package's refusals: a garbled header may hide the signature from
        # the server, and an unsigned request that routes nowhere gets the app's own 404 or 405
        if (index == 0 and from_app and case.signed and response.status in _REFUSALS
                and "x-fuzz-ran" not in response.headers):
            problem = refusal_problem(response.status, response.headers, response.body)
            if problem is not None:
                outcome.add("no_reason", problem)
        if "x-fuzz-ran" in response.headers:
            try:
                ran = json.loads(response.headers["x-fuzz-ran"])
            except ValueError:
                outcome.add("malformed", f"a tool answer without its record: {response.headers!r:.200}")
                continue
            if signed is None:
                outcome.add("false_accept", f"a tool ran on a request nobody signed: {ran}")
                continue
            differs = {k: (ran.get(k), v) for k, v in signed.items() if ran.get(k) != v}
            if differs:
                outcome.add("false_accept", f"what ran is not what was signed: {differs}")
    return outcome


@contextmanager
def target(servers: tuple[str, ...] = ("werkzeug", "gunicorn")) -> Iterator[Callable[[SocketCase], Outcome]]:
    """The fuzzed app behind Werkzeug (in a thread) and gunicorn (a subprocess).

    ``servers`` may also name ``waitress`` and ``wsgiref`` (threads, like Werkzeug).
    """
    import logging

    from tests._servers import gunicorn_serving, serving

    with ExitStack() as stack:
        for name in ("bailing_flask", "werkzeug", "waitress"):
            logger = logging.getLogger(name)
            stack.callback(logger.setLevel, logger.level)
            logger.setLevel(logging.CRITICAL + 1)
        urls: dict[str, str] = {}
        for server in servers:
            if server == "gunicorn":
                urls[server] = stack.enter_context(gunicorn_serving("tests._fuzz.apps:socket_app()"))
            else:  # werkzeug, waitress, wsgiref: in a thread of this process
                urls[server] = stack.enter_context(serving(tool_app(), server))

        def check(case: SocketCase) -> Outcome:
            if case.server not in urls:
                case = SocketCase(**{**case.__dict__, "server": next(iter(urls))})
            return check_case(urls, case)

        check.urls = urls  # type: ignore[attr-defined]  # the long run reads the servers' memory
        yield check
