"""The doctor's result types and the report as text."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any, Literal

CheckStatus = Literal["pass", "warn", "fail", "skip"]
Policy = Literal["signed_required", "public_allowed"]
#: the hub's conclusion about who can read the catalog
AccessStatus = Literal["protected", "public", "inconclusive"]
#: the hub's conclusion from its authorization probe
ProbeStatus = Literal["pass", "suspect", "inconclusive", "skipped"]


@dataclass(frozen=True)
class Check:
    """The outcome of one check."""

    name: str
    status: CheckStatus
    #: one line: what was observed and what it means for the hub
    summary: str
    #: the evidence (requests and answers, the likely cause)
    detail: str | None = None
    #: what to change
    fix: str | None = None


@dataclass(frozen=True)
class CatalogAccess:
    """The hub's ``spec_access_probe`` for this deployment: who can read the catalog.

    See :data:`bailing_flask.doctor.codes.ACCESS_VERDICTS` for the statuses.
    """

    status: AccessStatus
    signed_http: int | None = None
    unsigned_http: int | None = None
    invalid_http: int | None = None
    reason: str = ""
    #: the refusal reason of a non-2xx primary, read from its body (not used by the hub)
    primary_reason: str | None = None

    def evidence(self) -> str:
        parts = []
        for label, value in (("signed", self.signed_http), ("unsigned", self.unsigned_http),
                             ("bad signature", self.invalid_http)):
            if value is not None:
                parts.append(f"{label} {value}")
        return ", ".join(parts)


@dataclass(frozen=True)
class ProbeOutcome:
    """The hub's ``authz_probe`` result for this deployment.

    See :data:`bailing_flask.doctor.codes.PROBE_VERDICTS` for the statuses.
    """

    status: ProbeStatus
    http: int | None = None
    mode: Literal["dedicated", "tool"] | None = None
    tool: str | None = None
    requires_subject: bool | None = None
    reason: str = ""


@dataclass(frozen=True)
class DoctorReport:
    """Everything the doctor found; ``ok`` is ``False`` when any check failed."""

    checks: tuple[Check, ...]
    base_url: str = ""
    catalog_url: str = ""
    policy: str = "signed_required"
    catalog_access: CatalogAccess | None = None
    authz_probe: ProbeOutcome | None = None
    #: the base URL the app expects the hub to use, when known
    base_url_to_register: str | None = None
    #: where that came from (``BAILING_BASE_URL``, or where the catalog is served)
    base_url_source: str | None = None

    @property
    def ok(self) -> bool:
        return not any(check.status == "fail" for check in self.checks)

    def check(self, name: str) -> Check:
        """The check called ``name`` (``KeyError`` if it was not run)."""
        for check in self.checks:
            if check.name == name:
                return check
        raise KeyError(name)

    def counts(self) -> dict[str, int]:
        counts = {"pass": 0, "warn": 0, "fail": 0, "skip": 0}
        for check in self.checks:
            counts[check.status] += 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (for ``--json``)."""

        def plain(value: Any) -> Any:
            return None if value is None else dict(value.__dict__)

        return {
            "ok": self.ok,
            "base_url": self.base_url,
            "catalog_url": self.catalog_url,
            "policy": self.policy,
            "base_url_to_register": self.base_url_to_register,
            "base_url_source": self.base_url_source,
            "catalog_access": plain(self.catalog_access),
            "authz_probe": plain(self.authz_probe),
            "checks": [dict(check.__dict__) for check in self.checks],
        }

    def render(self, verbose: bool = False) -> str:
        """The report as text for a terminal (details of passing checks only if ``verbose``)."""
        lines = [f"bailing doctor  base_url {self.base_url}", f"                catalog  {self.catalog_url}"]
        if self.base_url_to_register:
            lines.append(f"                register base_url {self.base_url_to_register}"
                         f"  ({self.base_url_source})")
        if self.policy != "signed_required":
            lines.append(f"                policy   {self.policy}")
        lines.append("")
        width = max((len(check.name) for check in self.checks), default=0)
        indent = " " * (8 + width)

        def wrap(text: str, first: str = "", rest: str = "") -> list[str]:
            out: list[str] = []
            for number, paragraph in enumerate(text.splitlines() or [""]):
                out.extend(textwrap.wrap(
                    paragraph, width=max(len(indent) + 60, 110), break_long_words=False,
                    break_on_hyphens=False, initial_indent=first if number == 0 else rest,
                    subsequent_indent=rest,
                ) or [first if number == 0 else rest])
            return out

        for check in self.checks:
            head = f"{check.status.upper():4}  {check.name.ljust(width)}  "
            lines.extend(wrap(check.summary, head, indent + "  "))
            if check.detail and (verbose or check.status != "pass"):
                lines.extend(wrap(check.detail, indent, indent))
            if check.fix:
                lines.extend(wrap(check.fix, indent + "fix: ", indent + "     "))
        counts = self.counts()
        verdict = "OK" if self.ok else "NOT OK"
        lines.append("")
        lines.append(
            f"{counts['pass']} passed, {counts['warn']} warning(s), {counts['fail']} failed, "
            f"{counts['skip']} skipped: {verdict}"
        )
        return "\n".join(lines)
