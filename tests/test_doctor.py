"""``run_doctor`` against real deployments over loopback sockets.

Every scenario is a real server (Werkzeug's threaded server via the
``live_server`` fixture), with real proxies and middlewares in front of a
real bailing_flask app (``tests/apps/doctor_apps.py``): no mocks.
"""

from __future__ import annotations

import json
import time

import pytest

from bailing_flask import Bailing
from bailing_flask.doctor import CHECK_NAMES, DoctorReport, run_doctor

from .helpers import STRONG_SECRET
from .apps.doctor_apps import (
    CachingProxy,
    ForwardingProxy,
    create_shop_app,
    drop_response_header,
    generic_probe,
    gzip_responses,
    handmade_app,
    login_redirect,
    redirect_path,
    strip_prefix,
)
from bailing_flask._state import state_of
from bailing_flask._pipeline.catalog import catalog_of

WELL_KNOWN = "/.well-known/bailing/tools.json"
PROBE_PATH = "/.well-known/bailing/authz-probe"


def statuses(report: DoctorReport) -> dict[str, str]:
    return {check.name: check.status for check in report.checks}


def text_of(report: DoctorReport, name: str) -> str:
    check = report.check(name)
    return "\n".join(part for part in (check.summary, check.detail, check.fix) if part)


@pytest.fixture
def shop(live_server):
    """A healthy deployment: ``start(**config) -> base_url``."""

    def start(**config):
        return live_server(create_shop_app(**config))

    return start


# --- (a) healthy -------------------------------------------------------------------------------


def test_healthy_deployment_passes_every_check(shop):
    base = shop()
    report = run_doctor(base, STRONG_SECRET, subject="t1:u1")
    assert statuses(report) == {name: "pass" for name in CHECK_NAMES if name != "base_url"}, (
        report.render())
    assert report.ok
    access = report.catalog_access
    assert (access.status, access.signed_http, access.unsigned_http, access.invalid_http) == (
        "protected", 200, 401, 401)
    assert report.authz_probe.status == "pass" and report.authz_probe.mode == "dedicated"
    assert "as 't1:u1': HTTP 200" in report.check("tool_call").summary
    rendered = report.render()
    assert rendered.endswith("10 passed, 0 warning(s), 0 failed, 0 skipped: OK")
    assert json.loads(json.dumps(report.to_dict()))["catalog_access"]["status"] == "protected"


def test_compressed_responses_are_read_like_fetch_reads_them(live_server):
    app = create_shop_app()
    app.wsgi_app = gzip_responses(app.wsgi_app)  # type: ignore[method-assign]
    report = run_doctor(live_server(app), STRONG_SECRET, subject="t1:u1")
    assert report.ok and set(statuses(report).values()) == {"pass"}, report.render()
    size = len(catalog_of(state_of(app)).served_bytes)
    assert f"JSON object, {size} bytes" in report.check("catalog.body").summary


def test_anonymous_call_to_a_subject_tool_still_proves_the_signature_path(shop):
    report = run_doctor(shop(), STRONG_SECRET)
    check = report.check("tool_call")
    assert check.status == "pass"
    assert "403 subject_required" in check.summary and "--subject" in check.summary


# --- (b) a proxy that strips /api ----------------------------------------------------------------


def test_prefix_stripping_proxy_is_named(shop, live_server):
    upstream = shop()
    proxy = live_server(ForwardingProxy(upstream, strip_prefix("/api")))
    report = run_doctor(proxy + "/api", STRONG_SECRET, subject="t1:u1")
    assert not report.ok
    access = report.check("catalog.access")
    assert access.status == "fail"
    assert access.summary.startswith("inconclusive: signed 401 (bad_signature)")
    assert report.catalog_access.status == "inconclusive"
    assert report.catalog_access.primary_reason == "bad_signature"
    assert "strips the prefix '/api'" in access.detail
    assert "'/.well-known/bailing/tools.json' instead of '/api/.well-known/bailing/tools.json'" in access.detail
    assert "BAILING_PUBLIC_PREFIX = '/api'" in access.fix
    # the doctor looked past it: tool calls and the probe sign without the prefix and work
    assert report.check("catalog.body").detail.startswith("the catalog below was read with a corrected")
    assert statuses(report)["authz_probe"] == "pass"
    assert statuses(report)["tool_call"] == "pass"


def test_prefix_stripping_proxy_with_public_prefix_configured_is_healthy(shop, live_server):
    upstream = shop(BAILING_PUBLIC_PREFIX="/api")
    proxy = live_server(ForwardingProxy(upstream, strip_prefix("/api")))
    report = run_doctor(proxy + "/api", STRONG_SECRET, subject="t1:u1")
    assert report.ok, report.render()
    assert set(statuses(report).values()) == {"pass"}


def test_base_url_without_the_prefix_answers_404(shop, live_server):
    upstream = shop(BAILING_PUBLIC_PREFIX="/api")
    proxy = live_server(ForwardingProxy(upstream, strip_prefix("/api")))
    report = run_doctor(proxy, STRONG_SECRET, catalog_url=proxy + "/api" + WELL_KNOWN, subject="t1:u1")
    assert report.catalog_access.status == "protected"
    tool = report.check("tool_call")
    assert tool.status == "fail" and "answers 404" in tool.summary
    assert f"Try base_url {proxy}/api" in tool.fix
    probe = report.check("authz_probe")
    assert probe.status == "fail" and "HTTP 404" in probe.summary
    assert f"Try base_url {proxy}/api" in probe.fix


def test_server_that_signs_the_base_url_prefix_into_tool_calls(live_server):
    base = live_server(handmade_app("/api"))
    report = run_doctor(base + "/api", STRONG_SECRET, subject="t1:u1")
    assert report.catalog_access.status == "protected"  # the catalog signature covers the full path
    tool = report.check("tool_call")
    assert tool.status == "fail" and "401 (bad_signature)" in tool.summary
    assert "accepts the call signed for '/api/orders'" in tool.detail
    assert "WITHOUT the base_url prefix" in tool.detail
    # the fallback probe tool refuses the hub's signature too: a hollow "pass"
    assert report.authz_probe.status == "pass" and report.authz_probe.mode == "tool"
    assert "only because the signature was refused (bad_signature)" in report.check("authz_probe").summary


# --- (c) a cache in front of the catalog ---------------------------------------------------------


def test_caching_cdn_makes_the_catalog_public(shop, live_server):
    cdn = live_server(CachingProxy(shop()))
    report = run_doctor(cdn, STRONG_SECRET, subject="t1:u1")
    assert not report.ok
    access = report.catalog_access
    assert (access.status, access.signed_http, access.unsigned_http, access.invalid_http) == (
        "public", 200, 200, 200)
    check = report.check("catalog.access")
    assert check.status == "fail"
    assert "A cache between the hub and the app" in check.detail
    assert "x-cache: HIT" in check.detail
    assert "fresh query string" in check.detail  # the origin itself refuses (confirmed)
    caching = report.check("catalog.caching")
    assert caching.status == "fail" and "x-cache: HIT" in caching.summary

    # next run: the signed fetch itself is answered from the cache
    again = run_doctor(cdn, STRONG_SECRET, subject="t1:u1")
    assert "x-cache: HIT" in again.check("catalog.caching").summary
    assert again.check("catalog.caching").status == "fail"


def test_catalog_without_cache_control_is_a_warning(live_server):
    app = create_shop_app()
    app.wsgi_app = drop_response_header(app.wsgi_app, "Cache-Control")  # type: ignore[method-assign]
    report = run_doctor(live_server(app), STRONG_SECRET, subject="t1:u1")
    caching = report.check("catalog.caching")
    assert caching.status == "warn" and "lacks Cache-Control private, no-store" in caching.summary
    assert report.ok


def test_origin_serving_the_catalog_unsigned(shop):
    base = shop(BAILING_PUBLIC_CATALOG=True)
    report = run_doctor(base, STRONG_SECRET, subject="t1:u1")
    assert report.catalog_access.status == "public"
    check = report.check("catalog.access")
    assert check.status == "fail" and "The origin itself serves the catalog" in check.detail
    assert "BAILING_PUBLIC_CATALOG" in check.fix
    # the same deployment registered with the public_allowed policy is fine
    public = run_doctor(base, STRONG_SECRET, subject="t1:u1", policy="public_allowed")
    assert public.ok and public.catalog_access.status == "public"
    assert public.catalog_access.unsigned_http == 200 and public.catalog_access.signed_http is None


# --- (d) a login wall --------------------------------------------------------------------------


def test_login_redirect_on_unsigned_requests_is_inconclusive(live_server):
    app = create_shop_app()
    app.wsgi_app = login_redirect(app.wsgi_app)  # type: ignore[method-assign]
    base = live_server(app)
    report = run_doctor(base, STRONG_SECRET, subject="t1:u1")
    access = report.catalog_access
    assert (access.status, access.signed_http, access.unsigned_http, access.invalid_http) == (
        "inconclusive", 200, 302, 401)
    check = report.check("catalog.access")
    assert check.status == "fail"
    assert "Trap T21" in check.detail and "login redirect" in check.detail
    assert "Exempt /.well-known/bailing/tools.json from login redirects" in check.fix
    redirects = report.check("redirects")
    assert redirects.status == "fail" and "catalog_unsigned" in redirects.summary
    assert "302 /login?next=" in redirects.detail
    # the signed parts still work
    assert statuses(report)["tool_call"] == "pass" and statuses(report)["authz_probe"] == "pass"


# --- (e) wrong secret ----------------------------------------------------------------------------


def test_wrong_secret_is_explained(shop):
    report = run_doctor(shop(), "not-the-secret-0123456789abcdefghijklmnop")
    check = report.check("catalog.access")
    assert check.status == "fail"
    assert check.summary.startswith("inconclusive: signed 401 (bad_signature)")
    assert "the secret is the most likely cause" in check.detail
    assert "BAILING_SECRETS" in check.fix
    assert report.catalog_access.signed_http == 401
    for name in ("catalog.lint", "authz_probe", "tool_call"):
        assert report.check(name).status == "skip"
    assert "FAIL  catalog.access" in report.render()


# --- (f) clock skew ----------------------------------------------------------------------------


def test_clock_outside_the_window(shop):
    report = run_doctor(shop(), STRONG_SECRET, subject="t1:u1", clock=lambda: time.time() + 400)
    check = report.check("catalog.access")
    assert check.status == "fail" and "(timestamp_out_of_window)" in check.summary
    assert "server's own clock" in check.detail
    assert "NTP" in check.fix
    clock = report.check("clock")
    assert clock.status == "fail" and "behind this machine" in clock.summary
    assert 395 <= int(clock.summary.split(" s ")[0].split()[-1]) <= 405
    # signed with the server's clock, the rest of the deployment is fine
    assert statuses(report)["tool_call"] == "pass"
    assert statuses(report)["authz_probe"] == "pass"


def test_small_clock_difference_is_a_warning(shop):
    report = run_doctor(shop(), STRONG_SECRET, subject="t1:u1", clock=lambda: time.time() - 30)
    assert report.check("clock").status == "warn"
    assert "ahead of this machine" in report.check("clock").summary
    assert report.ok
    assert report.catalog_access.status == "protected"


# --- (g) the authz probe -----------------------------------------------------------------------


def test_probe_answering_ok_true_is_suspect(live_server):
    app = create_shop_app()
    app.wsgi_app = generic_probe(app.wsgi_app, PROBE_PATH, {"ok": True})  # type: ignore[method-assign]
    report = run_doctor(live_server(app), STRONG_SECRET, subject="t1:u1")
    assert report.authz_probe.status == "suspect"
    check = report.check("authz_probe")
    assert check.status == "fail" and check.summary.startswith("hub status suspect")
    assert "T22" in check.detail and '{"authorized": false}' in check.fix
    assert report.check("authz_probe.verifies").status == "pass"  # it does verify, it just never denies
    assert not report.ok


def test_probe_that_does_not_verify_signatures(live_server):
    app = create_shop_app()
    app.wsgi_app = generic_probe(  # type: ignore[method-assign]
        app.wsgi_app, PROBE_PATH, {"authorized": False}, verify=False)
    report = run_doctor(live_server(app), STRONG_SECRET, subject="t1:u1")
    assert report.authz_probe.status == "pass"
    verifies = report.check("authz_probe.verifies")
    assert verifies.status == "fail" and "does not verify signatures" in verifies.summary


def test_nested_probe_answer_is_inconclusive(live_server):
    app = create_shop_app()
    app.wsgi_app = generic_probe(  # type: ignore[method-assign]
        app.wsgi_app, PROBE_PATH, {"data": {"authorized": False}})
    report = run_doctor(live_server(app), STRONG_SECRET)
    assert report.authz_probe.status == "inconclusive"
    assert report.check("authz_probe").status == "fail"


# --- redirects (T8) ------------------------------------------------------------------------------


def test_redirected_tool_is_a_failure(live_server):
    app = create_shop_app()
    app.wsgi_app = redirect_path(app.wsgi_app, "/me", "/me/")  # type: ignore[method-assign]
    report = run_doctor(live_server(app), STRONG_SECRET, subject="t1:u1")
    tool = report.check("tool_call")
    assert tool.status == "fail" and "was redirected (308 -> /me/)" in tool.summary
    assert "Trap T8" in tool.detail
    redirects = report.check("redirects")
    assert redirects.status == "fail" and "tool_call" in redirects.summary


def test_redirected_catalog_is_never_followed(live_server):
    app = create_shop_app()
    app.wsgi_app = redirect_path(  # type: ignore[method-assign]
        app.wsgi_app, WELL_KNOWN, "/static/tools.json", "301 Moved Permanently")
    report = run_doctor(live_server(app), STRONG_SECRET)
    access = report.catalog_access
    assert (access.status, access.signed_http) == ("inconclusive", 301)
    assert "never follows redirects" in report.check("catalog.access").summary
    assert report.check("catalog.body").status == "skip"
    assert report.check("redirects").status == "fail"


def test_unreachable_deployment(live_server):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    report = run_doctor(f"http://127.0.0.1:{port}", STRONG_SECRET, timeout=2)
    check = report.check("catalog.access")
    assert check.status == "fail" and "connection refused" in check.summary
    assert report.catalog_access.status == "inconclusive"


def test_bad_arguments():
    with pytest.raises(ValueError):
        run_doctor("ftp://example.com", STRONG_SECRET)
    with pytest.raises(ValueError):
        run_doctor("http://example.com", STRONG_SECRET, policy="legacy_unverified")  # type: ignore[arg-type]


# --- the hub's rules, as pure functions ------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "target"),
    [
        ("http://h/bailing/tools.json?v=1&x=a b&y=é", "/bailing/tools.json?v=1&x=a%20b&y=%C3%A9"),  # §4.3
        ("http://h/bailing/tools.json?", "/bailing/tools.json"),  # a bare '?' is dropped
        ("http://h/商品/list x", "/%E5%95%86%E5%93%81/list%20x"),  # T4
        ("http://h/files/..", "/"),
        ("http://h/a/./b/%2e%2E/c", "/a/c"),
        ("http://h", "/"),
    ],
)
def test_urls_are_parsed_like_whatwg(url, target):
    from bailing_flask.doctor import _parse_url

    assert _parse_url(url).target == target


@pytest.mark.parametrize(
    ("body", "decision"),
    [
        ('{"ok":true,"authorized":false}', False),
        ('{"ok":true}', True),
        ('{"allow":false,"ok":true}', False),
        ('{"data":{"authorized":false}}', None),
        ('{"authorized":0}', None),
        ("null", None),
        ("[true]", None),
        ("  ", None),
        ("<html>", None),
    ],
)
def test_probe_bodies_are_read_like_the_hub(body, decision):
    from bailing_flask.doctor import _boolean_decision

    assert _boolean_decision(body) is decision
