"""The apps the request-level benchmarks run: one business view, three ways.

* :func:`tool_app` - what users run: ``Bailing(app)``, a subject loader, an
  app-wide authorizer, and ``@tool`` views:

  - ``POST /api/orders`` with a pydantic body model (50-byte JSON body),
    ``repeats="safe"``: every call runs (the headline tool call);
  - ``GET /api/orders`` with a pydantic query model;
  - ``POST /api/orders/idem`` - the same POST tool with de-duplication on
    (the default for a side-effecting tool), over ``BAILING_STORE``;
  - ``GET /account/orders`` - an ordinary route of the app, not a tool (the
    ``ordinary`` group).

* :func:`rows_app` - one read tool answering 20 ORM-like rows, with and
  without ``response=`` (what the return-shape projection costs).

* :func:`bare_app` - the same views without the package: the POST view
  parses its JSON body with ``request.get_json()``, the GET view reads
  ``request.args``; they answer the same bytes. It has the same ordinary
  route, so it is also the plain Flask app of the ``ordinary`` group.

* :func:`handwritten_app` - the same views behind the integration a
  competent team would write by hand instead of using the package
  (:func:`hub_tool`): HMAC verify of the same canonical string, the same
  timestamp window, the same subject loader, pydantic validation of the
  body (``model_validate_json``) or query, the same authorizer, then the
  view.

The gunicorn-served benchmarks import the factories from here
(``benchmarks._apps:tool_app()``), configured from the environment:
``BENCH_SECRET``, ``BENCH_STORE`` and ``BENCH_DEFER_COMPLETION``.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import io
import os
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal, NamedTuple

from flask import Flask, Response, g, request
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from bailing_flask._state import state_of
from bailing_flask._pipeline.catalog import catalog_of

SECRET = "bench-secret-0123456789abcdefghijklmnopqrstuvwxyz"
SUBJECT = "u-179"
WINDOW = 300
POST_PATH = "/api/orders"
IDEM_PATH = "/api/orders/idem"
GET_PATH = "/api/orders"
POST_TOOL = "order_create"
IDEM_TOOL = "order_create_once"
GET_TOOL = "order_list"
#: The POST tool's arguments; the hub sends them as a 50-byte JSON body.
POST_ARGS = {"sku": "A-1001", "quantity": 2, "note": "gift wrap!!"}
#: The GET tool's arguments; the hub sends them as ``?status=open&limit=10``.
GET_ARGS = {"status": "open", "limit": 10}
SCOPE_WRITE = "orders.write"
SCOPE_READ = "orders.read"


class OrderBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sku: str = Field(description="Stock keeping unit.", min_length=1, max_length=32)
    quantity: int = Field(description="How many.", ge=1, le=1000)
    note: str = Field("", description="Free text for the packer.", max_length=200)


class OrderQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Literal["open", "paid", "shipped"] | None = Field(None, description="Only orders in this state.")
    limit: int = Field(20, description="Page size.", ge=1, le=100)


class User(NamedTuple):
    id: str
    scopes: frozenset[str]


USERS = {SUBJECT: User(SUBJECT, frozenset({SCOPE_READ, SCOPE_WRITE}))}


def load_subject(subject: str) -> User | None:
    """The subject loader every variant uses: a dictionary lookup."""
    return USERS.get(subject)


def authorize(call: Any) -> bool:
    """The authorizer every variant calls: the user holds the tool's scope."""
    user = call.user
    return user is not None and call.tool.scope in user.scopes


def _created(sku: str, quantity: int) -> dict[str, Any]:
    return {"ok": True, "sku": sku, "quantity": quantity}


def _listed(status: str | None, limit: int) -> dict[str, Any]:
    return {"ok": True, "status": status, "limit": limit, "orders": []}


#: An ordinary route of the app (its own web front end's JSON), not a tool: unsigned requests.
ORDINARY_PATH = "/account/orders"
ORDINARY_QUERY = "page=2"


def _ordinary_route(app: Flask) -> None:
    """The same ordinary view in every app that has it: it reads the query, answers JSON."""

    @app.get(ORDINARY_PATH)
    def account_orders() -> Any:
        return {"ok": True, "page": int(request.args.get("page", "1")), "orders": []}


# -- what users run ------------------------------------------------------------------------


def tool_app(store: str | None = None, secret: str | None = None,
             defer: bool | None = None, config: Mapping[str, Any] | None = None) -> Flask:
    """``defer``: ``BAILING_IDEMPOTENCY_DEFER_COMPLETION`` (default: ``BENCH_DEFER_COMPLETION=1``).

    ``config``: more ``app.config`` entries, set before ``Bailing(app)`` (the
    direct audit sink). The app also has the ordinary route
    :data:`ORDINARY_PATH`, which is not a tool.
    """
    from bailing_flask import Bailing, current_call, tool

    app = Flask("bench_tool")
    app.config.update(
        BAILING_SECRETS=[secret or os.environ.get("BENCH_SECRET", SECRET)],
        BAILING_STORE=store or os.environ.get("BENCH_STORE") or "memory://",
        BAILING_IDEMPOTENCY_DEFER_COMPLETION=(
            defer if defer is not None else os.environ.get("BENCH_DEFER_COMPLETION") == "1"),
    )
    app.config.update(config or {})
    _ordinary_route(app)
    bailing = Bailing(app)
    bailing.subject_loader(load_subject)
    bailing.authorizer(authorize)

    @app.post(POST_PATH)
    @tool(name=POST_TOOL, scope=SCOPE_WRITE, body=OrderBody, repeats="safe")
    def order_create() -> Any:
        """Create an order."""
        body = current_call.body
        return _created(body.sku, body.quantity)  # type: ignore[union-attr]

    @app.post(IDEM_PATH)
    @tool(name=IDEM_TOOL, scope=SCOPE_WRITE, body=OrderBody)
    def order_create_once() -> Any:
        """Create an order, at most once per call."""
        body = current_call.body
        return _created(body.sku, body.quantity)  # type: ignore[union-attr]

    @app.get(GET_PATH)
    @tool(name=GET_TOOL, scope=SCOPE_READ, query=OrderQuery, readonly=True)
    def order_list() -> Any:
        """List orders."""
        query = current_call.query
        return _listed(query.status, query.limit)  # type: ignore[union-attr]

    return app


# -- the same read tool with and without a declared return shape ------------------------------------

ROWS_PATH = "/api/orders/rows"
ROWS_TOOL = "order_rows"
#: How many rows the view returns (the default cap of 50 cuts nothing).
ROWS = 20


class CustomerOut(BaseModel):
    customer_id: int
    name: str


class OrderOut(BaseModel):
    order_id: int
    order_no: str
    status: str
    amount: float
    customer: CustomerOut
    note: str = Field("", max_length=200)


class OrderRowsOut(BaseModel):
    orders: list[OrderOut]
    total: int


def _rows() -> dict[str, Any]:
    """What an ORM-backed search hands the view: 20 rows of 10 columns, a nested customer of 4."""
    return {
        "orders": [
            {"order_id": 1000 + i, "order_no": f"T1-{1000 + i}", "status": "paid", "amount": 19.9 + i,
             "note": "leave at the door", "internal_note": "VIP, escalate", "warehouse_id": 3,
             "cost_price": 7.25, "created_by": "u1", "updated_at": "2024-05-02T10:15:00Z",
             "customer": {"customer_id": 100 + i, "name": "Ann Example", "phone": "+1 555 0100",
                          "email": "ann@example.com"}}
            for i in range(ROWS)
        ],
        "total": ROWS,
        "page": 1,
    }


def _trimmed(rows: dict[str, Any]) -> dict[str, Any]:
    """What a team writes by hand instead of ``response=``: the same fields, picked in the view."""
    return {
        "orders": [
            {"order_id": o["order_id"], "order_no": o["order_no"], "status": o["status"],
             "amount": o["amount"], "note": o["note"][:200],
             "customer": {"customer_id": o["customer"]["customer_id"], "name": o["customer"]["name"]}}
            for o in rows["orders"][:50]
        ],
        "total": rows["total"],
    }


def rows_app(shaped: bool, secret: str | None = None, by_hand: bool = False) -> Flask:
    """One read tool returning :func:`_rows`.

    ``shaped=True`` declares ``response=OrderRowsOut``; ``by_hand=True``
    trims the rows in the view instead (:func:`_trimmed`).
    """
    from bailing_flask import Bailing, tool

    app = Flask("bench_rows_shaped" if shaped else "bench_rows_hand" if by_hand else "bench_rows_plain")
    app.config.update(BAILING_SECRETS=[secret or os.environ.get("BENCH_SECRET", SECRET)],
                      BAILING_STORE="memory://")
    bailing = Bailing(app)
    bailing.subject_loader(load_subject)
    bailing.authorizer(authorize)
    options: dict[str, Any] = {"response": OrderRowsOut} if shaped else {}

    @app.get(ROWS_PATH)
    @tool(name=ROWS_TOOL, scope=SCOPE_READ, **options)
    def order_rows() -> Any:
        """List order rows."""
        return _trimmed(_rows()) if by_hand else _rows()

    return app


# -- the same views without the package ------------------------------------------------------


def bare_app() -> Flask:
    """Also the plain Flask app of the ordinary-route comparison (:data:`ORDINARY_PATH`)."""
    app = Flask("bench_bare")
    _ordinary_route(app)

    @app.post(POST_PATH)
    def order_create() -> Any:
        data = request.get_json()
        return _created(data["sku"], data["quantity"])

    @app.post(IDEM_PATH)
    def order_create_once() -> Any:
        data = request.get_json()
        return _created(data["sku"], data["quantity"])

    @app.get(GET_PATH)
    def order_list() -> Any:
        args = request.args
        return _listed(args.get("status"), int(args.get("limit", 20)))

    return app


def middleware_app(secret: str | None = None) -> Flask:
    """The bare app with ``BailingMiddleware`` only: signed requests to undeclared routes."""
    from bailing_flask.wire import BailingMiddleware

    app = bare_app()
    app.wsgi_app = BailingMiddleware(  # type: ignore[method-assign]
        app.wsgi_app, secret or os.environ.get("BENCH_SECRET", SECRET), catalog_path=None
    )
    return app


#: The environ key :func:`verify_floor_app` puts the matched key's label under.
FLOOR_KEY = "bench.floor_verified"


def verify_floor_app(secret: str | None = None) -> Flask:
    """The bare app behind the least a verifying WSGI layer must do: the floor under the middleware.

    Reads the body (its declared length, one read), checks the signature
    with :meth:`bailing_flask.wire.Verifier.verify` (the timestamp window,
    the header formats, the body hash, the canonical string, one HMAC) and
    hands the body back as a new stream. No raw request target, no body
    limit, deadline or spooling, no record for the app: whatever
    ``middleware_vs_bare`` stays below this one's ratio is not the
    middleware's to win back.
    """
    from bailing_flask.wire import Verifier

    app = bare_app()
    verifier = Verifier(secret or os.environ.get("BENCH_SECRET", SECRET), window=WINDOW)
    inner = app.wsgi_app
    BytesIO = io.BytesIO

    def floor(environ: dict[str, Any], start_response: Any) -> Any:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        query = environ.get("QUERY_STRING", "")
        environ[FLOOR_KEY] = verifier.verify(
            signature=environ.get("HTTP_X_BAILING_SIGNATURE"),
            timestamp=environ.get("HTTP_X_BAILING_TIMESTAMP"),
            method=environ["REQUEST_METHOD"],
            path_with_query=environ["PATH_INFO"] + ("?" + query if query else ""),
            body=body,
            on_behalf_of=environ.get("HTTP_X_BAILING_ON_BEHALF_OF", ""),
            job_id=environ.get("HTTP_X_BAILING_JOB_ID", ""),
        )
        environ["wsgi.input"] = BytesIO(body)
        return inner(environ, start_response)

    app.wsgi_app = floor  # type: ignore[method-assign]
    return app


# -- the integration a team would write by hand --------------------------------------------------


class _HandTool(NamedTuple):
    name: str
    scope: str


class HandCall(NamedTuple):
    """What the hand-written integration hands the authorizer and the view."""

    tool: _HandTool
    subject: str
    job_id: str
    user: Any
    body: Any
    query: Any


_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


def _refuse(status: int, error: str) -> Response:
    return Response('{"error":"%s"}' % error, status=status, mimetype="application/json")


def hub_tool(secret: str, name: str, scope: str, *, body: type[BaseModel] | None = None,
             query: type[BaseModel] | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A competent hand-written version of what the package does on the request path.

    Verifies ``ts.METHOD.target.sha256(body).subject.job`` with one HMAC
    and a constant-time compare, the timestamp window, loads the subject,
    validates the body with ``model_validate_json`` (one pass, no dict) or
    the query with ``model_validate``, calls the authorizer, runs the view.
    What it leaves out compared to the package - refusing repeated query
    parameters, naming each bad parameter in the error, audit records and
    signals, the catalog - is what a team would typically leave out too.
    """
    key = secret.encode("utf-8")
    sha256, new_hmac, compare = hashlib.sha256, hmac.new, hmac.compare_digest
    info = _HandTool(name, scope)

    def decorate(view: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(view)
        def wrapper(**kwargs: Any) -> Any:
            environ = request.environ
            signature = environ.get("HTTP_X_BAILING_SIGNATURE", "")
            ts = environ.get("HTTP_X_BAILING_TIMESTAMP", "")
            if not ts.isdigit() or abs(time.time() - int(ts)) >= WINDOW:
                return _refuse(401, "timestamp_out_of_window")
            subject = environ.get("HTTP_X_BAILING_ON_BEHALF_OF", "")
            job_id = environ.get("HTTP_X_BAILING_JOB_ID", "")
            raw = request.get_data(cache=True) if body is not None else b""
            digest = sha256(raw).hexdigest() if raw else _EMPTY_SHA256
            target = environ.get("RAW_URI") or request.full_path.rstrip("?")
            message = f"{ts}.{environ['REQUEST_METHOD']}.{target}.{digest}.{subject}.{job_id}"
            expected = "sha256=" + new_hmac(key, message.encode("utf-8"), sha256).hexdigest()
            if not compare(expected, signature):
                return _refuse(401, "bad_signature")
            user = load_subject(subject) if subject else None
            try:
                parsed_body = body.model_validate_json(raw) if body is not None else None
                parsed_query = query.model_validate(request.args.to_dict()) if query is not None else None
            except ValidationError:
                return _refuse(400, "invalid_parameter")
            call = HandCall(info, subject, job_id, user, parsed_body, parsed_query)
            if authorize(call) is not True:
                return _refuse(403, "forbidden")
            g.hub_call = call
            return view(call, **kwargs)

        return wrapper

    return decorate


def handwritten_app(secret: str | None = None) -> Flask:
    secret = secret or os.environ.get("BENCH_SECRET", SECRET)
    app = Flask("bench_handwritten")

    @app.post(POST_PATH)
    @hub_tool(secret, POST_TOOL, SCOPE_WRITE, body=OrderBody)
    def order_create(call: HandCall) -> Any:
        return _created(call.body.sku, call.body.quantity)

    @app.get(GET_PATH)
    @hub_tool(secret, GET_TOOL, SCOPE_READ, query=OrderQuery)
    def order_list(call: HandCall) -> Any:
        return _listed(call.query.status, call.query.limit)

    return app


# -- catalog over a socket -------------------------------------------------------------------------

CATALOG_PLAIN_PATH = "/bench/plain-catalog"


def catalog_socket_app() -> Any:
    """The catalog app of the ``catalog`` group (``BENCH_CATALOG_TOOLS`` tools, default 1000),
    and a plain view of the same bytes that bypasses the package.

    One WSGI callable dispatches on the path: the plain route goes straight
    to Flask's own ``wsgi_app`` (no middleware, no package code), everything
    else to the app as users run it (middleware first). Same process, same
    worker, same bytes.
    """
    from bailing_flask import Bailing

    from .bench_catalog import make_app

    app, _bailing, inner = make_app(int(os.environ.get("BENCH_CATALOG_TOOLS", "1000")))
    state = state_of(app)
    payload = catalog_of(state).served_bytes

    def plain_catalog() -> Response:
        response = Response(payload, status=200)
        response.headers["Content-Type"] = "application/json; charset=utf-8"
        response.headers["Cache-Control"] = "private, no-store"
        return response

    app.add_url_rule(CATALOG_PLAIN_PATH, "bench_plain_catalog", plain_catalog)
    catalog_of(state)  # the new rule changes the rule count: rebuild once, before serving
    outer = app.wsgi_app

    def dispatch(environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("PATH_INFO") == CATALOG_PLAIN_PATH:
            return inner(environ, start_response)
        return outer(environ, start_response)

    return dispatch
