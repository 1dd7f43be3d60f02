"""One JSON audit record per call that reaches the gate, per refused signature, per refused callback.

Every outcome is driven by the hub simulator against a small real app: the
record must be on the ``bailing_flask.audit`` logger as parseable JSON with
every documented field, the same record must arrive through the
``audit_record`` signal, and nothing that could carry data (an exception's
message, argument values of a sensitive tool, a body) may appear.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flask import Flask, abort, jsonify
from pydantic import BaseModel

from bailing_flask import Bailing, tool
from bailing_flask import audit as audit_module
from bailing_flask.audit import AUDIT_FIELDS
from bailing_flask.signals import audit_record, signature_refused, tool_failed
from bailing_flask.wire.signing import sign_callback
from bailing_flask.testing import HubSimulator

from .helpers import STRONG_SECRET, reconfigure

CLIENT_TOKEN = "client-token-for-audit-tests-0123456789"
SECRET_IN_MESSAGE = "card 4111-1111-1111-1111"


class Note(BaseModel):
    text: str


class Refusal(Exception):
    pass


def create_app(**config: Any) -> Flask:
    app = Flask("audit_app")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://",
                      BAILING_CLIENT_TOKENS=CLIENT_TOKEN, **config)
    bailing = Bailing(app)
    bailing.authorizer(lambda call: call.subject == "t1:u1")

    @app.errorhandler(Refusal)
    def refusal(exc: Refusal) -> Any:
        return jsonify(error="refused"), 409

    @app.get("/ok")
    @tool(scope="ok.read")
    def ok() -> Any:
        return jsonify(ok=True)

    @app.post("/notes")
    @tool(scope="note.write", body=Note)
    def note() -> Any:
        return jsonify(saved=True), 201

    @app.post("/secret-notes")
    @tool(scope="note.write", body=Note, sensitive=True)
    def secret_note() -> Any:
        return jsonify(saved=True), 201

    @app.get("/boom")
    @tool(scope="ok.read")
    def boom() -> Any:
        raise ValueError(SECRET_IN_MESSAGE)

    @app.get("/missing")
    @tool(scope="ok.read")
    def missing() -> Any:
        abort(404)

    @app.get("/handled")
    @tool(scope="ok.read")
    def handled() -> Any:
        raise Refusal(SECRET_IN_MESSAGE)

    @bailing.job_finished
    def finished(job: Any) -> None:
        pass

    return app


@pytest.fixture
def app() -> Flask:
    return create_app()


@pytest.fixture
def hub(app: Flask) -> HubSimulator:
    return HubSimulator(app, STRONG_SECRET)


@pytest.fixture
def records(app: Flask) -> Iterator[list[dict[str, Any]]]:
    """Records as the audit_record signal delivers them."""
    seen: list[dict[str, Any]] = []

    def receive(sender: Flask, record: dict[str, Any]) -> None:
        seen.append(record)

    audit_record.connect(receive, app)
    yield seen
    audit_record.disconnect(receive, app)


def logged(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    """Every audit line, parsed from the message text (not from ``extra``)."""
    return [json.loads(r.getMessage()) for r in caplog.records if r.name == "bailing_flask.audit"]


def test_every_outcome_leaves_one_parseable_record_with_every_field(
    app: Flask, hub: HubSimulator, caplog: pytest.LogCaptureFixture,
    records: list[dict[str, Any]],
) -> None:
    app.config["PROPAGATE_EXCEPTIONS"] = False  # a production app: the raise becomes a 500
    with caplog.at_level(logging.INFO, logger="bailing_flask.audit"):
        assert hub.call("ok", subject="t1:u1", job_id="job-1").status == 200
        assert hub.call("ok", subject="t9:u9", job_id="job-2").status == 403
        assert hub.call("note", {"text": 5}, subject="t1:u1", job_id="job-3").status == 422
        assert hub.call("boom", subject="t1:u1", job_id="job-4").status == 500
        assert hub.call("missing", subject="t1:u1", job_id="job-5").status == 404
        assert hub.call("handled", subject="t1:u1", job_id="job-6").status == 409
    lines = logged(caplog)
    assert lines == records
    assert [list(line) for line in lines] == [list(AUDIT_FIELDS)] * 6
    summary = [(r["tool"], r["job_id"], r["status"], r["reason"], r["error"]) for r in lines]
    assert summary == [
        ("ok", "job-1", 200, None, None),
        ("ok", "job-2", 403, "forbidden", None),
        ("note", "job-3", 422, "invalid_parameter", None),
        ("boom", "job-4", 500, "view_raised", "ValueError"),
        ("missing", "job-5", 404, "view_status", "werkzeug.exceptions.NotFound"),
        ("handled", "job-6", 409, "view_raised", "tests.test_audit.Refusal"),
    ]
    first = lines[0]
    assert first["event"] == "tool_call" and first["verified"] is True
    assert (first["scope"], first["method"], first["path"]) == ("ok.read", "GET", "/ok")
    assert (first["subject"], first["client"], first["key_label"]) == ("t1:u1", "crm", "0")
    assert first["time"].endswith("Z") and first["duration_ms"] >= 0
    assert lines[3]["arguments"] == [] and lines[3]["duration_ms"] is not None
    # (Flask's own logger reports the exception; the audit trail never carries its message)
    assert not any(SECRET_IN_MESSAGE in r.getMessage() for r in caplog.records
                   if r.name.startswith("bailing_flask"))


def test_a_raised_view_is_recorded_when_exceptions_propagate_too(
    app: Flask, hub: HubSimulator, records: list[dict[str, Any]],
) -> None:
    app.config["PROPAGATE_EXCEPTIONS"] = True
    with pytest.raises(ValueError):
        hub.call("boom", subject="t1:u1")
    assert [(r["tool"], r["status"], r["error"]) for r in records] == [("boom", 500, "ValueError")]


def test_argument_values_follow_the_policy(hub: HubSimulator, app: Flask,
                                           caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="bailing_flask.audit"):
        hub.call("note", {"text": "plain words"}, subject="t1:u1")
        hub.call("secret_note", {"text": "private words"}, subject="t1:u1")
        reconfigure(app, audit_argument_values=True)
        hub.call("note", {"text": "plain words"}, subject="t1:u1")
        hub.call("secret_note", {"text": "private words"}, subject="t1:u1")
    assert [r["arguments"] for r in logged(caplog)] == [
        ["text"], ["text"], {"text": "plain words"}, ["text"],
    ]
    assert "private words" not in caplog.text


def test_replays_of_a_side_effect_are_marked(hub: HubSimulator, records: list[dict[str, Any]]) -> None:
    request = hub.build_call("note", {"text": "once"}, subject="t1:u1")
    assert hub.replay(request).status == 201
    again = hub.replay(request)
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert [r["replayed"] for r in records] == [False, True]


def test_a_view_that_sets_the_replay_header_itself_is_not_recorded_as_a_replay(
    app: Flask, hub: HubSimulator, records: list[dict[str, Any]],
) -> None:
    @app.get("/says-replayed")
    @tool(scope="ok.read")
    def says_replayed() -> Any:  # a read tool runs every call: it is never a replay
        return jsonify(ok=True), 200, {"Idempotent-Replayed": "true"}

    assert hub.call("says_replayed", subject="t1:u1").status == 200
    assert [(r["tool"], r["replayed"]) for r in records] == [("says_replayed", False)]


def test_a_write_tools_first_run_with_its_own_replay_header_is_not_recorded_as_a_replay(
    app: Flask, hub: HubSimulator, records: list[dict[str, Any]],
) -> None:
    @app.post("/says-replayed")
    @tool(scope="ok.write")
    def says_replayed_too() -> Any:  # de-duplicated: its first call runs, its repeat is a replay
        return jsonify(ok=True), 201, {"Idempotent-Replayed": "true"}

    request = hub.build_call("says_replayed_too", {}, subject="t1:u1")
    assert hub.replay(request).status == 201
    assert hub.replay(request).status == 201
    assert [(r["tool"], r["replayed"]) for r in records] == [("says_replayed_too", False),
                                                            ("says_replayed_too", True)]


def test_signature_refusals_are_audited_and_signalled_with_the_tool(
    app: Flask, hub: HubSimulator, caplog: pytest.LogCaptureFixture,
    records: list[dict[str, Any]],
) -> None:
    refused: list[tuple[Any, ...]] = []

    def on_refused(sender: Flask, **kw: Any) -> None:
        refused.append((kw["kind"], kw["reason"], kw["status"], kw["method"], kw["path"],
                        kw["tool"].name if kw["tool"] else None))

    signature_refused.connect(on_refused, app)
    try:
        request = hub.build_call("ok", subject="t1:u1", job_id="job-forged")
        with caplog.at_level(logging.INFO, logger="bailing_flask.audit"):
            assert hub.replay(request, on_behalf_of="t1:admin").status == 401
            assert hub.replay(request, timestamp="1").status == 401
            assert hub.fetch_catalog(signature="zeros").status == 401
    finally:
        signature_refused.disconnect(on_refused, app)
    assert refused == [
        ("tool", "bad_signature", 401, "GET", "/ok", "ok"),
        ("tool", "timestamp_out_of_window", 401, "GET", "/ok", "ok"),
        ("tool", "bad_signature", 401, "GET", "/.well-known/bailing/tools.json", None),
    ]
    assert logged(caplog) == records
    first = records[0]
    assert (first["event"], first["tool"], first["verified"], first["subject"]) == (
        "signature_refused", "ok", False, None)
    assert first["job_id"] == "job-forged" and first["client"] == "crm"
    assert [r["expected"] for r in records] == [False, False, True]
    assert set(AUDIT_FIELDS) <= set(first)


def test_refused_callbacks_are_audited_and_signalled(
    app: Flask, records: list[dict[str, Any]],
) -> None:
    refused: list[tuple[str, str]] = []
    signature_refused.connect(lambda sender, **kw: refused.append((kw["kind"], kw["reason"])), app,
                              weak=False)
    body = b'{"job_id":"j1","request_id":"r1","status":"done"}'
    client = app.test_client()
    try:
        ts = str(int(time.time() * 1000))
        wrong = sign_callback(STRONG_SECRET, ts, body)  # the provider secret: the wrong key
        client.post("/.well-known/bailing/callbacks/job", data=body, headers={
            "X-Bailing-Timestamp": ts, "X-Bailing-Signature": wrong})
    finally:
        signature_refused.receivers.clear()
    assert refused == [("callback", "wrong_key")]
    assert records[0]["event"] == "callback_refused" and records[0]["callback"] == "job"
    assert records[0]["status"] == 401


def test_tool_failed_signal_carries_the_exception(app: Flask, hub: HubSimulator) -> None:
    failed: list[tuple[str, str, int]] = []

    def on_failed(sender: Flask, tool: Any, call: Any, exception: BaseException, status: int,
                  duration_ms: float) -> None:
        failed.append((tool.name, type(exception).__name__, status))

    tool_failed.connect(on_failed, app)
    app.config["PROPAGATE_EXCEPTIONS"] = False
    try:
        hub.call("boom", subject="t1:u1")
        hub.call("missing", subject="t1:u1")
    finally:
        tool_failed.disconnect(on_failed, app)
    assert failed == [("boom", "ValueError", 500), ("missing", "NotFound", 404)]


def test_no_record_is_built_when_nobody_reads_them(
    hub: HubSimulator, monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[str] = []
    original = audit_module.gate_record

    def counting(*args: Any, **kwargs: Any) -> dict[str, Any]:
        built.append("record")
        return original(*args, **kwargs)

    monkeypatch.setattr(audit_module, "gate_record", counting)
    audit_logger = logging.getLogger("bailing_flask.audit")
    level = audit_logger.level
    try:
        audit_logger.setLevel(logging.WARNING)
        hub.call("ok", subject="t1:u1")
        assert built == []
        audit_logger.setLevel(logging.INFO)
        hub.call("ok", subject="t1:u1")
        assert built == ["record"]
    finally:
        audit_logger.setLevel(level)


@pytest.fixture
def quiet_audit_logger() -> Iterator[logging.Logger]:
    """The audit logger as an app leaves it, restored afterwards."""
    audit_logger = logging.getLogger("bailing_flask.audit")
    saved = (audit_logger.level, audit_logger.propagate, list(audit_logger.handlers),
             list(audit_logger.filters))
    yield audit_logger
    audit_logger.setLevel(saved[0])
    audit_logger.propagate = saved[1]
    audit_logger.handlers[:] = saved[2]
    audit_logger.filters[:] = saved[3]


def test_with_nobody_listening_not_one_field_of_a_record_is_built(
    app: Flask, hub: HubSimulator, monkeypatch: pytest.MonkeyPatch, quiet_audit_logger: logging.Logger,
) -> None:
    """No handler, receiver, sink or telemetry: the gate looks up nothing a record would hold."""
    def builds(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a part of an audit record was built while nobody listens")

    for name in ("gate_record", "exception_name", "_now", "_bound_record", "audit_line", "emit"):
        monkeypatch.setattr(audit_module, name, builds)
    quiet_audit_logger.setLevel(logging.WARNING)
    app.config["PROPAGATE_EXCEPTIONS"] = False
    assert hub.call("ok", subject="t1:u1").status == 200
    assert hub.call("ok", subject="t9:u9").status == 403
    assert hub.call("note", {"text": 5}, subject="t1:u1").status == 422
    assert hub.call("note", {"text": "n"}, subject="t1:u1").status == 201
    assert hub.call("boom", subject="t1:u1").status == 500
    assert hub.call("handled", subject="t1:u1").status == 409  # the app's own handler still answers
    assert hub.call("missing", subject="t1:u1").status == 404
    request = hub.build_call("ok", subject="t1:u1")
    assert hub.replay(request, on_behalf_of="t1:admin").status == 401


def _count_records(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    built: list[str] = []
    original = audit_module.gate_record

    def counting(*args: Any, **kwargs: Any) -> dict[str, Any]:
        built.append(args[0].name)
        return original(*args, **kwargs)

    monkeypatch.setattr(audit_module, "gate_record", counting)
    return built


def test_a_logger_on_for_info_with_no_handler_to_take_it_builds_nothing_until_one_is_added(
    hub: HubSimulator, monkeypatch: pytest.MonkeyPatch, quiet_audit_logger: logging.Logger,
) -> None:
    built = _count_records(monkeypatch)
    taken: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            taken.append(record)

    quiet_audit_logger.setLevel(logging.INFO)  # enabled, but nothing up the chain would write it
    quiet_audit_logger.propagate = False
    hub.call("ok", subject="t1:u1")
    assert built == []
    keep = Keep()
    quiet_audit_logger.addHandler(keep)  # added at run time: the next call sees it
    hub.call("ok", subject="t1:u1")
    assert built == ["ok"] and len(taken) == 1
    keep.setLevel(logging.WARNING)  # a handler that drops INFO does not count
    hub.call("ok", subject="t1:u1")
    assert built == ["ok"] and len(taken) == 1
    quiet_audit_logger.removeHandler(keep)
    quiet_audit_logger.propagate = True  # up to the root logger's handler (pytest's capture)
    hub.call("ok", subject="t1:u1")
    assert built == ["ok", "ok"]


def test_logging_basic_config_after_the_tools_compiled_is_honoured_by_the_next_call(
    hub: HubSimulator, monkeypatch: pytest.MonkeyPatch, quiet_audit_logger: logging.Logger,
) -> None:
    """What a tool's plan decides once must not hide a logging set-up an app does later."""
    import io

    built = _count_records(monkeypatch)
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    quiet_audit_logger.propagate = True
    root.handlers[:] = []
    root.setLevel(logging.WARNING)
    try:
        hub.call("ok", subject="t1:u1")  # compiles the tools; nobody would take an INFO record
        assert built == []
        written = io.StringIO()
        logging.basicConfig(level=logging.INFO, stream=written, format="%(message)s")
        hub.call("ok", subject="t1:u1")
        assert built == ["ok"]
        assert json.loads(written.getvalue().splitlines()[-1])["tool"] == "ok"
    finally:
        root.handlers[:] = saved[1]
        root.setLevel(saved[0])


def test_a_receiver_connected_after_the_tools_compiled_gets_the_next_record(
    app: Flask, hub: HubSimulator, monkeypatch: pytest.MonkeyPatch, quiet_audit_logger: logging.Logger,
) -> None:
    built = _count_records(monkeypatch)
    quiet_audit_logger.setLevel(logging.WARNING)
    hub.call("ok", subject="t1:u1")
    assert built == []
    seen: list[dict[str, Any]] = []

    def receive(sender: Flask, record: dict[str, Any]) -> None:
        seen.append(record)

    audit_record.connect(receive, app)
    try:
        hub.call("ok", subject="t1:u1")
    finally:
        audit_record.disconnect(receive, app)
    assert built == ["ok"] and seen[0]["tool"] == "ok"


def test_a_receiver_of_another_app_does_not_make_this_app_build_records(
    hub: HubSimulator, monkeypatch: pytest.MonkeyPatch, quiet_audit_logger: logging.Logger,
) -> None:
    built = _count_records(monkeypatch)
    quiet_audit_logger.setLevel(logging.WARNING)
    other = Flask("other")
    seen: list[Any] = []

    def receive(sender: Flask, record: dict[str, Any]) -> None:
        seen.append(record)

    audit_record.connect(receive, other)
    try:
        hub.call("ok", subject="t1:u1")
        assert built == [] and seen == []
        audit_record.connect(receive)  # any sender: this app's records too
        hub.call("ok", subject="t1:u1")
        assert built == ["ok"] and len(seen) == 1
    finally:
        audit_record.disconnect(receive, other)
        audit_record.disconnect(receive)


# -- records cannot be split or inflated by what a caller chose ------------------------------

LINE_BREAKS = ["\x85", "\u2028", "\u2029", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\r", "\n"]


@pytest.fixture
def audit_file(tmp_path: Any) -> Iterator[Any]:
    """The documented set-up: the audit logger writes its messages to a JSON-lines file."""
    path = tmp_path / "audit.jsonl"
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(message)s"))
    audit_logger = logging.getLogger("bailing_flask.audit")
    level = audit_logger.level
    audit_logger.addHandler(handler)
    audit_logger.setLevel(logging.INFO)
    try:
        yield path
    finally:
        audit_logger.removeHandler(handler)
        audit_logger.setLevel(level)
        handler.close()


def test_a_subject_with_a_line_break_character_cannot_forge_a_second_record(
    hub: HubSimulator, audit_file: Any, records: list[dict[str, Any]],
) -> None:
    forged = '{"event":"tool_call","tool":"refund","subject":"t1:admin","status":200}'
    subject = "t1:u2\x85" + forged  # U+0085 travels in a header (it is Latin-1)
    assert hub.call("ok", subject=subject).status == 403
    lines = audit_file.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1, lines
    assert json.loads(lines[0])["subject"] == subject == records[0]["subject"]


def test_argument_values_with_any_line_break_character_stay_on_one_line(
    app: Flask, hub: HubSimulator, audit_file: Any,
) -> None:
    reconfigure(app, audit_argument_values=True)
    for index, brk in enumerate(LINE_BREAKS):
        assert hub.call("note", {"text": f"a{brk}b"}, subject="t1:u1", job_id=f"j{index}").status == 201
    lines = audit_file.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(LINE_BREAKS)
    assert [json.loads(line)["arguments"]["text"] for line in lines] == [
        f"a{brk}b" for brk in LINE_BREAKS]
    text = audit_file.read_text(encoding="utf-8")
    assert not any(brk in text for brk in ("\x85", "\u2028", "\u2029"))


def test_every_string_of_a_record_is_bounded_and_says_where_it_was_cut(
    app: Flask, hub: HubSimulator, caplog: pytest.LogCaptureFixture,
    records: list[dict[str, Any]],
) -> None:
    reconfigure(app, audit_argument_values=True)
    long_subject, long_client = "t1:" + "u" * 6000, "c" * 6000
    with caplog.at_level(logging.INFO, logger="bailing_flask.audit"):
        hub.call("ok", subject=long_subject, client=long_client)
        hub.call("note", {"text": "x" * 6000}, subject="t1:u1")
        request = hub.build_call("ok", subject="t1:u1")
        hub.send("X" * 5000, request.path_with_query, request.headers, b"", request)
    assert logged(caplog) == records and len(records) == 3
    first = records[0]
    assert first["subject"] == long_subject[:audit_module.MAX_FIELD_CHARS] + "…[cut: 6003 characters]"
    assert first["client"] == long_client[:audit_module.MAX_FIELD_CHARS] + "…[cut: 6000 characters]"
    assert records[1]["arguments"]["text"].endswith("…[cut: 6000 characters]")
    assert records[2]["event"] == "signature_refused"
    assert records[2]["method"].endswith("…[cut: 5000 characters]")

    def strings(value: Any) -> Iterator[str]:
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for key, item in value.items():
                yield key
                yield from strings(item)
        elif isinstance(value, list):
            for item in value:
                yield from strings(item)

    limit = audit_module.MAX_FIELD_CHARS + len("…[cut: 6003 characters]")
    assert max(len(text) for record in records for text in strings(record)) <= limit


class _Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.taken: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.taken.append(record)


@pytest.fixture
def kept(quiet_audit_logger: logging.Logger) -> Iterator[_Keep]:
    """The audit logger on for INFO with one handler that keeps what it is handed."""
    keep = _Keep()
    quiet_audit_logger.setLevel(logging.INFO)
    quiet_audit_logger.propagate = False
    quiet_audit_logger.addHandler(keep)
    yield keep


def test_the_audit_line_reaches_a_handler_as_logger_info_would_hand_it(
    hub: HubSimulator, kept: _Keep, quiet_audit_logger: logging.Logger,
) -> None:
    """The package makes the record itself (no look up the stack for the caller), with the
    attributes ``Logger.info`` would give it: a formatter showing the file, line or function
    shows where the package logs, as before."""
    import inspect

    hub.call("ok", subject="t1:u1")
    (record,) = kept.taken
    line = record.getMessage()
    assert json.loads(line) == record.bailing and record.bailing["tool"] == "ok"  # type: ignore[attr-defined]
    assert (record.name, record.levelno, record.msg, record.args) == (
        "bailing_flask.audit", logging.INFO, "%s", (line,))
    assert record.pathname == audit_module.emit.__code__.co_filename
    assert (record.module, record.funcName, record.exc_info, record.stack_info) == (
        "audit", "emit", None, None)
    source, first = inspect.getsourcelines(audit_module.emit)
    assert first < record.lineno < first + len(source)

    reference = _Keep()  # what Logger.info itself makes of the same message
    quiet_audit_logger.handlers[:] = [reference]
    quiet_audit_logger.info("%s", line, extra={"bailing": record.bailing})  # type: ignore[attr-defined]
    formatted = {"message", "asctime"}  # what a formatter that handled the record added to it
    assert set(vars(reference.taken[0])) - formatted == set(vars(record)) - formatted


@contextlib.contextmanager
def _meanwhile(apply: Callable[[], None], undo: Callable[[], None]) -> Iterator[None]:
    apply()
    try:
        yield
    finally:
        undo()


def test_the_audit_record_goes_through_the_apps_record_factory_filters_and_disable(
    hub: HubSimulator, kept: _Keep, quiet_audit_logger: logging.Logger,
) -> None:
    made = logging.getLogRecordFactory()

    def tagging(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = made(*args, **kwargs)
        record.tenant = "t1"  # type: ignore[attr-defined]  # what a tracing library adds
        return record

    with _meanwhile(lambda: logging.setLogRecordFactory(tagging),
                    lambda: logging.setLogRecordFactory(made)):
        hub.call("ok", subject="t1:u1")
    assert [getattr(r, "tenant", None) for r in kept.taken] == ["t1"]

    def drop(record: logging.LogRecord) -> bool:
        return False

    with _meanwhile(lambda: quiet_audit_logger.addFilter(drop),
                    lambda: quiet_audit_logger.removeFilter(drop)):
        hub.call("ok", subject="t1:u1")
    with _meanwhile(lambda: logging.disable(logging.INFO), lambda: logging.disable(logging.NOTSET)):
        hub.call("ok", subject="t1:u1")
    assert len(kept.taken) == 1
    hub.call("ok", subject="t1:u1")
    assert len(kept.taken) == 2


def test_an_apps_own_logger_class_gets_the_audit_line_through_its_info(
    hub: HubSimulator, kept: _Keep, quiet_audit_logger: logging.Logger,
) -> None:
    called: list[str] = []

    class Structured(logging.Logger):  # what logging.setLoggerClass before the import would give
        def info(self, msg: object, *args: Any, **kwargs: Any) -> None:
            called.append(str(args[0]))
            super().info(msg, *args, **kwargs)

    quiet_audit_logger.__class__ = Structured
    try:
        hub.call("ok", subject="t1:u1")
    finally:
        quiet_audit_logger.__class__ = logging.Logger
    assert len(called) == 1 and [r.getMessage() for r in kept.taken] == called


# --- the configuration the docs show: the line goes straight to the handler's stream ----------
#
# With propagate off, no filter, Python's record factory, and plain StreamHandler or
# FileHandler handlers whose formatter writes the message alone, all ``logging`` would do is
# write the line and a line break under each handler's lock; the package does that itself,
# without a LogRecord nobody could read. Every other configuration goes through ``logging``.


def _message_only(handler: logging.Handler) -> logging.Handler:
    handler.setFormatter(logging.Formatter("%(message)s"))
    return handler


def _documented(logger: logging.Logger, *handlers: logging.Handler) -> None:
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.handlers[:] = list(handlers)


def _call_every_kind(hub: HubSimulator) -> None:
    """A call that runs, one that raises, one whose signature is refused."""
    hub.call("ok", subject="t1:u1")
    hub.call("note", {"text": "a note"}, subject="t1:u1")
    hub.call("boom", subject="t1:u1")
    request = hub.build_call("ok", subject="t1:u1")
    hub.replay(resigned_wrong(request))


def resigned_wrong(request: Any) -> Any:
    headers = dict(request.headers, **{"X-Bailing-Signature": "0" * 64})
    return type(request)(request.method, request.path_with_query, headers, request.body)


def _no_log_record(monkeypatch: pytest.MonkeyPatch, logger: logging.Logger) -> None:
    """From now on, the package making a ``LogRecord`` for ``logger`` fails the call."""
    def refuse(*args: Any, **kwargs: Any) -> logging.LogRecord:
        raise AssertionError("a LogRecord was made for the documented configuration")

    monkeypatch.setattr(logger, "makeRecord", refuse)


def test_the_documented_handlers_get_each_line_as_logging_writes_it(
    app: Flask, hub: HubSimulator, records: list[dict[str, Any]],
    quiet_audit_logger: logging.Logger, tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import io

    buffer = io.StringIO()
    path = tmp_path / "audit.jsonl"
    file = logging.FileHandler(path, encoding="utf-8")  # no formatter: the message alone too
    _documented(quiet_audit_logger, _message_only(logging.StreamHandler(buffer)), file)
    _no_log_record(monkeypatch, quiet_audit_logger)
    app.config["PROPAGATE_EXCEPTIONS"] = False
    try:
        _call_every_kind(hub)
        written = path.read_text(encoding="utf-8")  # as a log shipper tailing it reads it
    finally:
        file.close()
    expected = "".join(audit_module.audit_line(record) + "\n" for record in records)
    assert [r["event"] for r in records] == ["tool_call"] * 3 + ["signature_refused"]
    assert buffer.getvalue() == expected
    assert written == expected


@pytest.mark.parametrize("otherwise", ["logger filter", "handler filter", "handler subclass",
                                       "formatter", "propagation", "record factory",
                                       "a handler above INFO"])
def test_any_other_configuration_hands_logging_the_record(
    hub: HubSimulator, quiet_audit_logger: logging.Logger, otherwise: str,
) -> None:
    import io

    seen: list[logging.LogRecord] = []

    def look(record: logging.LogRecord) -> bool:
        if record.name == "bailing_flask.audit":  # not the package's other warnings
            seen.append(record)
        return True

    class Counting(logging.StreamHandler):  # type: ignore[type-arg]
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)
            super().emit(record)

    buffer = io.StringIO()
    handler = _message_only(
        Counting(buffer) if otherwise == "handler subclass" else logging.StreamHandler(buffer))
    _documented(quiet_audit_logger, handler)
    parent = logging.getLogger("bailing_flask")
    saved = (parent.handlers[:], logging.getLogRecordFactory())
    made = saved[1]

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = made(*args, **kwargs)
        look(record)
        return record

    if otherwise == "logger filter":
        quiet_audit_logger.addFilter(look)
    elif otherwise == "handler filter":
        handler.addFilter(look)
    elif otherwise == "formatter":
        handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    elif otherwise == "propagation":
        quiet_audit_logger.propagate = True
        above = logging.StreamHandler(io.StringIO())
        above.addFilter(look)
        parent.addHandler(above)
    elif otherwise == "record factory":
        logging.setLogRecordFactory(factory)
    elif otherwise == "a handler above INFO":  # logging skips it; the plain one still writes
        skipping = _message_only(logging.StreamHandler(io.StringIO()))
        skipping.setLevel(logging.WARNING)
        quiet_audit_logger.addHandler(skipping)
    try:
        hub.call("ok", subject="t1:u1")
    finally:
        parent.handlers[:] = saved[0]
        logging.setLogRecordFactory(saved[1])
    (line,) = buffer.getvalue().splitlines()
    assert line.startswith("INFO {") if otherwise == "formatter" else line.startswith("{")
    if otherwise == "a handler above INFO":
        assert skipping.stream.getvalue() == ""  # type: ignore[attr-defined]
    elif otherwise != "formatter":
        (record,) = seen
        assert record.bailing["tool"] == "ok" and record.getMessage() == line  # type: ignore[attr-defined]


class _FailingStream:
    def write(self, text: str) -> int:
        raise OSError("disk full")

    def flush(self) -> None:
        pass


def test_a_stream_that_fails_is_reported_as_logging_reports_it_and_the_call_goes_on(
    hub: HubSimulator, records: list[dict[str, Any]], quiet_audit_logger: logging.Logger,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(logging, "raiseExceptions", True)
    _documented(quiet_audit_logger, _message_only(logging.StreamHandler(_FailingStream())))
    assert hub.call("ok", subject="t1:u1").status == 200
    assert hub.call("ok", subject="t1:u1").status == 200
    errors = capsys.readouterr().err
    assert errors.count("--- Logging error ---") == 2 and "OSError: disk full" in errors
    assert "Message: '%s'" in errors and "audit.py" in errors  # the record logging would have made
    assert len(records) == 2


def test_handlers_changed_by_another_thread_while_a_line_is_written_are_handled_as_logging_would(
    hub: HubSimulator, quiet_audit_logger: logging.Logger, tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Between the look at the handlers and the write, another thread closes the file handler
    and adds handlers the line must not reach: a ``NullHandler``, one above ``INFO``. The line
    goes to the handlers looked at (the closed file opens again, as ``FileHandler.emit`` does),
    the new ones count from the next record, and the call is answered."""
    import io

    path = tmp_path / "audit.jsonl"
    file = _message_only(logging.FileHandler(path))
    buffer = io.StringIO()
    _documented(quiet_audit_logger, file, _message_only(logging.StreamHandler(buffer)))
    above = _message_only(logging.StreamHandler(io.StringIO()))
    above.setLevel(logging.WARNING)
    looked = audit_module._plain_handlers

    def meanwhile() -> Any:
        handlers = looked()
        monkeypatch.setattr(audit_module, "_plain_handlers", looked)  # once
        file.close()
        quiet_audit_logger.addHandler(logging.NullHandler())
        quiet_audit_logger.addHandler(above)
        return handlers

    monkeypatch.setattr(audit_module, "_plain_handlers", meanwhile)
    try:
        assert hub.call("ok", subject="t1:u1").status == 200
        assert hub.call("ok", subject="t1:u1").status == 200  # through logging: a NullHandler
    finally:
        file.close()
    assert len(path.read_text().splitlines()) == 2
    assert len(buffer.getvalue().splitlines()) == 2 and above.stream.getvalue() == ""


def test_a_delayed_file_handler_opens_its_file_with_the_first_record(
    hub: HubSimulator, quiet_audit_logger: logging.Logger, tmp_path: Any,
) -> None:
    path = tmp_path / "audit.jsonl"
    file = _message_only(logging.FileHandler(path, delay=True))
    _documented(quiet_audit_logger, file)
    assert not path.exists()
    try:
        hub.call("ok", subject="t1:u1")
        hub.call("ok", subject="t1:u1")
    finally:
        file.close()
    assert [json.loads(line)["tool"] for line in path.read_text().splitlines()] == ["ok", "ok"]


def test_lines_written_from_many_threads_at_once_stay_whole_and_all_there(
    hub: HubSimulator, quiet_audit_logger: logging.Logger, tmp_path: Any,
) -> None:
    import threading

    path = tmp_path / "audit.jsonl"
    file = _message_only(logging.FileHandler(path))
    _documented(quiet_audit_logger, file)
    start = threading.Barrier(8)

    def calls() -> None:
        start.wait(timeout=30)
        for _ in range(25):
            hub.call("note", {"text": "x" * 2000}, subject="t1:u1")

    threads = [threading.Thread(target=calls) for _ in range(8)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        file.close()
    lines = path.read_text().splitlines()
    assert len(lines) == 200 and all(json.loads(line)["tool"] == "note" for line in lines)
