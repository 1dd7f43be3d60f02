"""Without redis-server or PostgreSQL, their tests are skipped with one line; in CI they fail."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# as a machine without the packages: nothing on PATH, no /usr/lib/postgresql
CONFTEST = """
pytest_plugins = ["tests._installed", "tests._redis", "tests._postgres"]

import tests._postgres

tests._postgres.find_binaries = lambda: None
"""

SUITE = """
def test_shared_redis(redis_server):
    assert redis_server.port

def test_own_redis(redis_server_factory):
    assert redis_server_factory().port

def test_postgres(postgres_database):
    assert postgres_database.url

def test_needs_no_server():
    assert True
"""


@pytest.fixture
def machine_without_servers(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("PATH", str(pytester.path / "empty-bin"))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    for name in ("CI", "BAILING_REQUIRE_SERVERS", "BAILING_REQUIRE_POSTGRES"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(SUITE)
    return pytester


def test_the_tests_needing_a_missing_server_are_skipped_with_one_line(
    machine_without_servers: pytest.Pytester,
) -> None:
    result = machine_without_servers.runpytest_subprocess("-p", "no:cacheprovider", "-ra")
    result.assert_outcomes(passed=1, skipped=3)
    skipped = [line for line in result.outlines if line.startswith("SKIPPED")]
    assert len(skipped) == 1, skipped
    assert "[3]" in skipped[0]
    assert "redis-server, postgresql" in skipped[0] and "bash scripts/test.sh" in skipped[0]


def test_in_ci_a_missing_server_fails_its_tests(
    machine_without_servers: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    result = machine_without_servers.runpytest_subprocess("-p", "no:cacheprovider", "-ra")
    result.assert_outcomes(passed=1, errors=3)
    result.stdout.fnmatch_lines(["*redis-server*install Debian's redis-server*",
                                 "*postgresql*install Debian's postgresql*"], consecutive=False)
