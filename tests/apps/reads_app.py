"""Read-only tool views that read query and body keys by hand, some declared, some not.

``/tickets`` reads ``request.args.get("status")`` without declaring it;
``/search`` loads ``request.args`` through a marshmallow schema whose field
``q`` the catalog does not have; ``/dump`` reads the whole query string
(``to_dict()``) and declares none; ``/orders`` declares the ``status`` it
reads (``Param``); ``/lookup`` is a read-only ``POST`` whose JSON body
model declares ``sku`` while the view also reads ``warehouse``; ``/typed``
reads a declared ``query=`` model's field; ``/kb`` loads ``request.args``
through a marshmallow schema whose field is declared; ``/quiet`` declares a
parameter and reads nothing.
"""

from __future__ import annotations

from typing import Any

from flask import Flask, jsonify, request
from marshmallow import EXCLUDE, Schema, fields
from pydantic import BaseModel

from bailing_flask import Bailing, Param, tool

from ..helpers import STRONG_SECRET


class SearchSchema(Schema):
    q = fields.String(load_default="")


class LookupBody(BaseModel):
    sku: str


class TypedQuery(BaseModel):
    limit: int = 10


def create_app() -> Flask:
    app = Flask("reads_app")
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    bailing = Bailing(app)
    bailing.subject_loader(lambda subject: None if subject.startswith("__bailing") else subject)
    bailing.authorizer(lambda call: call.user is not None)

    @app.get("/api/v1/tickets")
    @tool(scope="ticket.read")
    def tickets() -> Any:
        """The open tickets, optionally of one status."""
        return jsonify(status=request.args.get("status"), tickets=[])

    @app.get("/api/v1/search")
    @tool(scope="kb.read")
    def search() -> Any:
        """Search the knowledge base."""
        loaded = SearchSchema(unknown=EXCLUDE).load(request.args)
        return jsonify(q=loaded["q"], hits=[])

    @app.get("/api/v1/dump")
    @tool(scope="debug.read")
    def dump() -> Any:
        """Echo the query string."""
        return jsonify(request.args.to_dict())

    @app.get("/api/v1/orders")
    @tool(scope="order.read", params=[Param("status", description="Only orders of this status.")])
    def orders() -> Any:
        """The orders, optionally of one status."""
        return jsonify(status=request.args.get("status"), orders=[])

    @app.post("/api/v1/lookup")
    @tool(scope="stock.read", readonly=True, body=LookupBody)
    def lookup() -> Any:
        """Stock of one SKU."""
        data = request.get_json()
        return jsonify(sku=data["sku"], warehouse=data.get("warehouse"), stock=3)

    @app.get("/api/v1/typed")
    @tool(scope="typed.read", query=TypedQuery)
    def typed() -> Any:
        """A declared query model."""
        return jsonify(limit=int(request.args.get("limit", 10)))

    @app.get("/api/v1/kb")
    @tool(scope="kb.read", params=[Param("q", description="What to look for.")])
    def declared_search() -> Any:
        """Search the knowledge base (the schema's field is declared)."""
        loaded = SearchSchema().load(request.args)  # unknown=RAISE: marshmallow iterates the keys
        return jsonify(q=loaded["q"], hits=[])

    @app.get("/api/v1/quiet")
    @tool(scope="quiet.read", params=[Param("status", description="Ignored.")])
    def quiet() -> Any:
        """Reads nothing of the request (the gate's own validation reads the query)."""
        return jsonify(ok=True)

    return app
