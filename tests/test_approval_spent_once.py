"""One business approval admits exactly one call, however its arguments are serialised.

The attack: the business approves ``transfer(amount=100, to="bob")`` for one
job and subject. The byte-identical repeat of the approved call is answered
from its idempotency record; but the same arguments in other JSON -- keys
reordered, whitespace, ``100.0``, a ``\\u0062`` escape -- are calls of their
own to the idempotency layer (each body has its own signed identity), and
every one of them found the approval and ran: five transfers from one
approval, six more at once after a second one.

Now the approval is *spent* where the call is reserved, in one atomic step
of the store (or of the app's own transaction in the transaction mode): the
call that spends it runs, its repeats are replayed, and every other call is
refused with ``403 business_approval_required`` and ``approval: used``.
Through real servers: gunicorn workers sharing a SQLite store, two servers
sharing a Redis, and the transaction mode on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from bailing_flask import Bailing
from bailing_flask.hub.fake import FakeHub, serve
from bailing_flask.stores import IdempotencyStore, MemoryStore, SQLiteStore
from bailing_flask.testing import HubRequest, HubResponse, HubSimulator

from .apps import approval_app
from .apps.approval_app import SUBJECT, create_app, transfers
from .helpers import STRONG_SECRET, resigned
from bailing_flask._state import state_of
from bailing_flask._pipeline.idempotency import idempotency_of
from bailing_flask.approvals import approvals_of

CLIENT_TOKEN = "client-token-spent-once-0123456789abcdef"
ARGS = {"amount": 100, "to": "bob"}
#: how the hub serialises the approved arguments
ORIGINAL = b'{"amount":100,"to":"bob"}'
#: the same arguments, serialised otherwise: each body is a call identity of its own
EQUIVALENT = [
    b'{"to":"bob","amount":100}',          # keys reordered
    b'{ "amount": 100, "to": "bob" }',     # whitespace
    b'{"amount":100.0,"to":"bob"}',        # 100.0
    b'{"amount":100,"to":"\\u0062ob"}',    # an escape
    b'{"amount":1e2,"to":"bob"}',          # an exponent
    b'{"amount":100.00,"to":"bob"}',       # trailing zeros
    b'{"amount":100,"to":"bob"}\n',        # a trailing newline
]


@pytest.fixture
def fake_hub() -> Iterator[tuple[FakeHub, str]]:
    """The hub that accepts the app's decisions, on a loopback port."""
    with serve() as served:
        yield served


@dataclass
class Deployment:
    """One or more servers of the approval app sharing their stores, and how to count effects."""

    hubs: list[HubSimulator]
    fake: FakeHub
    count: Callable[[], int]
    approvals: list[int] = field(default_factory=list)

    def approve(self, tool: str, job_id: str, approval_id: int,
                args: dict[str, Any] | None = None) -> None:
        """The hub asks the business; the app's handler approves it at once, at the hub."""
        sent = self.hubs[0].send_approval_request(tool, args or ARGS, subject=SUBJECT,
                                                  job_id=job_id, approval_id=approval_id)
        assert sent.status == 200, sent.text
        assert [d["decision"] for d in self.fake.decisions
                if d["approval_id"] == approval_id] == ["approved"]


def linked(hub: HubSimulator, fake: FakeHub) -> HubSimulator:
    hub.fake_hub = fake
    return hub


def concurrently(calls: list[tuple[HubSimulator, HubRequest]]) -> list[HubResponse]:
    """Send every call at once (each from its own thread, released together)."""
    barrier = threading.Barrier(len(calls))
    answers: list[HubResponse | BaseException] = [RuntimeError("not sent")] * len(calls)

    def send(index: int) -> None:
        hub, request = calls[index]
        try:
            barrier.wait(timeout=60)
            answers[index] = hub.replay(request)
        except BaseException as exc:  # pragma: no cover - reported below
            answers[index] = exc

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    failed = [answer for answer in answers if isinstance(answer, BaseException)]
    assert not failed, failed
    return answers  # type: ignore[return-value]


def assert_used(response: HubResponse, body: bytes) -> None:
    assert response.status == 403, (body, response.status, response.text)
    payload = response.json()
    assert (payload["reason"], payload["approval"]) == ("business_approval_required", "used"), body


def one_approval_runs_one_call(deployment: Deployment, tool: str) -> None:
    """The attack as it was found, against ``tool``: one effect per approval, whatever the bytes."""
    hubs = deployment.hubs
    job = str(uuid.uuid4())
    deployment.approve(tool, job, 701)
    approved = hubs[0].build_call(tool, ARGS, subject=SUBJECT, job_id=job)
    assert approved.body == ORIGINAL
    ran = hubs[0].replay(approved)
    assert ran.status == 201, ran.text
    for index, body in enumerate(EQUIVALENT):  # one after another, to every server
        assert_used(hubs[index % len(hubs)].replay(resigned(STRONG_SECRET, approved, body)), body)
    again = hubs[-1].replay(resigned(STRONG_SECRET, approved, ORIGINAL))  # the same call again
    assert again.status == 201 and again.headers.get("Idempotent-Replayed") == "true"
    assert again.body == ran.body
    assert deployment.count() == 1

    # a second approval of the same arguments in the same job: six equivalent bodies at once
    deployment.approve(tool, job, 702)
    answers = concurrently([(hubs[i % len(hubs)], resigned(STRONG_SECRET, approved, body))
                            for i, body in enumerate(EQUIVALENT[:6])])
    assert sorted(answer.status for answer in answers) == [201] + [403] * 5, [
        (answer.status, answer.text) for answer in answers]
    for answer, body in zip(answers, EQUIVALENT):
        if answer.status == 403:
            assert_used(answer, body)
        else:
            assert answer.headers.get("Idempotent-Replayed") is None  # it ran
    assert deployment.count() == 2


# --- the store mode, through real servers -----------------------------------------------------


def _env(tmp_path: Path, hub_url: str, store: str) -> dict[str, str]:
    return {"BAILING_TEST_SECRET": STRONG_SECRET, "BAILING_STORE": store,
            "BAILING_HUB_URL": hub_url, "APPROVAL_CLIENT_TOKEN": CLIENT_TOKEN,
            "APPROVAL_DATABASE": str(tmp_path / "effects.sqlite3")}


def test_gunicorn_workers_sharing_a_sqlite_store_spend_an_approval_once(
    gunicorn: Any, fake_hub: tuple[FakeHub, str], tmp_path: Path
) -> None:
    fake, url = fake_hub
    env = _env(tmp_path, url, f"sqlite:///{tmp_path / 'store.sqlite3'}")
    base = gunicorn("tests.apps.approval_app:create_app()", workers=2, env=env)
    hub = linked(HubSimulator(base, STRONG_SECRET, client_token=CLIENT_TOKEN), fake)
    one_approval_runs_one_call(
        Deployment([hub], fake, lambda: transfers(env["APPROVAL_DATABASE"])), "transfer")


def test_two_servers_sharing_a_redis_spend_an_approval_once(
    gunicorn: Any, fake_hub: tuple[FakeHub, str], tmp_path: Path, redis_server: Any
) -> None:
    fake, url = fake_hub
    env = _env(tmp_path, url, redis_server.url)
    hubs = [linked(HubSimulator(gunicorn("tests.apps.approval_app:create_app()", env=env),
                                STRONG_SECRET, client_token=CLIENT_TOKEN), fake)
            for _ in range(2)]
    one_approval_runs_one_call(
        Deployment(hubs, fake, lambda: transfers(env["APPROVAL_DATABASE"])), "transfer")


# --- the transaction mode, through real servers -------------------------------------------------


def _txn_env(tmp_path: Path, hub_url: str, backend: str, database: str) -> dict[str, str]:
    env = _env(tmp_path, hub_url, f"sqlite:///{tmp_path / 'store.sqlite3'}")
    env.update(TXN_BACKEND=backend, TXN_DATABASE=database,
               APPROVAL_FAIL_FILE=str(tmp_path / "fail-next-call"))
    return env


@pytest.fixture(params=["sqlite3", "psycopg"])
def txn_database(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """(backend, database) of the transaction mode: a SQLite file, or a PostgreSQL database."""
    if request.param == "sqlite3":
        return "sqlite3", str(tmp_path / "app.sqlite3")
    return "psycopg", str(request.getfixturevalue("postgres_database").conninfo)


def test_the_transaction_mode_spends_an_approval_once_across_workers(
    gunicorn: Any, fake_hub: tuple[FakeHub, str], tmp_path: Path, txn_database: tuple[str, str]
) -> None:
    fake, url = fake_hub
    backend, database = txn_database
    env = _txn_env(tmp_path, url, backend, database)
    base = gunicorn("tests.apps.approval_app:create_app()", workers=2, env=env)
    hub = linked(HubSimulator(base, STRONG_SECRET, client_token=CLIENT_TOKEN), fake)

    def count() -> int:
        return int(approval_app.query(backend, database, "SELECT COUNT(*) FROM transfers")[0][0])

    one_approval_runs_one_call(Deployment([hub], fake, count), "transfer_txn")
    spent = approval_app.query(backend, database, "SELECT call_key, note FROM bailing_idempotency "
                               "WHERE state = 'approval' ORDER BY call_key")
    assert [key for key, _ in spent] == ["approval:701", "approval:702"]
    with SQLiteStore(tmp_path / "store.sqlite3") as store:  # the store's records say so too
        assert [store.get_approval(i).used_by for i in (701, 702)] == [note for _, note in spent]  # type: ignore[union-attr]


def test_a_call_whose_transaction_rolled_back_does_not_spend_the_approval(
    gunicorn: Any, fake_hub: tuple[FakeHub, str], tmp_path: Path, txn_database: tuple[str, str]
) -> None:
    fake, url = fake_hub
    backend, database = txn_database
    env = _txn_env(tmp_path, url, backend, database)
    base = gunicorn("tests.apps.approval_app:create_app()", workers=2, env=env)
    hub = linked(HubSimulator(base, STRONG_SECRET, client_token=CLIENT_TOKEN), fake)
    deployment = Deployment([hub], fake, lambda: 0)
    job = str(uuid.uuid4())
    deployment.approve("transfer_txn", job, 801)
    approved = hub.build_call("transfer_txn", ARGS, subject=SUBJECT, job_id=job)
    Path(env["APPROVAL_FAIL_FILE"]).touch()
    failed = hub.replay(approved)
    assert failed.status == 500  # answered 5xx: its transaction rolled back, the approval with it

    def count() -> int:
        return int(approval_app.query(backend, database, "SELECT COUNT(*) FROM transfers")[0][0])

    assert count() == 0
    reordered = resigned(STRONG_SECRET, approved, EQUIVALENT[0])
    ran = hub.replay(reordered)
    assert ran.status == 201, ran.text
    assert count() == 1
    assert_used(hub.replay(resigned(STRONG_SECRET, approved, ORIGINAL)), ORIGINAL)
    repeat = hub.replay(resigned(STRONG_SECRET, approved, EQUIVALENT[0]))
    assert repeat.status == 201 and repeat.headers.get("Idempotent-Replayed") == "true"
    assert count() == 1


# --- in one process: the other paths -----------------------------------------------------------


@pytest.fixture
def app(fake_hub: tuple[FakeHub, str], tmp_path: Path) -> Flask:
    return create_app(BAILING_HUB_URL=fake_hub[1], BAILING_CLIENT_TOKENS=[CLIENT_TOKEN],
                      BAILING_SECRETS=[STRONG_SECRET],
                      BAILING_STORE=f"sqlite:///{tmp_path / 'store.sqlite3'}",
                      APPROVAL_DATABASE=str(tmp_path / "effects.sqlite3"))


@pytest.fixture
def hub(app: Flask, fake_hub: tuple[FakeHub, str]) -> HubSimulator:
    return linked(HubSimulator(app, STRONG_SECRET), fake_hub[0])


def test_a_tool_without_deduplication_runs_once_per_approval(
    app: Flask, hub: HubSimulator, fake_hub: tuple[FakeHub, str]
) -> None:
    deployment = Deployment([hub], fake_hub[0], lambda: transfers(app.config["APPROVAL_DATABASE"],
                                                                  "exports"))
    job = str(uuid.uuid4())
    deployment.approve("export", job, 901, {"limit": 5})
    first = hub.build_call("export", {"limit": 5}, subject=SUBJECT, job_id=job)
    assert hub.replay(first).status == 200
    # a read-only tool keeps no answer to replay: the same call again is refused too
    assert_used(hub.replay(first), b"")
    padded = HubRequest("GET", "/exports?limit=05", dict(first.headers))  # another identity
    assert_used(hub.replay(resigned(STRONG_SECRET, padded, b"")), b"?limit=05")
    assert deployment.count() == 1


def test_the_audit_names_the_approval_a_call_spent_and_refuses_the_others(
    app: Flask, hub: HubSimulator, fake_hub: tuple[FakeHub, str], caplog: pytest.LogCaptureFixture
) -> None:
    job = str(uuid.uuid4())
    Deployment([hub], fake_hub[0], lambda: 0).approve("transfer", job, 911)
    approved = hub.build_call("transfer", ARGS, subject=SUBJECT, job_id=job)
    with caplog.at_level(logging.INFO, logger="bailing_flask"):
        assert hub.replay(approved).status == 201
        assert_used(hub.replay(resigned(STRONG_SECRET, approved, EQUIVALENT[2])), EQUIVALENT[2])
        assert hub.replay(approved).status == 201  # replayed
    audit = [json.loads(r.getMessage()) for r in caplog.records if r.name == "bailing_flask.audit"]
    assert [(r["status"], r["reason"], r["approval_id"], r["replayed"]) for r in audit] == [
        (201, None, 911, False), (403, "business_approval_required", None, False),
        (201, None, 911, True)]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("was spent already (used)" in message for message in warnings)
    with app.app_context():
        record = approvals_of(state_of(app)).get(911)
    assert record is not None and record.used_by is not None and record.used_by.startswith("idem:")


def test_a_rerun_released_by_the_operator_needs_a_new_approval_and_the_cli_says_so(
    app: Flask, hub: HubSimulator, fake_hub: tuple[FakeHub, str]
) -> None:
    job = str(uuid.uuid4())
    Deployment([hub], fake_hub[0], lambda: 0).approve("transfer", job, 912)
    approved = hub.build_call("transfer", ARGS, subject=SUBJECT, job_id=job)
    assert hub.replay(approved).status == 201
    (entry,) = [e for e in idempotency_of(state_of(app)).store().list(state=None, limit=10)
                if e.meta.tool == "transfer"]
    result = app.test_cli_runner().invoke(args=[
        "bailing", "idempotency", "resolve", entry.key, "--rerun", "--note", "ledger shows nothing"])
    assert result.exit_code == 0, result.output
    assert "once approved again" in result.output and "business_approval" in result.output
    assert_used(hub.replay(approved), ORIGINAL)  # the approval stays spent


def test_a_store_that_cannot_spend_approvals_fails_closed(
    app: Flask, hub: HubSimulator, fake_hub: tuple[FakeHub, str], caplog: pytest.LogCaptureFixture
) -> None:
    class Earlier(MemoryStore):
        """A store written before approvals could be spent."""

        _claim_approved = IdempotencyStore._claim_approved
    idempotency_of(state_of(app))._store = Earlier()
    job = str(uuid.uuid4())
    Deployment([hub], fake_hub[0], lambda: 0).approve("transfer", job, 921)
    with caplog.at_level(logging.ERROR, logger="bailing_flask"):
        refused = hub.call("transfer", ARGS, subject=SUBJECT, job_id=job)
    assert refused.status == 503 and refused.json()["reason"] == "idempotency_store_unavailable"
    assert transfers(app.config["APPROVAL_DATABASE"]) == 0
    assert any("does not implement _claim_approved" in r.getMessage() for r in caplog.records)


def test_a_sqlalchemy_view_that_rolls_back_keeps_the_approval_spent(
    fake_hub: tuple[FakeHub, str], tmp_path: Path
) -> None:
    database = f"sqlite:///{tmp_path / 'app.sqlite3'}"
    app = create_app(BAILING_HUB_URL=fake_hub[1], BAILING_CLIENT_TOKENS=[CLIENT_TOKEN],
                     BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://",
                     TXN_BACKEND="sqlalchemy", TXN_DATABASE=database, VIEW_ROLLS_BACK=True)
    hub = linked(HubSimulator(app, STRONG_SECRET), fake_hub[0])
    job = str(uuid.uuid4())
    Deployment([hub], fake_hub[0], lambda: 0).approve("transfer_txn", job, 931)
    approved = hub.build_call("transfer_txn", ARGS, subject=SUBJECT, job_id=job)
    assert hub.replay(approved).status == 201
    assert_used(hub.replay(resigned(STRONG_SECRET, approved, EQUIVALENT[1])), EQUIVALENT[1])
    rows = approval_app.query("sqlalchemy", database, "SELECT COUNT(*) FROM transfers")
    spent = approval_app.query("sqlalchemy", database,
                               "SELECT note FROM bailing_idempotency WHERE call_key = ?",
                               ("approval:931",))
    assert rows == [(1,)] and len(spent) == 1 and spent[0][0].startswith("idem:")


@pytest.mark.parametrize("backend", ["sqlalchemy", "sqlite3"])
def test_an_operator_cannot_resolve_away_the_row_of_a_spent_approval(
    fake_hub: tuple[FakeHub, str], tmp_path: Path, backend: str
) -> None:
    """In the transaction mode a spent approval is a row of the call table: ``resolve`` (given its
    key by hand) finds no call there, so deleting it cannot let the approval run a second call."""
    path = tmp_path / "app.sqlite3"
    database = f"sqlite:///{path}" if backend == "sqlalchemy" else str(path)
    app = create_app(BAILING_HUB_URL=fake_hub[1], BAILING_CLIENT_TOKENS=[CLIENT_TOKEN],
                     BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://",
                     TXN_BACKEND=backend, TXN_DATABASE=database)
    hub = linked(HubSimulator(app, STRONG_SECRET), fake_hub[0])
    job = str(uuid.uuid4())
    Deployment([hub], fake_hub[0], lambda: 0).approve("transfer_txn", job, 951)
    approved = hub.build_call("transfer_txn", ARGS, subject=SUBJECT, job_id=job)
    assert hub.replay(approved).status == 201
    for decision in (["--rerun"], ["--status", "200"]):
        result = app.test_cli_runner().invoke(args=[
            "bailing", "idempotency", "resolve", "approval:951", *decision, "--note", "by hand"])
        assert result.exit_code == 1 and "no entry 'approval:951'" in result.output
    spent = approval_app.query(backend, database, "SELECT state FROM bailing_idempotency "
                               "WHERE call_key = ?", ("approval:951",))
    assert spent == [("approval",)]
    assert_used(hub.replay(resigned(STRONG_SECRET, approved, EQUIVALENT[1])), EQUIVALENT[1])


def test_a_view_that_commits_by_itself_still_spends_the_approval(
    fake_hub: tuple[FakeHub, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    database = str(tmp_path / "app.sqlite3")
    app = create_app(BAILING_HUB_URL=fake_hub[1], BAILING_CLIENT_TOKENS=[CLIENT_TOKEN],
                     BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://",
                     TXN_BACKEND="sqlite3", TXN_DATABASE=database, VIEW_COMMITS=True)
    hub = linked(HubSimulator(app, STRONG_SECRET), fake_hub[0])
    job = str(uuid.uuid4())
    Deployment([hub], fake_hub[0], lambda: 0).approve("transfer_txn", job, 941)
    approved = hub.build_call("transfer_txn", ARGS, subject=SUBJECT, job_id=job)
    with caplog.at_level(logging.ERROR, logger="bailing_flask"):
        ended = hub.replay(approved)
    assert (ended.status, ended.json()["reason"]) == (500, "transaction_ended_by_view")
    # its transfer was committed by the view: the approval is spent, nothing else runs on it
    assert_used(hub.replay(resigned(STRONG_SECRET, approved, EQUIVALENT[3])), EQUIVALENT[3])
    assert approval_app.query("sqlite3", database, "SELECT COUNT(*) FROM transfers") == [(1,)]
    with app.app_context():
        record = approvals_of(state_of(app)).get(941)
    assert record is not None and record.used_by is not None
