"""The finding codes live in one table, and every finding is made from it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bailing_flask.lint import lint_document
from bailing_flask.lint.codes import CODES, HUB_COMMIT, Finding, finding

PACKAGE = Path(__file__).resolve().parent.parent / "bailing_flask"
#: a call that makes a finding: finding(...), self._report(...), self.add(...), _HubCrash(...)
_SITE = re.compile(r"""(?:\bfinding|\._report|\.add|_HubCrash)\(\s*f?"([a-z0-9_{}]+)"(?:,\s*([^,()]+))?(?:,\s*"([a-z]+)")?""")


#: a module that makes findings imports them from the table (``lint/`` itself: ``from .codes``)
_MAKES_FINDINGS = re.compile(r"^[ \t]*from (?:\.+|bailing_flask\.)(?:lint\.)?codes import .*\bfinding\b", re.MULTILINE)


def _sites() -> list[tuple[str, str | None]]:
    """(code pattern, variant) of every place in the package that makes a finding."""
    found: list[tuple[str, str | None]] = []
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if path.parent.name != "lint" and not _MAKES_FINDINGS.search(text):
            continue  # e.g. the exercise's report also has an add("...") method
        for match in _SITE.finditer(text):
            found.append((match.group(1), match.group(3)))
    return found


def _codes_of(pattern: str) -> list[str]:
    regex = re.compile("^" + re.sub(r"\\\{[a-z_]+\\\}", "[a-z_]+", re.escape(pattern)) + "$")
    return [code for code in CODES if regex.match(code)]


def test_every_code_the_package_reports_is_in_the_table() -> None:
    sites = _sites()
    assert len(sites) > 80
    for pattern, variant in sites:
        codes = _codes_of(pattern)
        assert codes, f"{pattern} is reported but not in bailing_flask.lint.codes.CODES"
        if variant is not None:
            for code in codes:
                assert variant in CODES[code].variants, (code, variant)


def test_every_code_and_variant_in_the_table_is_reported_somewhere() -> None:
    used = {code for pattern, _ in _sites() for code in _codes_of(pattern)}
    assert sorted(set(CODES) - used) == []
    variants = {(code, variant) for pattern, variant in _sites() for code in _codes_of(pattern)}
    for entry in CODES.values():
        for name in entry.variants:
            assert (entry.code, name) in variants, (entry.code, name)


@pytest.mark.parametrize("code", sorted(CODES))
def test_every_text_formats_with_its_own_fields(code: str) -> None:
    entry = CODES[code]
    for variant, text in entry.texts():
        fields = {name: f"<{name}>" for name in text.fields()}
        made = finding(code, "GET /x", variant, **fields)
        assert made == Finding(entry.severity, code, "GET /x", made.message, made.suggestion, entry.source)
        assert made.message
        if text.fix is None:
            assert made.suggestion is None


def test_the_table_says_what_each_code_mirrors() -> None:
    assert re.fullmatch(r"[0-9a-f]{40}", HUB_COMMIT)
    for entry in CODES.values():
        if entry.source == "hub":
            assert entry.mirrors is not None, f"{entry.code}: a hub diagnostic names the hub function"
        if entry.mirrors is not None:
            assert re.fullmatch(r"src/[a-z/-]+\.ts", entry.mirrors.file), entry.mirrors
            assert re.fullmatch(r"[A-Za-z]+", entry.mirrors.function), entry.mirrors
        assert entry.severity in ("error", "warning", "info")
        assert entry.stages and set(entry.stages) <= {"lint", "registry"}


def test_texts_stand_alone() -> None:
    for entry in CODES.values():
        for _, text in entry.texts():
            for part in (text.message, text.fix or ""):
                assert "CONTRACT" not in part and "DESIGN" not in part and "\u00a7" not in part
                assert not re.search(r"\bT\d+\b", part), (entry.code, part)


def test_a_finding_is_built_from_the_table() -> None:
    [only] = [f for f in lint_document({"openapi": "3.0.3", "paths": []}) if f.code == "no_tools"]
    entry = CODES["no_tools"]
    assert (only.severity, only.source) == (entry.severity, entry.source)
    assert only.message == entry.text.message
    assert only.suggestion == "Mark operations with x-agent-capability: {enabled: true, scope: ...} " \
        "and fix the errors reported."


def test_the_doctor_reports_exactly_the_checks_of_its_table() -> None:
    from typing import get_args

    from bailing_flask.doctor import CHECK_NAMES
    from bailing_flask.doctor.codes import ACCESS_VERDICTS, CHECKS, PROBE_VERDICTS, STATUSES
    from bailing_flask.doctor.report import AccessStatus, CheckStatus, ProbeStatus

    assert CHECK_NAMES == (
        "base_url", "catalog.access", "catalog.caching", "catalog.body", "catalog.lint",
        "authz_probe", "authz_probe.verifies", "clock", "tool_call", "write_tools", "redirects",
    )
    assert tuple(check.name for check in CHECKS) == CHECK_NAMES
    reported = set()
    for path in (PACKAGE / "doctor").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        reported |= set(re.findall(r'(?:Check\(|self\.skip\()\s*"([a-z_.]+)"', text))
    assert reported == set(CHECK_NAMES)
    assert [v.value for v in STATUSES] == list(get_args(CheckStatus))
    assert [v.value for v in ACCESS_VERDICTS] == list(get_args(AccessStatus))
    assert [v.value for v in PROBE_VERDICTS] == list(get_args(ProbeStatus))
    for check in CHECKS:
        for ref in check.mirrors:
            assert re.fullmatch(r"src/[a-z/-]+\.ts", ref.file) and ref.function.isidentifier()


def test_lint_and_doctor_cite_only_what_the_shipped_docs_define() -> None:
    security = (PACKAGE.parent / "docs" / "security.rst").read_text(encoding="utf-8")
    defined = set(re.findall(r"\*\*(T\d+(?:, T\d+)*)\*\*", security))
    traps = {t for group in defined for t in group.split(", ")}
    assert {"T3", "T4", "T5", "T8", "T21", "T22"} <= traps
    for folder in ("lint", "doctor"):
        for path in (PACKAGE / folder).glob("*.py"):
            text = path.read_text(encoding="utf-8")
            assert "CONTRACT.md" not in text and "DESIGN.md" not in text, path
            assert "\u00a7" not in text, path
            cited = set(re.findall(r"\bT\d+\b", text))
            assert cited <= traps, (path, cited - traps)
