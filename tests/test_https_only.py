"""An HTTPS-only app (Flask-Talisman's ``force_https``) under the exercise, the simulator and the hub.

Talisman redirects every plain-http request to https. The exercise, the
pytest fixture and ``flask bailing call`` sent http, so every request was
redirected and the fix they printed (a first line for the hook) could not
be applied to another package's hook. They now send the scheme of
``BAILING_BASE_URL`` (or ``--https``), and a hub that reaches the app over
an internal http hop gets Talisman to step aside for its verified requests
only (:func:`bailing_flask.integrations.exempt_hub_requests`), which is proven here
against real Talisman over a socket, unsigned and forged requests included.
"""

from __future__ import annotations

import http.client
import time
from typing import Any
from urllib.parse import urlsplit

import pytest
from flask import Flask

import bailing_flask
from bailing_flask import ConfigurationError
from bailing_flask.doctor import run_doctor
from bailing_flask.exercise import run_exercise
from bailing_flask.exercise._hooks import package_of
from bailing_flask.testing import HubSimulator, catalog_headers, signed_headers

from .apps import desk_app
from .apps.desk_app import TLSProxy, create_app
from .helpers import STRONG_SECRET

INTERNAL = "http://desk-api.internal:8000"
PUBLIC = "https://desk.example.com"


@pytest.fixture(autouse=True)
def _clear() -> None:
    desk_app.PAGE_HITS.clear()
    desk_app.CLOSED.clear()


def get(base: str, path: str, headers: dict[str, str] | None = None, method: str = "GET",
        body: bytes = b"") -> http.client.HTTPResponse:
    """One raw request over the socket (no redirect followed)."""
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.netloc, timeout=60)
    conn.request(method, path, body=body or None, headers=headers or {})
    response = conn.getresponse()
    response.read()
    conn.close()
    return response


# -- the exercise ------------------------------------------------------------------------------


def test_talismans_redirect_is_named_with_a_fix_that_fits_another_packages_hook():
    report = run_exercise(create_app())
    assert not report.ok
    result = next(r for r in report.results if r.target.startswith("tool api_ticket_search"))
    assert "HTTP 302 redirect to https://localhost/api/v1/tickets" in result.summary
    assert result.culprit == ("flask-talisman: before_request function "
                              "flask_talisman.talisman.Talisman._force_https answered 302")
    assert "set BAILING_BASE_URL to it (or pass --https)" in result.fix
    assert "bailing_flask.integrations.exempt_hub_requests(app, talisman._force_https)" in result.fix
    assert "as its first line" not in result.fix  # Talisman's hook is not the app's to edit


def test_the_exercise_sends_the_scheme_of_BAILING_BASE_URL():
    report = run_exercise(create_app(base_url=PUBLIC))
    assert report.ok, report.render()
    assert "  requests: over https (the scheme of BAILING_BASE_URL https://desk.example.com)" in report.plan


def test_the_exercise_with_https_passes_and_the_cli_takes_the_option():
    assert run_exercise(create_app(), https=True).ok
    app = create_app()
    result = app.test_cli_runner().invoke(args=["bailing", "check", "--exercise", "--https"])
    assert result.exit_code == 0, result.output
    assert "requests: over https (--https)" in result.output
    refused = create_app().test_cli_runner().invoke(args=["bailing", "check", "--https"])
    assert refused.exit_code == 2 and "go with --exercise" in refused.output


def test_the_exercise_over_an_internal_http_hop_passes_with_the_recipe():
    report = run_exercise(create_app(base_url=INTERNAL, exempt=True))
    assert report.ok, report.render()
    assert "  requests: over http (the scheme of BAILING_BASE_URL http://desk-api.internal:8000)" in report.plan
    assert not run_exercise(create_app(base_url=INTERNAL)).ok  # without it: redirected


def test_package_of_names_an_installed_package_and_not_the_apps_own_code():
    app = create_app()
    hooks = app.before_request_funcs[None]
    assert package_of(hooks[0]) == "flask-talisman"
    assert package_of(create_app) is None


# -- the simulator, the pytest fixture and flask bailing call ------------------------------------------


def test_the_simulator_sends_the_scheme_of_BAILING_BASE_URL():
    hub = HubSimulator(create_app(base_url=PUBLIC), STRONG_SECRET)
    assert hub.scheme == "https"
    response = hub.call("api_ticket_search", {"department": "billing"}, subject="t1:bob")
    assert response.status == 200, response.text
    assert response.json()["secure"] is True
    assert response.headers["Strict-Transport-Security"].startswith("max-age=")  # Talisman saw https
    assert HubSimulator(create_app(), STRONG_SECRET, https=True).call(
        "api_ticket_search", subject="t1:bob").status == 200
    with pytest.raises(AssertionError, match="catalog fetch answered 302"):  # plain http: redirected
        HubSimulator(create_app(), STRONG_SECRET).call("api_ticket_search", subject="t1:bob")


def test_the_scheme_is_not_signed():
    app = create_app(base_url=INTERNAL, exempt=True)  # answers both schemes
    now = time.time()
    clock = lambda: now  # noqa: E731  (one second for both)
    over_https = HubSimulator(app, STRONG_SECRET, https=True, clock=clock)
    over_http = HubSimulator(app, STRONG_SECRET, https=False, clock=clock)
    first = over_https.build_call("api_ticket_search", {"status": "open"}, subject="t1:bob", job_id="j1")
    second = over_http.build_call("api_ticket_search", {"status": "open"}, subject="t1:bob", job_id="j1")
    assert first.headers == second.headers and first.path_with_query == second.path_with_query


def test_a_url_target_keeps_its_scheme():
    with pytest.raises(ValueError, match="contradicts"):
        HubSimulator("http://127.0.0.1:9", STRONG_SECRET, https=True)


def test_the_pytest_fixture_follows_BAILING_BASE_URL(pytester):
    pytester.makepyfile(
        """
        import pytest
        from tests.apps.desk_app import create_app

        @pytest.fixture
        def app():
            return create_app(base_url="https://desk.example.com")

        def test_search(bailing_hub):
            response = bailing_hub.call("api_ticket_search", {"department": "billing"}, subject="t1:bob")
            assert response.status == 200 and response.json()["secure"] is True
        """
    )
    from pathlib import Path

    root = str(Path(__file__).resolve().parent.parent)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--rootdir={pytester.path}",
                                           "-o", f"pythonpath={root}")
    result.assert_outcomes(passed=1)


def test_flask_bailing_call_sends_https_and_the_console_client():
    app = create_app(base_url=PUBLIC)
    result = app.test_cli_runner().invoke(
        args=["bailing", "call", "api_ticket_search", '{"status": "open"}', "--subject", "t1:bob"])
    assert result.exit_code == 0, result.output
    assert "> X-Bailing-Client: admin-debug" in result.output.splitlines()
    assert '"secure": true' in result.output
    with_url = app.test_cli_runner().invoke(
        args=["bailing", "call", "api_ticket_search", "--url", "http://127.0.0.1:9", "--https"])
    assert with_url.exit_code == 2 and "the URL's scheme decides" in with_url.output


# -- the internal http hop, over a socket -----------------------------------------------------------------


@pytest.fixture
def internal(live_server: Any) -> str:
    """The desk with the recipe, reached over plain http like a hub inside the network."""
    return str(live_server(create_app(base_url=INTERNAL, exempt=True)))


def test_the_hubs_verified_calls_over_http_are_not_redirected(internal):
    hub = HubSimulator(internal, STRONG_SECRET)
    search = hub.call("api_ticket_search", {"department": "billing"}, subject="t1:bob")
    assert search.status == 200 and search.json()["secure"] is False, search.text
    closed = hub.call("api_ticket_close", {"ticket_id": 7}, subject="t1:alice")
    assert closed.status == 200 and desk_app.CLOSED == [7]
    assert hub.fetch_catalog().status == 200
    assert hub.probe().json() == {"authorized": False}


def test_unsigned_requests_are_still_redirected_to_https(internal):
    for path in ("/api/v1/tickets", "/api/v1/dashboard", "/.well-known/bailing/tools.json"):
        response = get(internal, path)
        assert response.status == 302 and response.getheader("Location", "").startswith("https://"), path
    closing = get(internal, "/api/v1/tickets/7/close", method="POST", body=b"{}",
                  headers={"Content-Type": "application/json"})
    assert closing.status == 302
    assert desk_app.PAGE_HITS == [] and desk_app.CLOSED == []


def test_a_forged_signature_header_does_not_get_around_the_redirect(internal):
    # the signature is checked below Flask, before Talisman's hook: a bad one is answered 401
    # there, and the page never runs over http
    forged = signed_headers("not-the-secret-" + "x" * 32, "GET", "/api/v1/dashboard", subject="t1:alice")
    response = get(internal, "/api/v1/dashboard", forged)
    assert response.status == 401 and response.getheader("X-Bailing-Reason") == "bad_signature"
    zeros = {**forged, "X-Bailing-Signature": "sha256=" + "0" * 64}
    assert get(internal, "/api/v1/tickets", zeros).status == 401
    stale = signed_headers(STRONG_SECRET, "GET", "/api/v1/dashboard", subject="t1:alice", ts=1_000_000_000)
    assert get(internal, "/api/v1/dashboard", stale).status == 401
    assert desk_app.PAGE_HITS == []


def test_a_signed_catalog_fetch_over_http_is_served(internal):
    path = "/.well-known/bailing/tools.json"
    assert get(internal, path, catalog_headers(STRONG_SECRET, path)).status == 200


# -- TLS ends at the proxy ------------------------------------------------------------------------


def test_behind_a_tls_proxy_the_hub_calls_the_https_url_and_talisman_stays_quiet(
        live_server, self_signed_certificate):
    upstream = live_server(create_app(base_url=PUBLIC, proxy_fix=True))
    public = live_server(TLSProxy(upstream), tls=self_signed_certificate)
    report = run_doctor(public, STRONG_SECRET, subject="t1:bob", cacert=self_signed_certificate[0])
    for name in ("catalog.access", "authz_probe", "tool_call", "write_tools"):
        assert report.check(name).status == "pass", report.render()
    plain = live_server(TLSProxy(upstream))  # the same proxy's plain-http side
    assert get(plain, "/api/v1/dashboard").status == 302
    assert desk_app.CLOSED == []


# -- the helper itself ----------------------------------------------------------------------------


def test_exempt_hub_requests_names_a_function_that_is_not_a_hook():
    app = Flask("plain")
    with pytest.raises(ConfigurationError, match="is not a before_request function of 'plain'"):
        bailing_flask.integrations.exempt_hub_requests(app, create_app)


def test_exempting_twice_changes_nothing():
    app = create_app(base_url=INTERNAL, exempt=True)
    hook = app.before_request_funcs[None][0]
    again = bailing_flask.integrations.exempt_hub_requests(app, hook.__wrapped__)
    assert again is hook and app.before_request_funcs[None].count(hook) == 1
