"""Workers forked the way uWSGI forks them, each completing calls from several threads at once.

Run as a script: ``python -m tests.apps.raw_fork_deferred DB WORKERS THREADS``. It claims
``WORKERS x THREADS`` calls in the given SQLite file, then forks each worker with fork(2)
itself (through ctypes: no Python at-fork hooks run, as with uWSGI's default), whose threads
all call ``complete_deferred`` behind one barrier, count what the queue holds, and flush.
Prints one JSON line: what each worker's queue held, the calls left not completed, and the
workers that did not answer within the time limit.

The parent is single-threaded whenever it forks (the store that claimed is closed and the
workers' store has not been used yet), as a uWSGI master is: a fork(2) taken while another
thread waits for the GIL leaves the child's GIL unusable, whatever the package does.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import sys
import threading

from bailing_flask.stores._entries import EntryMeta, StoredResponse
from bailing_flask.stores.sqlite import SQLiteStore

OK = StoredResponse(200, (("Content-Type", "application/json"),), b"{}")
_ANSWER_WITHIN = 30.0


def _worker(store: SQLiteStore, keys: list[str], answer: int) -> None:
    queued = -1
    try:
        sys.setswitchinterval(1e-6)  # switch threads as often as possible
        barrier = threading.Barrier(len(keys))

        def complete(key: str) -> None:
            barrier.wait()
            store.complete_deferred(key, token="token-a", response=OK, retention_seconds=600.0)

        running = [threading.Thread(target=complete, args=(key,)) for key in keys]
        for thread in running:
            thread.start()
        for thread in running:
            thread.join()
        here = store._pending._here.get()
        queued = len(here.items) + sum(here.in_flight.values())
        store.flush()
    finally:
        os.write(answer, str(queued).encode())
        os._exit(0)


def main(path: str, workers: int, threads: int) -> None:
    keys = [[f"w{w}-t{t}" for t in range(threads)] for w in range(workers)]
    claimer = SQLiteStore(path)
    for key in (key for row in keys for key in row):
        assert claimer.claim(key, token="token-a", lease_seconds=600.0, retention_seconds=600.0,
                             meta=EntryMeta(tool="t", job_id="j")) is None
    claimer.close()
    store = SQLiteStore(path)  # not used in this process before the forks
    raw_fork = ctypes.PyDLL(None).fork
    queued: list[int] = []
    silent = 0
    for row in keys:
        read, write = os.pipe()
        pid = raw_fork()
        if pid == 0:
            os.close(read)
            _worker(store, row, write)
        os.close(write)
        if select.select([read], [], [], _ANSWER_WITHIN)[0]:
            queued.append(int(os.read(read, 20) or b"-1"))
            os.waitpid(pid, 0)
        else:
            silent += 1
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        os.close(read)
    checker = SQLiteStore(path)
    left = [key for row in keys for key in row
            if (entry := checker.get(key)) is None or entry.state != "completed"]
    checker.close()
    print(json.dumps({"queued": queued, "not_completed": len(left), "silent_workers": silent}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
