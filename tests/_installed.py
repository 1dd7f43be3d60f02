"""Whether the servers the tests start are installed; without one, its tests skip (or fail in CI).

The fixtures of ``tests/_redis.py``, ``tests/_postgres.py`` and ``tests/_mariadb.py`` start their own
servers, as the user running the tests, in temporary folders, on free
loopback ports; they call :func:`require` first. When a server is missing,
every test that needs it is skipped with the same message, and this module
(a pytest plugin, listed in ``tests/conftest.py``) reports those skips at
one place, so pytest's summary shows **one** line for all of them (naming
every missing server), not one per test. In CI (``CI`` set, as ``.ci/run``
does, or ``BAILING_REQUIRE_SERVERS``) a missing server is a broken set-up,
not a reason to pass: those tests fail instead.

Adding a server: one entry in :data:`SERVERS`, and its Debian package in
``scripts/test.sh``.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
from collections.abc import Callable, Iterator

import pytest

__all__ = ["SERVERS", "missing", "require", "required"]


def _redis() -> str | None:
    return None if shutil.which("redis-server") else "redis-server is not on PATH"


def _postgresql() -> str | None:
    from ._postgres import find_binaries

    if find_binaries() is None:
        return "initdb/pg_ctl are not on PATH nor in /usr/lib/postgresql/*/bin"
    if importlib.util.find_spec("psycopg") is None:
        return "the psycopg driver is not installed (pip install -e '.[test]')"
    return None


def _mariadb() -> str | None:
    from ._mariadb import find_binaries

    if find_binaries() is None:
        return "mariadbd/mariadb-install-db are not on PATH nor in /usr/sbin"
    if importlib.util.find_spec("pymysql") is None:
        return "the pymysql driver is not installed (pip install -e '.[test]')"
    return None


#: server -> (its Debian package, what is wrong when it cannot be started, or None)
SERVERS: dict[str, tuple[str, Callable[[], str | None]]] = {
    "redis-server": ("redis-server", _redis),
    "postgresql": ("postgresql", _postgresql),
    "mariadb": ("mariadb-server", _mariadb),
}


def required() -> bool:
    """CI must run every test: there a missing server fails its tests."""
    return bool(os.environ.get("CI") or os.environ.get("BAILING_REQUIRE_SERVERS")
                or os.environ.get("BAILING_REQUIRE_POSTGRES")
                or os.environ.get("BAILING_REQUIRE_MARIADB"))


@functools.lru_cache(maxsize=None)
def missing() -> dict[str, str]:
    """Each server that cannot be started here, with why (looked up once per session)."""
    found = {name: check() for name, (_, check) in SERVERS.items()}
    return {name: why for name, why in found.items() if why}


_SKIP_PREFIX = "the tests that start "


def require(server: str) -> None:
    """Skip (fail in CI) the calling test when ``server`` cannot be started here."""
    absent = missing()
    if server not in absent:
        return
    packages = " ".join(SERVERS[name][0] for name in absent)
    if required():
        pytest.fail(f"{server}: {absent[server]}; the tests need a real server: install Debian's "
                    f"{SERVERS[server][0]} (apt-get install -y {SERVERS[server][0]}, or run "
                    "bash scripts/test.sh as root)", pytrace=False)
    details = "; ".join(f"{name}: {why}" for name, why in absent.items())
    pytest.skip(f"{_SKIP_PREFIX}{', '.join(absent)} are skipped ({details}); as root, "
                f"bash scripts/test.sh installs them (apt-get install -y {packages}); with CI=true "
                "they fail instead")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Report the skips of :func:`require` at one place, so the summary folds them into one line."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    longrepr = report.longrepr
    if (report.skipped and isinstance(longrepr, tuple) and len(longrepr) == 3
            and str(longrepr[2]).startswith("Skipped: " + _SKIP_PREFIX)):
        report.longrepr = (__file__, _REQUIRE_LINE, longrepr[2])


_REQUIRE_LINE = require.__code__.co_firstlineno
