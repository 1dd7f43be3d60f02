"""The app's own tables (Flask-SQLAlchemy)."""

from __future__ import annotations

from decimal import Decimal

from flask_login import UserMixin
from sqlalchemy import Numeric
from sqlalchemy.orm import Mapped, mapped_column

from .extensions import db, login_manager


class User(UserMixin, db.Model):  # type: ignore[name-defined,misc]
    __tablename__ = "guide_user"
    id: Mapped[int] = mapped_column(primary_key=True)
    tenant: Mapped[str]
    login: Mapped[str]
    can_refund: Mapped[bool] = mapped_column(default=False)


class Refund(db.Model):  # type: ignore[name-defined,misc]
    __tablename__ = "guide_refund"
    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int]
    order_id: Mapped[int]
    amount: Mapped[Decimal] = mapped_column(Numeric(10, 2))
    job_id: Mapped[str | None]


@login_manager.user_loader
def load_session_user(user_id: str) -> User | None:
    return db.session.get(User, int(user_id))
