"""The pytest plugin is registered by the package's entry point, works, and costs nothing unused."""

from __future__ import annotations

APP = """
import pytest
from flask import Flask, jsonify
from bailing_flask import Bailing, tool

@pytest.fixture
def app():
    app = Flask("plugin_app")
    app.config["BAILING_SECRETS"] = ["a-secret-long-enough-for-no-warning-0123456789"]
    bailing = Bailing(app)
    bailing.authorizer(lambda call: call.subject == "t1:u1")

    @app.get("/api/ping")
    @tool(scope="ping.read")
    def ping():
        return jsonify(pong=True)

    return app

def test_allowed(bailing_hub):
    assert bailing_hub.call("ping", subject="t1:u1").json() == {"pong": True}

def test_denied(bailing_hub):
    assert bailing_hub.call("ping", subject="t2:u9").status == 403
"""


def test_bailing_hub_fixture_is_provided_by_the_entry_point(pytester):
    pytester.makepyfile(APP)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def test_a_suite_that_does_not_use_the_fixtures_never_imports_the_package_nor_flask(pytester):
    """Every pytest run of an environment with the package loads the plugin: it must cost nothing."""
    pytester.makeconftest(
        """
        import sys

        def pytest_sessionfinish(session):
            loaded = sorted(m for m in ("bailing_flask", "flask", "werkzeug", "pydantic")
                            if m in sys.modules)
            registered = session.config.pluginmanager.has_plugin("bailing_flask")
            print(f"\\nregistered={registered} loaded={loaded}")
        """
    )
    pytester.makepyfile("def test_unrelated():\n    assert sum([1, 2]) == 3\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["registered=True loaded=[[][]]"])


def test_the_fixtures_work_when_the_plugin_module_is_listed_by_hand(pytester, monkeypatch):
    """With autoloading off, ``pytest_plugins = ["bailing_flask.pytest_plugin"]`` (the docs' advice)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makeconftest('pytest_plugins = ["bailing_flask.pytest_plugin"]\n')
    pytester.makepyfile(APP)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
