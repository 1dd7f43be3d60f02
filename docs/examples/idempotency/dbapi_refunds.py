"""docs/concepts/idempotency.rst, exactly once with a plain sqlite3 connection per request."""

import os
import sqlite3

from flask import Flask, g, jsonify
from flask.typing import ResponseReturnValue
from pydantic import BaseModel, Field

from bailing_flask import Bailing, current_call, tool
from bailing_flask.transactional import DBAPITransaction, create_table_sql

app = Flask(__name__)
app.config.update(BAILING_SECRETS=[os.environ["BAILING_SECRET"]], DATABASE=os.environ.get("DATABASE", "shop.db"))


def get_db() -> sqlite3.Connection:
    if "db" not in g:
        g.db = sqlite3.connect(app.config["DATABASE"])
    return g.db  # type: ignore[no-any-return]


@app.teardown_appcontext
def close_db(exc: BaseException | None = None) -> None:
    conn = g.pop("db", None)
    if conn is not None:
        conn.close()


# [start:setup]
bailing = Bailing(transaction=DBAPITransaction(get_db))   # get_db(): the request's connection
# [end:setup]
bailing.init_app(app)
bailing.authorizer(lambda call: call.subject == "t1:alice")


def migrate() -> None:
    with sqlite3.connect(app.config["DATABASE"]) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS refunds (id INTEGER PRIMARY KEY, order_id INTEGER, amount REAL)")
        conn.executescript(create_table_sql("sqlite"))


class RefundBody(BaseModel):
    order_id: int = Field(description="The order to refund.", ge=1, le=2**53)
    amount: float = Field(description="The amount, in euros.", gt=0, le=1_000_000)


@app.post("/api/refunds")
@tool(scope="refund.write", body=RefundBody, repeats="transaction")
def refund_create() -> ResponseReturnValue:
    body = current_call.body
    assert isinstance(body, RefundBody)
    cursor = get_db().execute("INSERT INTO refunds (order_id, amount) VALUES (?, ?)", (body.order_id, body.amount))
    return jsonify(refund_id=cursor.lastrowid), 201   # no commit: the package commits the call
