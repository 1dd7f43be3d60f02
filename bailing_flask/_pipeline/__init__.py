"""The request pipeline behind :class:`~bailing_flask.Bailing` (internal: import from ``bailing_flask``).

From the declarations and ``app.url_map`` to the registry and the catalog
(``registry``, ``schema``, ``catalog``, ``param_hazards``), and for each
call the gate (``gate``) with what it runs in order: arguments
(``arguments``), subject and authorization (``authz``), replay
(``idempotency``), the view, the projection of its answer (``projection``);
besides, the hub-facing endpoints (``wellknown``, ``callbacks``). Nothing
here is public API; names may change in any release.
"""
