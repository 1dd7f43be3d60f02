"""The direct audit sink: every record one whole JSON line, written off the request path.

``BAILING_AUDIT_SINK`` (a ``JsonLinesSink``, or a path) gets the very line
the ``bailing_flask.audit`` logger would log. These tests drive real calls:
through gunicorn and uWSGI with two worker processes appending to one
file, with a writer that is stuck (the request must not wait, the overflow
is counted and reported), and through interpreter exit and ``close()``.
"""

from __future__ import annotations

import datetime
import http.client
import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from flask import Flask, abort, jsonify
from pydantic import BaseModel

from bailing_flask import Bailing, ConfigurationError, tool
from bailing_flask import audit as audit_module
from bailing_flask.audit import AUDIT_FIELDS, MAX_FIELD_CHARS, JsonLinesSink
from bailing_flask.testing import HubSimulator, signed_headers

from ._servers import gunicorn_serving, uwsgi_serving
from .helpers import STRONG_SECRET
from bailing_flask._state import state_of

ROOT = Path(__file__).resolve().parent.parent
#: the longest string a record may hold: a cut one keeps MAX_FIELD_CHARS and says how long it was
LONGEST = MAX_FIELD_CHARS + len("…[cut: 100000 characters]")


class Note(BaseModel):
    text: str
    tags: list[str] = []


def create_app(sink: Any, **config: Any) -> Flask:
    app = Flask("sink_app")
    app.config.update({"BAILING_SECRETS": [STRONG_SECRET], "BAILING_STORE": "memory://",
                       "BAILING_AUDIT_SINK": sink, "BAILING_AUDIT_ARGUMENT_VALUES": True, **config})
    bailing = Bailing(app)
    bailing.authorizer(lambda call: call.subject == "t1:u1")

    @app.post("/notes")
    @tool(scope="note.write", body=Note)
    def note() -> Any:
        """Write a note."""
        return jsonify(saved=True), 201

    @app.get("/boom")
    @tool(scope="note.read")
    def boom() -> Any:
        """Fail."""
        raise ValueError("a message that may quote data")

    @app.get("/missing")
    @tool(scope="note.read")
    def missing() -> Any:
        """Answer 404."""
        abort(404)

    return app


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


def wait_for(condition: Callable[[], bool], what: str, deadline: float = 60.0) -> None:
    end = time.monotonic() + deadline
    while not condition():
        if time.monotonic() > end:
            pytest.fail(f"not within {deadline:.0f} s: {what}")
        time.sleep(0.05)


# -- through real servers: several processes append to one file -----------------------------

#: what the calls send: (subject, text, tags); refused, plain, line breaks, too long for one field
CALLS = [
    ("t1:u1", "plain words", []),
    ("t1:u2\x85", "refused: U+0085 in the subject", []),
    ("t1:u1", "a\u2028b\u2029c\x85d", ["x\u2028y"]),
    ("t1:u1", "x" * 6000, ["t" * 300] * 60),  # a line far above PIPE_BUF (4096 bytes)
]


def _post(base: str, index: int) -> tuple[int, Any, str]:
    """One signed call to the server (``CALLS`` in turn); its status, answer and job id."""
    subject, text, tags = CALLS[index % len(CALLS)]
    job_id = f"job-{index}"
    body = json.dumps({"text": text, "tags": tags}).encode()
    headers = signed_headers(STRONG_SECRET, "POST", "/notes", body, subject=subject, job_id=job_id)
    host, port = base.split("//", 1)[1].split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        connection.request("POST", "/notes", body, {**headers, "Content-Type": "application/json"})
        response = connection.getresponse()
        payload = response.read()
    finally:
        connection.close()
    return response.status, json.loads(payload), job_id


def _serve(server: str, path: Path) -> Any:
    """gunicorn or uWSGI with two workers, on ``tests/apps/audit_sink_app.py``.

    Both load the app (and its sink) in the master, then fork. gunicorn's
    master writes one record while loading (``--preload``); uWSGI's does not,
    since uWSGI cannot fork a master in which a Python thread runs (see the app).
    """
    env = {"AUDIT_SINK_FILE": str(path)}
    if server == "gunicorn":
        return gunicorn_serving("tests.apps.audit_sink_app:application", workers=2,
                                env={**env, "GUNICORN_CMD_ARGS": "--preload"})
    return uwsgi_serving("tests.apps.audit_sink_app", env={**env, "AUDIT_SINK_LOAD_CALL": "0"},
                         extra=("--processes", "2"))


@pytest.mark.slow
@pytest.mark.parametrize("server", ["gunicorn", "uwsgi"])
def test_two_worker_processes_append_exactly_one_whole_line_per_call(tmp_path: Path, server: str) -> None:
    path = tmp_path / "audit.jsonl"
    sent: dict[str, int] = {}
    pids: set[int] = set()
    loaded_lines = 1 if server == "gunicorn" else 0
    with _serve(server, path) as base:
        end = time.monotonic() + 120
        with ThreadPoolExecutor(8) as pool:  # concurrent calls, until both workers have served some
            while len(pids) < 2 or len(sent) < 80:
                if time.monotonic() > end:
                    pytest.fail(f"{server}: only worker(s) {sorted(pids)} answered {len(sent)} calls")
                for status, answer, job_id in pool.map(lambda i: _post(base, i),
                                                       range(len(sent), len(sent) + 16)):
                    sent[job_id] = status
                    pids.update([answer["pid"]] if status == 200 else [])
        expected = len(sent) + loaded_lines
        wait_for(lambda: _count(path) >= expected, f"{expected} lines in the audit file")
    text = path.read_text(encoding="utf-8")  # the server is stopped: nothing more comes
    lines = text.splitlines()
    assert len(lines) == expected == text.count("\n")
    records = [json.loads(line) for line in lines]  # every line is one whole record
    loaded = [r for r in records if str(r["job_id"]).startswith("loaded-")]
    assert len(loaded) == loaded_lines  # queued in the master before the fork: once, not per worker
    calls = {r["job_id"]: r for r in records if r not in loaded}
    assert {job: r["status"] for job, r in calls.items()} == sent
    assert set(sent.values()) == {200, 403}
    assert all(list(r)[:len(AUDIT_FIELDS)] == list(AUDIT_FIELDS) for r in records)
    assert not any(brk in text for brk in ("\x85", "\u2028", "\u2029"))
    assert calls["job-2"]["arguments"] == {"text": "a\u2028b\u2029c\x85d", "tags": ["x\u2028y"]}
    assert calls["job-1"]["subject"] == "t1:u2\x85" and calls["job-1"]["reason"] == "forbidden"
    long = calls["job-3"]["arguments"]
    assert long["text"] == "x" * MAX_FIELD_CHARS + "…[cut: 6000 characters]"
    assert long["tags"][-1] == "…[cut: 60 items]" and len(long["tags"]) == 51
    assert max(len(s) for r in records for s in strings(r)) <= LONGEST
    assert max(len(line.encode()) for line in lines) > 4096


def _count(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


# -- in one process ---------------------------------------------------------------------------


def test_the_sink_writes_exactly_the_line_the_logger_logs(caplog: pytest.LogCaptureFixture) -> None:
    lines: list[str] = []
    sink = JsonLinesSink(lines.append)
    app = create_app(sink, PROPAGATE_EXCEPTIONS=False)
    hub = HubSimulator(app, STRONG_SECRET)
    with caplog.at_level(logging.INFO, logger="bailing_flask.audit"):
        assert hub.call("note", {"text": "a\u2028b"}, subject="t1:u1").status == 201
        assert hub.call("note", {"text": "x" * 600, "tags": ["t"] * 70}, subject="t1:u1").status == 201
        assert hub.call("note", {"text": 5}, subject="t1:u1").status == 422
        assert hub.call("note", {"text": "n"}, subject="t9:u9\x85").status == 403
        assert hub.call("boom", subject="t1:u1").status == 500
        assert hub.call("missing", subject="t1:u1").status == 404
        request = hub.build_call("note", {"text": "n"}, subject="t1:u1")
        assert hub.replay(request, on_behalf_of="t1:admin").status == 401  # refused before Flask
    sink.close()
    logged = [r.getMessage() for r in caplog.records if r.name == "bailing_flask.audit"]
    assert len(logged) == 7
    assert lines == logged
    assert [json.loads(line)["status"] for line in lines] == [201, 201, 422, 403, 500, 404, 401]
    assert not any(brk in line for line in lines for brk in ("\x85", "\u2028", "\u2029"))


def _sink_lines(caplog: pytest.LogCaptureFixture, logger_on: bool, values: bool) -> list[dict[str, Any]]:
    """The sink's records of the same calls, with the audit logger on (so the request builds
    each record) or off (so the sink alone reads them and its thread builds them)."""
    caplog.clear()
    lines: list[str] = []
    sink = JsonLinesSink(lines.append)
    app = create_app(sink, PROPAGATE_EXCEPTIONS=False, BAILING_AUDIT_ARGUMENT_VALUES=values)
    hub = HubSimulator(app, STRONG_SECRET)
    with caplog.at_level(logging.INFO if logger_on else logging.WARNING, logger="bailing_flask.audit"):
        assert hub.call("note", {"text": "a\u2028b"}, subject="t1:u1", job_id="j1").status == 201
        assert hub.call("note", {"text": "x" * 600, "tags": ["t"] * 70}, subject="t1:u1",
                        job_id="j2").status == 201
        assert hub.call("note", {"text": 5}, subject="t1:u1", job_id="j3").status == 422
        assert hub.call("note", {"text": "n"}, subject="t9:u9\x85", job_id="j4").status == 403
        assert hub.call("boom", subject="t1:u1", job_id="j5").status == 500
        assert hub.call("missing", subject="t1:u1", job_id="j6").status == 404
    sink.close()
    logged = [r for r in caplog.records if r.name == "bailing_flask.audit"]
    assert len(logged) == (6 if logger_on else 0)
    records = [json.loads(line) for line in lines]
    for record in records:
        assert record.pop("time") and record.pop("duration_ms") is not None
    return records


@pytest.mark.parametrize("values", [False, True], ids=["argument names", "argument values"])
def test_with_the_sink_alone_its_thread_builds_the_record_the_request_would_have_built(
    caplog: pytest.LogCaptureFixture, values: bool,
) -> None:
    built_by_request = _sink_lines(caplog, logger_on=True, values=values)
    built_by_sink = _sink_lines(caplog, logger_on=False, values=values)
    assert [r["job_id"] for r in built_by_sink] == ["j1", "j2", "j3", "j4", "j5", "j6"]
    assert built_by_sink == built_by_request
    assert all(len(text) <= LONGEST for record in built_by_sink for text in strings(record))


def _unix(stamp: str) -> float:
    return datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def test_a_record_built_by_the_sinks_thread_keeps_the_time_of_the_call() -> None:
    release = threading.Event()
    written: list[str] = []

    def slow(line: str) -> None:  # the thread builds and writes records only after this
        release.wait(60)
        written.append(line)

    sink = JsonLinesSink(slow)
    hub = HubSimulator(create_app(sink, BAILING_AUDIT_ARGUMENT_VALUES=False), STRONG_SECRET)
    before = time.time()
    assert hub.call("note", {"text": "n"}, subject="t1:u1", job_id="first").status == 201
    assert hub.call("note", {"text": "n"}, subject="t1:u1", job_id="second").status == 201
    after = time.time()
    time.sleep(1.5)  # the second record waits in the queue, unbuilt
    release.set()
    sink.close()
    records = [json.loads(line) for line in written]
    assert [r["job_id"] for r in records] == ["first", "second"]
    for record in records:
        assert before - 0.001 <= _unix(record["time"]) <= after + 0.001, record["time"]
        assert record["arguments"] == ["tags", "text"]


def test_a_full_queue_drops_and_counts_and_the_request_never_waits(
    caplog: pytest.LogCaptureFixture,
) -> None:
    entered, release = threading.Event(), threading.Event()
    written: list[str] = []

    def stuck(line: str) -> None:  # a target that stops answering (a full disk, a hung share)
        entered.set()
        release.wait(120)
        written.append(line)

    sink = JsonLinesSink(stuck, max_queued=3, report_every=3600)
    app = create_app(sink)
    hub = HubSimulator(app, STRONG_SECRET)
    statuses: list[int] = []

    def calls() -> None:
        statuses.append(hub.call("note", {"text": "first"}, subject="t1:u1", job_id="first").status)
        assert entered.wait(60)  # the sink's thread holds the first record and is stuck
        for index in range(9):
            statuses.append(hub.call("note", {"text": "n"}, subject="t1:u1", job_id=f"j{index}").status)

    with caplog.at_level(logging.ERROR, logger="bailing_flask"):
        caller = threading.Thread(target=calls)
        caller.start()
        caller.join(60)
        assert not caller.is_alive(), "a call waited for the audit sink"
    assert statuses == [201] * 10
    assert (sink.queued, sink.dropped, sink.written) == (3, 6, 0)
    reports = [r.getMessage() for r in caplog.records if "audit sink" in r.getMessage()]
    assert len(reports) == 1 and "dropped 1 record(s) (its queue is full)" in reports[0]  # once per interval
    status = json.loads(app.test_cli_runner().invoke(args=["bailing", "status", "--json"]).output)
    assert status["audit"]["sink"] == {"target": sink.target, "max_queued": 3, "queued": 3,
                                       "written": 0, "dropped": 6}
    release.set()
    with caplog.at_level(logging.ERROR, logger="bailing_flask"):
        sink.close()  # reports what the interval held back
    assert [json.loads(line)["job_id"] for line in written] == ["first", "j0", "j1", "j2"]
    reports = [r.getMessage() for r in caplog.records if "audit sink" in r.getMessage()]
    assert len(reports) == 2 and "dropped 5 record(s); 6 in this process so far" in reports[1]


def test_close_writes_what_is_queued_and_later_records_are_counted(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = JsonLinesSink(path)
    app = create_app(sink)
    hub = HubSimulator(app, STRONG_SECRET)
    for index in range(50):
        hub.call("note", {"text": "n"}, subject="t1:u1", job_id=f"j{index}")
    sink.close()  # no waiting: when close returns, the file holds every line
    assert [json.loads(line)["job_id"] for line in path.read_text().splitlines()] == [
        f"j{index}" for index in range(50)]
    assert hub.call("note", {"text": "n"}, subject="t1:u1", job_id="late").status == 201
    assert (sink.written, sink.dropped) == (50, 1)
    assert path.read_text().count("\n") == 50


def test_a_record_that_is_not_json_is_dropped_and_counted_and_the_next_one_written(
    tmp_path: Path,
) -> None:
    """A record of the app's own handed to the sink: a circular one, one nested past the
    interpreter's recursion limit. Neither stops the thread; both are counted."""
    path = tmp_path / "audit.jsonl"
    sink = JsonLinesSink(path)
    circular: dict[str, Any] = {"event": "mine"}
    circular["self"] = circular
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    for record in (circular, {"event": "deep", "value": deep}, {"event": "fine"}):
        sink.emit(record)
    sink.close()
    assert path.read_text() == '{"event":"fine"}\n'
    assert (sink.written, sink.dropped) == (1, 2)


_AT_EXIT = """
import sys
from tests.test_audit_sink import create_app
from bailing_flask.audit import JsonLinesSink
from bailing_flask.signals import audit_record
from bailing_flask.testing import HubSimulator
from tests.helpers import STRONG_SECRET

sink = JsonLinesSink(sys.argv[1], max_queued=100_000)
app = create_app(sink)
seen = []
audit_record.connect(lambda sender, record: seen.append(record), app, weak=False)
assert HubSimulator(app, STRONG_SECRET).call("note", {"text": "n"}, subject="t1:u1").status == 201
for index in range(20_000):  # far more than the thread writes before the interpreter exits
    sink.emit({**seen[0], "job_id": f"j{index}"})
"""


def test_records_still_queued_at_interpreter_exit_are_written(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    done = subprocess.run([sys.executable, "-c", _AT_EXIT, str(path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 20_001
    assert [json.loads(line)["job_id"] for line in lines[1:]] == [f"j{i}" for i in range(20_000)]


_SMALL_STACK = """
import sys, threading, time
threading.stack_size(256 * 1024)  # what an app or a server may set: the sink's thread gets it
from bailing_flask.audit import JsonLinesSink

sink = JsonLinesSink(sys.argv[1])
circular = {"event": "mine"}
circular["self"] = circular
sink.emit(circular)
sink.emit({"event": "fine"})
deadline = time.monotonic() + 60
while sink.written + sink.dropped < 2 and time.monotonic() < deadline:
    time.sleep(0.01)  # the sink's own thread writes them, not close()
print(sink.written, sink.dropped)
sink.close()
"""


def test_a_circular_record_is_dropped_at_once_by_a_sink_thread_with_a_small_stack(
    tmp_path: Path,
) -> None:
    """Looking for a cycle finds it at the second visit; encoding without looking recurses to
    the interpreter's limit, which overflows a 256 KiB thread stack on Python 3.12 and later."""
    path = tmp_path / "audit.jsonl"
    done = subprocess.run([sys.executable, "-c", _SMALL_STACK, str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert (done.returncode, done.stdout) == (0, "1 1\n"), done.stderr[-2000:]
    assert path.read_text() == '{"event":"fine"}\n'


def test_a_rotated_file_is_opened_again_at_its_path(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = JsonLinesSink(str(path))
    app = create_app(sink)
    hub = HubSimulator(app, STRONG_SECRET)
    hub.call("note", {"text": "n"}, subject="t1:u1", job_id="before")
    sink.flush()
    path.rename(tmp_path / "audit.jsonl.1")  # what logrotate does (then it signals nobody)
    hub.call("note", {"text": "n"}, subject="t1:u1", job_id="after")
    sink.close()
    assert json.loads((tmp_path / "audit.jsonl.1").read_text())["job_id"] == "before"
    assert json.loads(path.read_text())["job_id"] == "after"


def test_a_stream_gets_the_same_lines(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with open(path, "w", encoding="utf-8") as text_stream, open(tmp_path / "b.jsonl", "wb") as binary:
        sinks = [JsonLinesSink(text_stream), JsonLinesSink(binary)]
        for sink in sinks:
            app = create_app(sink)
            HubSimulator(app, STRONG_SECRET).call("note", {"text": "é\u2028"}, subject="t1:u1", job_id="j")
            sink.close()
    first, second = path.read_text(encoding="utf-8"), (tmp_path / "b.jsonl").read_text(encoding="utf-8")
    assert json.loads(first)["arguments"] == json.loads(second)["arguments"] == {"text": "é\u2028", "tags": []}
    assert first.count("\n") == second.count("\n") == 1 and "\u2028" not in first + second


def test_the_setting_takes_a_sink_or_a_path_and_refuses_anything_else(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    app = create_app(str(path))
    sink = state_of(app).audit_sink
    assert isinstance(sink, JsonLinesSink) and sink.target == str(path)
    HubSimulator(app, STRONG_SECRET).call("note", {"text": "n"}, subject="t1:u1")
    sink.close()
    assert path.read_text().count("\n") == 1
    keyword = Flask("keyword")
    keyword.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    Bailing(keyword, audit_sink=str(path))
    assert state_of(keyword).audit_sink is not None
    with pytest.raises(ConfigurationError, match="BAILING_AUDIT_SINK must be a bailing_flask.audit.JsonLinesSink"):
        create_app(42)
    with pytest.raises(ConfigurationError, match="max_queued"):
        JsonLinesSink(path, max_queued=0)
    assert audit_module.JsonLinesSink is JsonLinesSink and JsonLinesSink.__module__ == "bailing_flask.audit"
