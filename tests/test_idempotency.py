"""Side effects happen once, keyed on signed material, on every store."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from bailing_flask import Bailing
from bailing_flask.responses import REPLAY_HEADER
from bailing_flask.stores import EntryMeta
from bailing_flask.testing import HubRequest, HubSimulator

from .helpers import STRONG_SECRET, reconfigure
from .apps.idem_app import create_app, side_effects
from bailing_flask._state import state_of
from bailing_flask._pipeline.registry import registry_of
from bailing_flask._pipeline.idempotency import idempotency_of

ARGS = {"order_id": 7, "amount": 12.5}


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store_url(request, tmp_path):
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'idem.sqlite3'}"
    server = request.getfixturevalue("redis_server")
    url = server.url.rsplit("/", 1)[0] + "/1"  # a database of its own, emptied per test
    import redis

    client = redis.Redis.from_url(url)
    client.flushdb()
    client.close()
    return url


@pytest.fixture
def app(store_url, tmp_path):
    return create_app(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE=store_url,
                      IDEM_DATABASE=str(tmp_path / "business.sqlite3"))


@pytest.fixture
def hub(app):
    return HubSimulator(app, STRONG_SECRET)


def rows(app) -> int:
    return side_effects(app.config["IDEM_DATABASE"])


def identity(request: HubRequest, subject: str) -> str:
    """The store key of a request, derived like the middleware does."""
    material = "\n".join((request.method, request.path_with_query,
                          hashlib.sha256(request.body).hexdigest(), subject,
                          request.headers["X-Bailing-Job-Id"]))
    return "idem:" + hashlib.sha256(material.encode()).hexdigest()


def test_first_call_runs_and_a_repeat_is_answered_from_the_store(app, hub):
    request = hub.build_call("refund_create", ARGS, subject="t1:u1")
    assert "X-Bailing-Idempotency-Key" in request.headers
    first = hub.replay(request)
    second = hub.replay(request)
    assert first.status == 201, first.text
    assert second.status == 201
    assert second.body == first.body
    assert second.headers.get(REPLAY_HEADER) == "true"
    assert REPLAY_HEADER not in first.headers
    assert rows(app) == 1


def test_changed_or_dropped_unsigned_key_is_still_answered_from_the_store(app, hub, caplog):
    request = hub.build_call("refund_create", ARGS, subject="t1:u1")
    assert hub.replay(request).status == 201
    with caplog.at_level(logging.WARNING, logger="bailing_flask"):
        changed = hub.replay(request, idempotency_key="f" * 64)
        dropped = hub.replay(request, idempotency_key=None)
    assert changed.headers.get(REPLAY_HEADER) == "true"
    assert dropped.headers.get(REPLAY_HEADER) == "true"
    assert rows(app) == 1
    assert caplog.text.count("suspicious repeat") == 2


@pytest.mark.parametrize("change", ["body", "subject", "job"])
def test_a_different_body_subject_or_job_is_a_different_call(app, hub, change):
    job = f"job-{uuid.uuid4()}"  # the Redis server is shared by the whole session
    hub.call("refund_create", ARGS, subject="t1:u1", job_id=job)
    options = {"subject": "t1:u1", "job_id": job}
    args = dict(ARGS)
    if change == "body":
        args["amount"] = 13
    elif change == "subject":
        options["subject"] = "t1:u2"
    else:
        options["job_id"] = f"job-{uuid.uuid4()}"
    response = hub.call("refund_create", args, **options)
    assert response.status == 201
    assert REPLAY_HEADER not in response.headers
    assert rows(app) == 2


def test_4xx_outcomes_are_stored_5xx_outcomes_are_uncertain(app, hub):
    refused = hub.build_call("refund_create", {**ARGS, "fail": 409}, subject="t1:u1")
    assert hub.replay(refused).status == 409
    again = hub.replay(refused)
    assert again.status == 409 and again.headers.get(REPLAY_HEADER) == "true"
    broken = hub.build_call("refund_create", {**ARGS, "fail": 503}, subject="t1:u1")
    assert hub.replay(broken).status == 503
    retried = hub.replay(broken)
    assert retried.status == 409 and retried.json()["reason"] == "idempotency_uncertain"
    entry = idempotency_of(state_of(app)).store().get(identity(broken, "t1:u1"))
    assert entry is not None and entry.note == "the view answered HTTP 503"


def test_abort_with_a_4xx_is_recorded_like_a_returned_4xx(app, hub):
    request = hub.build_call("refund_create", {**ARGS, "refuse": 404}, subject="t1:u1")
    first = hub.replay(request)
    second = hub.replay(request)
    assert first.status == second.status == 404
    assert second.headers.get(REPLAY_HEADER) == "true"
    assert second.body == first.body
    assert rows(app) == 0


def test_a_side_effect_that_raised_never_runs_again_by_itself(app, hub, caplog):
    request = hub.build_call("refund_create", {**ARGS, "crash": True}, subject="t1:u1")
    with caplog.at_level(logging.WARNING, logger="bailing_flask"):
        assert hub.replay(request).status == 500
    assert rows(app) == 1  # the row was written before the view raised
    replays = [hub.replay(request) for _ in range(3)]
    assert [r.status for r in replays] == [409, 409, 409]
    assert {r.json()["reason"] for r in replays} == {"idempotency_uncertain"}
    assert rows(app) == 1
    entry = idempotency_of(state_of(app)).store().get(identity(request, "t1:u1"))
    assert entry is not None and entry.note == "the view raised RuntimeError"
    (logged,) = [r.getMessage() for r in caplog.records if "recorded as uncertain" in r.getMessage()]
    assert "RuntimeError" in logged and "payment gateway" not in logged  # the type, never the text


def test_the_apps_catch_all_error_handler_does_not_hide_the_failure(store_url, tmp_path):
    app = create_app(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE=store_url,
                     IDEM_DATABASE=str(tmp_path / "business.sqlite3"), IDEM_CATCH_ALL=True)
    hub = HubSimulator(app, STRONG_SECRET)
    request = hub.build_call("refund_create", {**ARGS, "crash": True}, subject="t1:u1")
    first = hub.replay(request)
    assert first.status == 200 and first.json() == {"ok": True, "note": "handled"}
    replays = [hub.replay(request) for _ in range(3)]
    assert [r.status for r in replays] == [409, 409, 409]
    assert side_effects(app.config["IDEM_DATABASE"]) == 1
    # an operator decides: repeats then get that answer, still without running the view
    key = identity(request, "t1:u1")
    result = app.test_cli_runner().invoke(args=[
        "bailing", "idempotency", "resolve", key, "--status", "201",
        "--body", '{"ok":true,"refund_id":1}', "--note", "row 1 is in the ledger"])
    assert result.exit_code == 0, result.output
    settled = hub.replay(request)
    assert settled.status == 201 and settled.json() == {"ok": True, "refund_id": 1}
    assert side_effects(app.config["IDEM_DATABASE"]) == 1


@pytest.mark.parametrize("failure", [{"fail": 503}, {"crash": True}])
def test_a_failed_call_runs_again_only_once_an_operator_releases_it(app, hub, failure):
    broken = hub.build_call("refund_create", {**ARGS, **failure}, subject="t1:u1")
    assert hub.replay(broken).status >= 500
    key = identity(broken, "t1:u1")
    entry = idempotency_of(state_of(app)).store().get(key)
    assert entry is not None and entry.note in ("the view answered HTTP 503", "the view raised RuntimeError")
    again = hub.replay(broken)
    assert (again.status, again.json()["reason"]) == (409, "idempotency_uncertain")
    written = rows(app)
    result = app.test_cli_runner().invoke(
        args=["bailing", "idempotency", "resolve", key, "--rerun", "--note", "nothing was paid"])
    assert result.exit_code == 0, result.output
    rerun = hub.replay(broken)
    assert rerun.status >= 500 and REPLAY_HEADER not in rerun.headers  # it ran again
    assert rows(app) == written + (1 if "crash" in failure else 0)


def test_read_only_tools_are_not_recorded(app, hub):
    job = f"job-{uuid.uuid4()}"
    first = hub.call("refund_count", subject="t1:u1", job_id=job)
    second = hub.call("refund_count", subject="t1:u1", job_id=job)
    assert REPLAY_HEADER not in first.headers and REPLAY_HEADER not in second.headers
    recorded = [e.meta.job_id for e in idempotency_of(state_of(app)).store().list(limit=1000)]
    assert job not in recorded


def test_a_repeat_while_the_first_still_runs_is_409(tmp_path, store_url):
    app = create_app(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE=store_url,
                     IDEM_DATABASE=str(tmp_path / "b.sqlite3"), IDEM_DELAY=1.0)
    hub = HubSimulator(app, STRONG_SECRET)
    request = hub.build_call("refund_create", ARGS, subject="t1:u1")
    results = {}
    slow = threading.Thread(target=lambda: results.setdefault("first", hub.replay(request)))
    slow.start()
    time.sleep(0.3)
    second = hub.replay(request)
    slow.join()
    assert results["first"].status == 201
    assert second.status == 409
    assert second.json()["reason"] == "idempotency_in_progress"
    assert side_effects(app.config["IDEM_DATABASE"]) == 1


def test_an_unfinished_entry_becomes_uncertain_after_its_lease(app, hub):
    reconfigure(app, idempotency_lease=0.2)
    request = hub.build_call("refund_create", ARGS, subject="t1:u1")
    store = idempotency_of(state_of(app)).store()
    # a worker reserved the call, started the side effect, and died
    store.reserve(identity(request, "t1:u1"), token="dead-worker", lease_seconds=0.2,
                  retention_seconds=60, meta=EntryMeta(tool="refund_create"))
    assert hub.replay(request).json()["reason"] == "idempotency_in_progress"
    time.sleep(0.3)
    response = hub.replay(request)
    assert response.status == 409
    assert response.json()["reason"] == "idempotency_uncertain"
    assert rows(app) == 0  # never re-run by default


def test_domain_key_deduplicates_across_jobs(app, hub):
    order = {"order_id": uuid.uuid4().int % 10**9 + 1, "amount": 12.5}  # unique per run
    first = hub.call("refund_by_order", order, subject="t1:u1")
    second = hub.call("refund_by_order", order, subject="t1:u1")
    other = hub.call("refund_by_order", {**order, "amount": 99}, subject="t1:u1")
    assert first.status == second.status == other.status == 201
    assert second.headers.get(REPLAY_HEADER) == "true"
    assert rows(app) == 2


def test_replay_refusal_is_off_by_default_and_refuses_when_on(app, hub):
    request = hub.build_call("refund_count", subject="t1:u1")
    assert hub.replay(request).status == 200
    assert hub.replay(request).status == 200  # two identical reads may share a signature
    reconfigure(app, reject_replays=True)
    fresh = hub.build_call("refund_count", subject="t1:u1", job_id="j-fresh")
    assert hub.replay(fresh).status == 200
    replayed = hub.replay(fresh)
    assert replayed.status == 401
    assert replayed.json()["reason"] == "replayed"


def test_cli_lists_and_resolves_uncertain_entries(app, hub):
    reconfigure(app, idempotency_lease=0.1)
    request = hub.build_call("refund_create", ARGS, subject="t1:u1")
    key = identity(request, "t1:u1")
    idempotency_of(state_of(app)).store().reserve(
        key, token="dead", lease_seconds=0.1, retention_seconds=60,
        meta=EntryMeta(tool="refund_create", job_id=request.headers["X-Bailing-Job-Id"],
                       subject="t1:u1"))
    time.sleep(0.2)
    runner = app.test_cli_runner()
    listed = runner.invoke(args=["bailing", "idempotency", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    (entry,) = [json.loads(line) for line in listed.output.splitlines() if line.startswith("{")]
    assert entry["key"] == key and entry["state"] == "uncertain"
    assert entry["tool"] == "refund_create"
    resolved = runner.invoke(args=["bailing", "idempotency", "resolve", key, "--status", "201",
                                   "--body", '{"ok":true,"refund_id":41}',
                                   "--note", "refund 41 found in the ledger"])
    assert resolved.exit_code == 0, resolved.output
    answer = hub.replay(request)
    assert answer.status == 201 and answer.json() == {"ok": True, "refund_id": 41}
    assert answer.headers.get(REPLAY_HEADER) == "true"
    assert rows(app) == 0


def test_cli_resolve_with_rerun_lets_the_next_call_run(app, hub):
    reconfigure(app, idempotency_lease=0.1)
    request = hub.build_call("refund_create", ARGS, subject="t1:u1")
    key = identity(request, "t1:u1")
    idempotency_of(state_of(app)).store().reserve(
        key, token="dead", lease_seconds=0.1, retention_seconds=60, meta=EntryMeta())
    time.sleep(0.2)
    result = app.test_cli_runner().invoke(
        args=["bailing", "idempotency", "resolve", key, "--rerun", "--note", "no refund found"])
    assert result.exit_code == 0, result.output
    assert hub.replay(request).status == 201
    assert rows(app) == 1


@pytest.mark.parametrize("decision", [["--rerun"], ["--status", "201"]], ids=["rerun", "answer"])
def test_cli_resolve_refuses_a_call_that_is_still_running(app, hub, decision):
    """A live lease: the worker may still be in the view; deciding now lets a repeat run beside it."""
    request = hub.build_call("refund_create", ARGS, subject="t1:u1")
    key = identity(request, "t1:u1")
    store = idempotency_of(state_of(app)).store()
    store.reserve(key, token="running", lease_seconds=300, retention_seconds=600, meta=EntryMeta())
    result = app.test_cli_runner().invoke(
        args=["bailing", "idempotency", "resolve", key, *decision, "--note", "looked stuck"])
    assert result.exit_code == 1, result.output
    assert "still running" in result.output and "lease ends in" in result.output
    entry = store.get(key)
    assert entry is not None and (entry.state, entry.token) == ("in_progress", "running")
    assert hub.replay(request).json()["reason"] == "idempotency_in_progress"
    assert rows(app) == 0


def _finishing_store(kind: str, tmp_path):
    """A real store whose first read is followed at once by another worker's write: what an
    operator meets when the slow worker of an uncertain call finishes while they decide."""
    from bailing_flask.stores import MemoryStore, SQLiteStore

    base = MemoryStore if kind == "memory" else SQLiteStore

    class FinishingStore(base):  # type: ignore[misc,valid-type]
        after_read = None

        def _get(self, key):
            entry = super()._get(key)
            write, self.after_read = self.after_read, None
            if write is not None:
                write()
            return entry

    return FinishingStore() if kind == "memory" else FinishingStore(tmp_path / "idem.sqlite3")


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("decision", [["--rerun"], ["--status", "200"]], ids=["rerun", "answer"])
def test_cli_resolve_keeps_the_answer_of_a_worker_that_finished_while_the_operator_decided(
        tmp_path, kind, decision):
    """Read uncertain, completed before the decision lands: a ``--rerun`` would let the call run a
    second time, an answer would replace the real one. The decision is refused, nothing changes."""
    from bailing_flask.stores import StoredResponse

    store = _finishing_store(kind, tmp_path)
    app = create_app(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE=store,
                     IDEM_DATABASE=str(tmp_path / "business.sqlite3"))
    hub = HubSimulator(app, STRONG_SECRET)
    request = hub.build_call("refund_create", ARGS, subject="t1:u1")
    key = identity(request, "t1:u1")
    store.reserve(key, token="slow", lease_seconds=0.1, retention_seconds=60,
                  meta=EntryMeta(tool="refund_create", job_id=request.headers["X-Bailing-Job-Id"],
                                 subject="t1:u1"))
    time.sleep(0.2)  # uncertain: the operator looks it up, and the slow worker completes it
    answer = StoredResponse(201, (("Content-Type", "application/json"),), b'{"refund_id":7}')
    store.after_read = lambda: store.complete(key, token="slow", response=answer,
                                              retention_seconds=60.0)
    result = app.test_cli_runner().invoke(
        args=["bailing", "idempotency", "resolve", key, *decision, "--note", "looked lost"])
    assert result.exit_code == 1, result.output
    assert "changed while it was being resolved (it is completed now)" in result.output
    entry = store.get(key)
    assert entry is not None and entry.state == "completed" and entry.response == answer
    repeat = hub.replay(request)
    assert repeat.status == 201 and repeat.json() == {"refund_id": 7}
    assert rows(app) == 0  # the view never ran here: the worker's run is the only one


def test_cli_resolve_reports_a_missing_entry_without_writing(app, hub):
    result = app.test_cli_runner().invoke(
        args=["bailing", "idempotency", "resolve", "idem:" + "0" * 64, "--rerun", "--note", "x"])
    assert result.exit_code == 1
    assert "no entry 'idem:" in result.output


def test_store_down_refuses_side_effects_but_not_reads(redis_server_factory, tmp_path):
    server = redis_server_factory()
    app = create_app(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE=server.url,
                     IDEM_DATABASE=str(tmp_path / "b.sqlite3"))
    hub = HubSimulator(app, STRONG_SECRET)
    assert hub.call("refund_create", ARGS, subject="t1:u1").status == 201
    server.stop()
    down = hub.call("refund_create", {**ARGS, "amount": 2}, subject="t1:u1")
    assert down.status == 503
    assert down.json()["reason"] == "idempotency_store_unavailable"
    assert hub.call("refund_count", subject="t1:u1").status == 200
    assert rows(app) == 1  # nothing ran
    server.start()
    assert hub.call("refund_create", {**ARGS, "amount": 2}, subject="t1:u1").status == 201
    assert rows(app) == 2


def _fire(hub: HubSimulator, request: HubRequest, n: int) -> list[int]:
    with ThreadPoolExecutor(max_workers=n) as pool:
        return [r.status for r in pool.map(lambda _: hub.replay(request), range(n))]


@pytest.mark.parametrize("defer", ["0", "1"])
def test_50_concurrent_duplicates_on_4_gunicorn_workers_and_sqlite(gunicorn, tmp_path, defer):
    env = {"BAILING_TEST_SECRET": STRONG_SECRET,
           "BAILING_STORE": f"sqlite:///{tmp_path / 'idem.sqlite3'}",
           "IDEM_DATABASE": str(tmp_path / "business.sqlite3"), "IDEM_DELAY": "0.2",
           "IDEM_DEFER": defer}
    base = gunicorn("tests.apps.idem_app:create_app()", workers=4, env=env)
    hub = HubSimulator(base, STRONG_SECRET)
    request = hub.build_call("refund_create", ARGS, subject="t1:u1")
    statuses = _fire(hub, request, 50)
    assert side_effects(env["IDEM_DATABASE"]) == 1
    assert statuses.count(201) >= 1
    assert set(statuses) <= {201, 409}, statuses
    assert all(s < 500 for s in statuses)


@pytest.mark.parametrize("defer", ["0", "1"])
def test_50_concurrent_duplicates_across_two_app_processes_sharing_redis(gunicorn, tmp_path,
                                                                       redis_server, defer):
    env = {"BAILING_TEST_SECRET": STRONG_SECRET, "BAILING_STORE": redis_server.url,
           "IDEM_DATABASE": str(tmp_path / "business.sqlite3"), "IDEM_DELAY": "0.2",
           "IDEM_DEFER": defer}
    first = HubSimulator(gunicorn("tests.apps.idem_app:create_app()", workers=2, env=env), STRONG_SECRET)
    second = HubSimulator(gunicorn("tests.apps.idem_app:create_app()", workers=2, env=env), STRONG_SECRET)
    request = first.build_call("refund_create", ARGS, subject="t1:u1")
    with ThreadPoolExecutor(max_workers=50) as pool:
        statuses = [r.status for r in pool.map(
            lambda i: (first if i % 2 else second).replay(request), range(50))]
    assert side_effects(env["IDEM_DATABASE"]) == 1
    assert set(statuses) <= {201, 409}, statuses


def test_worker_killed_during_the_side_effect_is_uncertain_and_resolvable(gunicorn, tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    env = {"BAILING_TEST_SECRET": STRONG_SECRET,
           "BAILING_STORE": f"sqlite:///{tmp_path / 'idem.sqlite3'}",
           "IDEM_DATABASE": str(tmp_path / "business.sqlite3"), "IDEM_LEASE": "1"}
    base = gunicorn("tests.apps.idem_app:create_app()", workers=2, env=env)
    hub = HubSimulator(base, STRONG_SECRET)
    request = hub.build_call("refund_create", {**ARGS, "die": True}, subject="t1:u1")
    with pytest.raises(Exception):  # the worker died: the connection is cut
        hub.replay(request)
    assert side_effects(env["IDEM_DATABASE"]) == 1  # the side effect did happen
    time.sleep(1.2)
    uncertain = hub.replay(request)
    assert uncertain.status == 409
    assert uncertain.json()["reason"] == "idempotency_uncertain"

    import os

    cli_env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent), **env)

    def flask(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "flask", "--app", "tests.apps.idem_app:create_app",
                               "bailing", "idempotency", *args], env=cli_env, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    (line,) = [json.loads(x) for x in flask("list", "--json").splitlines() if x.startswith("{")]
    assert line["state"] == "uncertain" and line["subject"] == "t1:u1"
    flask("resolve", line["key"], "--status", "201", "--body", '{"ok":true,"refund_id":1}',
          "--note", "row 1 exists")
    answered = hub.replay(request)
    assert answered.status == 201 and answered.json() == {"ok": True, "refund_id": 1}
    assert side_effects(env["IDEM_DATABASE"]) == 1


# --- the request path's precomputed parts ---------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_reservation_tokens_are_unique_and_a_forked_worker_draws_new_ones():
    from bailing_flask._pipeline.idempotency import _TOKENS

    tokens = {_TOKENS.next() for _ in range(1000)}
    assert len(tokens) == 1000
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its next token and leave at once
        try:
            os.write(write, _TOKENS.next().encode())
        finally:
            os._exit(0)
    os.close(write)
    child_token = os.read(read, 200).decode()
    os.close(read)
    os.waitpid(pid, 0)
    parent_token = _TOKENS.next()
    assert child_token and child_token not in tokens
    assert child_token.split("-")[0] != parent_token.split("-")[0]  # another random prefix


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_threads_of_a_new_worker_never_hand_out_the_parents_tokens():
    """Attack: a captured write call sent to several workers of a pre-fork threaded server just
    after they start. Two threads of one new worker ask for a token at the same moment; one of
    them must not pair the new process id with the parent's prefix and counter while the other
    draws the new prefix, or sibling workers hand out the same token and a store tells both of
    them they own the call: it runs twice."""
    import json
    import threading

    from bailing_flask._pipeline.idempotency import _TOKENS

    parent_prefix = _TOKENS.next().rsplit("-", 1)[0]
    tokens: list[str] = []
    for _round in range(15):
        children = []
        for _worker in range(4):
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:  # a new worker: two threads ask at once, then it leaves at once
                try:
                    start, drawn = threading.Barrier(2), []
                    def draw() -> None:
                        start.wait()
                        drawn.append(_TOKENS.next())
                    threads = [threading.Thread(target=draw) for _ in range(2)]
                    for thread in threads:
                        thread.start()
                    for thread in threads:
                        thread.join()
                    os.write(write, json.dumps(drawn).encode())
                finally:
                    os._exit(0)
            os.close(write)
            children.append((pid, read))
        for pid, read in children:
            with os.fdopen(read, "rb") as pipe:
                tokens += json.loads(pipe.read())
            os.waitpid(pid, 0)
    assert len(tokens) == 15 * 4 * 2
    assert not [token for token in tokens if token.startswith(parent_prefix)]
    assert len(set(tokens)) == len(tokens)


def test_a_configuration_swapped_after_the_first_call_is_used(app, hub):
    request = hub.build_call("refund_create", ARGS, subject="t1:u1")
    assert hub.replay(request).status == 201
    reconfigure(app, idempotency_retention=5)
    other = hub.build_call("refund_create", {**ARGS, "amount": 3}, subject="t1:u1")
    started = time.time()
    assert hub.replay(other).status == 201
    entry = idempotency_of(state_of(app)).store().get(identity(other, "t1:u1"))
    assert entry is not None and entry.expires_at <= started + 5 + 60


@pytest.mark.parametrize("value", ["maybe", 2, None])
def test_defer_completion_must_be_a_flag_or_the_app_does_not_start(tmp_path, value):
    from bailing_flask.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="^BAILING_IDEMPOTENCY_DEFER_COMPLETION must be"):
        create_app(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://",
                   IDEM_DATABASE=str(tmp_path / "b.sqlite3"),
                   BAILING_IDEMPOTENCY_DEFER_COMPLETION=value)


def test_a_tool_compiled_again_gets_its_own_plan(app):
    import dataclasses

    idempotency = idempotency_of(state_of(app))
    tool = next(t for t in registry_of(state_of(app)).tools if t.name == "refund_create")
    plan = idempotency._plan(tool)
    assert plan.applies and plan.tool is tool and idempotency._plan(tool) is plan
    readonly = dataclasses.replace(tool, readonly=True, repeats=None)  # rebuilt with other options
    other = idempotency._plan(readonly)
    assert other is not plan and other.tool is readonly and not other.applies


# --- BAILING_IDEMPOTENCY_DEFER_COMPLETION: the same answers, one write per call ----------------


@pytest.fixture
def deferred_app(store_url, tmp_path):
    return create_app(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE=store_url,
                      IDEM_DATABASE=str(tmp_path / "business.sqlite3"),
                      BAILING_IDEMPOTENCY_DEFER_COMPLETION=True)


def test_deferred_completions_answer_repeats_exactly_like_the_default(deferred_app):
    app = deferred_app
    hub = HubSimulator(app, STRONG_SECRET)
    request = hub.build_call("refund_create", ARGS, subject="t1:u1")
    first = hub.replay(request)
    second = hub.replay(request)
    assert first.status == 201 and REPLAY_HEADER not in first.headers
    assert second.status == 201 and second.body == first.body
    assert second.headers.get(REPLAY_HEADER) == "true"
    refused = hub.build_call("refund_create", {**ARGS, "fail": 409}, subject="t1:u1")
    assert hub.replay(refused).status == 409
    assert hub.replay(refused).headers.get(REPLAY_HEADER) == "true"
    broken = hub.build_call("refund_create", {**ARGS, "fail": 503}, subject="t1:u1")
    assert hub.replay(broken).status == 503
    assert hub.replay(broken).json()["reason"] == "idempotency_uncertain"
    assert rows(app) == 1
    store = idempotency_of(state_of(app)).store()
    store.flush()
    entry = store.get(identity(request, "t1:u1"))
    assert entry is not None and entry.state == "completed" and entry.response.status == 201


def test_deferred_completions_keep_concurrent_duplicates_to_one_run(deferred_app):
    app = deferred_app
    hub = HubSimulator(app, STRONG_SECRET)
    request = hub.build_call("refund_create", ARGS, subject="t1:u1")
    statuses = _fire(hub, request, 20)
    assert rows(app) == 1
    assert set(statuses) <= {201, 409}, statuses
    idempotency_of(state_of(app)).store().flush()
    assert hub.replay(request).headers.get(REPLAY_HEADER) == "true"


def test_workers_forked_by_uwsgi_without_telling_python_draw_their_own_tokens(uwsgi):
    """uWSGI forks its workers in C after loading the app, without running Python's
    at-fork hooks (unless --py-call-osafterfork): tokens must still differ per worker."""
    import urllib.request

    base = uwsgi("tests.apps.fork_app", extra=("--processes", "3"))
    seen: dict[str, set[str]] = {}
    for _ in range(200):
        with urllib.request.urlopen(base + "/", timeout=10) as answer:
            pid, token = answer.read().decode().split()
        seen.setdefault(pid, set()).add(token.rsplit("-", 1)[0])
        if len(seen) >= 2 and sum(len(v) for v in seen.values()) >= 2 and len(seen) == 3:
            break
    assert len(seen) >= 2, seen  # requests reached several workers
    prefixes = [prefix for prefixes in seen.values() for prefix in prefixes]
    assert len(prefixes) == len(set(prefixes)), seen  # no two workers share a token prefix
