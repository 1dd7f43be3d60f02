"""Side effects that happen at most once, keyed on what the hub signed.

``X-Bailing-Idempotency-Key`` is not covered by the signature:
anyone replaying a captured request within the window can change or drop
it. So a call's identity is derived from signed material only (method,
signed path+query, body hash, subject and job id), which is exactly the
hub's own notion of "the same call" (job + tool + arguments + subject)
and cannot be altered without breaking the signature. The unsigned
key is recorded next to the entry for reconciliation and cross-checked.

First arrival runs the view and stores its final response (2xx and 4xx,
``abort(4xx)`` included); a repeat gets the stored response with
``Idempotent-Replayed: true``; a repeat while the first still runs gets 409
``idempotency_in_progress``. A side effect that failed -- the view raised
(even if the app's own error handler turns that into a 200) or answered
5xx -- may have happened in part, so it is recorded as uncertain and never
runs again by itself; a tool whose failures are atomic opts in to
``failure_is_atomic`` and its failures release the entry instead. An entry
whose lease expired without completion (a worker died mid-side-effect) is
uncertain as well. Uncertain calls are refused with ``idempotency_uncertain``
until an operator resolves them, unless the tool opted in to
``rerun_uncertain`` because its view is transactional.

A tool in the transaction mode (``transactional=True``, or
``BAILING_TRANSACTIONAL``) is handed to :mod:`bailing_flask.transactional`
instead: its record commits in the view's own database transaction.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from flask import Response, current_app
from werkzeug.exceptions import HTTPException

from ._wsgi_headers import is_hop_by_hop
from ._sync import call_sync
from .responses import REASON_HEADER, ErrorInfo
from .stores import (
    EntryMeta,
    IdempotencyStore,
    Reservation,
    StoredResponse,
    StoreUnavailable,
    store_from_url,
)

if TYPE_CHECKING:  # pragma: no cover
    from .context import ToolCall
    from .extension import BailingState
    from .registry import Tool
    from .transactional import TransactionalIdempotency

__all__ = ["Idempotency", "REPLAY_HEADER", "call_key"]

logger = logging.getLogger("bailing_flask")

REPLAY_HEADER = "Idempotent-Replayed"
#: response headers never replayed from the store (nor any hop-by-hop header)
_SKIPPED_HEADERS = {"content-length", "date", "server", "set-cookie"}
_CLEANUP_INTERVAL = 300.0


def call_key(tool: Tool, call: ToolCall) -> str:
    """The store key of a call: signed material, or the tool's own domain key."""
    domain = tool.options.idempotency_key
    if domain is not None:
        material = f"domain\n{tool.name}\n{call_sync(domain, call)}"
        return "idem:" + hashlib.sha256(material.encode("utf-8")).hexdigest()
    return "idem:" + call.verified.identity


class Idempotency:
    """Per-app de-duplication of side-effecting tool calls over a store."""

    def __init__(self, state: BailingState) -> None:
        self.state = state
        self._store: IdempotencyStore | None = None
        self._lock = threading.Lock()
        self._last_cleanup = time.monotonic()
        self._cleaning = False
        self._transactional: TransactionalIdempotency | None = None

    # -- the store ----------------------------------------------------------------

    def store(self) -> IdempotencyStore:
        """The configured store, created on first use (``BAILING_STORE``)."""
        if self._store is None:
            with self._lock:
                if self._store is None:
                    url = self.state.config("BAILING_STORE")
                    if not url:
                        path = os.path.join(self.state.app.instance_path, "bailing.sqlite3")
                        url = "sqlite:///" + path
                    self._store = store_from_url(url)
        return self._store

    def _maybe_cleanup(self) -> None:
        """Drop expired entries now and then, off the request's path."""
        now = time.monotonic()
        if self._cleaning or now - self._last_cleanup < _CLEANUP_INTERVAL:
            return
        self._last_cleanup = now
        self._cleaning = True

        def run() -> None:
            try:
                self.store().cleanup(limit=1000)
            except Exception:  # a failed cleanup is retried at the next interval
                logger.warning("bailing: idempotency cleanup failed", exc_info=True)
            finally:
                self._cleaning = False

        threading.Thread(target=run, name="bailing-idempotency-cleanup", daemon=True).start()

    def transactional(self) -> TransactionalIdempotency:
        """The transaction mode (:mod:`bailing_flask.transactional`), created on first use."""
        if self._transactional is None:
            from .transactional import TransactionalIdempotency

            with self._lock:
                if self._transactional is None:
                    self._transactional = TransactionalIdempotency(self)
        return self._transactional

    # -- policy -------------------------------------------------------------------------

    @staticmethod
    def applies(tool: Tool) -> bool:
        """Every tool that can change something, unless ``deduplicate=False`` (see :attr:`Tool.deduplicated`).

        ``idempotent=True`` does not turn this off: it tells the hub the call
        may be repeated, which is exactly when a repeat must not run twice.
        """
        return tool.deduplicated

    def check_replay(self, tool: Tool, call: ToolCall) -> ErrorInfo | None:
        """``BAILING_REJECT_REPLAYS``: refuse an exact signature seen before."""
        if not self.state.config("BAILING_REJECT_REPLAYS"):
            return None
        ttl = 2 * float(self.state.config("BAILING_WINDOW"))
        try:
            first = self.store().remember_signature(call.verified.signature, ttl_seconds=ttl)
        except StoreUnavailable:
            if self.applies(tool):
                return ErrorInfo.make("idempotency_store_unavailable")
            logger.warning("bailing: replay check skipped for read tool %r: store unavailable", tool.name)
            return None
        return None if first else ErrorInfo.make("replayed")

    # -- the run ---------------------------------------------------------------------------

    def run(self, tool: Tool, call: ToolCall, execute: Callable[[], Response]) -> Response:
        """Run ``execute`` at most once per call identity."""
        if not self.applies(tool):
            return execute()
        mode = tool.options.transactional
        if mode or (mode is None and self.state.config("BAILING_TRANSACTIONAL")):
            return self.transactional().run(tool, call, execute)
        key = call_key(tool, call)
        token = os.urandom(12).hex()
        lease = float(self.state.config("BAILING_IDEMPOTENCY_LEASE"))
        retention = float(self.state.config("BAILING_IDEMPOTENCY_RETENTION"))
        meta = EntryMeta(tool=tool.name, job_id=call.job_id, subject=call.subject,
                         unsigned_key=call.unsigned.idempotency_key)
        try:
            store = self.store()
            reservation = store.reserve(key, token=token, lease_seconds=lease,
                                        retention_seconds=retention, meta=meta)
        except StoreUnavailable as exc:
            logger.error("bailing: idempotency store unavailable (%s); refusing side effect of %r",
                         exc, tool.name)
            return self.state.error_response(ErrorInfo.make("idempotency_store_unavailable"))
        self._maybe_cleanup()
        if reservation.outcome == "completed":
            return self._replay(tool, call, key, reservation)
        if reservation.outcome == "in_progress":
            return self.state.error_response(ErrorInfo.make("idempotency_in_progress"))
        if reservation.outcome == "uncertain":
            if not tool.options.rerun_uncertain:
                logger.warning("bailing: call %s of tool %r is uncertain (an earlier attempt did not "
                               "finish); resolve it with `flask bailing idempotency`", key, tool.name)
                return self.state.error_response(ErrorInfo.make("idempotency_uncertain"))
            try:
                taken = store.take_over(key, old_token=reservation.entry.token, new_token=token,
                                        lease_seconds=lease)
            except StoreUnavailable:
                return self.state.error_response(ErrorInfo.make("idempotency_store_unavailable"))
            if not taken:
                return self.state.error_response(ErrorInfo.make("idempotency_in_progress"))
            logger.warning("bailing: re-running uncertain call %s of tool %r (rerun_uncertain)", key,
                           tool.name)
        return self._first_run(store, tool, key, token, retention, execute)

    def _first_run(self, store: IdempotencyStore, tool: Tool, key: str, token: str,
                   retention: float, execute: Callable[[], Response]) -> Response:
        # The exception is seen here, on its way out of the view and before the
        # app's own error handlers turn it into whatever response they like.
        try:
            try:
                response = execute()
            except HTTPException as exc:
                if exc.code is None or exc.code >= 500:
                    raise
                # abort(404) and the like: a deliberate refusal, recorded like a returned
                # 4xx and rendered by the app's handlers exactly as Flask would
                response = current_app.make_response(current_app.handle_user_exception(exc))
        except BaseException as exc:
            self._failed(store, tool, key, token, f"the view raised {type(exc).__name__}")
            raise
        if response.status_code >= 500:
            if response.headers.get(REASON_HEADER) == "invalid_response":
                # the view finished (its effect happened); only its answer was withheld
                self._failed(store, tool, key, token, "the view's result did not match its "
                             "declared response shape and was withheld", effect_done=True)
            else:
                self._failed(store, tool, key, token, f"the view answered HTTP {response.status_code}")
            return response
        stored = StoredResponse(
            status=response.status_code,
            headers=tuple((name, value) for name, value in response.headers.items()
                          if name.lower() not in _SKIPPED_HEADERS and not is_hop_by_hop(name)),
            body=response.get_data(),
        )
        try:
            if not store.complete(key, token=token, response=stored, retention_seconds=retention):
                logger.error("bailing: call %s of tool %r was resolved or taken over while it ran",
                             key, tool.name)
        except StoreUnavailable:
            # the side effect happened: answer it; the entry turns uncertain after its lease
            logger.error("bailing: could not record the outcome of call %s of tool %r; it will "
                         "show as uncertain", key, tool.name)
        return response

    def _failed(self, store: IdempotencyStore, tool: Tool, key: str, token: str, why: str,
                effect_done: bool = False) -> None:
        """A side effect failed: uncertain by default, released if its failures are atomic."""
        if tool.options.failure_is_atomic and not effect_done:
            self._release(store, key, token)
            return
        try:
            store.mark_uncertain(key, token=token, note=why)
        except StoreUnavailable:
            logger.error("bailing: could not record the failure of call %s of tool %r; it will "
                         "show as uncertain when its lease runs out", key, tool.name)
            return
        logger.warning(
            "bailing: call %s of tool %r failed (%s) and may have had part of its effect: recorded "
            "as uncertain, repeats are refused until `flask bailing idempotency resolve` decides "
            "(declare failure_is_atomic=True if a failure of this tool never leaves anything behind)",
            key, tool.name, why,
        )

    @staticmethod
    def _release(store: IdempotencyStore, key: str, token: str) -> None:
        try:
            store.release(key, token=token)
        except StoreUnavailable:
            logger.error("bailing: could not release call %s after a failure", key)

    def _replay(self, tool: Tool, call: ToolCall, key: str, reservation: Reservation) -> Response:
        entry = reservation.entry
        if entry.meta.unsigned_key != call.unsigned.idempotency_key:
            logger.warning(
                "bailing: suspicious repeat of call %s (tool %r, job %r): the unsigned "
                "X-Bailing-Idempotency-Key changed from %r to %r; answered from the store",
                key, tool.name, call.job_id, entry.meta.unsigned_key, call.unsigned.idempotency_key,
            )
        stored = entry.response
        assert stored is not None  # completed entries carry their response
        response = Response(stored.body, status=stored.status)
        response.headers.clear()
        for name, value in stored.headers:
            if not is_hop_by_hop(name):  # e.g. a response an operator resolved by hand
                response.headers.add(name, value)
        response.headers[REPLAY_HEADER] = "true"
        return response
