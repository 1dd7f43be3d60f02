"""The pytest plugin is registered by the package's entry point and works."""

from __future__ import annotations



def test_bailing_hub_fixture_is_provided_by_the_entry_point(pytester):
    pytester.makepyfile(
        """
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
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
