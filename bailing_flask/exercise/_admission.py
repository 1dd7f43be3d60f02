"""How the exercise's requests go through the real gate, which has no exercise mode.

Every request of the exercise passes the same steps as the hub's: the
signature, the subject loader, the arguments, the authorizer, the business
approval, the replay check and the admission hooks. What the exercise needs
it gets from outside the gate, for its own run only, and puts back:

* the de-duplication and replay records of its calls go to a throwaway
  memory store (:func:`throwaway_store`), never to the app's store: the
  exercise's calls are never repeats of the hub's, nor the hub's of them;
* an unsigned request (the ``unsigned`` check) goes to a tool flagged
  ``allow_unsigned=True`` for that one request (:func:`allowing_unsigned`),
  so that the gate lets it through to the view's decorators exactly as it
  would for a tool that declares it, validation of the human's arguments
  included; the view itself never runs (the exercise stops there);
* a stack that does not lead through the ``@tool`` wrapper (``@tool`` above
  the route decorator) is never sent an admitted request: nothing would stop
  it before the view (:func:`unguarded`).

The flag and the store are the process's own for the duration: like the
rest of the exercise, run it in a process that serves no traffic.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from bailing_flask._pipeline.gate import leads_to_declaration
from bailing_flask._pipeline.idempotency import idempotency_of
from bailing_flask._pipeline.registry import registry_of
from bailing_flask.stores.memory import MemoryStore

__all__ = ["throwaway_store", "allowing_unsigned", "unguarded"]


@contextlib.contextmanager
def throwaway_store(state: Any) -> Iterator[None]:
    """For the run: the idempotency and replay records go to a memory store of their own."""
    runner = idempotency_of(state)
    saved = runner._store
    runner._store = MemoryStore()
    try:
        yield
    finally:
        runner._store = saved


@contextlib.contextmanager
def allowing_unsigned(state: Any, endpoint: str, method: str) -> Iterator[None]:
    """For one request: the tool at ``endpoint``/``method`` takes unsigned requests."""
    tool = registry_of(state).by_endpoint.get((endpoint, method))
    if tool is None or tool.options.allow_unsigned:
        yield
        return
    options = tool.options
    object.__setattr__(tool, "options", options.model_copy(update={"allow_unsigned": True}))
    try:
        yield
    finally:
        object.__setattr__(tool, "options", options)


def unguarded(state: Any, endpoint: str) -> bool:
    """Whether the view the gate runs for ``endpoint`` does not lead to the declared view."""
    view = state.app.view_functions.get(endpoint)
    if view is not None and view is state.gates.get(endpoint):
        view = getattr(view, "__wrapped__", view)
    return view is not None and not leads_to_declaration(view)
