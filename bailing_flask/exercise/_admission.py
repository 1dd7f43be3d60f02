"""How the exercise's requests go through the real gate, which has no exercise mode.

Every request of the exercise passes the same steps as the hub's: the
signature, the subject loader, the arguments, the authorizer, the business
approval, the replay check and the admission hooks. What the exercise needs
it gets from outside the gate, for its own run only, and puts back:

* the de-duplication and replay records of its calls go to a throwaway
  memory store of the run (:func:`for_this_request`), never to the app's
  store: the exercise's calls are never repeats of the hub's, nor the hub's
  of them;
* an unsigned request (the ``unsigned`` check) reaches a tool as if it
  declared ``allow_unsigned=True`` (:func:`for_this_request`), so that the
  gate lets it through to the view's decorators exactly as it would for a
  tool that declares it, validation of the human's arguments included; the
  view itself never runs (the exercise stops there);
* a stack that does not lead through the ``@tool`` wrapper (``@tool`` above
  the route decorator) is never sent an admitted request: nothing would stop
  it before the view (:func:`unguarded`).

The store and the flag hold for the exercise's own request only: each is
sent in a context of its own (``contextvars.Context().run(...)``) and both
are set in it, where no other thread or request sees them and no header or
environ key can set them. A hub call served meanwhile by the same process
keeps the app's store and the tool's own ``allow_unsigned``.
"""

from __future__ import annotations

from typing import Any

from bailing_flask._pipeline.gate import leads_to_declaration, take_unsigned_here
from bailing_flask._pipeline.idempotency import idempotency_of, use_store_here
from bailing_flask._pipeline.registry import registry_of
from bailing_flask.stores import IdempotencyStore

__all__ = ["for_this_request", "unguarded"]


def for_this_request(state: Any, store: IdempotencyStore, unsigned_to: tuple[str, str] | None) -> None:
    """In the current context (the exercise's one request): records go to ``store``, and
    the tool at ``unsigned_to`` (endpoint, method) takes unsigned requests."""
    use_store_here(idempotency_of(state), store)
    if unsigned_to is not None:
        tool = registry_of(state).by_endpoint.get(unsigned_to)
        if tool is not None and not tool.options.allow_unsigned:
            take_unsigned_here(tool)


def unguarded(state: Any, endpoint: str) -> bool:
    """Whether the view the gate runs for ``endpoint`` does not lead to the declared view."""
    view = state.app.view_functions.get(endpoint)
    if view is not None and view is state.gates.get(endpoint):
        view = getattr(view, "__wrapped__", view)
    return view is not None and not leads_to_declaration(view)
