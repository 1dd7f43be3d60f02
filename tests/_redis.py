"""Real ``redis-server`` processes for the tests, started and stopped by fixtures.

Import the fixtures into a test module (``from ._redis import redis_server,
redis_server_factory``) or list this module in ``pytest_plugins``.

* ``redis_server`` (session scope): one shared server; tests keep apart by
  using their own key prefix. Never stop it from a test.
* ``redis_server_factory`` (function scope): ``start()`` returns a dedicated
  :class:`RedisServer` the test may ``stop()``, ``restart()`` (same port),
  ``pause()`` and ``resume()``; all of them are stopped after the test.

Servers listen on a free loopback port, keep nothing on disk (``--save ""
--appendonly no``, unless ``start("--appendonly", "yes")`` asks otherwise)
and work in a temporary directory, which a restart keeps. They run as the
user running the tests. Without ``redis-server`` the tests that need it
are skipped with one line in the summary, and fail in CI
(``tests/_installed.py``): the Redis store must not ship untested.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ._installed import require

__all__ = ["RedisServer", "redis_server", "redis_server_factory"]

_START_TIMEOUT = 10.0


def _redis_server_executable() -> str:
    require("redis-server")
    executable = shutil.which("redis-server")
    assert executable is not None
    return executable


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One ``redis-server`` process on a fixed loopback port."""

    def __init__(self, executable: str, directory: Path, port: int | None = None,
                 args: tuple[str, ...] = ()) -> None:
        self.executable = executable
        self.directory = directory
        self.port = port or _free_port()
        #: extra command-line options (they override the defaults above)
        self.args = tuple(args)
        self.log = directory / "redis.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> RedisServer:
        """Start the server and wait until it answers PING."""
        if self.running:
            return self
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as log:
            self._process = subprocess.Popen(
                [
                    self.executable,
                    "--port", str(self.port),
                    "--bind", "127.0.0.1",
                    "--save", "",
                    "--appendonly", "no",
                    "--dir", str(self.directory),
                    "--daemonize", "no",
                    *self.args,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + _START_TIMEOUT
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                break
            if _answers_ping(self.port):
                return self
            time.sleep(0.02)
        self.stop()
        tail = self.log.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"redis-server did not start on port {self.port}:\n{tail}")

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL); its data is gone."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        if os.name == "posix":
            os.kill(process.pid, signal.SIGCONT)  # in case it was paused
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)

    def kill(self) -> None:
        """Crash the server (SIGKILL): no final save, no AOF flush."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.kill()
        process.wait(timeout=5)

    def restart(self) -> RedisServer:
        """Stop and start again on the same port, like an operator's restart."""
        self.stop()
        return self.start()

    def pause(self) -> None:
        """Freeze the process (SIGSTOP): connections open, nothing answers."""
        assert self._process is not None
        os.kill(self._process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self._process is not None
        os.kill(self._process.pid, signal.SIGCONT)


def _start_on_a_free_port(executable: str, directory: Path,
                          args: tuple[str, ...] = ()) -> RedisServer:
    """Start a server, trying another port if the chosen one was taken meanwhile."""
    for attempt in range(3):
        server = RedisServer(executable, directory, args=args)
        try:
            return server.start()
        except RuntimeError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server shared by the whole session; do not stop it from a test."""
    server = _start_on_a_free_port(
        _redis_server_executable(), tmp_path_factory.mktemp("redis-shared")
    )
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_server_factory(tmp_path: Path) -> Iterator[Callable[..., RedisServer]]:
    """Start dedicated servers that the test may stop, restart or pause.

    ``start(*args)`` passes extra options to ``redis-server``, e.g.
    ``start("--appendonly", "yes")`` for a server that persists.
    """
    executable = _redis_server_executable()
    servers: list[RedisServer] = []

    def start(*args: str) -> RedisServer:
        server = _start_on_a_free_port(executable, tmp_path / f"redis-{len(servers)}", args)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
