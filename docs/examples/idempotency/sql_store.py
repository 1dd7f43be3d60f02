"""docs/concepts/idempotency.rst: the three ways to give an app the SQL store."""

from flask import Flask
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import Engine

# [start:ways]
from bailing_flask.stores import SQLStore


def store_from_a_url(app: Flask) -> None:   # an engine and a small pool of its own
    app.config["BAILING_STORE"] = "postgresql+psycopg://shop:secret@db.internal/shop"


def store_on_the_apps_engine(app: Flask, db: SQLAlchemy) -> None:
    # the app's own engine, pool, credentials and TLS (Flask-SQLAlchemy)
    app.config["BAILING_STORE"] = SQLStore(db)          # db.engine, looked up on first use


def store_on_an_engine(app: Flask, engine: Engine) -> None:
    app.config["BAILING_STORE"] = SQLStore(engine)
# [end:ways]
