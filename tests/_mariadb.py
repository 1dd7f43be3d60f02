"""A throwaway MariaDB server for the tests, started and stopped by fixtures.

* ``mariadb_server`` (session scope): one server in a temporary directory
  (``mariadb-install-db``, then ``mariadbd`` on a free loopback port; as the
  ``mysql`` user when the tests run as root, as MariaDB refuses root), with a
  real account that logs in over TCP with a password, as an app does in
  production; stopped at the end.
* ``mariadb_database`` (function scope): a fresh database of that server for
  one test, dropped afterwards: ``.url`` (SQLAlchemy with PyMySQL).

The server comes from Debian's ``mariadb-server`` package and the driver from
the ``pymysql`` package of the test extra. When either is missing the tests
**fail** in CI (``CI`` or ``BAILING_REQUIRE_MARIADB`` set) and are skipped
elsewhere, with one line for every missing server (``tests/_installed.py``). The server trades
durability against a power cut for speed (the log is flushed to the OS at
each commit, not to the disk): a killed server keeps every committed write,
which is what the restart tests need.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ._installed import require

__all__ = ["MariaDBServer", "MariaDBDatabase", "mariadb_server", "mariadb_database",
           "find_binaries", "start_server"]

#: the account the tests' apps log in with (a password, over TCP, like production)
USER = "bailing"
PASSWORD = "s3cret-Passw0rd"


def find_binaries() -> tuple[Path, Path] | None:
    """``(mariadbd, mariadb-install-db)``, or ``None``."""
    server = shutil.which("mariadbd") or shutil.which("mariadbd", path="/usr/sbin:/usr/libexec")
    install = shutil.which("mariadb-install-db")
    if server and install:
        return Path(server), Path(install)
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class MariaDBServer:
    binary: Path
    directory: Path
    port: int
    user: str | None  # the OS user the server runs as (None: this one)
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def socket_path(self) -> str:
        return str(self.directory / "mariadb.sock")

    def url(self, dbname: str) -> str:
        return f"mysql+pymysql://{USER}:{PASSWORD}@127.0.0.1:{self.port}/{dbname}?charset=utf8mb4"

    def admin(self) -> Any:
        """A PyMySQL connection as the server's root, over its socket."""
        import pymysql

        return pymysql.connect(unix_socket=self.socket_path, user="root", autocommit=True)

    def _arguments(self) -> list[str]:
        data = self.directory / "data"
        arguments = [str(self.binary), "--no-defaults", f"--datadir={data}",
                     f"--socket={self.socket_path}", f"--port={self.port}",
                     "--bind-address=127.0.0.1", f"--pid-file={self.directory / 'mariadb.pid'}",
                     f"--log-error={self.directory / 'server.log'}", "--skip-name-resolve",
                     "--innodb-flush-log-at-trx-commit=2", "--innodb-buffer-pool-size=32M",
                     "--innodb-log-file-size=16M", "--max-connections=120",
                     "--character-set-server=utf8mb4", f"--tmpdir={self.directory / 'tmp'}"]
        if self.user:
            arguments.append(f"--user={self.user}")
        return arguments

    def start(self, timeout: float = 60.0) -> None:
        """Start (or restart) the server on its port and wait until it answers."""
        self.process = subprocess.Popen(self._arguments(), stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        cwd="/")
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"mariadbd exited with {self.process.returncode}:\n"
                                   + self.log()[-2000:])
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    pass
                self.admin().close()
                return
            except OSError:
                pass
            except Exception:  # pymysql's errors while it is still starting
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("mariadbd did not answer in time:\n" + self.log()[-2000:])
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL the server (committed writes survive: they are in the OS's cache)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(60)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()

    def log(self) -> str:
        try:
            return (self.directory / "server.log").read_text(errors="replace")
        except OSError:
            return ""


def start_server(directory: Path) -> MariaDBServer:
    """Install a data directory in ``directory`` and start a server on it, with the test account.

    Raises ``RuntimeError`` when that fails.
    """
    found = find_binaries()
    if found is None:
        raise RuntimeError("mariadbd/mariadb-install-db not found")
    binary, install = found
    user = None
    # its own temporary directory: the shared /tmp is emptied by other processes (seen once:
    # install-db's bootstrap lost a temporary table of its own there, and failed)
    (directory / "tmp").mkdir()
    if os.geteuid() == 0:  # MariaDB refuses to run as root
        user = "mysql"
        shutil.chown(directory, user=user, group=user)
        shutil.chown(directory / "tmp", user=user, group=user)
    arguments = [str(install), "--no-defaults", f"--datadir={directory / 'data'}",
                 f"--tmpdir={directory / 'tmp'}",
                 "--auth-root-authentication-method=normal", "--skip-test-db",
                 "--skip-name-resolve"]
    if user:
        arguments.append(f"--user={user}")
    done = subprocess.run(arguments, capture_output=True, text=True, timeout=300, cwd="/")
    if done.returncode != 0:
        raise RuntimeError(f"mariadb-install-db failed: {done.stderr[-2000:]}")
    server = MariaDBServer(binary, directory, _free_port(), user)
    for _attempt in range(3):
        try:
            server.start()
            break
        except RuntimeError:
            if "Address already in use" not in server.log():
                raise
            server.port = _free_port()  # taken meanwhile: try another
    else:  # pragma: no cover - three ports taken in a row
        raise RuntimeError("mariadbd found no free port")
    admin = server.admin()
    try:
        with admin.cursor() as cursor:
            cursor.execute(f"CREATE USER '{USER}'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'")
            cursor.execute(f"GRANT ALL PRIVILEGES ON `t\\_%`.* TO '{USER}'@'127.0.0.1'")
    finally:
        admin.close()
    return server


@pytest.fixture(scope="session")
def mariadb_server() -> Iterator[MariaDBServer]:
    require("mariadb")
    directory = Path(tempfile.mkdtemp(prefix="bailing-mariadb-"))
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
class MariaDBDatabase:
    server: MariaDBServer
    name: str

    @property
    def url(self) -> str:
        return self.server.url(self.name)


@pytest.fixture
def mariadb_database(mariadb_server: MariaDBServer) -> Iterator[MariaDBDatabase]:
    name = "t_" + uuid.uuid4().hex[:12]
    admin = mariadb_server.admin()
    try:
        with admin.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
    finally:
        admin.close()
    try:
        yield MariaDBDatabase(mariadb_server, name)
    finally:
        try:
            admin = mariadb_server.admin()
        except Exception:  # the server was stopped by the test and not restarted
            return
        try:
            with admin.cursor() as cursor:
                cursor.execute(f"DROP DATABASE IF EXISTS {name}")
        finally:
            admin.close()
