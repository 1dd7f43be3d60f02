"""Target ``schemathesis``: the example app's own served catalog, called over a real socket.

The catalog is fetched the way the hub fetches it (signed, it is a
signed-only endpoint), then requests are generated from it two ways:

* by schemathesis (positive and negative data), each request signed by a
  ``requests`` auth hook at the last moment, over the exact bytes that go on
  the wire: the path and query as sent, the sha256 of the body bytes, the
  subject and the job id, plus the hub's idempotency key on side-effecting
  tools (:class:`HubSigner`);
* by the hub's own request builder (:class:`~bailing_flask.testing.HubSimulator`)
  with arguments drawn from each operation's JSON schema, so the
  encoding is exactly the hub's (``encodeURIComponent``, ``URLSearchParams``,
  ``JSON.stringify``).

Each generated request is sent as signed, and once more tampered with
(unsigned, another subject, one body byte changed). Oracle: no 5xx; every
refusal carries a reason code with the table's status; a request signed like
the hub is never refused for its signature; a tampered one is always
refused (401) and never changes anything.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from hypothesis import strategies as st

from . import CLIENT_TOKEN, SECRET, Outcome, refusal_problem

__all__ = ["HubSigner", "schemathesis_available", "hub_cases", "target", "CATALOG"]

CATALOG = "/.well-known/bailing/tools.json"
#: subjects of the example app: admin of t1, a reader of t1, a user of t2, unknown ones
SUBJECTS = ("t1:u1", "t1:u1", "t1:u2", "t2:u9", None, "t9:nobody", "__bailing_authz_probe__:nobody")
#: refusals of the signature itself: a request signed like the hub must never get one
SIGNATURE_REASONS = frozenset({
    "missing_signature", "malformed_signature", "malformed_timestamp", "timestamp_out_of_window",
    "bad_signature", "malformed_job_id", "ambiguous_signature", "unexpected_body", "wrong_key",
    "request_altered",
})


def schemathesis_available() -> str | None:
    """``None`` when schemathesis can be used, else why not."""
    try:
        import schemathesis  # noqa: F401
    except ImportError as exc:
        return f"schemathesis is not installed ({exc}); pip install -e '.[fuzz]'"
    return None


def example_app_from_env() -> Any:
    """The example app for a gunicorn worker: database and secrets from the fuzz run."""
    from example_app import create_app

    from .apps import quiet_worker

    quiet_worker()
    app = create_app(_example_config(os.environ["FUZZ_DATABASE"]))
    app.logger.setLevel(100)
    return app


def _example_config(database: str) -> dict[str, Any]:
    return {
        "DATABASE": database, "BAILING_SECRETS": [SECRET], "BAILING_STORE": "memory://",
        "SECRET_KEY": "fuzz-session-key", "BAILING_CLIENT_TOKENS": [CLIENT_TOKEN],
        "BAILING_HUB_URL": "http://127.0.0.1:9",  # no decision is ever sent here
    }


# -- the wire --------------------------------------------------------------------------------------


@dataclass
class Sent:
    status: int
    headers: dict[str, str]
    body: bytes


def send(base_url: str, method: str, target: str, headers: dict[str, str], body: bytes) -> Sent:
    """One request with the target exactly as given (no re-quoting), on a fresh connection."""
    parts = urlsplit(base_url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.putrequest(method, target, skip_accept_encoding=True)
        for name, value in headers.items():
            conn.putheader(name, value.encode("latin-1"))
        if body or method not in ("GET", "HEAD"):
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body or None)
        response = conn.getresponse()
        return Sent(response.status, dict(response.getheaders()), response.read())
    finally:
        conn.close()


def fetch_catalog(base_url: str) -> dict[str, Any]:
    """The catalog, fetched signed like the hub (it refuses unsigned fetches)."""
    from bailing_flask.testing import catalog_headers

    unsigned = send(base_url, "GET", CATALOG, {}, b"")
    if unsigned.status != 401:
        raise AssertionError(f"an unsigned catalog fetch answered {unsigned.status}")
    fetched = send(base_url, "GET", CATALOG, catalog_headers(SECRET, CATALOG), b"")
    if fetched.status != 200:
        raise AssertionError(f"the signed catalog fetch answered {fetched.status}: {fetched.body[:200]!r}")
    document: dict[str, Any] = json.loads(fetched.body)
    return document


def _side_effecting(operation: dict[str, Any], method: str) -> bool:
    execution = (operation.get("x-agent-capability") or {}).get("execution") or {}
    return method != "GET" and not execution.get("readonly") and execution.get("idempotent") is not True


def _tamper(method: str, target: str, headers: dict[str, str], body: bytes, how: str
            ) -> tuple[dict[str, str], bytes]:
    headers = dict(headers)
    if how == "unsigned":
        headers.pop("X-Bailing-Signature", None)
    elif how == "subject":
        headers["X-Bailing-On-Behalf-Of"] = "t1:u1" if headers.get("X-Bailing-On-Behalf-Of") != "t1:u1" else "t2:u9"
    elif how == "body" and body:
        body = body[:-1] + bytes([body[-1] ^ 0x01])
    else:  # a GET has no body to change: change the query instead
        headers["X-Bailing-Job-Id"] = str(uuid.uuid4())
    return headers, body


def judge(outcome: Outcome, sent: Sent, *, signed: bool, carried: dict[str, str] | None = None) -> None:
    """The oracle of one response; ``carried`` are the headers of a tampered request."""
    carried = carried or {}
    reason = sent.headers.get("X-Bailing-Reason") or ""
    if not reason:
        try:
            value = json.loads(sent.body)
            reason = str(value.get("reason") or "") if isinstance(value, dict) else ""
        except ValueError:
            pass
    outcome.label = f"{sent.status} {reason}".strip()
    if sent.status >= 500:
        outcome.add("server_error", f"{sent.status} {reason}: {sent.body[:300]!r}")
    # an unsigned request to a path no route serves gets the app's own 404 page, as any browser would
    unsigned_miss = not signed and "X-Bailing-Signature" not in carried and sent.status in (404, 405)
    if sent.status >= 400 and not unsigned_miss:
        problem = refusal_problem(sent.status, sent.headers, sent.body)
        if problem is not None:
            outcome.add("no_reason", problem)
    if signed and reason in SIGNATURE_REASONS:
        outcome.add("malformed", f"a request signed like the hub was refused: {reason}")
    if not signed and sent.status < 400:
        outcome.add("false_accept", f"a tampered request was answered {sent.status}: {sent.body[:200]!r}")


# -- schemathesis ----------------------------------------------------------------------------------


class HubSigner:
    """A ``requests`` auth hook: sign the prepared request exactly as it goes on the wire.

    Set :attr:`call` (tool, arguments, subject, job, side-effecting) before
    each request; the hook then adds the hub's headers over the final path
    and query and the body bytes, and the idempotency key when the tool has
    side effects.
    """

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.call: dict[str, Any] = {}
        #: what was signed last: (method, target, headers, body), to replay it tampered
        self.last: tuple[str, str, dict[str, str], bytes] | None = None

    def __call__(self, request: Any) -> Any:
        from bailing_flask.testing import idempotency_key, signed_headers

        try:  # urllib3 percent-encodes what is not allowed in a target: sign it as it will go
            from urllib3.util.url import _encode_target
        except ImportError:  # pragma: no cover - another urllib3
            _encode_target = None
        target = request.path_url
        if _encode_target is not None:
            target = _encode_target(target)
            request.url = "/".join(request.url.split("/", 3)[:3]) + target  # scheme://host + target
        body = request.body or b""
        if isinstance(body, str):
            body = body.encode("utf-8")
            request.body = body
        call = self.call
        key = None
        if call.get("side_effecting"):
            key = idempotency_key(call["tool"], call["args"], call["job"], call["subject"])
        headers = signed_headers(self.secret, request.method, target, body, subject=call.get("subject"),
                                 job_id=call.get("job"), client="crm", idempotency_key=key)
        request.headers.update(headers)
        kept = {name: value for name, value in request.headers.items()
                if name.lower() not in ("content-length", "host", "transfer-encoding")}
        self.last = (request.method, target, kept, body)
        return request


@dataclass
class _SchemathesisCase:
    operation: str
    case: Any
    subject: str | None
    tamper: str

    def __repr__(self) -> str:
        case = self.case
        return (f"schemathesis({self.operation}, path={case.path_parameters!r}, query={case.query!r},"
                f" body={getattr(case, 'body', None)!r:.300}, subject={self.subject!r}, tamper={self.tamper})")


def schemathesis_cases(document: dict[str, Any]) -> st.SearchStrategy[_SchemathesisCase]:
    import schemathesis
    from schemathesis import GenerationMode

    schema = schemathesis.openapi.from_dict(document)
    strategies = []
    for result in schema.get_all_operations():
        operation = result.ok()
        label = f"{operation.method.upper()} {operation.path}"
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            strategies.append(operation.as_strategy(generation_mode=mode).map(
                lambda case, label=label: (label, case)))
    return st.builds(
        lambda pair, subject, tamper: _SchemathesisCase(pair[0], pair[1], subject, tamper),
        st.one_of(strategies), st.sampled_from(SUBJECTS),
        st.sampled_from(["unsigned", "subject", "body"]),
    )


def _check_schemathesis(base_url: str, document: dict[str, Any], session: Any, signer: HubSigner,
                        item: _SchemathesisCase) -> Outcome:
    outcome = Outcome()
    case = item.case
    method = case.method.upper()
    operation = document["paths"][case.path][method.lower()]
    args: dict[str, Any] = {**(case.path_parameters or {}), **(case.query or {})}
    body = getattr(case, "body", None)
    if isinstance(body, dict):
        args.update(body)
    signer.call = {"tool": operation["operationId"], "args": json.loads(json.dumps(args, default=str)),
                   "subject": item.subject, "job": str(uuid.uuid4()),
                   "side_effecting": _side_effecting(operation, method)}
    signer.last = None
    try:
        response = _patiently(lambda: case.call(base_url=base_url, session=session, timeout=30))
    except Exception as exc:  # schemathesis refused to build it, or the connection broke
        name = type(exc).__name__
        if "Serializ" in name or "InvalidArgument" in name or "Unsatisfiable" in name:
            outcome.label = f"not sendable ({name})"
            return outcome
        outcome.add("exception", f"{name}: {exc}")
        return outcome
    headers = {name: ", ".join(value) if isinstance(value, list) else value
               for name, value in response.headers.items()}
    judge(outcome, Sent(response.status_code, headers, response.content), signed=True)
    if signer.last is not None:
        method, target, headers, sent_body = signer.last
        headers, sent_body = _tamper(method, target, headers, sent_body, item.tamper)
        tampered = Outcome()
        try:
            answer = _patiently(lambda: send(base_url, method, target, headers, sent_body))
        except OSError as exc:
            outcome.add("exception", f"no answer: {type(exc).__name__}: {exc}")
            return outcome
        judge(tampered, answer, signed=False, carried=headers)
        outcome.problems.extend(tampered.problems)
    return outcome


# -- the hub's own encoding, arguments from the schema ---------------------------------------------


def schema_values(schema: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values for a JSON schema: inside it mostly, outside it now and then."""
    anything = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10))
    if not isinstance(schema, dict) or depth > 3:
        return anything
    if "enum" in schema:
        return st.one_of(st.sampled_from(schema["enum"]), st.sampled_from(schema["enum"]), anything)
    kind = schema.get("type")
    if kind == "integer":
        low, high = schema.get("minimum"), schema.get("maximum")
        return st.one_of(st.integers(low, high), st.integers(low, high), st.integers(), anything)
    if kind == "number":
        return st.one_of(st.floats(schema.get("minimum"), schema.get("maximum"), allow_nan=False,
                                   allow_infinity=False), st.integers(0, 10**6), st.floats(allow_nan=False))
    if kind == "string":
        return st.one_of(st.text(max_size=schema.get("maxLength") or 30), st.text(max_size=300),
                         st.sampled_from(["1001", "t1", "+86 138 0000 0000", "12345"]))
    if kind == "boolean":
        return st.one_of(st.booleans(), anything)
    if kind == "array":
        return st.lists(schema_values(schema.get("items"), depth + 1), max_size=4)
    if kind == "object":
        properties = schema.get("properties") or {}
        return st.fixed_dictionaries({}, optional={
            name: schema_values(sub, depth + 1) for name, sub in properties.items()})
    return anything


def _operation_arguments(operation: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for parameter in operation.get("parameters") or []:
        fields[parameter["name"]] = schema_values(parameter.get("schema"))
    body = ((operation.get("requestBody") or {}).get("content") or {}).get("application/json") or {}
    properties = (body.get("schema") or {}).get("properties") or {}
    for name, sub in properties.items():
        fields[name] = schema_values(sub)
    required = {p["name"] for p in operation.get("parameters") or [] if p.get("in") == "path"}
    return st.fixed_dictionaries({k: v for k, v in fields.items() if k in required},
                                 optional={k: v for k, v in fields.items() if k not in required})


@dataclass
class _HubCase:
    tool: str
    args: dict[str, Any]
    subject: str | None
    tamper: str


def hub_cases(document: dict[str, Any]) -> st.SearchStrategy[_HubCase]:
    """Tool calls built by the hub's rules, arguments drawn from the catalog's schemas."""
    per_tool = []
    for path_item in document["paths"].values():
        for operation in path_item.values():
            per_tool.append(st.builds(_HubCase, st.just(operation["operationId"]),
                                      _operation_arguments(operation), st.sampled_from(SUBJECTS),
                                      st.sampled_from(["unsigned", "subject", "body"])))
    return st.one_of(per_tool)


def _patiently(send_it: Callable[[], Any]) -> Any:
    """Send once more after a connection error: a loaded machine may drop one, a hang drops both."""
    try:
        return send_it()
    except OSError:
        time.sleep(0.5)
        return send_it()


def _check_hub(base_url: str, hub: Any, item: _HubCase) -> Outcome:
    outcome = Outcome()
    missing = hub.missing_path_arguments(item.tool, item.args)
    if missing:
        outcome.label = "not sendable (path argument missing)"
        return outcome
    request = hub.build_call(item.tool, item.args, subject=item.subject)
    headers, body = _tamper(request.method, request.path_with_query, request.headers, request.body,
                            item.tamper)
    try:
        judge(outcome, _patiently(lambda: hub.replay(request)), signed=True)
        sent = _patiently(lambda: send(base_url, request.method, request.path_with_query, headers, body))
    except OSError as exc:
        outcome.add("exception", f"no answer: {type(exc).__name__}: {exc}")
        return outcome
    tampered = Outcome()
    judge(tampered, sent, signed=False, carried=headers)
    outcome.problems.extend(tampered.problems)
    return outcome


@dataclass
class OpenApiCase:
    server: str
    generator: str  # schemathesis or hub
    item: Any

    def __repr__(self) -> str:
        return f"OpenApiCase({self.server}, {self.generator}, {self.item!r})"


@contextmanager
def target(servers: tuple[str, ...] = ("werkzeug", "gunicorn")
           ) -> Iterator[tuple[Callable[[str], st.SearchStrategy[OpenApiCase]], Callable[[OpenApiCase], Outcome]]]:
    """The example app on real servers; yields ``(cases(generator), check)``.

    The example app's database is a fresh copy per run, in a temporary
    folder that is removed at the end.
    """
    import logging

    from bailing_flask.testing import HubSimulator
    from example_app import create_app
    from tests._servers import gunicorn_serving, serving

    with ExitStack() as stack:
        for name in ("bailing_flask", "werkzeug", "example_app", "schemathesis"):
            logger = logging.getLogger(name)
            stack.callback(logger.setLevel, logger.level)
            logger.setLevel(logging.CRITICAL + 1)
        folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="bailing-fuzz-shop-"))
        seeded = os.path.join(folder, "seed.sqlite3")
        create_app(_example_config(seeded))  # schema and demo data, once
        urls: dict[str, str] = {}
        if "werkzeug" in servers:
            database = os.path.join(folder, "werkzeug.sqlite3")
            shutil.copy(seeded, database)
            urls["werkzeug"] = stack.enter_context(serving(create_app(_example_config(database)), "werkzeug"))
        if "gunicorn" in servers:
            database = os.path.join(folder, "gunicorn.sqlite3")
            shutil.copy(seeded, database)
            urls["gunicorn"] = stack.enter_context(gunicorn_serving(
                "tests._fuzz.openapi:example_app_from_env()", env={"FUZZ_DATABASE": database}))
        documents = {name: fetch_catalog(url) for name, url in urls.items()}
        hubs = {name: HubSimulator(url, SECRET) for name, url in urls.items()}
        signer = HubSigner(SECRET)
        session: Any = None
        if schemathesis_available() is None:  # requests comes with schemathesis
            import requests

            session = stack.enter_context(requests.Session())
            session.auth = signer

        def cases(generator: str) -> st.SearchStrategy[OpenApiCase]:
            document = documents[next(iter(urls))]
            items = schemathesis_cases(document) if generator == "schemathesis" else hub_cases(document)
            return st.builds(OpenApiCase, st.sampled_from(sorted(urls)), st.just(generator), items)

        def check(case: OpenApiCase) -> Outcome:
            url = urls[case.server]
            if case.generator == "schemathesis":
                return _check_schemathesis(url, documents[case.server], session, signer, case.item)
            return _check_hub(url, hubs[case.server], case.item)

        check.urls = urls  # type: ignore[attr-defined]  # the long run reads the servers' memory
        yield cases, check
