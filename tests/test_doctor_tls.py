"""``flask bailing doctor --cacert FILE``: a deployment whose certificate a public CA did not sign.

An internal CA or a self-signed certificate verifies against the CA file
given, and only against it; without it the doctor says the certificate
does not verify and how to pass the CA. Real HTTPS servers (Werkzeug's,
with a certificate openssl made for the test), no mocks.
"""

from __future__ import annotations

import pytest
from flask import Flask

from bailing_flask.doctor import CHECK_NAMES, run_doctor

from .apps.doctor_apps import create_shop_app
from .helpers import STRONG_SECRET, make_self_signed_certificate


@pytest.fixture(autouse=True)
def _no_certificate_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # the undocumented way round it before --cacert: not what these tests are about
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)


@pytest.fixture
def https_shop(live_server, self_signed_certificate) -> str:
    return str(live_server(create_shop_app(), tls=self_signed_certificate))


def doctor(app: Flask, *args: str):  # type: ignore[no-untyped-def]
    return app.test_cli_runner().invoke(args=["bailing", "doctor", *args])


def test_a_self_signed_certificate_verifies_against_the_cacert_given(https_shop, self_signed_certificate):
    result = doctor(create_shop_app(), "--url", https_shop, "--subject", "t1:u1",
                    "--cacert", self_signed_certificate[0])
    assert result.exit_code == 0, result.output
    assert "0 failed" in result.output


def test_every_check_passes_over_https_with_the_ca(https_shop, self_signed_certificate):
    report = run_doctor(https_shop, STRONG_SECRET, subject="t1:u1", cacert=self_signed_certificate[0])
    assert {c.name: c.status for c in report.checks} == {
        name: "pass" for name in CHECK_NAMES if name != "base_url"}, report.render()


def test_without_the_ca_the_doctor_says_the_certificate_does_not_verify_and_names_cacert(https_shop):
    result = doctor(create_shop_app(), "--url", https_shop)
    assert result.exit_code == 1
    assert "CERTIFICATE_VERIFY_FAILED" in result.output
    assert "pass --cacert with that CA's PEM file" in result.output


def test_another_ca_does_not_verify_it(https_shop, tmp_path):
    other, _ = make_self_signed_certificate(tmp_path)
    report = run_doctor(https_shop, STRONG_SECRET, cacert=other)
    assert report.check("catalog.access").status == "fail"
    assert "CERTIFICATE_VERIFY_FAILED" in report.check("catalog.access").summary


def test_a_cacert_that_is_missing_or_not_pem_is_a_usage_error(tmp_path):
    missing = doctor(create_shop_app(), "--url", "https://127.0.0.1:9", "--cacert", str(tmp_path / "ca.pem"))
    assert missing.exit_code == 2 and "no such file" in missing.output
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    junk = doctor(create_shop_app(), "--url", "https://127.0.0.1:9", "--cacert", str(tmp_path / "junk.pem"))
    assert junk.exit_code == 2 and "not a PEM file of CA certificates" in junk.output
