"""A throwaway PostgreSQL server for the tests, started and stopped by fixtures.

* ``postgres_server`` (session scope): one cluster in a temporary directory
  (``initdb``, then ``pg_ctl start`` on a free loopback port; as the
  ``postgres`` user when the tests run as root), stopped at the end.
* ``postgres_database`` (function scope): a fresh database of that server
  for one test, dropped afterwards: ``.conninfo`` (libpq) and ``.url``
  (SQLAlchemy with psycopg 3).

The server binaries come from Debian's ``postgresql`` package (found on
``PATH`` or under ``/usr/lib/postgresql/*/bin``) and the driver from the
``psycopg`` package of the test extra. When either is missing the tests
**fail** in CI (``CI`` set: ``.ci/run`` installs both, so a missing server
means a broken set-up, not a reason to pass) and are skipped elsewhere,
with one line in the summary (``tests/_installed.py``). The cluster trades
durability for speed (``fsync=off``): the tests kill clients, never the
server.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ._installed import require

__all__ = ["PostgresServer", "PostgresDatabase", "postgres_server", "postgres_database",
           "find_binaries", "start_server"]


def _unavailable(why: str) -> None:
    """Fail (in CI) or skip: PostgreSQL cannot be started here (see ``tests/_installed.py``)."""
    from ._installed import required

    message = (f"{why}; the PostgreSQL tests need Debian's postgresql package and the psycopg "
               "driver (apt-get install -y postgresql; pip install -e '.[test]')")
    if required():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def find_binaries() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``, or ``None``."""
    initdb = shutil.which("initdb")
    if initdb and shutil.which("pg_ctl", path=str(Path(initdb).resolve().parent)):
        return Path(initdb).resolve().parent
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(candidate, "pg_ctl")):
            return Path(candidate)
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PostgresServer:
    bindir: Path
    directory: Path
    port: int
    user: str | None  # the OS user the server runs as (None: this one)

    def conninfo(self, dbname: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={dbname} connect_timeout=10"

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{dbname}"

    def _run(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        extra: dict[str, Any] = {"user": self.user, "group": self.user} if self.user else {}
        return subprocess.run(list(args), capture_output=True, text=True, timeout=120, cwd="/",
                              **extra, **kwargs)

    def stop(self) -> None:
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.directory / "data"), "-m", "immediate",
                  "-w", "stop")


def start_server(directory: Path, *, durable: bool = False) -> PostgresServer:
    """initdb + start a cluster in ``directory`` (raises ``RuntimeError`` when that fails)."""
    bindir = find_binaries()
    if bindir is None:
        raise RuntimeError("initdb/pg_ctl not found (PATH, /usr/lib/postgresql/*/bin)")
    user = None
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        user = "postgres"
        shutil.chown(directory, user=user, group=user)
    server = PostgresServer(bindir, directory, _free_port(), user)
    done = server._run(str(bindir / "initdb"), "-D", str(directory / "data"), "-A", "trust", "-U",
                       "postgres", "-E", "UTF8", "--locale=C", "--no-sync")
    if done.returncode != 0:
        raise RuntimeError(f"initdb failed: {done.stderr[-2000:]}")
    options = (f"-p {server.port} -k {directory} -c listen_addresses=127.0.0.1 "
               "-c max_connections=60 -c shared_buffers=16MB")
    if not durable:
        options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    for attempt in range(3):
        done = server._run(str(bindir / "pg_ctl"), "-D", str(directory / "data"), "-l",
                           str(directory / "server.log"), "-o", options, "-w", "-t", "60", "start")
        if done.returncode == 0:
            return server
        server.port = _free_port()  # taken meanwhile: try another
        options = options.replace(options.split()[1], str(server.port), 1)
    log = (directory / "server.log").read_text(errors="replace")[-2000:]
    raise RuntimeError(f"PostgreSQL did not start: {done.stderr[-1000:]}\n{log}")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    require("postgresql")
    directory = Path(tempfile.mkdtemp(prefix="bailing-pg-"))
    os.chmod(directory, 0o755)
    try:
        server = start_server(directory)
    except RuntimeError as exc:
        shutil.rmtree(directory, ignore_errors=True)
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)


@dataclass
class PostgresDatabase:
    server: PostgresServer
    name: str

    @property
    def conninfo(self) -> str:
        return self.server.conninfo(self.name)

    @property
    def url(self) -> str:
        return self.server.url(self.name)


@pytest.fixture
def postgres_database(postgres_server: PostgresServer) -> Iterator[PostgresDatabase]:
    import psycopg

    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(postgres_server.conninfo(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield PostgresDatabase(postgres_server, name)
    finally:
        deadline = time.monotonic() + 10
        while True:
            try:
                with psycopg.connect(postgres_server.conninfo(), autocommit=True) as conn:
                    conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
                break
            except psycopg.Error:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.2)
