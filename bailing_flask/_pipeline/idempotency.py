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
runs again by itself. An entry whose lease expired without completion (a
worker died mid-side-effect) is uncertain as well. Uncertain calls are
refused with ``idempotency_uncertain`` until an operator resolves them
(``flask bailing idempotency resolve``, ``--rerun`` to let it run again).

A tool in the transaction mode (``repeats="transaction"``) is handed to
:mod:`bailing_flask.transactional` instead: its record commits in the view's
own database transaction, and a failure rolls back.
"""

from __future__ import annotations

import contextvars
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from flask import Response, current_app, request
from werkzeug.exceptions import HTTPException

from bailing_flask.approvals import _spend_approval
from bailing_flask.declare import ExerciseStop
from bailing_flask.wire.headers import is_hop_by_hop
from bailing_flask.wire.digest import sha256_hex
from bailing_flask._sync import call_sync
from bailing_flask.responses import REASON_HEADER, REPLAY_HEADER, ErrorInfo
from bailing_flask.settings import Config
from bailing_flask._state import BailingState, Cache
from bailing_flask.stores import (
    Entry,
    IdempotencyStore,
    Reservation,
    StoreBusy,
    StoreUnavailable,
    store_from_url,
)
from bailing_flask.stores._entries import _trusted_meta, _trusted_response

if TYPE_CHECKING:  # pragma: no cover
    from bailing_flask.context import ToolCall
    from bailing_flask._pipeline.registry import Tool

__all__ = ["Idempotency", "call_key"]

logger = logging.getLogger("bailing_flask")

#: Whether this request's signature arrived for the first time (see :meth:`Idempotency.first_arrival`).
FIRST_ARRIVAL_KEY = "bailing.first_arrival"
#: Set when this request is answered from a completed call's record (the audit's ``replayed``):
#: a view's own ``Idempotent-Replayed`` header on a first run is no replay.
REPLAYED_KEY = "bailing.replayed"
#: response headers never replayed from the store (nor any hop-by-hop header)
_SKIPPED_HEADERS = {"content-length", "date", "server", "set-cookie"}
#: the hop-by-hop headers of RFC 2616 section 13.5.1, as ``wsgiref.util.is_hop_by_hop`` knows them
_HOP_BY_HOP = frozenset((
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
    "transfer-encoding", "upgrade",
))
#: what a stored response leaves out, lower-cased: one set lookup per header
_NOT_STORED = frozenset(_SKIPPED_HEADERS) | _HOP_BY_HOP
_CLEANUP_INTERVAL = 300.0


#: header name -> whether a stored response keeps it (names are few; bounded anyway)
_KEEP: dict[str, bool] = {}
#: the stored header tuples seen so far, so that thousands of stored responses with the same
#: headers share one tuple (a store in memory keeps them all; bounded)
_SHARED_HEADERS: dict[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]] = {}


def _stored_headers(headers: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """The headers a stored response keeps, in order (one dict lookup per header)."""
    kept = []
    for pair in headers:
        keep = _KEEP.get(pair[0])
        if keep is None:
            keep = pair[0].lower() not in _NOT_STORED
            if len(_KEEP) < 1024:
                _KEEP[pair[0]] = keep
        if keep:
            kept.append(pair)
    stored = tuple(kept)
    shared = _SHARED_HEADERS.get(stored)
    if shared is not None:
        return shared
    if len(_SHARED_HEADERS) < 1024:
        _SHARED_HEADERS[stored] = stored
    return stored


class _Tokens:
    """Reservation tokens: unique per attempt, across threads, processes and hosts.

    A random 128-bit prefix per process and a counter: one ``os.urandom`` per
    process instead of one per call. The prefix is drawn again whenever the
    process id changes: a pre-fork server forks its workers after the app
    (and this object) was loaded, and uWSGI does so without running Python's
    at-fork hooks, so only the process id tells a worker from its siblings.
    Two workers handing out the same token for the same call would both be
    told they own it.

    The process id, the prefix and the counter are one tuple, read once per
    token and replaced in one assignment: a thread of a new worker never
    pairs the new process id with the parent's prefix while another thread
    draws the new one (``os.urandom`` lets other threads run). Two threads
    that both find the process id changed each draw a prefix of their own,
    and both prefixes are new.
    """

    def __init__(self) -> None:
        self._state = self._fresh()

    @staticmethod
    def _fresh() -> tuple[int, str, Iterator[int]]:
        return os.getpid(), os.urandom(16).hex() + "-", itertools.count(1)

    def next(self) -> str:
        pid, prefix, counter = self._state
        if pid != os.getpid():
            pid, prefix, counter = self._state = self._fresh()
        return prefix + str(next(counter))


_TOKENS = _Tokens()


def call_key(tool: Tool, call: ToolCall) -> str:
    """The store key of a call: signed material, or the tool's own domain key."""
    domain = tool.options.idempotency_key
    if domain is not None:
        return _domain_key(tool.name, call_sync(domain, call))
    return "idem:" + call.verified.identity


def _domain_key(tool_name: str, value: Any) -> str:
    material = f"domain\n{tool_name}\n{value}"
    return "idem:" + sha256_hex(material.encode("utf-8"))


class _Plan:
    """What de-duplication needs to know about one tool, worked out once per tool.

    Built on a tool's first call (and again only if the registry is rebuilt
    with a new :class:`~bailing_flask._pipeline.registry.Tool`), so the request path
    reads plain attributes instead of re-deriving the policy every call.
    """

    __slots__ = ("tool", "applies", "transaction", "name", "domain", "approval")

    def __init__(self, tool: Tool) -> None:
        self.tool = tool
        self.applies = Idempotency.applies(tool)
        self.transaction = tool.repeats == "transaction"
        self.name = tool.name
        self.domain = tool.options.idempotency_key
        #: ``business_approval``: the reservation also spends the call's approval
        self.approval = bool(tool.options.business_approval)

    def key(self, call: ToolCall) -> str:
        if self.domain is not None:
            return _domain_key(self.name, call_sync(self.domain, call))
        return "idem:" + call.verified.identity


class _Settings:
    """The ``BAILING_IDEMPOTENCY_*`` values of one configuration, under short names."""

    __slots__ = ("config", "lease", "retention", "defer")

    def __init__(self, config: Config) -> None:
        self.config = config
        self.lease = float(config.idempotency_lease)
        self.retention = float(config.idempotency_retention)
        self.defer = config.idempotency_defer_completion


def store_refusal(state: BailingState, exc: StoreUnavailable | None = None) -> Response:
    """``503``: the store is busy (locked by another process: ``Retry-After``) or unavailable."""
    if isinstance(exc, StoreBusy):
        response = state.error_response(ErrorInfo.make("idempotency_store_busy"))
        response.headers["Retry-After"] = str(exc.retry_after)
        return response
    return state.error_response(ErrorInfo.make("idempotency_store_unavailable"))


def answer_of(execute: Callable[[], Response]) -> Response:
    """Run a de-duplicated view; ``abort(4xx)`` becomes the answer to record.

    ``abort(404)`` and the like are a deliberate refusal: recorded like a
    returned 4xx and rendered by the app's handlers exactly as Flask would.
    A 5xx ``HTTPException`` (and any other exception) goes on to the caller,
    which marks the call as failed. Both modes (store and transaction) use it.
    """
    try:
        return execute()
    except HTTPException as exc:
        if exc.code is None or exc.code >= 500:
            raise
        return current_app.make_response(current_app.handle_user_exception(exc))


class TransactionMode(Protocol):
    """What the transaction mode's runner (:mod:`bailing_flask.transactional`, above) offers."""

    def run(self, tool: Tool, call: ToolCall, execute: Callable[[], Response]) -> Response: ...

    def adapter(self) -> Any: ...  # a TransactionAdapter, or None


#: ``(runner, store)``: in this context the runner's records go to that store instead of
#: its own (the exercise's throwaway store, for its own requests). Only code in the
#: process sets it, in a context of its own: no header or environ key can, and no other
#: thread or request sees it.
_STORE_HERE: contextvars.ContextVar[tuple[Idempotency, IdempotencyStore] | None] = (
    contextvars.ContextVar("bailing_flask.store_here", default=None))


def use_store_here(runner: Idempotency, store: IdempotencyStore) -> None:
    """In the current context, ``runner`` keeps its records in ``store``. For a context
    made for one request (``contextvars.Context().run(...)``), which ends with it."""
    _STORE_HERE.set((runner, store))


#: the app's de-duplication runner (:func:`install_idempotency`, :func:`idempotency_of`)
_RUNNER: Cache[Idempotency] = Cache("idempotency")


def install_idempotency(state: BailingState,
                        transaction_mode: Callable[[Idempotency], TransactionMode]) -> Idempotency:
    """Give ``state``'s app its runner (``init_app``); its store becomes the app's ``state.store``."""
    runner = _RUNNER.put(state, Idempotency(state, transaction_mode))
    state.store = runner.store
    return runner


def idempotency_of(state: BailingState) -> Idempotency:
    """The app's de-duplication runner (``init_app`` installs it)."""
    runner: Idempotency = state.caches[_RUNNER]  # on the request path: a subscript, not a call
    return runner


class Idempotency:
    """Per-app de-duplication of side-effecting tool calls over a store."""

    def __init__(self, state: BailingState,
                 transaction_mode: Callable[[Idempotency], TransactionMode]) -> None:
        """``transaction_mode`` makes the transaction mode's runner on first use (it lives
        above this module, in :mod:`bailing_flask.transactional`, which builds on it)."""
        self.state = state
        self._transaction_mode = transaction_mode
        self._store: IdempotencyStore | None = None
        self._lock = threading.Lock()
        self._last_cleanup = time.monotonic()
        self._cleaning = False
        self._transactional: TransactionMode | None = None
        #: id(tool) -> its plan; the plan keeps the tool alive, so an id is never reused
        self._plans: dict[int, _Plan] = {}
        self._settings_cache: _Settings | None = None

    # -- the store ----------------------------------------------------------------

    def store(self) -> IdempotencyStore:
        """The configured store, created on first use (``BAILING_STORE``: a URL or a store)."""
        here = _STORE_HERE.get()
        if here is not None and here[0] is self:
            return here[1]
        if self._store is None:
            with self._lock:
                if self._store is None:
                    configured = self.state.config.store
                    if isinstance(configured, IdempotencyStore):  # SQLStore(db.engine), one's own
                        self._store = configured
                    else:
                        url = configured
                        if not url:
                            path = os.path.join(self.state.app.instance_path, "bailing.sqlite3")
                            url = "sqlite:///" + path
                        self._store = store_from_url(str(url))
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

    def transactional(self) -> TransactionMode:
        """The transaction mode (:mod:`bailing_flask.transactional`), created on first use."""
        if self._transactional is None:
            with self._lock:
                if self._transactional is None:
                    self._transactional = self._transaction_mode(self)
        return self._transactional

    # -- policy -------------------------------------------------------------------------

    @staticmethod
    def applies(tool: Tool) -> bool:
        """Every write tool unless it says ``repeats="safe"`` (see :attr:`Tool.deduplicated`)."""
        return tool.deduplicated

    def _plan(self, tool: Tool) -> _Plan:
        plan = self._plans.get(id(tool))
        if plan is None or plan.tool is not tool:
            plan = _Plan(tool)
            if len(self._plans) > 4096:  # registries rebuilt many times (tests): start afresh
                self._plans = {}
            self._plans[id(tool)] = plan
        return plan

    def _settings(self) -> _Settings:
        """Lease, retention and the completion mode of the app's configuration."""
        cached = self._settings_cache
        if cached is None or cached.config is not self.state.config:
            cached = self._settings_cache = _Settings(self.state.config)
        return cached

    def first_arrival(self, environ: dict[str, Any], signature: str) -> bool:
        """Whether this exact signature arrives for the first time (in the store, so for every
        worker and host sharing it), remembered for as long as it can verify.

        Asked at most once per request: the answer is kept in the environ, so
        the replay check and the rate-limit key (:func:`~bailing_flask.rate_limit_key`)
        agree. Raises :class:`StoreUnavailable`.
        """
        known = environ.get(FIRST_ARRIVAL_KEY)
        if known is not None:
            return bool(known)
        verifier = self.state.middleware.verifier
        window = verifier.window if verifier is not None else self.state.config.window
        first = self.store().remember_signature(signature, ttl_seconds=2 * float(window))
        environ[FIRST_ARRIVAL_KEY] = first
        return first

    def check_replay(self, tool: Tool, call: ToolCall) -> ErrorInfo | None:
        """``BAILING_REJECT_REPLAYS``: refuse an exact signature seen before."""
        if not self.state.config.reject_replays:
            return None
        try:
            first = self.first_arrival(request.environ, call.verified.signature)
        except StoreUnavailable:
            if self._plan(tool).applies:
                return ErrorInfo.make("idempotency_store_unavailable")
            logger.warning("bailing: replay check skipped for read tool %r: store unavailable", tool.name)
            return None
        return None if first else ErrorInfo.make("replayed")

    # -- the run ---------------------------------------------------------------------------

    def run(self, tool: Tool, call: ToolCall, execute: Callable[[], Response]) -> Response:
        """Run ``execute`` at most once per call identity.

        :raises _ApprovalRefused: a ``business_approval`` tool's approval was spent already.
        """
        plan = self._plans.get(id(tool))
        if plan is None or plan.tool is not tool:
            plan = self._plan(tool)
        if not plan.applies:
            if plan.approval:
                refused = self._spend_alone(plan, call)
                if refused is not None:
                    return refused
            return execute()
        if plan.transaction:
            return self.transactional().run(tool, call, execute)
        settings = self._settings()
        verified = call.verified
        key = "idem:" + verified.identity if plan.domain is None else plan.key(call)
        token = _TOKENS.next()
        meta = _trusted_meta(plan.name, verified.job_id, verified.subject,
                             verified.unsigned.idempotency_key)
        try:
            store = self.store()
            if plan.approval:
                held = _spend_approval(store, tool, call, key, token=token,
                                      lease_seconds=settings.lease,
                                      retention_seconds=settings.retention, meta=meta)
            else:
                held = store.claim(key, token=token, lease_seconds=settings.lease,
                                   retention_seconds=settings.retention, meta=meta)
        except StoreUnavailable as exc:
            logger.error("bailing: idempotency store unavailable (%s); refusing side effect of %r",
                         exc, plan.name)
            return store_refusal(self.state, exc)
        if time.monotonic() - self._last_cleanup >= _CLEANUP_INTERVAL:
            self._maybe_cleanup()
        if held is not None:
            refused = self._held(plan, call, key, held)
            if refused is not None:
                return refused
        return self._first_run(store, plan, key, token, settings, execute)

    def _spend_alone(self, plan: _Plan, call: ToolCall) -> Response | None:
        """A ``business_approval`` tool without de-duplication: spend its approval, once.

        No reservation and no stored answer, so a repeat of the same call is
        refused like any other (``approval: used``). ``None``: spent, run it.
        """
        settings = self._settings()
        verified = call.verified
        meta = _trusted_meta(plan.name, verified.job_id, verified.subject,
                             verified.unsigned.idempotency_key)
        try:
            _spend_approval(self.store(), plan.tool, call, "idem:" + verified.identity,
                           token=_TOKENS.next(), lease_seconds=settings.lease,
                           retention_seconds=settings.retention, meta=meta, reserve=False)
        except StoreUnavailable as exc:
            logger.error("bailing: idempotency store unavailable (%s); refusing %r, whose "
                         "approval cannot be spent", exc, plan.name)
            return store_refusal(self.state, exc)
        return None

    def _held(self, plan: _Plan, call: ToolCall, key: str, held: Reservation) -> Response | None:
        """The answer to a call someone else holds; ``None`` when the caller owns it after all."""
        if held.outcome == "completed":
            return self._replay(plan, call, key, held)
        if held.outcome == "in_progress":
            return self.state.error_response(ErrorInfo.make("idempotency_in_progress"))
        if held.outcome == "uncertain":
            logger.warning("bailing: call %s of tool %r is uncertain (an earlier attempt did not "
                           "finish); resolve it with `flask bailing idempotency`", key, plan.name)
            return self.state.error_response(ErrorInfo.make("idempotency_uncertain"))
        # "reserved" from a store's own claim(): the caller owns the key after all
        return None

    def _first_run(self, store: IdempotencyStore, plan: _Plan, key: str, token: str,
                   settings: _Settings, execute: Callable[[], Response]) -> Response:
        # The exception is seen here, on its way out of the view and before the
        # app's own error handlers turn it into whatever response they like.
        try:
            response = answer_of(execute)
        except ExerciseStop:
            _release(store, key, token)  # the exercise stopped it before the view: nothing happened
            raise
        except BaseException as exc:
            self._failed(store, plan, key, token, f"the view raised {type(exc).__name__}")
            raise
        status = response.status_code
        if status >= 500:
            if response.headers.get(REASON_HEADER) == "invalid_response":
                # the view finished (its effect happened); only its answer was withheld
                self._failed(store, plan, key, token, "the view's result did not match its "
                             "declared response shape and was withheld")
            else:
                self._failed(store, plan, key, token, f"the view answered HTTP {status}")
            return response
        # the response came from Flask: an int status, str header pairs, bytes; no re-checks
        chunks = response.response
        if chunks.__class__ is list and len(chunks) == 1 and chunks[0].__class__ is bytes:
            body: bytes = chunks[0]  # what get_data() would join, without the copy
        else:
            body = response.get_data()
        stored = _trusted_response(status, _stored_headers(response.headers), body)
        try:
            if settings.defer:
                recorded = store.complete_deferred(key, token=token, response=stored,
                                                   retention_seconds=settings.retention)
            else:
                recorded = store.complete(key, token=token, response=stored,
                                          retention_seconds=settings.retention)
        except StoreUnavailable:
            # the side effect happened: answer it; the entry turns uncertain after its lease
            logger.error("bailing: could not record the outcome of call %s of tool %r; it will "
                         "show as uncertain", key, plan.name)
            return response
        if recorded is False:
            logger.error("bailing: call %s of tool %r was resolved or taken over while it ran",
                         key, plan.name)
        return response

    def _failed(self, store: IdempotencyStore, plan: _Plan, key: str, token: str, why: str) -> None:
        """A side effect failed: uncertain (the transaction mode rolls back instead)."""
        try:
            store.mark_uncertain(key, token=token, note=why)
        except StoreUnavailable:
            logger.error("bailing: could not record the failure of call %s of tool %r; it will "
                         "show as uncertain when its lease runs out", key, plan.name)
            return
        logger.warning(
            "bailing: call %s of tool %r failed (%s) and may have had part of its effect: recorded "
            "as uncertain, repeats are refused until `flask bailing idempotency resolve` decides "
            "(repeats='transaction' rolls a failed call back instead, if its whole effect is in "
            "the app's database)",
            key, plan.name, why,
        )

    def _replay(self, plan: _Plan, call: ToolCall, key: str, reservation: Reservation) -> Response:
        return replayed_answer(self.state, plan.name, call, key, reservation.entry, "store")


def replayed_answer(state: BailingState, tool_name: str, call: ToolCall, key: str, entry: Entry,
                    kept_in: str) -> Response:
    """The recorded answer of a completed call, for a repeat of it (both modes).

    A recorded answer holds what the view answered the subject who made the
    call. A repeat by another subject (a domain key that leaves the subject
    out: "one refund per order") ran nothing either, but gets a refusal
    instead of that answer.
    """
    if entry.meta.subject != call.verified.subject:
        logger.warning("bailing: call %s of tool %r was made by another subject; its recorded "
                       "answer is not given to %r", key, tool_name, call.verified.subject)
        return state.error_response(ErrorInfo.make("idempotency_other_subject"))
    if entry.meta.unsigned_key != call.unsigned.idempotency_key:
        logger.warning(
            "bailing: suspicious repeat of call %s (tool %r, job %r): the unsigned "
            "X-Bailing-Idempotency-Key changed from %r to %r; answered from the %s",
            key, tool_name, call.job_id, entry.meta.unsigned_key, call.unsigned.idempotency_key,
            kept_in,
        )
    stored = entry.response
    assert stored is not None  # completed entries carry their response
    response = Response(stored.body, status=stored.status)
    response.headers.clear()
    for name, value in stored.headers:
        if not is_hop_by_hop(name):  # e.g. a response an operator resolved by hand
            response.headers.add(name, value)
    response.headers[REPLAY_HEADER] = "true"
    request.environ[REPLAYED_KEY] = True
    return response


def _release(store: IdempotencyStore, key: str, token: str) -> None:
    """Give up a claim whose view never ran: an identical call may run."""
    try:
        store.release(key, token=token)
    except StoreUnavailable:  # the entry turns uncertain when its lease runs out
        logger.error("bailing: could not release call %s; it will show as uncertain when its "
                     "lease runs out", key)
