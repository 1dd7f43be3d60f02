"""The embedded SQLite store under faults: locked, read-only, deleted while the app runs.

In every case a side effect is refused with ``503`` and does not run
(``idempotency_store_busy`` with ``Retry-After`` for a lock, else
``idempotency_store_unavailable``), a read is still answered,
and no log line carries the secret or an argument value. A lock or a
permission problem ends and the same app serves again; a deleted file is
refused for good (until the workers restart), because connections opened
before keep writing into the deleted file while a new one would start a
second, empty store under the same name.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile

import pytest

from bailing_flask.stores import SQLiteStore, StoreUnavailable, store_from_url
from bailing_flask.errors import ConfigurationError
from bailing_flask.testing import HubSimulator

from .helpers import STRONG_SECRET
from .apps.idem_app import create_app, side_effects
from .apps import sqlite_fault_scenarios
from .apps.sqlite_fault_scenarios import MARKER_AMOUNT


def refund(hub: HubSimulator, order: int):
    return hub.call("refund_create", {"order_id": order, "amount": MARKER_AMOUNT},
                    subject="t1:u1")


def assert_refused(response) -> None:
    assert response.status == 503, response.body[:300]
    assert response.json()["reason"] == "idempotency_store_unavailable"
    assert b"Traceback" not in response.body


def assert_clean_logs(text: str) -> None:
    assert STRONG_SECRET not in text
    assert str(MARKER_AMOUNT) not in text
    assert "Traceback" not in text


@pytest.fixture
def app(tmp_path):
    return create_app(BAILING_SECRETS=[STRONG_SECRET],
                      BAILING_STORE=f"sqlite:///{tmp_path / 'store.sqlite3'}?busy_timeout=0.3",
                      IDEM_DATABASE=str(tmp_path / "business.sqlite3"))


def test_sqlite_file_locked_by_another_process_refuses_side_effects_then_recovers(
    app, tmp_path, caplog
):
    hub = HubSimulator(app, STRONG_SECRET)
    assert refund(hub, 1).status == 201
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
         "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); sys.stdin.readline(); "
         "c.execute('COMMIT')", str(tmp_path / "store.sqlite3")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        with caplog.at_level(logging.INFO, logger="bailing_flask"):
            busy = refund(hub, 2)  # busy, not "in progress" nor broken: retry shortly
            assert (busy.status, busy.json()["reason"]) == (503, "idempotency_store_busy")
            assert busy.headers.get("Retry-After") == "2"
            assert hub.call("refund_count", subject="t1:u1").status == 200  # reads go on
        assert side_effects(app.config["IDEM_DATABASE"]) == 1
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=10)
    assert refund(hub, 2).status == 201  # the lock is gone: the same app serves again
    assert side_effects(app.config["IDEM_DATABASE"]) == 2
    assert any("database is locked" in r.getMessage() for r in caplog.records)
    assert_clean_logs(caplog.text)


def test_sqlite_file_deleted_while_running_refuses_instead_of_starting_a_second_store(
    app, tmp_path, caplog
):
    hub = HubSimulator(app, STRONG_SECRET)
    done = hub.build_call("refund_create", {"order_id": 1, "amount": MARKER_AMOUNT},
                          subject="t1:u1")
    assert hub.replay(done).status == 201
    for path in tmp_path.glob("store.sqlite3*"):
        path.unlink()
    with caplog.at_level(logging.ERROR, logger="bailing_flask"):
        assert_refused(refund(hub, 2))
        assert_refused(hub.replay(done))  # not run again: its record is out of reach
        assert_refused(refund(hub, 3))
    assert side_effects(app.config["IDEM_DATABASE"]) == 1
    deleted = [r for r in caplog.records if "was deleted while the app was running" in
               r.getMessage()]
    assert len(deleted) == 1 and str(tmp_path / "store.sqlite3") in deleted[0].getMessage()
    assert_clean_logs(caplog.text)
    # the workers restart: a new, empty store, and the app serves again
    restarted = create_app(**{key: app.config[key] for key in
                              ("BAILING_SECRETS", "BAILING_STORE", "IDEM_DATABASE")})
    assert refund(HubSimulator(restarted, STRONG_SECRET), 2).status == 201


def test_a_store_file_another_thread_creates_meanwhile_is_not_taken_for_a_deleted_one(
        tmp_path, monkeypatch):
    # the race seen in CI: a thread looks for the file before another thread's first connection
    # created it, then finds the -wal that connection made: the file is there by then
    from bailing_flask.stores import _sqlite_file

    path = tmp_path / "store.sqlite3"
    other = SQLiteStore(path)
    other.ping()  # the file, its -wal and -shm, as another thread's first use leaves them
    assert (tmp_path / "store.sqlite3-wal").exists()
    looks: list[str] = []
    real_identity = _sqlite_file.identity

    def identity_before_the_other_thread_created_it(name: str) -> tuple[int, int] | None:
        looks.append(name)
        return None if len(looks) == 1 else real_identity(name)

    guard = _sqlite_file.FileGuard(str(path))
    monkeypatch.setattr(_sqlite_file, "identity", identity_before_the_other_thread_created_it)
    guard.check()  # no refusal: the file exists when the -wal is seen
    assert len(looks) == 2
    other.close()


def test_sqlite_store_refuses_to_start_next_to_a_wal_left_by_a_deleted_file(tmp_path):
    path = tmp_path / "store.sqlite3"
    worker = SQLiteStore(path)  # another worker, still holding the file open
    worker.ping()
    path.unlink()  # the -wal and -shm stay: the other worker still uses them
    newcomer = SQLiteStore(path)
    with pytest.raises(StoreUnavailable, match="-wal/-shm files exist without the database"):
        newcomer.ping()
    assert not path.exists()  # nothing was created next to them
    with pytest.raises(StoreUnavailable, match="deleted or replaced"):
        worker.ping()
    worker.close()


def test_sqlite_file_replaced_while_running_is_refused(tmp_path):
    path = tmp_path / "store.sqlite3"
    store = SQLiteStore(path)
    store.ping()
    replacement = tmp_path / "restored.sqlite3"
    restored = SQLiteStore(replacement)
    restored.ping()
    restored.close()
    os.replace(replacement, path)
    with pytest.raises(StoreUnavailable, match="deleted or replaced"):
        store.ping()
    store.close()  # every connection of this process is gone: the file at the path is used
    store.ping()


def test_sqlite_url_sets_the_busy_timeout():
    assert store_from_url("sqlite:///x.db?busy_timeout=0.25").busy_timeout == 0.25  # type: ignore[attr-defined]
    for url in ("sqlite:///x.db?busy_timeout=soon", "sqlite:///x.db?mode=ro",
                "sqlite:///x.db?busy_timeout=0"):
        with pytest.raises(ConfigurationError):
            store_from_url(url)


def _run_unprivileged(directory: str) -> dict:
    """The scenarios in a forked child that runs as ``nobody`` when the suite runs as root.

    Root ignores file modes, so a read-only file would not be read-only to it.
    The interpreter may live where ``nobody`` cannot read (``/root``), so the
    child is forked from this process, after one run as root has imported
    everything the scenarios use.
    """
    if os.geteuid() != 0:
        return sqlite_fault_scenarios.main(directory)
    with tempfile.TemporaryDirectory() as warm_up:
        sqlite_fault_scenarios.main(warm_up)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop root, run, report, leave without cleanup
        code = 1
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            os.write(write, json.dumps(sqlite_fault_scenarios.main(directory)).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        output = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the unprivileged scenarios failed"
    return json.loads(output)


def test_sqlite_file_or_directory_made_read_only_refuses_then_recovers_without_read_only_wal_left():
    with tempfile.TemporaryDirectory() as directory:
        os.chmod(directory, 0o777)
        steps = _run_unprivileged(directory)
    assert steps["first"]["status"] == 201
    for fault in ("file_read_only", "directory_read_only"):
        assert steps[fault] == {"status": 503, "reason": "idempotency_store_unavailable",
                                "traceback": False}, (fault, steps)
        assert steps[f"{fault}_effects"] == (1 if fault == "file_read_only" else 2)
        assert steps[fault.replace("read_only", "writable_again")]["status"] == 201
    assert steps["effects"] == 3
    # the read-only file is refused before SQLite opens it read-only and leaves read-only
    # -wal and -shm files behind, which kept the store read-only after the file was fixed
    assert "bailing.sqlite3 is not writable by this process" in steps["log"]
    # the read-only directory: SQLite's own words, no -wal can be created
    assert "readonly database" in steps["log"] or "unable to open" in steps["log"]
    assert_clean_logs(steps["log"])


@pytest.fixture
def small_disk(tmp_path):
    """A 3 MiB file system of its own (tmpfs), to be filled; skipped where it cannot be mounted."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system to fill needs root (CI runs as root)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_sqlite_store_on_a_nearly_full_disk_keeps_its_log_small_and_keeps_serving(
        small_disk, tmp_path, caplog):
    """Its -wal file used to grow into the last free space (up to 200 commits between two
    checkpoints); then no commit succeeded, so no checkpoint ever ran, and every side effect was
    refused until someone freed space by hand. Below 64 MiB free it is now checkpointed and cut
    back every few commits, and a write refused for a full disk cuts it back at once."""
    store = small_disk / "store.sqlite3"
    app = create_app(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE=f"sqlite:///{store}",
                     IDEM_DATABASE=str(tmp_path / "business.sqlite3"))
    hub = HubSimulator(app, STRONG_SECRET)
    assert refund(hub, 1).status == 201
    free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
    with open(small_disk / "filler", "wb") as filler:  # nearly full: 1 MiB left
        filler.write(b"\0" * (free - 1024 * 1024))
    wal = store.with_name("store.sqlite3-wal")
    with caplog.at_level(logging.WARNING, logger="bailing_flask"):
        statuses, wal_sizes = [], []
        for order in range(2, 302):  # their records need far less than the space left
            statuses.append(refund(hub, order).status)
            wal_sizes.append(wal.stat().st_size if wal.exists() else 0)
    assert statuses == [201] * len(statuses), statuses  # the log never took the last space
    assert max(wal_sizes) < 512 * 1024
    assert side_effects(app.config["IDEM_DATABASE"]) == 1 + statuses.count(201)
    assert_clean_logs(caplog.text)
