"""Several hosts on one SQL database: two gunicorn servers, duplicates, a database restart.

Real PostgreSQL and MariaDB servers of their own (durable: a commit is on
the disk, or for MariaDB in the OS, before it is answered), two gunicorn
servers with two workers each standing for two hosts, a view that takes a
little while so that calls overlap:

* the same signed call sent to both servers at once runs once; every other
  copy is answered from its record or refused as in progress; a hub callback
  delivered to both is handled once;
* the database stopped and started again under load: while it is down
  every side effect is refused with ``503 idempotency_store_unavailable``
  (never a 500, nothing run); once it is back the same workers serve again,
  and since the database kept every reservation and answer, nothing runs
  twice.

A worker SIGKILLed in the middle of a call is in ``test_faults_worker_kill.py``.
Bounds on durations only catch a hang, never a speed.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from bailing_flask.stores import SQLStore
from bailing_flask.testing import HubSimulator

from ._servers import gunicorn_serving
from .apps.idem_app import callbacks_handled, rows_by_order
from .helpers import STRONG_SECRET, sql_url
from .test_faults_redis import CLIENT_TOKEN, outage_phase

pytestmark = [pytest.mark.slow]


class _Postgres:
    """A durable PostgreSQL cluster of its own, stopped (immediately) and started again."""

    def __init__(self, directory: Path) -> None:
        from ._postgres import start_server

        self.server = start_server(directory, durable=True)
        self.url = self.server.url("postgres")

    def stop(self) -> None:
        self.server.stop()

    def start(self) -> None:
        server = self.server
        options = (f"-p {server.port} -k {server.directory} -c listen_addresses=127.0.0.1 "
                   "-c max_connections=60 -c shared_buffers=16MB")
        done = server._run(str(server.bindir / "pg_ctl"), "-D", str(server.directory / "data"),
                           "-l", str(server.directory / "server.log"), "-o", options, "-w", "-t",
                           "60", "start")
        assert done.returncode == 0, done.stderr

    def close(self) -> None:
        self.stop()


class _MariaDB:
    """A MariaDB server of its own, SIGKILLed and started again (its commits are kept)."""

    def __init__(self, directory: Path) -> None:
        from ._mariadb import start_server

        self.server = start_server(directory)
        admin = self.server.admin()
        with admin.cursor() as cursor:
            cursor.execute("CREATE DATABASE t_faults CHARACTER SET utf8mb4")
        admin.close()
        self.url = self.server.url("t_faults")

    def stop(self) -> None:
        self.server.kill()

    def start(self) -> None:
        self.server.start()

    def close(self) -> None:
        self.server.stop()


@pytest.fixture(params=["postgresql", "mariadb"])
def database(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A database server of this test's own, with the store's tables: ``.url``, ``stop()``,
    ``start()``."""
    request.getfixturevalue("postgres_server" if request.param == "postgresql"
                            else "mariadb_server")  # skips cleanly without the packages
    directory = Path(tempfile.mkdtemp(prefix="bailing-faults-sql-"))
    directory.chmod(0o755)
    server = (_Postgres if request.param == "postgresql" else _MariaDB)(directory)
    try:
        store = SQLStore(server.url)
        store.create_schema()
        store.close()
        yield server
    finally:
        server.close()
        shutil.rmtree(directory, ignore_errors=True)


def _env(url: str, business: str, **extra: str) -> dict[str, str]:
    return {"BAILING_TEST_SECRET": STRONG_SECRET, "BAILING_STORE": url,
            "IDEM_DATABASE": business, "IDEM_CLIENT_TOKEN": CLIENT_TOKEN, **extra}


@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])
def test_two_servers_sharing_the_database_run_a_duplicated_call_once(
        backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    url = sql_url(request, backend)
    SQLStore(url).create_schema()
    business = str(tmp_path / "business.sqlite3")
    env = _env(url, business, IDEM_DELAY="0.3")
    with ExitStack() as stack:
        hosts = [HubSimulator(stack.enter_context(gunicorn_serving(
            "tests.apps.idem_app:create_app()", env=env, workers=2)), STRONG_SECRET,
            client_token=CLIENT_TOKEN) for _ in range(2)]
        calls = [hosts[0].build_call("refund_create", {"order_id": order, "amount": 1},
                                     subject="t1:u1") for order in (1, 2, 3)]
        start = threading.Barrier(24)

        def send(index: int) -> Any:
            start.wait(60)
            return index % 3, hosts[index % 2].replay(calls[index % 3])

        with ThreadPoolExecutor(max_workers=24) as pool:
            answers = list(pool.map(send, range(24)))
        # every copy of a call, on either host, once the first has finished
        again = [(order, host.replay(call)) for order, call in enumerate(calls)
                 for host in hosts]
        job = {"job_id": "job-sql-1", "request_id": "req-sql-1",
               "updated_at": "2026-01-02T03:04:05.000Z"}
        delivered = [host.send_job_finished(**job) for host in hosts for _ in range(2)]
    assert rows_by_order(business) == {1: 1, 2: 1, 3: 1}  # each ran once, on one host
    for order in range(3):
        first = [r for o, r in answers if o == order and r.status == 201
                 and r.headers.get("Idempotent-Replayed") != "true"]
        assert len(first) == 1, order
        others = [r for o, r in answers if o == order and r not in first]
        for response in others:
            assert (response.status == 201 and response.headers.get("Idempotent-Replayed")
                    == "true") or (response.status == 409 and response.json()["reason"]
                                   == "idempotency_in_progress"), response.body
    assert all(r.status == 201 and r.headers.get("Idempotent-Replayed") == "true"
               for _, r in again)
    assert [r.status for r in delivered] == [200] * 4
    assert [r.json().get("duplicate", False) for r in delivered] == [False, True, True, True]
    assert callbacks_handled(business) == 1


def test_database_restart_under_load_refuses_cleanly_and_runs_nothing_twice(
        database: Any, tmp_path: Path) -> None:
    business = str(tmp_path / "business.sqlite3")
    env = _env(database.url, business, IDEM_DELAY="0.05")
    with gunicorn_serving("tests.apps.idem_app:create_app()", env=env, workers=2) as base:
        _, again, repeat_of_first, runs, refused = outage_phase(database, base, business,
                                                                first_order=1)
    # the database kept every reservation and answer: nothing ran twice
    assert max(runs.values()) == 1, {k: v for k, v in runs.items() if v > 1}
    assert repeat_of_first.status == 201 and repeat_of_first.replayed
    ran_afterwards = 0
    for order in refused:  # refused during the outage: nothing ran then
        answer = again[order]
        if answer.status == 201:  # run once afterwards
            assert runs[order] == 1
            ran_afterwards += 1
        else:
            # its reservation committed as the database went down, and the answer to it was
            # lost: the call is held (in progress, then uncertain), and it never ran
            assert (answer.status, answer.reason) == (409, "idempotency_in_progress")
            assert runs.get(order, 0) == 0
    assert ran_afterwards, "no call refused during the outage was served afterwards"
