"""Exactly once: the idempotency record commits in the app's own database transaction.

The store mode (:mod:`bailing_flask._pipeline.idempotency`) reserves a call in a store
of its own, runs the view, then records the answer. The view's commit and
that record are two writes, so a crash between them leaves a call
*uncertain*. In the transaction mode there is one write: the reservation
row is inserted at the start of the view's own database transaction, the
view's changes follow in the same transaction, the answer is written into
that row, and one commit makes all of it durable -- or a rollback (an
exception, a ``5xx``, a killed worker, a lost connection) leaves nothing.

* A repeat of a committed call finds the row and gets its answer; nothing
  runs.
* A repeat of a call whose transaction rolled back finds no row and runs:
  nothing had happened.
* A duplicate arriving while the first still runs collides with the first
  one's uncommitted row on the table's primary key: PostgreSQL makes its
  ``INSERT`` wait for the first transaction (then it sees the committed row
  and gets the answer), SQLite makes it wait for the database's write lock
  (``busy_timeout``); a wait that times out answers
  ``409 idempotency_in_progress``. Never two effects.
* There is no lease: an uncommitted row is invisible to everyone else and
  vanishes with its transaction.

The one thing that can break this is a view that ends the package's
transaction itself (a ``COMMIT`` statement of its own, or a commit on
another connection while it runs). The SQLAlchemy adapter turns the view's
``session.commit()`` into a flush and a savepoint for the duration of the
call, and its ``rollback()``/``close()`` into a return to that savepoint, so
SQLAlchemy views keep their code; on a DB-API connection the view must
leave ``BEGIN``/``COMMIT`` to the package and use savepoints for nested
blocks. A view that ends the transaction anyway is detected (the savepoint
after the reservation is gone, the driver has no transaction open, or the
engine reported a commit during the view): the call answers ``500
transaction_ended_by_view`` and is left *uncertain* -- the only way one can
arise, with a worker killed after such a ``COMMIT``.

Adapters: :class:`SQLAlchemyTransaction` (Flask-SQLAlchemy, or any
SQLAlchemy ``Session``) and :class:`DBAPITransaction` (a plain ``sqlite3``
or ``psycopg`` 3 connection). Nothing here imports SQLAlchemy or a driver
until an adapter uses it.

The package is split by job: ``_records`` (the table's DDL, its rows and
statements, shared by both adapters), ``_adapter`` (what the mode needs from
a database), ``_sqlalchemy`` and ``_dbapi`` (the two adapters) and ``_mode``
(the run of one call). Import from ``bailing_flask.transactional``.
"""

from __future__ import annotations

from bailing_flask.transactional._adapter import TransactionAdapter
from bailing_flask.transactional._dbapi import DBAPITransaction
from bailing_flask.transactional._mode import (
    TransactionalIdempotency as TransactionalIdempotency,
    in_transaction_mode as in_transaction_mode,
    resolve_adapter as resolve_adapter,
)
from bailing_flask.transactional._records import TABLE_NAME, create_table_sql
from bailing_flask.transactional._sqlalchemy import SQLAlchemyTransaction

__all__ = [
    "TABLE_NAME",
    "TransactionAdapter",
    "SQLAlchemyTransaction",
    "DBAPITransaction",
    "create_table_sql",
]
