"""``flask bailing doctor``: look at a live deployment the way BailingHub does.

The doctor sends the hub's own requests to a running deployment (over the
network, through every proxy, CDN and gateway in front of the app) and
says what the hub would conclude, why, and how to fix it:

* with the base URL the app's catalog paths are relative to (its
  ``BAILING_BASE_URL``, as ``flask bailing doctor`` passes it), that the
  hub's ``base_url`` has the same path, and which one to register;
* the catalog fetch of the ``signed_required`` policy: a signed
  ``GET spec_url`` that never follows redirects, then, after a 2xx, two
  concurrent negative probes (unsigned; same timestamp with
  ``sha256=`` + 64 zeros), classified exactly like the hub
  (``protected`` / ``public`` / ``inconclusive``);
* the catalog response itself (``Cache-Control: private, no-store``, caches
  that hand the signed copy to anyone, content type, 5 MiB, JSON object)
  and the lint of what is actually served;
* the authorization probe, with the hub's target choice and
  classification, plus two stricter checks the hub does not make (a
  ``pass`` that only means "the signature was refused", and an endpoint
  that answers an invalid signature);
* the clock difference visible in the ``Date`` header (the hub refuses
  signatures 300 s or more apart);
* one signed call to a parameter-less read tool, as the hub sends it,
  with redirects followed like the hub's ``fetch`` does, so a redirect or
  a ``404`` (``base_url`` prefix) shows up;
* to every POST/PUT/PATCH/DELETE tool, the hub's request as the probe
  subject with an undeclared argument (the gate refuses it before
  authorization), so a CSRF check, a session guard or a login redirect in
  front of the write tools shows up too;
* every redirect seen on the way (the hub re-sends the signature for the
  new path, which cannot verify: trap T8 of :doc:`/security`).

When a signature is refused, the doctor tries a few corrected signatures
(another path prefix, the server's own clock) to name the cause instead of
listing every possibility. These diagnostic requests are marked as such;
the hub itself never sends them.

Every check, the hub functions it reproduces and the meaning of each
outcome are listed in :data:`bailing_flask.doctor.codes.CHECKS`. The parts:
:mod:`~bailing_flask.doctor.transport` (HTTP as Node's ``fetch`` does it),
:mod:`~bailing_flask.doctor.classify` (the hub's verdicts, pure),
``catalog_checks`` and ``call_checks`` (the checks),
:mod:`~bailing_flask.doctor.diagnose` (the 401 diagnosis) and
:mod:`~bailing_flask.doctor.report` (the result and its rendering).

Usage::

    report = run_doctor("https://shop.example.com/openapi", secret)
    print(report.render())
    sys.exit(0 if report.ok else 1)
"""

from __future__ import annotations

import time
from collections.abc import Callable

from bailing_flask.doctor.call_checks import _CallChecks
from bailing_flask.doctor.catalog_checks import _CatalogChecks
from bailing_flask.doctor.classify import _boolean_decision as _boolean_decision
from bailing_flask.doctor.codes import CHECKS
from bailing_flask.doctor.constants import CLOCK_TOLERANCE as CLOCK_TOLERANCE
from bailing_flask.doctor.constants import PROBE_BODY as PROBE_BODY
from bailing_flask.doctor.constants import PROBE_SUBJECT as PROBE_SUBJECT
from bailing_flask.doctor.constants import SPEC_MAX_BYTES as SPEC_MAX_BYTES
from bailing_flask.doctor.constants import WELL_KNOWN_CATALOG as WELL_KNOWN_CATALOG
from bailing_flask.doctor.constants import WINDOW_SECONDS as WINDOW_SECONDS
from bailing_flask.doctor.constants import ZERO_SIGNATURE as ZERO_SIGNATURE
from bailing_flask.doctor.report import CatalogAccess, Check, DoctorReport, ProbeOutcome
from bailing_flask.doctor.report import CheckStatus as CheckStatus
from bailing_flask.doctor.report import Policy as Policy
from bailing_flask.doctor.transport import _parse_url, tls_context

__all__ = [
    "CHECK_NAMES",
    "CatalogAccess",
    "Check",
    "DoctorReport",
    "ProbeOutcome",
    "run_doctor",
]

#: Every check, in report order (see :data:`bailing_flask.doctor.codes.CHECKS`; ``base_url``
#: only runs when the app's own base URL is known).
CHECK_NAMES: tuple[str, ...] = tuple(check.name for check in CHECKS)


class _Doctor(_CatalogChecks, _CallChecks):
    """Runs every check in report order."""

    # -- run -----------------------------------------------------------------------------------

    def run(self) -> DoctorReport:
        self.base_url_check()
        primary = self.catalog_access()
        self.catalog_caching(primary)
        self.catalog_body(primary)
        self.catalog_lint()
        self.authz_probe()
        self.tool_call()
        self.write_tools()
        self.clock_check()
        self.redirects()
        checks = tuple(self.state.checks[name] for name in CHECK_NAMES if name in self.state.checks)
        return DoctorReport(
            checks=checks,
            base_url=self.base_url,
            catalog_url=self.catalog.href,
            policy=self.policy,
            catalog_access=self.state.access,
            authz_probe=self.state.probe,
            base_url_to_register=self.expected_base_url,
            base_url_source=self.expected_source if self.expected_base_url else None,
        )


def run_doctor(
    base_url: str,
    secret: str,
    *,
    catalog_url: str | None = None,
    subject: str | None = None,
    timeout: float = 10.0,
    clock: Callable[[], float] = time.time,
    policy: Policy = "signed_required",
    expected_base_url: str | None = None,
    expected_source: str | None = None,
    write_tools: bool = True,
    cacert: str | None = None,
) -> DoctorReport:
    """Examine a live deployment the way BailingHub would, and report.

    :param base_url: the tool source's ``base_url`` in the hub (may contain a
        path prefix such as ``https://shop.example.com/openapi``).
    :param secret: the tool source's provider secret.
    :param catalog_url: the hub's ``spec_url``; defaults to
        ``base_url + /.well-known/bailing/tools.json``.
    :param subject: call the read tool as this subject (default: anonymous).
    :param timeout: seconds per request (the hub uses 10; the probe at most 8).
    :param clock: current Unix time of this machine (injectable for tests).
    :param policy: the tool source's ``spec_access_policy``.
    :param expected_base_url: the base URL the app's catalog paths are
        relative to (its ``BAILING_BASE_URL``, as ``flask bailing doctor``
        passes it); printed as the one to register, and checked against
        ``base_url`` (check ``base_url``).
    :param expected_source: where ``expected_base_url`` comes from, for the
        report (default ``"BAILING_BASE_URL"``).
    :param write_tools: ``False`` sends nothing to write tools (the
        ``write_tools`` check is skipped).
    :param cacert: a PEM file of the CA certificates to verify an ``https``
        server against instead of the system's (a self-signed or internal
        CA that the hub is told to trust).

    Sends GET requests, the hub's POST authorization probe, and to each
    POST/PUT/PATCH/DELETE tool the hub's request as the probe subject with
    an undeclared argument, which the gate refuses before authorization
    (only once the probe showed that subject is denied): no side effect runs
    behind bailing_flask's gate.
    """
    if policy not in ("signed_required", "public_allowed"):
        raise ValueError("policy must be 'signed_required' or 'public_allowed'")
    _parse_url(base_url)  # ValueError early for a malformed base_url
    if catalog_url:
        _parse_url(catalog_url)
    if expected_base_url:
        _parse_url(expected_base_url)
    doctor = _Doctor(base_url, secret, catalog_url=catalog_url, subject=subject, timeout=timeout,
                     clock=clock, policy=policy, expected_base_url=expected_base_url,
                     expected_source=expected_source, tls=tls_context(cacert))
    doctor.send_writes = write_tools
    return doctor.run()
