"""Target ``callbacks``: what the hub POSTs to the business, and what it answers to a decision.

Three kinds of case:

* ``post``: a job record, delivery webhook or approval request (built the way
  the hub builds them, :mod:`bailing_flask.hub.posts`) with fields
  deleted, retyped or replaced by arbitrary JSON, or a body that is not
  JSON at all; signed correctly with the client token (now and then not),
  POSTed to the app's callback endpoints, backed by the in-memory store or
  a SQLite file. Oracle: 2xx or a 4xx with a reason code, never a 5xx;
  the handler runs only for a correctly signed body and only with a payload
  that validates again as what it claims to be.
* ``answer``: the hub's answer to the business's approval decision, any
  status and any JSON: :meth:`HubClient.decide_approval` returns a
  well-typed :class:`DecisionResult` or raises a :class:`HubError`, nothing else.
* ``decision``: building a decision from arbitrary values: an
  :class:`ApprovalDecision` or a :class:`PayloadError`.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from . import CLIENT_TOKEN, Outcome, callback_signature, refusal_problem
from .apps import tool_app

__all__ = ["CallbackCase", "cases", "target"]

PATHS = {kind: f"/.well-known/bailing/callbacks/{kind}" for kind in ("job", "delivery", "approval")}
ARGS_HASH = "17b4db064e17f4878e391177e6ca623b798911f34014bc9e78920993d7dd27ad"


@dataclass
class CallbackCase:
    kind: str  # post, answer, decision
    data: dict[str, Any]

    def __repr__(self) -> str:
        return f"CallbackCase({self.kind}, {self.data!r:.1500})"


# -- strategies ------------------------------------------------------------------------------------

_weird_text = st.one_of(
    st.text(max_size=20), st.sampled_from(["", " ", "\x00", "\ud800", "a\udfffb", "\u2028", "é" * 70,
                                           "x" * 300, "1e400", "null", "job.1", "../../etc"]),
)
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(-2**70, 2**70),
    st.sampled_from([0, -1, 1, 2**53 + 1, 10**30, 1e308, -0.0, 0.5]), st.floats(allow_nan=False),
    _weird_text,
)
json_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_weird_text, inner, max_size=4),
    max_leaves=12,
)
_FIELDS = {
    "job": ["job_id", "request_id", "status", "result", "usage", "metadata", "updated_at",
            "dispatch", "attempts", "thread_id", "error", "raw_result", "report"],
    "delivery": ["kind", "job_id", "request_id", "status", "attachments", "metadata", "text",
                 "finished_at", "report", "message"],
    "approval": ["kind", "approval_id", "job_id", "request_id", "tool", "args", "args_hash",
                 "intent", "subject", "confirm_when", "metadata", "scope", "risk", "policy"],
}


def _base(kind: str, variant: str, job_id: str, approval_id: int) -> dict[str, Any]:
    from bailing_flask.hub import posts as hub_payloads

    job = hub_payloads.job_record(job_id=job_id, subject="t1:u1")
    if kind == "job":
        return job
    if kind == "delivery":
        return hub_payloads.delivery_webhook(job)
    return hub_payloads.approval_request(
        approval_id=approval_id, job=job, tool="refund_execute", scope="refund.execute",
        method="POST", path="/api/refunds/{request_id}/execute", args={"request_id": 9},
        subject="t1:u1", variant=variant,  # type: ignore[arg-type]
    )


_edit = st.one_of(
    st.tuples(st.just("set"), st.sampled_from(sorted({f for fs in _FIELDS.values() for f in fs})),
              json_values),
    st.tuples(st.just("delete"), st.sampled_from(sorted({f for fs in _FIELDS.values() for f in fs})),
              st.none()),
    st.tuples(st.just("intent"), st.sampled_from(["approval_id", "job_id", "args_hash", "kind",
                                                  "confirm_when", "subject"]), json_values),
    st.tuples(st.just("add"), _weird_text, json_values),
)


@st.composite
def _post(draw: st.DrawFn) -> CallbackCase:
    kind = draw(st.sampled_from(["job", "delivery", "approval"]))
    target_kind = draw(st.sampled_from([kind, kind, kind, "job", "delivery", "approval"]))
    variant = draw(st.sampled_from(["tool_approval_request", "tool_approval"]))
    payload: Any = _base(kind, variant, draw(st.uuids()).hex, draw(st.integers(1, 10**6)))
    shape = draw(st.sampled_from(["edited", "edited", "edited", "valid", "json", "bytes", "deep"]))
    if shape == "edited":
        for action, name, value in draw(st.lists(_edit, min_size=1, max_size=4)):
            if action == "set":
                payload[name] = value
            elif action == "delete":
                payload.pop(name, None)
            elif action == "intent" and isinstance(payload.get("intent"), dict):
                payload["intent"][name] = value
            elif action == "add":
                payload[name] = value
    if shape == "json":
        payload = draw(json_values)
    if shape == "bytes":
        raw = draw(st.one_of(st.binary(max_size=200), st.sampled_from([
            b"", b"{", b"\xef\xbb\xbf{}", b'{"job_id": NaN}', b'{"a":1}{"b":2}', b"[]",
            b'{"job_id":"x","job_id":"y","request_id":"r","status":"done"}', b"\xff\xfe{\x00}\x00",
        ])))
    elif shape == "deep":
        depth = draw(st.sampled_from([50, 500, 5000, 100_000]))
        raw = b'{"job_id":"j","request_id":"r","status":"done","metadata":' + b"[" * depth + b"]" * depth + b"}"
    else:
        raw = json.dumps(payload, ensure_ascii=draw(st.booleans()), separators=(",", ":"),
                         allow_nan=True).encode("utf-8", "surrogatepass")
    signing = draw(st.sampled_from(["valid"] * 6 + ["none", "provider", "seconds", "garbage"]))
    return CallbackCase("post", {"kind": target_kind, "raw": raw, "signing": signing,
                                 "store": draw(st.sampled_from(["memory", "sqlite"]))})


_ACCEPTED = {"ok": True, "id": 7, "status": "approved", "decision_id": "biz-7", "idempotent": False,
             "rerun": True}
_answer_field = st.sampled_from(sorted(_ACCEPTED) + ["error"])


@st.composite
def _answer_bodies(draw: st.DrawFn) -> bytes:
    """The hub's answer to an accepted decision with fields edited, or any JSON at all."""
    value: Any = dict(_ACCEPTED)
    if draw(st.booleans()):
        for name, new in draw(st.lists(st.tuples(_answer_field, st.one_of(st.just(None), json_values)),
                                       max_size=3)):
            if new is None:
                value.pop(name, None)
            else:
                value[name] = new
    else:
        value = draw(json_values)
    return json.dumps(value, allow_nan=True).encode("utf-8", "surrogatepass")


@st.composite
def _answer(draw: st.DrawFn) -> CallbackCase:
    status = draw(st.sampled_from([200] * 12 + [201, 204, 302, 400, 401, 403, 404, 409, 429, 500,
                                   502, 503, 418]))
    body = draw(st.one_of(_answer_bodies(), _answer_bodies(), st.binary(max_size=50),
                          st.sampled_from([b'{"ok":true,"status":"approved","id":1e400}',
                                           b'{"ok":true,"status":"approved","id":"7"}',
                                           b'{"ok":true,"status":"approved","id":NaN}'])))
    headers = draw(st.lists(st.sampled_from([("Retry-After", "5"), ("Retry-After", "-1"),
                                             ("Retry-After", "1e400"), ("Retry-After", "nan"),
                                             ("Location", "http://elsewhere/"),
                                             ("Content-Type", "text/html")]), max_size=2))
    return CallbackCase("answer", {"status": status, "body": body, "headers": headers,
                                   "auth": draw(st.sampled_from(["signature", "bearer"]))})


@st.composite
def _decision(draw: st.DrawFn) -> CallbackCase:
    return CallbackCase("decision", {
        "decision": draw(st.one_of(st.sampled_from(["approved", " Denied ", "approve", ""]),
                                   json_values)),
        "approver": draw(st.one_of(_weird_text, json_values)),
        "decision_id": draw(st.one_of(st.sampled_from(["biz-1", "a" * 129, "x y"]), json_values)),
        "comment": draw(st.one_of(st.none(), _weird_text, st.just("c" * 1001))),
        "decided_at": draw(st.one_of(st.none(), _weird_text, json_values)),
    })


cases = st.one_of(_post(), _post(), _post(), _answer(), _decision())


# -- the oracle ------------------------------------------------------------------------------------


def _check_post(apps: dict[str, Any], data: dict[str, Any]) -> Outcome:
    from bailing_flask.hub.payloads import ApprovalRequest, DeliveryWebhook, JobRecord

    outcome = Outcome()
    app = apps[data["store"]]
    received: list[tuple[str, Any]] = app.config["FUZZ_RECEIVED"]
    before = len(received)
    raw: bytes = data["raw"]
    ts = str(int(time.time() * 1000))
    signing = data["signing"]
    if signing == "seconds":
        ts = str(int(time.time()))
    key = {"provider": app.config["BAILING_SECRETS"][0]}.get(signing, CLIENT_TOKEN)
    headers = {"Content-Type": "application/json", "X-Bailing-Timestamp": ts}
    if signing != "none":
        headers["X-Bailing-Signature"] = ("sha256=" + "f" * 64 if signing == "garbage"
                                          else callback_signature(key, ts, raw))
    try:
        response = app.test_client().post(PATHS[data["kind"]], data=raw, headers=headers)
    except Exception as exc:
        outcome.add("exception", f"{type(exc).__name__}: {exc}")
        return outcome
    body = response.get_data()
    status = response.status_code
    outcome.label = f"{status} {_reason(body)}".strip()
    if status >= 500:
        outcome.add("server_error", f"{status}: {body[:300]!r}")
    elif status >= 400:
        problem = refusal_problem(status, dict(response.headers), body)
        if problem is not None:
            outcome.add("no_reason", problem)
    elif not 200 <= status < 300:
        outcome.add("malformed", f"a callback answered {status}")
    got = received[before:]
    if len(got) > 1:
        outcome.add("false_accept", f"the handler ran {len(got)} times for one POST")
    for kind, payload in got:
        if signing != "valid":
            outcome.add("false_accept", f"the {kind} handler ran for a POST signed {signing!r}")
        if status != 200:
            outcome.add("false_accept", f"the {kind} handler ran but the answer was {status}")
        model = {"job": JobRecord, "delivery": DeliveryWebhook, "approval": ApprovalRequest}[kind]
        if kind != data["kind"] or not isinstance(payload, model):
            outcome.add("false_accept", f"the {data['kind']} endpoint handed a {type(payload).__name__}"
                        f" to the {kind} handler")
            continue
        try:
            again = model.model_validate(payload.model_dump())
        except Exception as exc:
            outcome.add("false_accept", f"the handler got a {model.__name__} that does not "
                        f"validate again: {type(exc).__name__}: {exc}")
            continue
        if again != payload:
            outcome.add("false_accept", f"the handler got a {model.__name__} that changes when "
                        "validated again")
    return outcome


def _reason(body: bytes) -> str:
    try:
        value = json.loads(body)
    except ValueError:
        return ""
    return str(value.get("reason", "")) if isinstance(value, dict) else ""


class _AnswerHub:
    """A hub on a loopback socket that answers each decision with what the case says.

    Served by wsgiref: Werkzeug's development server allocates about 10 MiB
    per connection, which would drown the client's own memory figure.
    """

    def __init__(self, stack: ExitStack) -> None:
        from tests._servers import serving

        self.answer: tuple[int, list[tuple[str, str]], bytes] = (200, [], b"{}")
        self.url = stack.enter_context(serving(self, "wsgiref"))

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        environ["wsgi.input"].read(length)
        status, headers, body = self.answer
        start_response(f"{status} Fuzz", [("Content-Type", "application/json"), *headers,
                                          ("Content-Length", str(len(body)))])
        return [body]


def _approval() -> Any:
    from bailing_flask.hub.payloads import parse_approval_request

    return parse_approval_request({
        "kind": "tool_approval_request", "approval_id": 7, "job_id": "job-7", "request_id": "req-7",
        "tool": "refund_execute", "args": {"request_id": 9}, "args_hash": ARGS_HASH,
    })


def _check_answer(hub: _AnswerHub, data: dict[str, Any]) -> Outcome:
    from bailing_flask.hub.client import DecisionResult, HubClient, HubError

    outcome = Outcome()
    hub.answer = (data["status"], data["headers"], data["body"])
    client = HubClient(hub.url, CLIENT_TOKEN, timeout=5)
    try:
        result = client.decide_approval(_approval(), "approved", approver="u1", decision_id="biz-7",
                                        auth=data["auth"])
    except HubError as exc:
        outcome.label = type(exc).__name__
        if not isinstance(exc.status, int):
            outcome.add("malformed", f"{type(exc).__name__} with status {exc.status!r}")
        return outcome
    except Exception as exc:
        outcome.add("exception", f"{type(exc).__name__}: {exc}")
        return outcome
    outcome.label = "DecisionResult"
    if not 200 <= data["status"] < 300:
        outcome.add("false_accept", f"a {data['status']} answer was taken as an accepted decision")
    if not isinstance(result, DecisionResult) or not (
        isinstance(result.ok, bool) and isinstance(result.status, str)
        and isinstance(result.approval_id, int) and isinstance(result.decision_id, str)
        and isinstance(result.idempotent, bool) and isinstance(result.rerun, bool)
    ):
        outcome.add("malformed", f"an ill-typed result {result!r}")
    return outcome


def _check_decision(data: dict[str, Any]) -> Outcome:
    from bailing_flask.hub.payloads import ApprovalDecision, PayloadError, build_decision

    outcome = Outcome()
    try:
        decision = build_decision(_approval(), **data)
    except PayloadError:
        outcome.label = "PayloadError"
        return outcome
    except Exception as exc:
        outcome.add("exception", f"{type(exc).__name__}: {exc}")
        return outcome
    outcome.label = "ApprovalDecision"
    try:
        again = ApprovalDecision.model_validate_json(decision.body())
        if again != decision or decision.decision not in ("approved", "denied"):
            outcome.add("malformed", f"the decision does not survive its own bytes: {decision!r}")
    except Exception as exc:
        outcome.add("malformed", f"the decision's body does not validate: {type(exc).__name__}: {exc}")
    return outcome


@contextmanager
def target() -> Iterator[Callable[[CallbackCase], Outcome]]:
    """Two apps (memory and SQLite stores) and an answering hub; the package's logging quiet."""
    import logging

    with ExitStack() as stack:
        for name in ("bailing_flask", "werkzeug"):  # refusals and requests are expected here
            logger = logging.getLogger(name)
            stack.callback(logger.setLevel, logger.level)
            logger.setLevel(logging.CRITICAL + 1)
        folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="bailing-fuzz-"))
        apps = {"memory": tool_app(),
                "sqlite": tool_app(BAILING_STORE="sqlite:///" + os.path.join(folder, "idem.sqlite3"))}
        hub = _AnswerHub(stack)

        def check(case: CallbackCase) -> Outcome:
            if case.kind == "post":
                return _check_post(apps, case.data)
            if case.kind == "answer":
                return _check_answer(hub, case.data)
            return _check_decision(case.data)

        yield check
