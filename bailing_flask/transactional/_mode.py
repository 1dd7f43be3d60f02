"""The transaction mode itself: reserve, run the view, record the answer, one commit."""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flask import Response, request

from bailing_flask.approvals import APPROVAL_KEY, _ApprovalRefused, _approval_candidates, _refusal
from bailing_flask._pipeline.idempotency import Idempotency, answer_of, call_key, replayed_answer, store_refusal
from bailing_flask.wire.headers import is_hop_by_hop
from bailing_flask.errors import ConfigurationError
from bailing_flask.responses import ErrorInfo
from bailing_flask.stores import Entry, EntryMeta, StoreBusy, StoredResponse, StoreUnavailable
from bailing_flask.transactional._adapter import TransactionAdapter, _CallTransaction
from bailing_flask.transactional._records import (
    _ApprovalTaken,
    _Busy,
    _Duplicate,
    _EndedByView,
    _Record,
)
from bailing_flask.transactional._sqlalchemy import SQLAlchemyTransaction

if TYPE_CHECKING:  # pragma: no cover
    from bailing_flask.context import ToolCall
    from bailing_flask._pipeline.registry import Tool

logger = logging.getLogger("bailing_flask")

#: response headers never stored (nor any hop-by-hop header); as in the store mode
_SKIPPED_HEADERS = {"content-length", "date", "server", "set-cookie"}
_CLEANUP_INTERVAL = 300.0


def resolve_adapter(value: Any, app: Any) -> TransactionAdapter | None:
    """``BAILING_TRANSACTION`` as an adapter: an adapter, ``"sqlalchemy"`` or ``None``."""
    if value is None or isinstance(value, TransactionAdapter):
        return value
    if isinstance(value, str) and value.strip().lower() in ("sqlalchemy", "flask_sqlalchemy",
                                                            "flask-sqlalchemy"):
        db = app.extensions.get("sqlalchemy")
        if db is None:
            raise ConfigurationError("BAILING_TRANSACTION = 'sqlalchemy' needs Flask-SQLAlchemy "
                                     "initialised on this app (db.init_app(app))")
        return SQLAlchemyTransaction(db)
    raise ConfigurationError(
        "BAILING_TRANSACTION must be SQLAlchemyTransaction(...), DBAPITransaction(...), 'sqlalchemy' "
        f"or None, not {type(value).__name__}"
    )


class TransactionalIdempotency:
    """Runs side-effecting calls exactly once inside the app's own transaction."""

    def __init__(self, idempotency: Idempotency) -> None:
        self.idempotency = idempotency
        self.state = idempotency.state
        self._adapter: TransactionAdapter | None = None
        self._resolved = False
        self._lock = threading.Lock()
        self._last_cleanup = time.monotonic()
        self.clock: Callable[[], float] = time.time

    def adapter(self) -> TransactionAdapter | None:
        if not self._resolved:
            with self._lock:
                if not self._resolved:
                    self._adapter = resolve_adapter(self.state.config.transaction, self.state.app)
                    self._resolved = True
        return self._adapter

    def run(self, tool: Tool, call: ToolCall, execute: Callable[[], Response]) -> Response:
        adapter = self.adapter()
        if adapter is None:
            self.state.warn_once(
                ("transaction", tool.name),
                "bailing: tool %r runs in the transaction mode but BAILING_TRANSACTION is not set; "
                "refusing its calls", tool.name, level=logging.ERROR,
            )
            return self.state.error_response(ErrorInfo.make("idempotency_store_unavailable"))
        now = self.clock()
        retention = self.state.config.idempotency_retention
        record = _Record(
            key=call_key(tool, call), token=os.urandom(12).hex(),
            meta=EntryMeta(tool=tool.name, job_id=call.job_id, subject=call.subject,
                           unsigned_key=call.unsigned.idempotency_key),
            created_at=now, expires_at=now + retention,
        )
        approvals: list[tuple[int, float]] = []
        if tool.options.business_approval:
            approvals = self._approvals(tool, call, record.key)
            record = dataclasses.replace(record, approval=approvals.pop(0))
        attempt = 0
        while attempt < 2:
            attempt += 1
            try:
                transaction = adapter.begin()
            except StoreUnavailable as exc:
                return self._unavailable(tool, exc)
            try:
                transaction.reserve(record)  # and the approval's row (business_approval)
            except _ApprovalTaken:  # another call's committed transaction spent it
                transaction.rollback()
                if not approvals:
                    raise _ApprovalRefused(_refusal(tool, call, "used")) from None
                record = dataclasses.replace(record, approval=approvals.pop(0))
                attempt -= 1
                continue
            except _Duplicate:
                transaction.rollback()
                answer = self._existing(adapter, tool, call, record, last=attempt == 2)
                if answer is not None:
                    return answer
                continue  # the committed row was gone (expired, or resolved to run again)
            except _Busy as exc:
                transaction.rollback()
                if exc.whole_database:  # SQLite: someone holds the database's one write lock
                    logger.warning("bailing: the database is locked by another connection (%s); "
                                   "refusing the side effect of %r for now", exc, tool.name)
                    return store_refusal(self.state, StoreBusy(str(exc)))
                logger.info("bailing: call %s of tool %r waits for the same call in another "
                            "transaction (%s): 409", record.key, tool.name, exc)
                return self.state.error_response(ErrorInfo.make("idempotency_in_progress"))
            except StoreUnavailable as exc:
                transaction.rollback()
                return self._unavailable(tool, exc)
            except BaseException:
                transaction.rollback()
                raise
            return self._first_run(adapter, transaction, tool, record, execute)
        return self.state.error_response(ErrorInfo.make("idempotency_in_progress"))

    def _approvals(self, tool: Tool, call: ToolCall, key: str) -> list[tuple[int, float]]:
        """The approvals this call may spend, as ``(approval_id, expires_at)``, oldest first.

        Those the package store already names another call for are left out
        (spent in the store mode, or marked after a commit here); the table's
        row of each decides in the end.
        """
        candidates = _approval_candidates(tool, call)
        found = [(r.approval_id, r.expires_at) for r in candidates if r.used_by in (None, key)]
        spent = [r.approval_id for r in candidates if r.used_by == key]
        if spent:  # this call spent it before: a repeat is answered from its row
            request.environ[APPROVAL_KEY] = spent[0]
        if not found:
            raise _ApprovalRefused(_refusal(tool, call, "used"))
        return found

    def _mark_spent(self, tool: Tool, record: _Record) -> None:
        """After the commit: the package store's record names the call too (best effort).

        The table's row is what decides; the mark keeps the store's record
        true for operators, and spent for the store mode should the tool
        leave the transaction mode (or the view have ended the transaction).
        """
        if record.approval is None:
            return
        approval_id = record.approval[0]
        request.environ[APPROVAL_KEY] = approval_id
        keep = record.expires_at - record.created_at  # (nothing is reserved: only checked)
        marked: str
        try:
            marked = self.idempotency.store().claim_approved(
                record.key, approval_ids=(approval_id,), token=record.token, lease_seconds=keep,
                retention_seconds=keep, meta=record.meta, reserve=False).outcome
        except (StoreUnavailable, NotImplementedError) as exc:
            marked = str(exc)
        if marked != "reserved":
            logger.warning("bailing: approval %d was spent on call %s of tool %r in its transaction, "
                           "but the store's record could not be marked (%s)", approval_id,
                           record.key, tool.name, marked)

    def _unavailable(self, tool: Tool, exc: StoreUnavailable) -> Response:
        logger.error("bailing: the database is unavailable (%s); refusing the side effect of %r",
                     exc, tool.name)
        return self.state.error_response(ErrorInfo.make("idempotency_store_unavailable"))

    def _existing(self, adapter: TransactionAdapter, tool: Tool, call: ToolCall, record: _Record,
                  *, last: bool) -> Response | None:
        try:
            entry = adapter.get(record.key)
        except StoreUnavailable as exc:
            return self._unavailable(tool, exc)
        now = self.clock()
        if entry is None or entry.expires_at <= now:
            if entry is not None:
                try:
                    adapter.delete_expired(record.key, now)
                except StoreUnavailable as exc:
                    return self._unavailable(tool, exc)
            if last:
                return self.state.error_response(ErrorInfo.make("idempotency_in_progress"))
            return None
        if entry.state == "completed" and entry.response is not None:
            return replayed_answer(self.state, tool.name, call, record.key, entry, "record")
        logger.warning("bailing: call %s of tool %r was committed without its answer (the view "
                       "committed the transaction itself, then the worker died); resolve it with "
                       "`flask bailing idempotency`", record.key, tool.name)
        return self.state.error_response(ErrorInfo.make("idempotency_uncertain"))

    def _first_run(self, adapter: TransactionAdapter, transaction: _CallTransaction, tool: Tool,
                   record: _Record, execute: Callable[[], Response]) -> Response:
        stored: StoredResponse | None = None
        try:
            with transaction.guard(record):
                response = answer_of(execute)
                if response.status_code < 500:
                    stored = StoredResponse(
                        status=response.status_code,
                        headers=tuple((name, value) for name, value in response.headers.items()
                                      if name.lower() not in _SKIPPED_HEADERS and not is_hop_by_hop(name)),
                        body=response.get_data(),
                    )
        except Exception as exc:
            if transaction.ended_by_view:  # what it committed outside stays: uncertain
                return self._ended_by_view(transaction, tool, record, exc)
            transaction.rollback()
            logger.info("bailing: call %s of tool %r raised %s: its transaction rolled back, an "
                        "identical call runs again", record.key, tool.name, type(exc).__name__)
            raise
        except BaseException:
            transaction.rollback()
            raise
        if stored is None:
            if transaction.ended_by_view:
                return self._ended_by_view(transaction, tool, record, None)
            transaction.rollback()
            logger.info("bailing: call %s of tool %r answered HTTP %d: its transaction rolled back, "
                        "an identical call runs again", record.key, tool.name, response.status_code)
            return response
        try:
            transaction.complete(record, stored)
            transaction.commit()
        except _EndedByView:
            return self._ended_by_view(transaction, tool, record, None)
        except (_Duplicate, _Busy):
            transaction.rollback()
            logger.warning("bailing: call %s of tool %r lost its reservation (the view rolled back) "
                           "to an identical call; its changes rolled back", record.key, tool.name)
            return self.state.error_response(ErrorInfo.make("idempotency_in_progress"))
        except StoreUnavailable as exc:
            transaction.rollback()
            logger.error("bailing: the transaction of call %s of tool %r failed to commit (%s); an "
                         "identical call tells what happened: answered from the record if it "
                         "committed, run again if not", record.key, tool.name, exc)
            return self.state.error_response(ErrorInfo.make("transaction_failed"))
        except BaseException:
            transaction.rollback()
            raise
        self._mark_spent(tool, record)
        self._maybe_cleanup(adapter)
        return response

    def _ended_by_view(self, transaction: _CallTransaction, tool: Tool, record: _Record,
                       exc: BaseException | None) -> Response:
        """The view committed (or ended) the call's transaction itself: its answer cannot be
        recorded with its changes. Keep what it wrote, leave the call uncertain, say so."""
        logger.error(
            "bailing: the view of transactional tool %r ended the package's transaction itself "
            "(%s), so its answer could not be recorded with its changes. What it wrote was kept "
            "and call %s is left uncertain: check its effect, then settle it with `flask bailing "
            "idempotency resolve`. Leave COMMIT to bailing_flask (session.commit() in the view is "
            "fine) and use savepoints for nested blocks", tool.name, transaction.ended_by_view,
            record.key, exc_info=exc,
        )
        try:
            transaction.keep(record)
        except Exception:  # noqa: BLE001 - the database failed too: nothing more to do here
            logger.error("bailing: could not record call %s as uncertain", record.key, exc_info=True)
        self._mark_spent(tool, record)  # its effect may have stayed: the approval is spent
        return self.state.error_response(ErrorInfo.make("transaction_ended_by_view"))

    def _maybe_cleanup(self, adapter: TransactionAdapter) -> None:
        """Now and then, after a call's commit: delete expired records in a small transaction."""
        now = time.monotonic()
        if now - self._last_cleanup < _CLEANUP_INTERVAL:
            return
        self._last_cleanup = now
        try:
            adapter.cleanup(now=self.clock(), limit=1000)
        except Exception:  # noqa: BLE001 - retried at the next interval
            logger.warning("bailing: cleanup of %s failed", adapter.table_name, exc_info=True)


def in_transaction_mode(tool: Tool) -> bool:
    """Whether ``tool`` runs in the transaction mode (``repeats="transaction"``)."""
    return tool.repeats == "transaction"
