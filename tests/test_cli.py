"""The ``flask bailing`` commands, run through Flask's CLI runner."""

from __future__ import annotations

import json

from flask import Flask

from bailing_flask import Bailing, tool

from .apps.authz_app import create_app as create_authz_app
from .apps.catalog_app import create_app as create_catalog_app
from .helpers import STRONG_SECRET
from bailing_flask._state import state_of
from bailing_flask._pipeline.catalog import catalog_of


def broken_app() -> Flask:
    app = Flask(__name__)
    app.config["BAILING_SECRETS"] = STRONG_SECRET
    Bailing(app)  # no authorizer at all

    @app.get("/x")
    @tool(scope="x.read")
    def x():
        """A tool."""
        return "x"

    return app


def test_export_writes_the_catalog(tmp_path):
    app = create_catalog_app()
    out = tmp_path / "tools.json"
    result = app.test_cli_runner().invoke(args=["bailing", "export", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_bytes()) == catalog_of(state_of(app)).document


def test_export_to_stdout():
    result = create_catalog_app().test_cli_runner().invoke(args=["bailing", "export", "--indent", "2"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["info"]["title"] == "Shop tools"


def test_errors_stop_the_export(tmp_path):
    out = tmp_path / "tools.json"
    result = broken_app().test_cli_runner().invoke(args=["bailing", "export", "-o", str(out)])
    assert result.exit_code == 1
    assert "no_authorizer" in result.output
    assert not out.exists()


def test_check_exits_non_zero_on_errors():
    good = create_catalog_app().test_cli_runner().invoke(args=["bailing", "check"])
    assert good.exit_code == 0, good.output
    assert "0 error(s)" in good.output
    bad = broken_app().test_cli_runner().invoke(args=["bailing", "check"])
    assert bad.exit_code == 1
    assert "ERROR   no_authorizer" in bad.output


def test_tools_lists_exported_and_not_exported_routes():
    result = create_catalog_app().test_cli_runner().invoke(args=["bailing", "tools"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert any(line.startswith("shop_order_search") and "GET" in line and "shop.order.read" in line
               for line in lines)
    assert "Declared but not exported:" in result.output
    assert "enabled=False" in result.output and "deprecated=True" in result.output


def test_call_in_process_prints_request_and_response():
    app, _ = create_authz_app()
    result = app.test_cli_runner().invoke(
        args=["bailing", "call", "order_get", '{"order_id": 101}', "--subject", "t1:u1",
              "--job", "job-cli-1"])
    assert result.exit_code == 0, result.output
    assert "> GET /api/orders/101" in result.output
    assert "> X-Bailing-On-Behalf-Of: t1:u1" in result.output
    assert "> X-Bailing-Job-Id: job-cli-1" in result.output
    assert "< HTTP 200" in result.output
    assert '"tenant": "t1"' in result.output
    assert STRONG_SECRET not in result.output


def test_call_exits_non_zero_on_a_refusal():
    app, _ = create_authz_app()
    result = app.test_cli_runner().invoke(
        args=["bailing", "call", "order_get", '{"order_id": 101}', "--subject", "t2:u9"])
    assert result.exit_code == 1
    assert "< HTTP 403" in result.output


def test_call_against_a_live_url(live_server):
    app, _ = create_authz_app()
    base = live_server(app)
    runner_app, _ = create_authz_app()
    result = runner_app.test_cli_runner().invoke(
        args=["bailing", "call", "order_search", '{"keyword": "张三 退款"}', "--subject", "t1:u1",
              "--url", base])
    assert result.exit_code == 0, result.output
    assert "> GET /api/orders?keyword=%E5%BC%A0%E4%B8%89+%E9%80%80%E6%AC%BE" in result.output


def client_echo_app() -> Flask:
    from flask import jsonify

    from bailing_flask import current_call

    app = Flask("client_echo")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    Bailing(app).authorizer(lambda call: True)

    @app.get("/whoami")
    @tool(scope="whoami.read")
    def whoami():
        """The unsigned client header the app received."""
        return jsonify(client=current_call.unsigned.client)

    return app


def test_call_names_itself_admin_debug_like_the_consoles_debug_invoke(live_server):
    runner = client_echo_app().test_cli_runner()
    result = runner.invoke(args=["bailing", "call", "whoami"])
    assert result.exit_code == 0, result.output
    assert "> X-Bailing-Client: admin-debug" in result.output.splitlines()
    assert '"client": "admin-debug"' in result.output
    base = live_server(client_echo_app())
    other = runner.invoke(args=["bailing", "call", "whoami", "--url", base, "--client", "crm"])
    assert other.exit_code == 0 and '"client": "crm"' in other.output, other.output
    empty = runner.invoke(args=["bailing", "call", "whoami", "--url", base, "--client", ""])
    assert "> X-Bailing-Client: " in empty.output.splitlines() and '"client": ""' in empty.output


def test_call_with_unknown_tool_or_bad_json():
    app, _ = create_authz_app()
    runner = app.test_cli_runner()
    unknown = runner.invoke(args=["bailing", "call", "nope", "{}"])
    assert unknown.exit_code != 0 and "no tool named 'nope'" in unknown.output
    bad = runner.invoke(args=["bailing", "call", "order_get", "{not json"])
    assert bad.exit_code != 0 and "not JSON" in bad.output


def test_call_with_a_missing_path_argument_names_it_instead_of_sending_the_placeholder(
        live_server):
    app, _ = create_authz_app()
    runner = app.test_cli_runner()
    for args in ("{}", '{"order_id": null}'):
        result = runner.invoke(args=["bailing", "call", "order_get", args, "--subject", "t1:u1"])
        assert result.exit_code != 0
        assert "needs the path argument(s) order_id" in result.output
        assert "> GET" not in result.output and "<html" not in result.output.lower()
    live = runner.invoke(args=["bailing", "call", "order_get", "{}", "--url", live_server(app)])
    assert live.exit_code != 0 and "order_id" in live.output and "> GET" not in live.output


def test_doctor_passes_a_healthy_deployment_and_fails_a_wrong_secret(live_server):
    app, _ = create_authz_app()
    base = live_server(app)
    runner = create_authz_app()[0].test_cli_runner()
    healthy = runner.invoke(args=["bailing", "doctor", "--url", base, "--subject", "t1:u1"])
    assert healthy.exit_code == 0, healthy.output
    assert "PASS  catalog.access" in healthy.output
    wrong = runner.invoke(args=["bailing", "doctor", "--url", base, "--secret",
                                "not-the-secret-0123456789-0123456789"])
    assert wrong.exit_code == 1
    assert "bad_signature" in wrong.output


def test_catalog_with_a_trailing_slash_is_not_the_catalog():
    app = create_catalog_app()
    assert app.test_client().get("/.well-known/bailing/tools.json/").status_code == 404
