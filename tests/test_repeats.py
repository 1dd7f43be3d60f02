"""``repeats=`` says what a repeat of the same call gets; ``idempotency_key=`` which calls repeat.

Repeat behaviour used to take six options (``idempotent``, ``deduplicate``
and its first name ``idempotency``, ``rerun_uncertain``,
``failure_is_atomic``, ``transactional``) and five rules refusing their
contradictions; ``idempotent=True`` told the hub a call was safe to retry
while the package still ran it once. Now one option has three values, each
with one meaning for the hub and for the package, and every removed option
is refused with what to write instead.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from flask import Blueprint, Flask, jsonify, request
from pydantic import BaseModel, Field

from bailing_flask import Bailing, ToolDeclarationError, get_current_call, tool, tool_defaults
from bailing_flask.declare import REMOVED_OPTIONS, REPEATS
from bailing_flask.responses import REPLAY_HEADER
from bailing_flask.testing import HubSimulator
from bailing_flask.transactional import DBAPITransaction

from .helpers import STRONG_SECRET
from bailing_flask._state import state_of
from bailing_flask._pipeline.registry import registry_of
from bailing_flask._pipeline.idempotency import idempotency_of


class RowBody(BaseModel):
    title: str = Field(description="Title.", max_length=50)


class Connections:
    """One sqlite3 connection per thread to the app's database file (autocommit)."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)
        self.local = threading.local()

    def __call__(self) -> sqlite3.Connection:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = sqlite3.connect(self.path, isolation_level=None)
            conn.execute("CREATE TABLE IF NOT EXISTS rows (title TEXT)")
        return conn


def make_app(rows: list[str], db: Connections) -> Flask:
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://",
                      BAILING_TRANSACTION=DBAPITransaction(db))
    bailing = Bailing(app)
    bailing.authorizer(lambda call: True)

    def insert() -> Any:
        rows.append(request.endpoint or "")
        db().execute("INSERT INTO rows (title) VALUES (?)", (request.endpoint,))
        if request.get_json(silent=True, force=True).get("title") == "crash":
            raise RuntimeError("failed after the insert")
        return jsonify(rows=len(rows)), 201

    app.add_url_rule("/rows/plain", "plain", tool(scope="row.write", body=RowBody)(insert),
                     methods=["POST"])
    app.add_url_rule("/rows/safe", "safe", tool(scope="row.write", body=RowBody, repeats="safe")(insert),
                     methods=["PUT"])
    app.add_url_rule("/rows/txn", "txn",
                     tool(scope="row.write", body=RowBody, repeats="transaction")(insert), methods=["POST"])
    app.add_url_rule("/rows/domain", "domain",
                     tool(scope="row.write", body=RowBody,
                          idempotency_key=lambda call: call.body.title)(insert), methods=["POST"])
    app.add_url_rule("/rows/preview", "preview",
                     tool(scope="row.read", body=RowBody, readonly=True)(insert), methods=["POST"])
    app.add_url_rule("/rows/read", "read", tool(scope="row.read")(lambda: jsonify(rows=len(rows))))
    return app


@pytest.fixture
def db(tmp_path: Path) -> Connections:
    return Connections(tmp_path / "app.sqlite3")


@pytest.fixture
def rows() -> list[str]:
    return []


@pytest.fixture
def app(rows: list[str], db: Connections) -> Flask:
    return make_app(rows, db)


def delivered_twice(app: Flask, name: str, title: str = "t") -> tuple[int, int, str | None]:
    hub = HubSimulator(app, STRONG_SECRET)
    call = hub.build_call(name, {"title": title}, subject="t1:u1", job_id="job-1")
    first, again = hub.replay(call), hub.replay(call)
    return first.status, again.status, again.headers.get(REPLAY_HEADER)


def execution(app: Flask, path: str, method: str) -> dict[str, Any]:
    document = HubSimulator(app, STRONG_SECRET).document()
    return document["paths"][path][method]["x-agent-capability"]["execution"]  # type: ignore[no-any-return]


# -- the three values -------------------------------------------------------------------------------


def test_a_write_tool_replays_a_repeat_by_default(app, rows):
    assert delivered_twice(app, "plain") == (201, 201, "true")
    assert rows == ["plain"]
    assert "X-Bailing-Idempotency-Key" in HubSimulator(app, STRONG_SECRET).build_call(
        "plain", {"title": "t"}).headers  # the hub journals it and sends its key
    assert execution(app, "/rows/plain", "post") == {"readonly": False, "idempotent": False}


def test_repeats_safe_runs_every_call_and_tells_the_hub_it_may_retry(app, rows):
    assert delivered_twice(app, "safe") == (201, 201, None)
    assert rows == ["safe", "safe"]
    assert idempotency_of(state_of(app)).store().list(limit=10) == []  # nothing recorded
    hub = HubSimulator(app, STRONG_SECRET)
    assert "X-Bailing-Idempotency-Key" not in hub.build_call("safe", {"title": "t"}).headers
    assert execution(app, "/rows/safe", "put") == {"readonly": False, "idempotent": True}


def test_repeats_transaction_runs_once_with_the_record_in_the_views_transaction(app, rows, db):
    assert delivered_twice(app, "txn") == (201, 201, "true")
    assert rows == ["txn"]
    assert [r[0] for r in db().execute("SELECT tool FROM bailing_idempotency")] == ["txn"]
    assert idempotency_of(state_of(app)).store().list(limit=10) == []  # not in the store
    assert execution(app, "/rows/txn", "post") == {"readonly": False, "idempotent": False}


def test_a_failure_is_uncertain_with_replay_and_rolled_back_with_transaction(app, rows, db):
    assert delivered_twice(app, "plain", title="crash")[:2] == (500, 409)
    assert delivered_twice(app, "txn", title="crash")[:2] == (500, 500)  # it ran again
    assert rows == ["plain", "txn", "txn"]
    written = [r[0] for r in db().execute("SELECT title FROM rows")]
    assert written == ["plain"]  # both transactional attempts rolled back


def test_a_domain_key_makes_calls_of_other_jobs_repeats(app, rows):
    hub = HubSimulator(app, STRONG_SECRET)
    first = hub.call("domain", {"title": "same"}, subject="t1:u1", job_id="job-1")
    other_job = hub.call("domain", {"title": "same"}, subject="t1:u1", job_id="job-2")
    assert (first.status, other_job.headers.get(REPLAY_HEADER)) == (201, "true")
    assert rows == ["domain"]


def test_read_tools_run_every_call(app, rows):
    assert delivered_twice(app, "preview") == (201, 201, None)
    assert rows == ["preview", "preview"]
    assert execution(app, "/rows/preview", "post") == {"readonly": True, "idempotent": False}


def test_repeats_on_a_read_only_tool_only_says_safe_to_the_hub(rows):
    app = Flask("reads")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    Bailing(app).authorizer(lambda call: True)

    @app.post("/search")
    @tool(scope="row.read", body=RowBody, readonly=True, repeats="safe")
    def search() -> Any:
        """Search."""
        rows.append("search")
        return jsonify(found=0)

    @app.post("/preview")
    @tool(scope="row.read", body=RowBody, readonly=True, repeats="replay")
    def preview() -> Any:
        """Preview."""
        rows.append("preview")
        return jsonify(found=0)

    assert execution(app, "/search", "post") == {"readonly": True, "idempotent": True}
    assert execution(app, "/preview", "post") == {"readonly": True, "idempotent": False}
    assert delivered_twice(app, "search")[2] is None and delivered_twice(app, "preview")[2] is None
    assert rows == ["search", "search", "preview", "preview"]


def test_each_value_is_documented():
    assert set(REPEATS) == {"replay", "transaction", "safe"}


def test_tools_shows_each_tools_repeats(app):
    result = app.test_cli_runner().invoke(args=["bailing", "tools"])
    assert result.exit_code == 0, result.output
    header, *lines = result.output.splitlines()
    assert header.split()[5] == "REPEATS"
    cells = {line.split()[0]: line for line in lines if line.strip()}
    assert cells["plain"].split()[5] == "replay" and "side effect" in cells["plain"]
    assert cells["safe"].split()[5] == "safe" and "the hub may retry" in cells["safe"]
    assert cells["txn"].split()[5] == "transaction"
    assert "replay (domain key)" in cells["domain"]
    assert cells["preview"].split()[5] == "-" and cells["read"].split()[5] == "-"
    listed = app.test_cli_runner().invoke(args=["bailing", "tools", "--json"])
    tools = {t["name"]: (t["repeats"], t["domain_key"]) for t in json.loads(listed.output)["tools"]}
    assert tools == {"plain": ("replay", False), "safe": ("safe", False), "txn": ("transaction", False),
                     "domain": ("replay", True), "preview": (None, False), "read": (None, False)}


# -- what is refused ---------------------------------------------------------------------------------


@pytest.mark.parametrize("option, value, replacement", [
    ("idempotent", True, "write repeats='safe'"),
    ("idempotent", False, "leave it out"),
    ("deduplicate", False, "write repeats='safe' if running every call is harmless"),
    ("deduplicate", True, "leave it out: every write tool is de-duplicated by default"),
    ("idempotency", False, "the first name of deduplicate=, also removed: write repeats='safe'"),
    ("transactional", True, "write repeats='transaction'"),
    ("rerun_uncertain", True, "flask bailing idempotency resolve KEY --rerun"),
    ("failure_is_atomic", True, "write repeats='transaction': a failure rolls back"),
])
def test_a_removed_option_is_refused_naming_its_replacement(option, value, replacement):
    def on_a_view(**options: Any) -> None:
        tool(scope="x.write", **options)(lambda: None)

    def as_blueprint_defaults(**options: Any) -> None:
        tool_defaults(Blueprint("bp", __name__), **options)

    for declare in (on_a_view, as_blueprint_defaults):
        with pytest.raises(ToolDeclarationError) as info:
            declare(**{option: value})
        message = str(info.value)
        assert f"{option}= is removed; " in message and replacement in message, message


def test_every_removed_option_is_in_the_table():
    assert set(REMOVED_OPTIONS) == {"idempotent", "deduplicate", "idempotency", "transactional",
                                    "rerun_uncertain", "failure_is_atomic"}


def test_safe_with_a_domain_key_is_refused_in_the_decorator_and_through_defaults():
    message = re.escape("repeats='safe' runs every call, and idempotency_key= says which calls are "
                        "repeats of each other")
    with pytest.raises(ToolDeclarationError, match=message):
        tool(scope="x.write", repeats="safe", idempotency_key=lambda call: "k")(lambda: None)
    app = Flask("layered")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET])
    Bailing(app)
    bp = Blueprint("bp", __name__)
    tool_defaults(bp, repeats="safe")

    @bp.post("/x")
    @tool(scope="x.write", idempotency_key=lambda call: "k")
    def keyed() -> Any:
        """Keyed."""
        return jsonify(ok=True)

    app.register_blueprint(bp)
    with pytest.raises(ToolDeclarationError, match=r"keyed \(POST /x\): " + message):
        registry_of(state_of(app))


# -- a domain key and another subject -----------------------------------------------------------


@pytest.mark.parametrize("repeats", ["replay", "transaction"])
def test_a_domain_key_that_leaves_the_subject_out_never_hands_one_users_answer_to_another(
        rows, db, repeats):
    """``idempotency_key=`` on the order alone ("one refund per order"): the call runs once,
    whoever asks; Alice's repeat gets her recorded answer, Bob's a refusal without it."""
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://",
                      BAILING_TRANSACTION=DBAPITransaction(db))
    Bailing(app).authorizer(lambda call: True)

    @app.post("/refunds")
    @tool(scope="refund.write", body=RowBody, repeats=repeats,
          idempotency_key=lambda call: call.body.title)
    def refund_create() -> Any:
        """Refund an order once."""
        rows.append(get_current_call().subject)
        db().execute("INSERT INTO rows (title) VALUES (?)", ("refund",))
        return jsonify(refund_for=get_current_call().subject, card="4242"), 201

    hub = HubSimulator(app, STRONG_SECRET)
    alice = hub.call("refund_create", {"title": "order-7"}, subject="t1:alice", job_id="job-1")
    again = hub.call("refund_create", {"title": "order-7"}, subject="t1:alice", job_id="job-2")
    bob = hub.call("refund_create", {"title": "order-7"}, subject="t2:bob", job_id="job-3")
    assert (alice.status, again.status, again.headers.get(REPLAY_HEADER)) == (201, 201, "true")
    assert again.json() == alice.json() == {"refund_for": "t1:alice", "card": "4242"}
    assert (bob.status, bob.json()["reason"]) == (409, "idempotency_other_subject")
    assert "t1:alice" not in bob.text and "4242" not in bob.text
    assert REPLAY_HEADER not in bob.headers
    assert rows == ["t1:alice"]  # ran once, for Alice
