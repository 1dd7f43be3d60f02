"""The desk's own tables (Flask-SQLAlchemy)."""

from __future__ import annotations

from sqlalchemy.orm import Mapped, mapped_column

from .extensions import db


class Agent(db.Model):  # type: ignore[name-defined,misc]
    __tablename__ = "desk_agent"
    id: Mapped[int] = mapped_column(primary_key=True)
    tenant: Mapped[str]
    login: Mapped[str]
    token: Mapped[str] = mapped_column(unique=True)
    #: space-separated: "agent", "supervisor"
    roles: Mapped[str] = mapped_column(default="")


class Ticket(db.Model):  # type: ignore[name-defined,misc]
    __tablename__ = "desk_ticket"
    id: Mapped[int] = mapped_column(primary_key=True)
    tenant: Mapped[str]
    title: Mapped[str]
    status: Mapped[str] = mapped_column(default="open")
