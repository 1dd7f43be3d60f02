"""Permission faults of the SQLite store, for a process of their own.

:func:`main` runs them in a directory and returns what each step saw. The
test runs it in a child process that drops root first when the suite runs
as root (root ignores file modes, so a read-only file would not be
read-only to it).

Each call is sent from a new thread, as a threaded server would: connections
opened before a file became read-only keep the write access they were opened
with (a POSIX file descriptor does), so it is a new connection that meets
the fault.
"""

from __future__ import annotations

import io
import logging
import os
import threading
from typing import Any

from bailing_flask import Bailing
from bailing_flask.testing import HubSimulator

from .idem_app import create_app, side_effects
from bailing_flask._state import state_of
from bailing_flask._pipeline.idempotency import idempotency_of

SECRET = "s3cr3t-for-tests-0123456789abcdefghijklmnop"
#: an argument value that must never appear in a log line
MARKER_AMOUNT = 987654.321


def in_thread(hub: HubSimulator, order: int) -> dict[str, Any]:
    result: dict[str, Any] = {}

    def send() -> None:
        response = hub.call("refund_create", {"order_id": order, "amount": MARKER_AMOUNT},
                            subject="t1:u1")
        result.update(status=response.status, reason=(response.json() or {}).get("reason"),
                      traceback="Traceback" in response.body.decode("utf-8", "replace"))

    thread = threading.Thread(target=send)
    thread.start()
    thread.join()
    return result


def main(directory: str) -> dict[str, Any]:
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    logger = logging.getLogger("bailing_flask")
    logger.addHandler(handler)
    try:
        return _steps(directory, log)
    finally:
        logger.removeHandler(handler)


def _steps(directory: str, log: io.StringIO) -> dict[str, Any]:
    store = os.path.join(directory, "store", "bailing.sqlite3")
    business = os.path.join(directory, "business.sqlite3")
    app = create_app(BAILING_SECRETS=[SECRET], BAILING_STORE=f"sqlite:///{store}",
                     IDEM_DATABASE=business)
    hub = HubSimulator(app, SECRET)
    steps: dict[str, Any] = {"first": in_thread(hub, 1)}

    os.chmod(store, 0o444)
    steps["file_read_only"] = in_thread(hub, 2)
    steps["file_read_only_effects"] = side_effects(business)
    os.chmod(store, 0o644)
    steps["file_writable_again"] = in_thread(hub, 2)

    # the workers restart while the directory is read-only: no -wal can be created
    idempotency_of(state_of(app)).store().close()
    folder = os.path.dirname(store)
    os.chmod(folder, 0o555)
    steps["directory_read_only"] = in_thread(hub, 3)
    steps["directory_read_only_effects"] = side_effects(business)
    os.chmod(folder, 0o755)
    steps["directory_writable_again"] = in_thread(hub, 3)
    steps["effects"] = side_effects(business)
    steps["log"] = log.getvalue()
    return steps

