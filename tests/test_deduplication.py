"""``idempotent=`` (what the hub is told) and ``deduplicate=`` (what we do) cannot be confused.

The old pair, ``idempotent=`` and ``idempotency=``, differed by three
letters, and the natural reading of ``idempotent=True`` ("make this
idempotent") turned de-duplication off: the same signed call delivered
twice created two rows, and neither ``check`` nor ``tools`` said so.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from flask import Flask, jsonify, request
from pydantic import BaseModel, Field

from bailing_flask import Bailing, ToolDeclarationError, tool
from bailing_flask.testing import HubSimulator

from .helpers import STRONG_SECRET


class RowBody(BaseModel):
    title: str = Field(description="Title.", max_length=50)


def make_app(rows: list[str]) -> Flask:
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    bailing = Bailing(app)
    bailing.authorizer(lambda call: True)

    def insert() -> Any:
        rows.append(request.endpoint or "")
        return jsonify(rows=len(rows)), 201

    app.add_url_rule("/rows/plain", "plain", tool(scope="row.write", body=RowBody)(insert),
                     methods=["POST"])
    app.add_url_rule("/rows/idempotent", "idempotent",
                     tool(scope="row.write", body=RowBody, idempotent=True)(insert), methods=["PUT"])
    app.add_url_rule("/rows/off", "off", tool(scope="row.write", body=RowBody, deduplicate=False)(insert),
                     methods=["POST"])
    app.add_url_rule("/rows/domain", "domain",
                     tool(scope="row.write", body=RowBody,
                          idempotency_key=lambda call: call.body.title)(insert), methods=["POST"])
    app.add_url_rule("/rows/read", "read", tool(scope="row.read")(lambda: jsonify(rows=len(rows))))
    return app


def delivered_twice(app: Flask, name: str) -> tuple[int, int, str | None]:
    hub = HubSimulator(app, STRONG_SECRET)
    call = hub.build_call(name, {"title": "t"}, subject="t1:u1", job_id="job-1")
    first, again = hub.replay(call), hub.replay(call)
    return first.status, again.status, again.headers.get("Idempotent-Replayed")


def test_idempotent_true_still_runs_a_repeated_signed_call_once():
    rows: list[str] = []
    app = make_app(rows)
    assert delivered_twice(app, "idempotent") == (201, 201, "true")
    assert rows == ["idempotent"]
    # and the hub is told what idempotent=True means to it: no key, retries allowed
    hub = HubSimulator(app, STRONG_SECRET)
    assert "X-Bailing-Idempotency-Key" not in hub.build_call("idempotent", {"title": "t"}).headers
    execution = hub.document()["paths"]["/rows/idempotent"]["put"]["x-agent-capability"]["execution"]
    assert execution["idempotent"] is True


def test_plain_writes_and_domain_keys_are_deduplicated_and_off_means_off():
    rows: list[str] = []
    app = make_app(rows)
    assert delivered_twice(app, "plain")[2] == "true"
    assert delivered_twice(app, "domain")[2] == "true"
    assert delivered_twice(app, "off") == (201, 201, None)
    assert rows == ["plain", "domain", "off", "off"]


def test_tools_shows_each_tools_deduplication():
    result = make_app([]).test_cli_runner().invoke(args=["bailing", "tools"])
    assert result.exit_code == 0, result.output
    lines = {line.split()[0]: line for line in result.output.splitlines()[1:] if line.strip()}
    assert "DEDUP" in result.output.splitlines()[0]
    assert "signed call" in lines["plain"] and "side effect" in lines["plain"]
    assert "signed call" in lines["idempotent"] and "the hub may retry" in lines["idempotent"]
    assert "off (deduplicate=False)" in lines["off"]
    assert "domain key" in lines["domain"]
    assert lines["read"].split()[5] == "-"


def test_check_explains_idempotent_on_a_write_tool_until_deduplicate_says_which():
    result = make_app([]).test_cli_runner().invoke(args=["bailing", "check"])
    assert result.exit_code == 0, result.output
    assert "WARNING idempotent_write" in result.output and "PUT /rows/idempotent" in result.output
    assert "still runs an identical signed call once" in result.output
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET])
    Bailing(app).authorizer(lambda call: True)
    app.add_url_rule("/x", "x", tool(scope="x.write", idempotent=True, deduplicate=False)(lambda: "x"),
                     methods=["PUT"])
    assert "idempotent_write" not in {f.code for f in Bailing.state(app).catalog().findings}


def test_the_old_name_still_works_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match="renamed deduplicate="):
        declared = tool(scope="x.write", idempotency=False)(lambda: None)
    assert declared.__bailing_tool__.options.deduplicate is False
    with pytest.raises(ToolDeclarationError, match="old name"):
        tool(scope="x.write", idempotency=False, deduplicate=False)(lambda: None)


@pytest.mark.parametrize("options", [
    {"deduplicate": False, "idempotency_key": lambda call: "k"},
    {"deduplicate": False, "rerun_uncertain": True},
])
def test_contradictory_declarations_are_refused(options):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ToolDeclarationError, match="deduplicate=False"):
            tool(scope="x.write", **options)(lambda: None)
