"""Target ``middleware``: the verifier and the gate, called with raw WSGI environs.

A case is a request the hub would sign (method, raw path, query, body,
subject, job), a way of signing it (validly, not at all, with garbage, with
another key, out of the window) and up to four mutations applied to the
environ *after* signing: another method or path, a mismatching
``REQUEST_URI``, a changed query, a flipped or truncated body, odd
``CONTENT_LENGTH`` values, chunked flags, a stream that fails, duplicate or
extra headers, a mount prefix, an absolute-form target. It goes either to
the Flask app of :mod:`tests._fuzz.apps` or to the bare middleware.

The oracle: the WSGI call never raises and always answers one well-formed
response; a signed request that is refused says why (a reason code with the
table's status); no 5xx; and whenever a tool ran, what it ran on is exactly
what was signed with the right key within the window.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import quote, unquote_to_bytes

from hypothesis import strategies as st

from . import SECRET, Outcome, hub_signature, refusal_problem
from .apps import JOB_CALLBACK, MAX_BODY, TOOL_PATHS, echo_middleware, tool_app

__all__ = ["WsgiCase", "cases", "target", "LazyBody"]

CATALOG = "/.well-known/bailing/tools.json"
_STATUS_LINE = re.compile(r"[1-5][0-9][0-9] [^\r\n]*")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


@dataclass(frozen=True)
class LazyBody:
    """A large body described, not held: ``size`` bytes repeating ``pattern``."""

    pattern: bytes
    size: int

    def chunks(self, size: int = 65536) -> Iterator[bytes]:
        block = (self.pattern * (size // len(self.pattern) + 1))[:size]
        left = self.size
        while left > 0:
            yield block[: min(size, left)]
            left -= size

    def sha256(self) -> str:
        digest = hashlib.sha256()
        for chunk in self.chunks():
            digest.update(chunk)
        return digest.hexdigest()


class _LazyStream(io.RawIOBase):
    """A ``wsgi.input`` that produces a :class:`LazyBody` on demand, optionally failing."""

    def __init__(self, body: LazyBody, fail_after: int | None = None) -> None:
        self._body = body
        self._left = body.size
        self._given = 0
        self._fail_after = fail_after

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:  # type: ignore[override]
        if self._fail_after is not None and self._given >= self._fail_after:
            raise OSError("client went away")
        if size is None or size < 0:
            size = self._left
        size = min(size, self._left)
        pattern = self._body.pattern
        data = (pattern * (size // len(pattern) + 1))[:size]
        self._left -= size
        self._given += size
        return data


class _FailingStream(io.BytesIO):
    def __init__(self, data: bytes, fail_after: int) -> None:
        super().__init__(data)
        self._fail_after = fail_after

    def read(self, size: int | None = -1) -> bytes:
        if self.tell() >= self._fail_after:
            raise OSError("connection reset")
        return super().read(size)


Body = bytes | LazyBody


@dataclass
class WsgiCase:
    app: str
    method: str
    raw_path: str
    query: str
    body: Body
    subject: str | None
    job: str | None
    signing: str
    mutations: list[tuple[str, Any]] = field(default_factory=list)

    def __repr__(self) -> str:
        body = self.body if isinstance(self.body, bytes) else f"<{self.body.size} bytes>"
        return (f"WsgiCase(app={self.app!r}, {self.method} {self.raw_path!r}?{self.query!r}, "
                f"body={body!r:.200}, subject={self.subject!r}, job={self.job!r}, "
                f"signing={self.signing!r}, mutations={self.mutations!r})")


# -- strategies ----------------------------------------------------------------------------------

latin1 = st.characters(min_codepoint=0x20, max_codepoint=0xFF)
_HEX64 = st.text("0123456789abcdef", min_size=64, max_size=64)
_ints = st.one_of(st.integers(0, 10**6), st.integers(-10**20, 10**30),
                  st.sampled_from(["0", "00", "1.5", "-0", "1e3", "٣", "0x1f", ""]))


def _fill(template: str, value: object) -> str:
    return template.replace("{n}", str(value))


@st.composite
def _raw_paths(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["tool", "tool", "tool", "fixed", "random", "encoded"]))
    if kind == "tool":
        _, template = draw(st.sampled_from(TOOL_PATHS))
        return _fill(template, draw(_ints))
    if kind == "fixed":
        return draw(st.sampled_from([
            "/", "/plain", CATALOG, "/.well-known/bailing/authz-probe", JOB_CALLBACK,
            "/.well-known/bailing/callbacks/delivery", "/.well-known/bailing/callbacks/approval",
            "/secure/x", "//items/1", "/items/1/", "/items/%31", "/notes/",
            "/search/..", "/items/1%2Flabel", "/%2e%2e/items/1", "/items;1", "/items/1\x00",
        ]))
    if kind == "encoded":
        text = draw(st.text(st.characters(min_codepoint=0x20, max_codepoint=0x2FFF), max_size=20))
        return "/" + quote(text, safe="/;:@!$&'()*+,=-._~")
    return "/" + draw(st.text(latin1, max_size=30))


@st.composite
def _queries(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["none", "none", "pairs", "random"]))
    if kind == "none":
        return ""
    if kind == "random":
        return draw(st.text(latin1.filter(lambda c: c != "#"), max_size=40))
    pairs = draw(st.lists(st.tuples(
        st.sampled_from(["q", "limit", "x", "q", "", "a.b", "q[]"]),
        st.one_of(st.text(max_size=20), _ints.map(str), st.text(max_size=20), _ints.map(str),
                  _HEX64.map(lambda h: f"x.{h}.y")),
    ), max_size=4))
    return "&".join(f"{quote(k)}={quote(v, safe='.')}" for k, v in pairs)


_json_bodies = st.one_of(
    st.fixed_dictionaries({"text": st.text(max_size=30)}, optional={
        "tags": st.lists(st.text(max_size=5), max_size=12),
        "amount": st.one_of(st.floats(allow_nan=False), st.integers(), st.text(max_size=3)),
        "label": st.text(max_size=60), "extra": st.none(),
    }),
    st.fixed_dictionaries({"label": st.text(max_size=60)}),
    st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=10),
                 lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                 max_leaves=10),
).map(lambda value: __import__("json").dumps(value).encode())

_bodies: st.SearchStrategy[Body] = st.one_of(
    st.just(b""), st.just(b"{}"), _json_bodies, _json_bodies, st.binary(max_size=300),
    st.sampled_from([50, 5000, 60_000]).map(lambda depth: b'{"text":' + b"[" * depth + b"]" * depth + b"}"),
    st.builds(LazyBody, st.sampled_from([b"x", b'{"text":"', b"\x00\xff"]),
              st.sampled_from([31 * 1024, 33 * 1024, MAX_BODY - 1, MAX_BODY, MAX_BODY + 1, 3 * MAX_BODY])),
)

_subjects = st.one_of(
    st.none(), st.just("t1:u1"), st.just("alice@corp.example.com"), st.text(latin1, max_size=40),
    st.none(), st.just("t1:u1"), st.just("tenant.1:user.2"), st.text(latin1, max_size=10),
    _HEX64.map(lambda h: f"x.{h}.y"), st.just(""),
)
_jobs = st.one_of(st.none(), st.uuids().map(str), st.just("probe"), st.just(""),
                  st.text(latin1, max_size=20))
_methods = st.sampled_from(["GET", "GET", "POST", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"])
_content_lengths = st.sampled_from(
    ["", "-1", "+5", " 5 ", "1e3", "0x10", "٣", "9" * 30, "5, 5", "0", "nan", "1_0", "２"])
_header_names = st.sampled_from([
    "HTTP_X_BAILING_SIGNATURE", "HTTP_X_BAILING_TIMESTAMP", "HTTP_X_BAILING_ON_BEHALF_OF",
    "HTTP_X_BAILING_JOB_ID", "HTTP_X_BAILING_CLIENT", "HTTP_X_BAILING_IDEMPOTENCY_KEY",
    "HTTP_X_BAILING_TOOL_SCOPE", "HTTP_CONTENT_TYPE", "CONTENT_TYPE", "HTTP_X_HTTP_METHOD_OVERRIDE",
    "HTTP_TRANSFER_ENCODING", "HTTP_COOKIE", "HTTP_X_FORWARDED_PREFIX", "HTTP_X_FOO",
    "HTTP_AUTHORIZATION", "HTTP_EXPECT",
])

_mutation = st.one_of(
    st.tuples(st.just("method"), st.sampled_from(["get", "post", "GET", "POST", "PUT", "DELETE",
                                                   "FOO", "PROPFIND", "M-SEARCH"])),
    st.tuples(st.just("path_info"), _raw_paths()),
    st.tuples(st.just("raw_uri"), st.one_of(_raw_paths(), st.text(latin1, max_size=20))),
    st.tuples(st.just("drop_raw_uri"), st.none()),
    st.tuples(st.just("absolute_uri"), st.sampled_from(["http://h", "HTTPS://h:1", "http://"])),
    st.tuples(st.just("fragment"), st.text(latin1, max_size=5)),
    st.tuples(st.just("query"), _queries()),
    st.tuples(st.just("body_flip"), st.integers(0, 10**6)),
    st.tuples(st.just("body_truncate"), st.integers(0, 10**6)),
    st.tuples(st.just("content_length"), _content_lengths),
    st.tuples(st.just("chunked"), st.booleans()),
    st.tuples(st.just("stream_error"), st.integers(0, 2000)),
    st.tuples(st.just("subject"), _subjects),
    st.tuples(st.just("job"), _jobs),
    st.tuples(st.just("duplicate"), st.sampled_from(["HTTP_X_BAILING_SIGNATURE",
                                                      "HTTP_X_BAILING_TIMESTAMP",
                                                      "HTTP_X_BAILING_ON_BEHALF_OF"])),
    st.tuples(st.just("header"), st.tuples(_header_names, st.text(latin1, max_size=30))),
    st.tuples(st.just("script_name"), st.sampled_from(["/pre", "/p%20re", "/ü"])),
)

def _hub_like(case: WsgiCase) -> WsgiCase:
    """Mostly what the hub sends: no body on a GET (the fuzzer still tries one now and then)."""
    if case.method in ("GET", "HEAD") and case.body and sum(map(ord, case.raw_path)) % 5:
        case.body = b""
    return case


cases = st.builds(
    WsgiCase,
    app=st.sampled_from(["flask", "flask", "bare"]),
    method=_methods,
    raw_path=_raw_paths(),
    query=_queries(),
    body=_bodies,
    subject=_subjects,
    job=_jobs,
    signing=st.sampled_from(["valid"] * 8 + ["none", "garbage", "zeros", "other_key", "stale",
                                             "future", "ts_garbage", "upper_hex"]),
    mutations=st.lists(_mutation, max_size=4),
).map(_hub_like)


# -- building the environ --------------------------------------------------------------------------


def _body_bytes(body: Body) -> bytes | None:
    return body if isinstance(body, bytes) else None


def _body_sha(body: Body) -> str:
    return hashlib.sha256(body).hexdigest() if isinstance(body, bytes) else body.sha256()


def _sign(case: WsgiCase, now: int) -> dict[str, str]:
    """The X-Bailing headers (as environ keys) of the case's signing mode."""
    pwq = case.raw_path + ("?" + case.query if case.query else "")
    catalog = case.raw_path == CATALOG
    subject = "" if catalog else (case.subject or "")
    job = "" if catalog else (case.job or "")
    ts = {"stale": now - 400, "future": now + 400}.get(case.signing, now)
    stamp = "1e9" if case.signing == "ts_garbage" else str(ts)
    key = "another-secret-entirely-0123456789abcdef" if case.signing == "other_key" else SECRET
    if isinstance(case.body, LazyBody):
        # sign the lazy body without holding it: the canonical string only needs its digest
        canonical = (f"{stamp}.{case.method.upper()}.{pwq}.{case.body.sha256()}.".encode("utf-8")
                     + subject.encode("utf-8") + b"." + job.encode("utf-8"))
        signature = "sha256=" + hmac.new(key.encode(), canonical, hashlib.sha256).hexdigest()
    else:
        signature = hub_signature(key, stamp, case.method, pwq, case.body, subject, job)
    if case.signing == "garbage":
        signature = "sha256=" + "g" * 64
    elif case.signing == "zeros":
        signature = "sha256=" + "0" * 64
    elif case.signing == "upper_hex":
        signature = signature.upper().replace("SHA256=", "sha256=")
    headers = {"HTTP_X_BAILING_TIMESTAMP": stamp}
    if case.signing != "none":
        headers["HTTP_X_BAILING_SIGNATURE"] = signature
    if case.subject is not None:
        headers["HTTP_X_BAILING_ON_BEHALF_OF"] = case.subject
    if case.job is not None:
        headers["HTTP_X_BAILING_JOB_ID"] = case.job
    headers["HTTP_X_BAILING_CLIENT"] = "crm"
    return headers


def _path_info(raw_path: str) -> str:
    try:
        return unquote_to_bytes(raw_path.encode("latin-1")).decode("latin-1")
    except UnicodeEncodeError:
        return raw_path


def _native(value: str) -> str:
    """A text as a WSGI server hands it over: its UTF-8 bytes read as ISO-8859-1 if need be."""
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogatepass").decode("latin-1")
    return value


def build_environ(case: WsgiCase, now: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The environ of the case, and what was signed (for the oracle)."""
    headers = _sign(case, now)
    body = case.body
    raw_target = case.raw_path + ("?" + case.query if case.query else "")
    environ: dict[str, Any] = {
        "REQUEST_METHOD": case.method, "SCRIPT_NAME": "", "PATH_INFO": _path_info(case.raw_path),
        "QUERY_STRING": case.query, "REQUEST_URI": raw_target, "RAW_URI": raw_target,
        "SERVER_NAME": "localhost", "SERVER_PORT": "80", "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": "localhost", "wsgi.version": (1, 0), "wsgi.url_scheme": "http",
        "wsgi.errors": io.StringIO(), "wsgi.multithread": False, "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }
    environ.update(headers)
    size = len(body) if isinstance(body, bytes) else body.size
    if size or case.method not in ("GET", "HEAD"):
        environ["CONTENT_LENGTH"] = str(size)
    if isinstance(body, bytes) and body[:1] in (b"{", b"["):
        environ["CONTENT_TYPE"] = "application/json"
    stream_body: Body = body
    fail_after: int | None = None
    for kind, value in case.mutations:
        if kind == "method":
            environ["REQUEST_METHOD"] = value
        elif kind == "path_info":
            environ["PATH_INFO"] = _path_info(value)
        elif kind == "raw_uri":
            environ["REQUEST_URI"] = environ["RAW_URI"] = value
        elif kind == "drop_raw_uri":
            environ.pop("REQUEST_URI", None)
            environ.pop("RAW_URI", None)
        elif kind == "absolute_uri" and "REQUEST_URI" in environ:
            environ["REQUEST_URI"] = environ["RAW_URI"] = value + environ["REQUEST_URI"]
        elif kind == "fragment" and "REQUEST_URI" in environ:
            environ["REQUEST_URI"] = environ["RAW_URI"] = environ["REQUEST_URI"] + "#" + value
        elif kind == "query":
            environ["QUERY_STRING"] = value
        elif kind == "body_flip" and isinstance(stream_body, bytes) and stream_body:
            flipped = bytearray(stream_body)
            flipped[value % len(flipped)] ^= 0x01
            stream_body = bytes(flipped)
        elif kind == "body_truncate" and isinstance(stream_body, bytes) and stream_body:
            stream_body = stream_body[: value % len(stream_body)]
        elif kind == "content_length":
            if value:
                environ["CONTENT_LENGTH"] = value
            else:
                environ.pop("CONTENT_LENGTH", None)
        elif kind == "chunked":
            environ.pop("CONTENT_LENGTH", None)
            environ["HTTP_TRANSFER_ENCODING"] = "chunked"
            if value:
                environ["wsgi.input_terminated"] = True
        elif kind == "stream_error":
            fail_after = value
        elif kind == "subject":
            if value is None:
                environ.pop("HTTP_X_BAILING_ON_BEHALF_OF", None)
            else:
                environ["HTTP_X_BAILING_ON_BEHALF_OF"] = value
        elif kind == "job":
            if value is None:
                environ.pop("HTTP_X_BAILING_JOB_ID", None)
            else:
                environ["HTTP_X_BAILING_JOB_ID"] = value
        elif kind == "duplicate" and value in environ:
            environ[value] = environ[value] + "," + environ[value]
        elif kind == "header":
            name, text = value
            environ[name] = text
        elif kind == "script_name":
            environ["SCRIPT_NAME"] = _path_info(value)
            for key in ("REQUEST_URI", "RAW_URI"):
                if key in environ:
                    environ[key] = value + environ[key]
    for key, value in environ.items():  # PEP 3333: native strings hold ISO-8859-1 only
        if isinstance(value, str):
            environ[key] = _native(value)
    if isinstance(stream_body, bytes):
        environ["wsgi.input"] = (_FailingStream(stream_body, fail_after) if fail_after is not None
                                 else io.BytesIO(stream_body))
    else:
        environ["wsgi.input"] = _LazyStream(stream_body, fail_after)
    catalog = case.raw_path == CATALOG
    signed = {
        "valid": case.signing == "valid",
        "method": case.method.upper(),
        "path_info": _path_info(case.raw_path),
        "pwq": raw_target,
        "query": case.query,
        "body_sha256": _body_sha(body),
        "subject": None if catalog else (case.subject or None),
        "job": "" if catalog else (case.job or ""),
    }
    return environ, signed


# -- the oracle ------------------------------------------------------------------------------------


def _call(app: Callable[..., Any], environ: dict[str, Any], outcome: Outcome
          ) -> tuple[str, list[tuple[str, str]], bytes] | None:
    started: list[tuple[str, list[tuple[str, str]]]] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        if started and exc_info is None:
            outcome.add("malformed", "start_response called twice without exc_info")
        started.append((status, headers))
        return lambda data: None

    try:
        result = app(environ, start_response)
        try:
            body = b"".join(result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
    except Exception as exc:
        outcome.add("exception", f"{type(exc).__name__}: {exc}")
        return None
    if not started:
        outcome.add("malformed", "start_response was never called")
        return None
    status, headers = started[-1]
    return status, headers, body


def _well_formed(status: str, headers: list[tuple[str, str]], body: bytes, outcome: Outcome,
                 head: bool = False) -> None:
    if not isinstance(status, str) or not _STATUS_LINE.fullmatch(status):
        outcome.add("malformed", f"status line {status!r}")
    for name, value in headers:
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            outcome.add("malformed", f"header name {name!r}")
        elif not isinstance(value, str) or "\r" in value or "\n" in value:
            outcome.add("malformed", f"header {name}: {value!r}")
        else:
            try:
                value.encode("latin-1")
            except UnicodeEncodeError:
                outcome.add("malformed", f"header {name} is not ISO-8859-1: {value!r}")
        if (isinstance(name, str) and name.lower() == "content-length" and value != str(len(body))
                and not (head and not body)):  # a HEAD answer keeps the length of the GET body
            outcome.add("malformed", f"Content-Length {value!r} for {len(body)} bytes")


def _is_tool_route(method: str, path_info: str) -> bool:
    for tool_method, template in TOOL_PATHS:
        pattern = re.escape(template).replace(r"\{n\}", r"[0-9]+")
        if method.upper() == tool_method and re.fullmatch(pattern, path_info):
            return True
    return False


def _under_secure(path: str) -> bool:
    """Under the bare middleware's ``require_signature`` prefix (leading slashes collapse)."""
    path = "/" + path.lstrip("/")
    return path == "/secure" or path.startswith("/secure/")


def _accept_problem(ran: dict[str, Any], signed: dict[str, Any]) -> str | None:
    if not signed["valid"]:
        return f"a tool ran on a request without a valid signature: {ran}"
    expected = {"method": signed["method"], "path_info": signed["path_info"],
                "query": signed["query"], "body_sha256": signed["body_sha256"],
                "subject": signed["subject"], "job": signed["job"]}
    differs = {k: (ran.get(k), v) for k, v in expected.items() if ran.get(k) != v}
    return f"what ran is not what was signed: {differs}" if differs else None


def check_case(apps: dict[str, Callable[..., Any]], case: WsgiCase) -> Outcome:
    outcome = Outcome()
    environ, signed = build_environ(case, int(time.time()))
    app = apps[case.app]
    answered = _call(app, environ, outcome)
    if answered is None:
        outcome.label = "no answer"
        return outcome
    status_line, headers, body = answered
    _well_formed(status_line, headers, body, outcome, head=environ["REQUEST_METHOD"].upper() == "HEAD")
    try:
        status = int(status_line[:3])
    except ValueError:
        return outcome
    header_map = {name.lower(): value for name, value in headers}
    outcome.label = f"{status} {header_map.get('x-bailing-reason', '')}".strip()
    if status >= 500:
        outcome.add("server_error", f"{status_line}: {body[:200]!r}")
    signed_request = "HTTP_X_BAILING_SIGNATURE" in environ
    method = str(environ.get("REQUEST_METHOD", ""))
    path_info = str(environ.get("PATH_INFO", ""))
    explain = signed_request or (case.app == "flask" and _is_tool_route(method, path_info)) or (
        case.app == "bare" and (_under_secure(path_info)
                                or _under_secure(str(environ.get("REQUEST_URI", "")))))
    if status >= 400 and explain:
        problem = refusal_problem(status, dict(headers), body)
        if problem is not None:
            outcome.add("no_reason", problem)
    if case.app == "flask":
        if "x-fuzz-ran" in header_map:
            import json

            problem = _accept_problem(json.loads(header_map["x-fuzz-ran"]), signed)
            if problem is not None:
                outcome.add("false_accept", problem)
    else:
        echoed = environ.get("fuzz.echo")
        if echoed is not None:
            read, call = echoed
            if call is not None and call.kind == "tool":
                ran = {"method": call.method, "path_info": signed["path_info"],
                       "query": signed["query"] if call.signed_path == signed["pwq"] else "<other>",
                       "body_sha256": hashlib.sha256(read).hexdigest(), "subject": call.subject,
                       "job": call.job_id}
                if call.body_sha256 != ran["body_sha256"]:
                    outcome.add("false_accept", "the app read another body than the verified one")
                problem = _accept_problem(ran, signed)
                if problem is not None:
                    outcome.add("false_accept", problem)
            elif call is None and _under_secure(str(environ.get("PATH_INFO", ""))):
                outcome.add("false_accept", "an unsigned request reached a require_signature prefix")
    return outcome


@contextmanager
def target() -> Iterator[Callable[[WsgiCase], Outcome]]:
    """The Flask app and the bare middleware, with the package's logging quiet."""
    import logging

    logger = logging.getLogger("bailing_flask")
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    apps = {"flask": tool_app(), "bare": echo_middleware()}
    try:
        yield lambda case: check_case(apps, case)
    finally:
        logger.setLevel(level)
