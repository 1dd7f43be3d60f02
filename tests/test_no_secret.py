"""Without the provider secret: the app's commands run, serving stays closed.

A legacy app gets ``Bailing(app)`` in its factory long before every
environment has the hub's secret. ``flask routes``, ``flask db upgrade`` and
the app's own commands must keep working there; every request signed by
the hub is refused (503 ``not_configured``, logged as an error), and the
``bailing`` commands that need the secret say so.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from flask import Flask, jsonify
from flask.cli import FlaskGroup
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy

from bailing_flask import Bailing, ConfigurationError, tool
from bailing_flask.testing import HubSimulator, catalog_headers, signed_headers

from .helpers import STRONG_SECRET, raw_request


def legacy_app(tmp_path: Path, **config: Any) -> Flask:
    app = Flask("legacy_no_secret", instance_path=str(tmp_path / "instance"))
    app.config.update(SQLALCHEMY_DATABASE_URI=f"sqlite:///{tmp_path / 'app.db'}",
                      BAILING_STORE="memory://", **config)
    db = SQLAlchemy(app)
    Migrate(app, db, directory=str(tmp_path / "migrations"))
    bailing = Bailing(app)
    bailing.authorizer(lambda call: True)

    @app.cli.command("seed")
    def seed() -> None:
        """The app's own command."""
        click.echo("seeded")

    @app.get("/")
    def home() -> Any:
        return "home"

    @app.get("/api/ping")
    @tool(scope="ping.read")
    def ping() -> Any:
        """Ping."""
        return jsonify(pong=True)

    return app


def flask_command(app: Flask, *args: str) -> Any:
    """Run ``flask <args>`` (the real ``flask`` command group) on ``app``."""
    return CliRunner().invoke(FlaskGroup(create_app=lambda: app), list(args))


def test_app_commands_run_without_a_secret(tmp_path, caplog):
    with caplog.at_level(logging.ERROR, logger="bailing_flask"):
        app = legacy_app(tmp_path)
    assert "BAILING_SECRETS is not set" in caplog.text
    routes = flask_command(app, "routes")
    assert routes.exit_code == 0, routes.output
    assert "/api/ping" in routes.output
    assert flask_command(app, "seed").output == "seeded\n"
    # the bailing commands that do not need the secret work too
    tools = flask_command(app, "bailing", "tools")
    assert tools.exit_code == 0 and "ping" in tools.output


def test_flask_routes_and_db_upgrade_run_without_a_secret(tmp_path):
    # a real `flask` process each (alembic reconfigures logging, which must not leak into pytest)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BAILING_")}
    env.update(PYTHONPATH=str(Path(__file__).resolve().parent.parent),
               NO_SECRET_APP_DIR=str(tmp_path))

    def flask(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "flask", "--app", "tests.test_no_secret:create_app", *args],
            env=env, capture_output=True, text=True, timeout=60,
        )

    routes = flask("routes")
    assert routes.returncode == 0, routes.stderr
    assert "/api/ping" in routes.stdout
    assert "BAILING_SECRETS is not set" in routes.stderr
    for args in (("db", "init"), ("db", "upgrade")):
        result = flask(*args)
        assert result.returncode == 0, (args, result.stderr)
    assert (tmp_path / "migrations" / "env.py").exists()


def create_app() -> Flask:
    """For ``flask --app``: the legacy app in the folder the test chose."""
    return legacy_app(Path(os.environ["NO_SECRET_APP_DIR"]))


@pytest.mark.parametrize("empty", [None, "", []])
def test_every_signed_request_is_refused_and_logged(tmp_path, caplog, empty):
    app = legacy_app(tmp_path, BAILING_SECRETS=empty)
    client = app.test_client()
    with caplog.at_level(logging.ERROR, logger="bailing_flask"):
        tool_call = client.get("/api/ping", headers=signed_headers(STRONG_SECRET, "GET", "/api/ping"))
    assert tool_call.status_code == 503
    assert tool_call.json["reason"] == "not_configured"
    assert "BAILING_SECRETS is not set" in caplog.text
    catalog = client.get("/.well-known/bailing/tools.json",
                         headers=catalog_headers(STRONG_SECRET, "/.well-known/bailing/tools.json"))
    assert catalog.status_code == 503
    # unsigned: what it always was
    assert client.get("/.well-known/bailing/tools.json").status_code == 401
    assert client.get("/api/ping").json["reason"] == "missing_signature"
    assert client.get("/").get_data(as_text=True) == "home"


def test_a_real_server_refuses_hub_calls_without_a_secret(tmp_path, live_server):
    base = live_server(legacy_app(tmp_path))
    response = raw_request(base, "GET", "/api/ping", signed_headers(STRONG_SECRET, "GET", "/api/ping"))
    assert response.status == 503
    assert b'"reason":"not_configured"' in response.body
    assert raw_request(base, "GET", "/").body == b"home"


def test_bailing_commands_that_need_the_secret_say_so(tmp_path):
    runner = legacy_app(tmp_path).test_cli_runner()
    for args in (["bailing", "call", "ping"], ["bailing", "doctor", "--url", "http://127.0.0.1:9"],
                 ["bailing", "check", "--exercise"]):
        result = runner.invoke(args=args)
        assert result.exit_code != 0, args
        assert "needs the provider secret" in result.output and "BAILING_SECRETS" in result.output, args


def test_check_without_a_secret_lints_and_warns(tmp_path):
    result = legacy_app(tmp_path).test_cli_runner().invoke(args=["bailing", "check"])
    assert result.exit_code == 0, result.output
    assert "BAILING_SECRETS is not set" in result.output


def test_a_malformed_secret_still_refuses_to_start(tmp_path):
    with pytest.raises(ConfigurationError, match="empty"):
        legacy_app(tmp_path, BAILING_SECRETS=[""])
    with pytest.raises(ConfigurationError):
        legacy_app(tmp_path, BAILING_SECRETS=42)


def test_with_the_secret_the_same_app_serves_the_hub(tmp_path):
    app = legacy_app(tmp_path, BAILING_SECRETS=[STRONG_SECRET])
    assert HubSimulator(app, STRONG_SECRET).call("ping").json() == {"pong": True}


def test_the_bare_middleware_still_refuses_to_start_unless_told_otherwise():
    def echo(environ: Any, start_response: Any) -> list[bytes]:
        start_response("200 OK", [])
        return [b"app"]

    from bailing_flask.wire import BailingMiddleware
    from werkzeug.test import Client

    with pytest.raises(ConfigurationError, match="BAILING_SECRETS"):
        BailingMiddleware(echo, None)
    closed = Client(BailingMiddleware(echo, None, missing_secret="refuse"))
    signed = closed.get("/x", headers=signed_headers(STRONG_SECRET, "GET", "/x"))
    assert signed.status_code == 503 and signed.json["reason"] == "not_configured"
    assert closed.get("/x").get_data() == b"app"
