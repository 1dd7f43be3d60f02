"""Is the SQLite store's file still the one this process opened, and may it write it?

SQLite cannot cope with a database file deleted or replaced while it is in
use: connections opened before go on writing into the deleted file, while a
new one creates an empty file under the same name -- two stores, one of
which a repeat of a call would not see, and a ``-wal`` shared by both
(SQLite's documented way to corrupt a database). Nor should it open a file
it may not write: it would do so read-only, and create the ``-wal`` and
``-shm`` files with the file's read-only mode, which then keep the store
read-only after the file itself is writable again.

:class:`FileGuard` checks both; its failures are ``sqlite3.OperationalError``,
which the store turns into ``StoreUnavailable`` like any other.
"""

from __future__ import annotations

import logging
import os
import sqlite3

__all__ = ["FileGuard", "identity"]

logger = logging.getLogger("bailing_flask")


def identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path``, ``None`` if there is none."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


class FileGuard:
    """The identity of the store's file in this process, and the checks made with it."""

    def __init__(self, path: str) -> None:
        self.path = path
        #: (device, inode) of the file this process's connections use, once one is open
        self.file: tuple[int, int] | None = None
        self._logged = False

    def unchanged(self) -> bool:
        """The cheap check of every use: the path still leads to the opened file."""
        return self.file is not None and identity(self.path) == self.file

    def check(self) -> None:
        """Refuse when the file was deleted or replaced while in use (until :meth:`reset`)."""
        current = identity(self.path)
        if self.file is None:
            # the file is looked at again after its -wal/-shm: another thread or worker may
            # have created all three between the first look and those (SQLite writes the file
            # before its -wal); only a file still missing then was deleted
            if current is None and any(os.path.exists(self.path + tail)
                                       for tail in ("-wal", "-shm")) and identity(self.path) is None:
                raise sqlite3.OperationalError(
                    "its -wal/-shm files exist without the database file (deleted while in use "
                    "by another process?); refusing to start a new store next to them")
            return
        if current == self.file:
            return
        if not self._logged:
            self._logged = True
            logger.error(
                "bailing: the SQLite idempotency store at %s was %s while the app was running; "
                "side effects are refused until the workers are restarted (the records kept in "
                "the old file are no longer reachable; restore it from a backup first if you "
                "have one)", self.path, "deleted" if current is None else "replaced",
            )
        raise sqlite3.OperationalError(
            "the file was deleted or replaced while in use; restart the app's workers")

    def check_writable(self) -> None:
        """Refuse to open a connection that SQLite would quietly make read-only.

        Not opening it at all leaves no read-only ``-wal`` or ``-shm`` behind.
        """
        for name in (self.path, self.path + "-wal", self.path + "-shm"):
            if os.path.exists(name) and not os.access(name, os.R_OK | os.W_OK):
                raise sqlite3.OperationalError(
                    f"{os.path.basename(name)} is not writable by this process (read-only "
                    "file or wrong owner); side effects are refused until it is")

    def opened(self, conn: sqlite3.Connection) -> None:
        """Remember the file a new connection opened; refuse one replaced meanwhile."""
        if self.file is None:
            self.file = identity(self.path)
        elif identity(self.path) != self.file:
            conn.close()
            self.check()

    def reset(self) -> None:
        """No connection of this process is left: the next may use whatever file is there."""
        self.file = None
        self._logged = False
