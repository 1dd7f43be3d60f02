"""What the transaction mode needs from a database: an adapter, and one call's transaction."""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager

from bailing_flask.stores import Entry, StoredResponse
from bailing_flask.transactional._records import ListState, _ApprovalTaken, _Duplicate, _Record

logger = logging.getLogger("bailing_flask")


class _CallTransaction(ABC):
    """One call's transaction on the app's own connection or session."""

    #: how the view ended the package's transaction itself (its own ``COMMIT``, a commit
    #: outside the call's transaction), when it did; the call is then left uncertain
    ended_by_view: str | None = None

    @abstractmethod
    def reserve(self, record: _Record) -> None:
        """Insert the running row (and the row of the approval it spends); raises
        :class:`_Duplicate`, :class:`_Busy` or :class:`_ApprovalTaken`."""

    @contextmanager
    def guard(self, record: _Record) -> Iterator[None]:
        """Around the view: keep the view's own commits inside the transaction."""
        yield

    @abstractmethod
    def complete(self, record: _Record, response: StoredResponse) -> None:
        """Write the answer into the row; raises :class:`_EndedByView` when the transaction is no
        longer the call's (the view committed or ended it)."""

    @abstractmethod
    def keep(self, record: _Record) -> None:
        """After the view ended the transaction: commit what is left without the answer and make
        sure the running row is committed (the call is uncertain)."""

    @abstractmethod
    def _insert_approval(self, record: _Record) -> None:
        """Insert the row of the approval ``record`` spends; raises :class:`_Duplicate` or
        :class:`_Busy` as the reservation's own insert does."""

    def _spend_approval(self, record: _Record) -> None:
        """In :meth:`reserve`, right after the call's row (before the view's first commit
        point, so no rollback of the view takes it away): the row of the approval it spends.

        Raises :class:`_ApprovalTaken` when another call's committed transaction spent it
        (PostgreSQL waits for an open one first; SQLite's write lock already did).
        """
        if record.approval is None:
            return
        try:
            self._insert_approval(record)
        except _Duplicate:
            raise _ApprovalTaken() from None

    @abstractmethod
    def commit(self) -> None:
        """The one commit; raises :class:`StoreUnavailable` when it did not report success."""

    @abstractmethod
    def rollback(self) -> None:
        """Undo everything of this call (never raises)."""


class TransactionAdapter(ABC):
    """Gives the transaction mode the current request's transaction.

    Use :class:`SQLAlchemyTransaction` or :class:`DBAPITransaction`. The
    administrative methods (``get``, ``list``, ``resolve``, ``cleanup``) run
    in transactions of their own, in an app context (``flask bailing
    idempotency`` uses them).
    """

    table_name: str
    #: create the table on the first call (else a migration does)
    create_on_first_use: bool
    _created: bool
    _lock: threading.Lock

    def _ensure_table(self) -> None:
        if self._created or not self.create_on_first_use:
            return
        with self._lock:
            if self._created:
                return
            try:
                self.create_table()
            except Exception as exc:  # noqa: BLE001 - the INSERT will say what is wrong
                logger.error("bailing: could not create table %s (%s); create it with a migration",
                             self.table_name, exc)
            self._created = True

    @abstractmethod
    def begin(self) -> _CallTransaction:
        """The transaction of the call now running (in a request)."""

    @abstractmethod
    def get(self, key: str) -> Entry | None:
        """The committed record of ``key``, expired or not."""

    @abstractmethod
    def list(self, *, state: ListState | None = None, limit: int = 100) -> list[Entry]:
        """Live records, oldest first (``in_progress`` never lists anything: running rows are not
        committed; ``uncertain`` lists the rows a view committed without their answer)."""

    @abstractmethod
    def resolve(self, key: str, *, response: StoredResponse | None, note: str,
                retention_seconds: float, now: float, seen: Entry | None = None) -> bool:
        """Settle a record by operator decision (``None``: delete it so the call may run).

        With ``seen`` (the record as :meth:`get` read it) only while it still has that
        state and token, in the same statement: see :meth:`IdempotencyStore.resolve`."""

    @abstractmethod
    def delete_expired(self, key: str, now: float) -> None:
        """Delete the record of ``key`` if its retention is over."""

    @abstractmethod
    def cleanup(self, *, now: float, limit: int = 1000) -> int:
        """Delete up to ``limit`` expired records; returns how many."""

    @abstractmethod
    def create_table(self) -> None:
        """Create the table if it does not exist."""
