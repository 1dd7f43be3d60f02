"""One doctor run: the deployment's URLs, the secret, the transport, and what was found so far."""

from __future__ import annotations

import math
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bailing_flask.doctor.constants import WELL_KNOWN_CATALOG
from bailing_flask.doctor.report import CatalogAccess, Check, Policy, ProbeOutcome
from bailing_flask.doctor.transport import _Exchange, _parse_url, _Transport


@dataclass
class _State:
    checks: dict[str, Check] = field(default_factory=dict)
    document: dict[str, Any] | None = None
    #: the catalog came from a diagnostic variant, not from the hub's own request
    document_from_variant: str | None = None
    access: CatalogAccess | None = None
    probe: ProbeOutcome | None = None


class _Session:
    """The state every check reads and writes."""

    def __init__(
        self,
        base_url: str,
        secret: str,
        *,
        catalog_url: str | None,
        subject: str | None,
        timeout: float,
        clock: Callable[[], float],
        policy: Policy,
        expected_base_url: str | None = None,
        expected_source: str | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.expected_base_url = expected_base_url.strip().rstrip("/") if expected_base_url else None
        self.expected_source = expected_source or "BAILING_BASE_URL"
        self.base_url = base_url.strip().rstrip("/")
        self.base = _parse_url(self.base_url or "/")
        self.base_prefix = self.base.target.split("?", 1)[0].rstrip("/")
        self.catalog_url = catalog_url.strip() if catalog_url else self.base_url + WELL_KNOWN_CATALOG
        self.catalog = _parse_url(self.catalog_url)
        self.secret = secret
        self.subject = subject or None
        self.policy = policy
        self.clock = clock
        #: send the write_tools check's requests (``run_doctor(write_tools=False)`` turns them off)
        self.send_writes = True
        #: added to the doctor's clock once a clock difference is confirmed
        self.offset = 0.0
        self.http = _Transport(timeout, clock, tls)
        self.timeout = timeout
        self.state = _State()
        #: the two negative catalog probes, once sent
        self.negatives: tuple[_Exchange, ...] = ()

    def now(self) -> str:
        return str(math.floor(self.clock() + self.offset))

    def add(self, check: Check) -> None:
        self.state.checks[check.name] = check

    def skip(self, name: str, why: str) -> None:
        self.add(Check(name, "skip", why))
