"""Tools whose JSON bodies are validated in one pass (and some that keep the two-step way)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from flask import Flask, jsonify
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from bailing_flask import Bailing, get_current_call, tool

SECRET = "a-secret-of-at-least-32-bytes-0123456789"
#: the mode pydantic validated each ``Note.text`` in (``"json"``: from the raw body)
MODES: list[str] = []


class Note(BaseModel):
    text: str = Field(max_length=200)
    count: int = 0
    ratio: float = 0.0
    tags: list[str] = []
    extra: dict[str, Any] = {}

    @field_validator("text", mode="before")
    @classmethod
    def _seen(cls, value: Any, info: ValidationInfo) -> Any:
        MODES.append(info.mode)
        return value


class Price(BaseModel):
    amount: Decimal


class Aliased(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    order_id: int = Field(alias="orderId")


def _answer() -> Any:
    call = get_current_call()
    assert call is not None
    body = call.body
    return jsonify(model=type(body).__qualname__, args={k: repr(v) for k, v in call.args.items()})


def create_app(**options: Any) -> Flask:
    """``options``: more ``Bailing`` keywords (``spool_threshold=0``: the body goes to a file)."""
    app = Flask(__name__)
    Bailing(app, secrets=[SECRET], store="memory://", **options)

    @app.post("/notes")
    @tool(scope="note.write", body=Note, authorizer=lambda call: True)
    def note_create() -> Any:
        return _answer()

    @app.post("/prices")
    @tool(scope="price.write", body=Price, authorizer=lambda call: True)
    def price_set() -> Any:
        return _answer()

    @app.post("/aliased")
    @tool(scope="order.write", body=Aliased, authorizer=lambda call: True)
    def aliased_create() -> Any:
        return _answer()

    return app
