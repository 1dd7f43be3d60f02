"""Real PEP 3333 servers for the tests: wsgiref and waitress in threads, uWSGI in a subprocess.

``wsgi_server`` starts an in-process server: ``start(app, kind)`` with
``kind`` ``"wsgiref"``, ``"waitress"`` or ``"werkzeug"`` returns the base
URL; every server is stopped at the end of the test. ``uwsgi`` starts a
real uWSGI with ``--http-socket`` (and the ``Connection: close`` header
the deployment docs prescribe) on a WSGI module of this package.

wsgiref and waitress check what the application sends against PEP 3333
(they refuse hop-by-hop headers, for one), which Werkzeug, gunicorn and
uWSGI do not.
"""

from __future__ import annotations

import http.client
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest

__all__ = ["post_chunked_until_refused", "serving", "uwsgi_serving", "gunicorn_serving", "wsgi_server", "uwsgi", "uwsgi_executable"]

ROOT = Path(__file__).resolve().parent.parent


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


class _ThreadedWSGIServer(WSGIServer):
    daemon_threads = True


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: seconds a server may take to answer its first request: its workers import the app first, and
#: a busy machine makes that slow (the port accepts connections long before)
START_DEADLINE = 120.0


def answers_http(port: int, timeout: float) -> bool:
    """Whether the server on ``port`` answers an HTTP request (any status) within ``timeout``."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=max(timeout, 0.5))
    try:
        conn.request("GET", "/__the-test-server-is-up__")
        conn.getresponse().read()
        return True
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def _wait_for_port(port: int, proc: subprocess.Popen[bytes] | None, what: str,
                   log: Any = None) -> None:
    """Wait until the server answers HTTP: its port accepts, and a worker has loaded the app."""
    deadline = time.monotonic() + START_DEADLINE
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            if answers_http(port, deadline - time.monotonic()):
                return
            raise OSError("no answer yet")
        except OSError:
            if (proc is not None and proc.poll() is not None) or time.monotonic() > deadline:
                if log is not None:
                    log.seek(0)
                    output = log.read().decode(errors="replace")
                else:
                    output = proc.stdout.read().decode() if proc is not None and proc.stdout else ""
                raise AssertionError(f"{what} did not start: {output[-2000:]}")
            time.sleep(0.05)


@contextmanager
def serving(app: Any, kind: str) -> Iterator[str]:
    """Serve ``app`` with wsgiref, waitress or Werkzeug in a thread; yields the base URL."""
    if kind == "wsgiref":
        server = make_server("127.0.0.1", 0, app, server_class=_ThreadedWSGIServer,
                             handler_class=_QuietHandler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_port}"
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
    elif kind == "waitress":
        import waitress
        from waitress import wasyncore

        logging.getLogger("waitress").setLevel(logging.ERROR)
        channels: dict[int, Any] = {}
        served = waitress.create_server(app, map=channels, host="127.0.0.1", port=0, threads=2)
        stop = threading.Event()

        def loop() -> None:  # waitress's own run() cannot be stopped from another thread
            while not stop.is_set():
                wasyncore.loop(timeout=0.05, map=channels, count=1)
            wasyncore.close_all(channels)
            served.task_dispatcher.shutdown()

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{served.effective_port}"  # type: ignore[union-attr]
        finally:
            stop.set()
            thread.join(timeout=5)
    elif kind == "werkzeug":
        from werkzeug.serving import make_server as werkzeug_server

        wserver = werkzeug_server("127.0.0.1", 0, app, threaded=True)
        thread = threading.Thread(target=wserver.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{wserver.server_port}"
        finally:
            wserver.shutdown()
            thread.join(timeout=5)
    else:
        raise ValueError(f"unknown server kind {kind!r}")


@pytest.fixture
def wsgi_server() -> Iterator[Callable[[Any, str], str]]:
    """``start(app, kind) -> base_url`` for wsgiref, waitress or Werkzeug, on loopback."""
    with ExitStack() as stack:
        yield lambda app, kind: stack.enter_context(serving(app, kind))


def uwsgi_executable() -> str:
    """uWSGI from this virtualenv (the ``test`` extra installs it), else from PATH."""
    candidate = Path(sys.executable).parent / "uwsgi"
    found = str(candidate) if candidate.exists() else shutil.which("uwsgi")
    if found is None:
        pytest.fail("uWSGI was not found; the deployment docs prescribe a uWSGI configuration "
                    "that these tests check: pip install -e '.[test]' (it builds uWSGI)",
                    pytrace=False)
    return found


#: the servers running now, and what they print: shown with a test that fails while they run
_RUNNING: dict[int, tuple[str, subprocess.Popen[bytes], Any]] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed test shows what its servers printed, and whether one had stopped by itself.

    A server whose worker failed to boot stops whole and resets the
    connections it held: the test sees only "connection reset by peer".
    """
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if call.when != "call" or not report.failed:
        return
    for what, proc, log in list(_RUNNING.values()):
        log.seek(0)
        output = log.read().decode(errors="replace")[-4000:]
        state = "running" if proc.poll() is None else f"exited by itself with {proc.returncode}"
        report.sections.append((f"{what} (pid {proc.pid}, {state}) printed", output))


@contextmanager
def _subprocess(command: list[str], port: int, env: dict[str, str] | None, what: str,
                log_path: Path | None = None) -> Iterator[str]:
    environment = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    # a file, not a pipe nobody reads: a server that logs a lot would block once it is full
    log = open(log_path, "w+b") if log_path is not None else tempfile.TemporaryFile()  # noqa: SIM115
    proc = subprocess.Popen(command, env=environment, cwd=str(ROOT),
                            stdout=log, stderr=subprocess.STDOUT)
    _RUNNING[id(proc)] = (what, proc, log)
    try:
        _wait_for_port(port, proc, what, log)
        yield f"http://127.0.0.1:{port}"
    finally:
        del _RUNNING[id(proc)]
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        log.close()


def uwsgi_serving(module: str, env: dict[str, str] | None = None,
                  extra: tuple[str, ...] = ()) -> Any:
    """uWSGI ``--http-socket`` on ``module`` (whose ``application`` is the WSGI app).

    The documented ``--add-header "Connection: close"`` is always on.
    """
    port = _free_port()
    command = [
        uwsgi_executable(), "--http-socket", f"127.0.0.1:{port}", "--module", module,
        "--home", sys.prefix, "--need-app", "--master", "--processes", "1",
        "--die-on-term", "--disable-logging", "--add-header", "Connection: close", *extra,
    ]
    return _subprocess(command, port, env, "uWSGI")


def gunicorn_serving(app_spec: str, env: dict[str, str] | None = None, workers: int = 1,
                     log_path: Path | None = None) -> Any:
    """gunicorn on ``app_spec`` (e.g. ``"tests.apps.live_apps:middleware_app()"``).

    ``log_path``: keep what the server printed there (it is read after the block).
    """
    port = _free_port()
    # a worker that imports the app slowly on a busy machine is not one that hangs
    command = [sys.executable, "-m", "gunicorn", "-w", str(workers), "-b", f"127.0.0.1:{port}",
               "--graceful-timeout", "2", "--timeout", "120", app_spec]
    return _subprocess(command, port, env, "gunicorn", log_path)


@pytest.fixture
def uwsgi() -> Iterator[Callable[..., str]]:
    """``start(module, env={}, extra=()) -> base_url``: see :func:`uwsgi_serving`."""
    with ExitStack() as stack:
        yield lambda module, env=None, extra=(): stack.enter_context(
            uwsgi_serving(module, env, extra))


def post_chunked_until_refused(base: str, path: str, total: int, headers: str = "") -> bytes:
    """POST ``total`` bytes chunked, 1 MiB a chunk, until the server answers and closes.

    Returns what the server answered (``b""`` if it closed without a word).
    ``headers`` are extra raw header lines, each ending in CRLF.
    """
    host, port = base.split("//", 1)[1].split(":")
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n{headers}"
            "Transfer-Encoding: chunked\r\n\r\n".encode()
        )
        chunk = b"%x\r\n" % (1024 * 1024) + b"x" * (1024 * 1024) + b"\r\n"
        try:
            for _ in range(total // (1024 * 1024)):
                sock.sendall(chunk)
            sock.sendall(b"0\r\n\r\n")
        except OSError:  # the server answered and closed: that is the point
            pass
        try:
            return sock.recv(65536)
        except OSError:
            return b""
