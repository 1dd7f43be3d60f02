"""The shop's own users: password login with a session cookie, and the permission table.

This is the legacy authentication the back-office pages always had. The
hub integration reuses :func:`load_user` (the same users and permissions)
but not the session: hub calls carry a signed subject instead of a cookie.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from flask import Blueprint, abort, flash, g, redirect, render_template, request, session, url_for
from werkzeug.security import check_password_hash

from .db import get_db

__all__ = ["User", "bp", "load_user", "login_required", "permission_required"]

F = TypeVar("F", bound=Callable[..., Any])

bp = Blueprint("auth", __name__)


@dataclass(frozen=True)
class User:
    """A back-office user of one tenant and what they may do."""

    tenant_id: str
    user_id: str
    display_name: str
    permissions: frozenset[str]

    @property
    def subject(self) -> str:
        """The structured subject the hub sends for this user (``tenant:user``)."""
        return f"{self.tenant_id}:{self.user_id}"

    def can(self, permission: str) -> bool:
        return permission in self.permissions


def load_user(conn: sqlite3.Connection, tenant_id: str, user_id: str) -> User | None:
    """The user with their permissions, or ``None`` if there is no such user in that tenant."""
    row = conn.execute(
        "SELECT display_name FROM users WHERE tenant_id = ? AND user_id = ?", (tenant_id, user_id)
    ).fetchone()
    if row is None:
        return None
    permissions = conn.execute(
        "SELECT permission FROM permissions WHERE tenant_id = ? AND user_id = ?", (tenant_id, user_id)
    ).fetchall()
    return User(tenant_id, user_id, row["display_name"], frozenset(p["permission"] for p in permissions))


def _check_password(conn: sqlite3.Connection, tenant_id: str, user_id: str, password: str) -> User | None:
    row = conn.execute(
        "SELECT password_hash FROM users WHERE tenant_id = ? AND user_id = ?", (tenant_id, user_id)
    ).fetchone()
    if row is None or not check_password_hash(row["password_hash"], password):
        return None
    return load_user(conn, tenant_id, user_id)


@bp.before_app_request
def _load_logged_in_user() -> None:
    tenant_id, user_id = session.get("tenant_id"), session.get("user_id")
    g.user = load_user(get_db(), tenant_id, user_id) if tenant_id and user_id else None


def current_user() -> User | None:
    """The logged-in user of this browser session."""
    return cast("User | None", g.get("user"))


def login_required(view: F) -> F:
    """Send anonymous visitors to the login page, then back where they wanted to go."""

    @functools.wraps(view)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if current_user() is None:
            return redirect(url_for("auth.login", next=request.full_path.rstrip("?")))
        return view(*args, **kwargs)

    return cast(F, wrapped)


def permission_required(permission: str) -> Callable[[F], F]:
    """403 for logged-in users who lack ``permission`` (use below :func:`login_required`)."""

    def decorate(view: F) -> F:
        @functools.wraps(view)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            user = current_user()
            if user is None or not user.can(permission):
                abort(403)
            return view(*args, **kwargs)

        return cast(F, wrapped)

    return decorate


def _safe_next(target: str | None) -> str:
    # only local paths: an open redirect after login is a classic phishing aid
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return url_for("shop.order_list")


@bp.route("/login", methods=["GET", "POST"])
def login() -> Any:
    if request.method == "POST":
        tenant_id = request.form.get("tenant", "").strip()
        user_id = request.form.get("username", "").strip()
        user = _check_password(get_db(), tenant_id, user_id, request.form.get("password", ""))
        if user is not None:
            session.clear()
            session["tenant_id"], session["user_id"] = user.tenant_id, user.user_id
            return redirect(_safe_next(request.args.get("next")))
        flash("Unknown company, user name or password.")
    return render_template("login.html"), 200 if request.method == "GET" else 401


@bp.post("/logout")
def logout() -> Any:
    session.clear()
    return redirect(url_for("auth.login"))
