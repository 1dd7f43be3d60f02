"""Configuration errors at start-up and in ``check``; ``status``, ``tools --json``, colour on a tty."""

from __future__ import annotations

import io
import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
from flask import Flask, render_template_string
from jinja2 import DictLoader

from bailing_flask import Bailing, tool
from bailing_flask.cli import _print_findings
from bailing_flask.config_check import check_settings
from bailing_flask.errors import ConfigurationError
from bailing_flask.lint import Finding
from bailing_flask.settings import load_config

from .apps.catalog_app import create_app as create_catalog_app
from .helpers import STRONG_SECRET, reconfigure
from bailing_flask._state import state_of
from bailing_flask._pipeline.catalog import catalog_of

CLIENT_TOKEN = "client-token-operating-0123456789abcdef"


def make_app(*, init: bool = True, **config: Any) -> tuple[Flask, Bailing]:
    app = Flask("operated_app")
    app.config.update({"BAILING_SECRETS": [STRONG_SECRET], "BAILING_STORE": "memory://", **config})
    bailing = Bailing()
    bailing.authorizer(lambda call: True)

    @app.get("/ping")
    @tool(scope="ping.read", description="Ping.")
    def ping() -> Any:
        return {"pong": True}

    if init:
        bailing.init_app(app)
    return app, bailing


def run(app: Flask, *args: str) -> Any:
    return app.test_cli_runner().invoke(args=["bailing", *args])


# --- at start-up -----------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["postgres://db/x", "sqlite://relative.db", "memory://x", "redis"])
def test_an_invalid_store_url_stops_init_app_naming_the_setting(url: str) -> None:
    with pytest.raises(ConfigurationError, match="^BAILING_STORE: ") as caught:
        make_app(BAILING_STORE=url)
    assert "postgres://db/x" not in str(caught.value)  # a URL may hold a password: never echoed


def test_secrets_with_surrounding_whitespace_are_errors_without_showing_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR, logger="bailing_flask"):
        app, _ = make_app(BAILING_SECRETS={"new": STRONG_SECRET + "\n", "old": STRONG_SECRET},
                          BAILING_CLIENT_TOKENS=[" " + CLIENT_TOKEN])
    assert "BAILING_SECRETS['new'] starts or ends with whitespace" in caplog.text
    assert "BAILING_CLIENT_TOKENS['0'] starts or ends with whitespace" in caplog.text
    assert STRONG_SECRET not in caplog.text and CLIENT_TOKEN not in caplog.text
    result = run(app, "check")
    assert result.exit_code == 1 and "secret_whitespace" in result.output
    assert STRONG_SECRET not in result.output


def test_a_short_secret_is_a_check_warning_that_strict_fails_on_and_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    short = "..."  # what `export BAILING_SECRET=...` typed literally gives
    with caplog.at_level(logging.WARNING, logger="bailing_flask"):
        app, _ = make_app(BAILING_SECRETS={"new": short, "old": STRONG_SECRET})
    assert caplog.text.count("is only 3 bytes long") == 1  # by the verifier, not again by init
    result = run(app, "check")
    assert result.exit_code == 0 and "secret_short" in result.output, result.output
    assert "BAILING_SECRETS['new'] is only 3 bytes long" in result.output
    strict = run(app, "check", "--strict")
    assert strict.exit_code == 1, strict.output
    assert "'...'" not in result.output and STRONG_SECRET not in result.output  # never the value


def test_a_handler_without_a_client_token_is_reported_even_when_registered_late(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app, bailing = make_app()

    @bailing.delivery  # after init_app, as decorators in another module would be
    def on_delivery(delivery: Any) -> None:
        pass

    result = run(app, "check")
    assert result.exit_code == 1
    assert "handler_without_client_token" in result.output and "BAILING_CLIENT_TOKENS" in result.output
    with caplog.at_level(logging.ERROR, logger="bailing_flask"):
        app.test_client().get("/ping")  # the first request checks again
    assert "a @bailing.delivery handler is registered but BAILING_CLIENT_TOKENS is not set" in caplog.text


def test_a_handler_known_at_init_app_is_reported_there(caplog: pytest.LogCaptureFixture) -> None:
    app, bailing = make_app(init=False)
    bailing.job_finished(lambda job: None)
    with caplog.at_level(logging.ERROR, logger="bailing_flask"):
        bailing.init_app(app)
    assert "@bailing.job_finished handler is registered but BAILING_CLIENT_TOKENS" in caplog.text


def test_the_chat_widget_without_a_hub_url_is_found_in_the_templates(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app, _ = make_app(BAILING_CLIENT_TOKENS=CLIENT_TOKEN)
    app.jinja_loader = DictLoader({  # type: ignore[assignment]
        "help.html": "<p>Ask us</p>{{ bailing_chat_widget('support', uid) }}",
        "plain.html": "<p>nothing</p>",
    })
    result = run(app, "check", "--json")
    problems = json.loads(result.output)["configuration"]
    assert [(p["code"], p["setting"]) for p in problems] == [
        ("widget_without_hub_url", "BAILING_HUB_URL")]
    assert "help.html" in problems[0]["message"] and result.exit_code == 1
    with caplog.at_level(logging.ERROR, logger="bailing_flask"):
        app.test_client().get("/ping")
    assert "widget_without_hub_url" in caplog.text
    reconfigure(app, hub_url="https://hub.example.com")
    assert run(app, "check").exit_code == 0
    with app.test_request_context():
        assert "hub.example.com" in render_template_string("{{ bailing_chat_widget('support') }}")


def test_business_approval_tools_need_their_wiring() -> None:
    app, bailing = make_app()

    @app.post("/payout")
    @tool(scope="pay.write", description="Pay.", business_approval=True)
    def payout() -> Any:
        return {"ok": True}

    codes = {p["code"] for p in json.loads(run(app, "check", "--json").output)["configuration"]}
    assert codes == {"business_approval_without_handler", "business_approval_without_hub_url",
                     "business_approval_without_client_token"}


def test_check_settings_accepts_a_clean_configuration() -> None:
    assert check_settings(load_config({"BAILING_SECRETS": STRONG_SECRET,
                                       "BAILING_STORE": "sqlite:///x.db", "OTHER": 1})) == []


# --- check, tools, status on the command line -----------------------------------------------


def test_check_json_and_strict() -> None:
    clean = create_catalog_app()
    report = json.loads(run(clean, "check", "--json").output)
    assert (report["ok"], report["errors"], report["warnings"]) == (True, 0, 0)
    assert run(clean, "check", "--strict").exit_code == 0
    app, _ = make_app()

    @app.get("/undescribed")
    @tool(scope="x.read")
    def undescribed() -> Any:
        return {}

    report = json.loads(run(app, "check", "--json").output)
    assert (report["ok"], report["errors"], report["warnings"], report["tools"]) == (True, 0, 1, 2)
    (finding,) = report["findings"]
    assert finding == {"severity": "warning", "code": "missing_summary", "path": "GET /undescribed",
                       "message": finding["message"], "suggestion": finding["suggestion"],
                       "source": "hub"}
    assert run(app, "check").exit_code == 0
    strict = run(app, "check", "--strict")
    assert strict.exit_code == 1 and "WARNING missing_summary" in strict.output
    assert json.loads(run(app, "check", "--json", "--strict").output)["ok"] is False


def test_tools_json_lists_tools_and_routes_left_out() -> None:
    report = json.loads(run(create_catalog_app(), "tools", "--json").output)
    names = {t["name"]: t for t in report["tools"]}
    assert names["shop_order_search"]["method"] == "GET"
    assert {"served", "subject_required", "sensitive", "side_effecting",
            "business_approval"} <= set(names["shop_order_search"])
    assert {item["reason"] for item in report["not_exported"]} >= {"enabled=False", "deprecated=True"}


def test_status_redacts_secrets_and_reports_the_catalog_digest(tmp_path: Path) -> None:
    import hashlib

    store = f"sqlite:///{tmp_path / 'status.sqlite3'}"
    app, bailing = make_app(BAILING_CLIENT_TOKENS={"main": CLIENT_TOKEN}, BAILING_STORE=store,
                            BAILING_HUB_URL="https://hub.example.com")
    bailing.approval_request(lambda request: None)
    result = run(app, "status", "--json")
    assert result.exit_code == 0, result.output
    assert STRONG_SECRET not in result.output and CLIENT_TOKEN not in result.output
    data = json.loads(result.output)
    configuration = data["configuration"]
    assert configuration["BAILING_SECRETS"] == {
        "configured": True, "secrets": [{"label": "0", "length": len(STRONG_SECRET)}]}
    assert configuration["BAILING_CLIENT_TOKENS"]["secrets"] == [
        {"label": "main", "length": len(CLIENT_TOKEN)}]
    assert data["store"] == {"backend": "SQLiteStore", "reachable": True, "error": None,
                             "persistence": None, "location": str(tmp_path / "status.sqlite3")}
    assert data["handlers"]["approval"] == {
        "registered": True, "path": "/.well-known/bailing/callbacks/approval", "client_token": True}
    assert data["handlers"]["job"]["registered"] is False
    served = catalog_of(state_of(app)).served_bytes
    assert data["catalog"]["tools"] == 1
    assert data["catalog"]["catalog_sha256"] == hashlib.sha256(served).hexdigest()
    assert data["approvals"]["pending"] == 0 and data["hub"]["url"] == "https://hub.example.com"
    text = run(app, "status").output
    assert "BAILING_SECRETS" in text and f"0 ({len(STRONG_SECRET)} chars)" in text
    assert "SQLiteStore" in text and "reachable" in text and STRONG_SECRET not in text


def test_status_reads_redis_persistence_and_hides_the_password(redis_server: Any) -> None:
    from urllib.parse import urlsplit

    parts = urlsplit(redis_server.url)
    url = f"redis://:not-a-real-password@{parts.hostname}:{parts.port}/0"
    app, _ = make_app(BAILING_STORE=url)
    data = json.loads(run(app, "status", "--json").output)
    assert "not-a-real-password" not in json.dumps(data)
    assert data["configuration"]["BAILING_STORE"] == f"redis://{parts.hostname}:{parts.port}/0"
    store = data["store"]
    assert store["backend"] == "RedisStore" and store["location"].startswith("redis://127.0.0.1:")
    plain, _ = make_app(BAILING_STORE=redis_server.url)
    persistence = json.loads(run(plain, "status", "--json").output)["store"]["persistence"]
    # the test server is started without appendonly: the status says what a restart loses
    assert persistence["mode"] in ("snapshots", "none")
    assert "appendonly yes" in persistence["warning"]


def test_status_reports_an_unreachable_store() -> None:
    app, _ = make_app(BAILING_STORE="redis://127.0.0.1:1/0")
    data = json.loads(run(app, "status", "--json").output)
    assert data["store"]["reachable"] is False and "unavailable" in data["store"]["error"]


# --- colour only on a terminal -------------------------------------------------------------


def test_severities_are_coloured_on_a_terminal_only() -> None:
    finding = Finding("error", "no_authorizer", "GET /x", "no authorizer")
    plain = io.StringIO()
    _print_findings([finding], plain)
    assert plain.getvalue().startswith("ERROR   no_authorizer") and "\x1b[" not in plain.getvalue()
    master, slave = os.openpty()
    try:
        with os.fdopen(slave, "w", closefd=False) as terminal:
            _print_findings([finding], terminal)
            terminal.flush()
        written = os.read(master, 4096).decode()
    finally:
        os.close(master)
        os.close(slave)
    assert "\x1b[31m" in written and "no_authorizer" in written
