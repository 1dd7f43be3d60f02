"""A ten-year-old Flask app, with the extensions such apps have, plus bailing_flask.

An app factory, Flask-SQLAlchemy, Flask-Login, a blueprint under
``/api/v1``, a ``MethodView`` with ``decorators = [login_required]``, a
global "session required" guard, Flask-WTF's ``CSRFProtect``,
Flask-Limiter and an ``async def`` view. Each integration line can be left
out (the keyword arguments of :func:`create_app`), which reproduces the
breakage that line prevents.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from flask import Blueprint, Flask, jsonify, request, session
from flask.views import MethodView
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from flask_login import (
    LoginManager,
    UserMixin,
    current_user,
    fresh_login_required,
    login_required,
    login_user,
)
from flask_sqlalchemy import SQLAlchemy
from flask_wtf.csrf import CSRFProtect, generate_csrf
from pydantic import BaseModel, Field
from sqlalchemy.orm import Mapped, mapped_column

import bailing_flask
from bailing_flask import Bailing, get_arguments, get_current_call, tool

from ..helpers import STRONG_SECRET

db = SQLAlchemy()


class User(UserMixin, db.Model):  # type: ignore[name-defined,misc]
    __tablename__ = "legacy_user"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(unique=True)
    tenant: Mapped[str]
    can_write: Mapped[bool]


class Note(db.Model):  # type: ignore[name-defined,misc]
    __tablename__ = "legacy_note"
    id: Mapped[int] = mapped_column(primary_key=True)
    owner: Mapped[str]
    text: Mapped[str]


class NoteBody(BaseModel):
    text: str = Field(description="The note.", min_length=1, max_length=100)


def notes() -> list[tuple[str, str]]:
    return [(n.owner, n.text) for n in db.session.scalars(db.select(Note).order_by(Note.id))]


def create_app(
    *,
    guard: Literal["aware", "naive", None] = "aware",
    bridge: bool = True,
    csrf: Literal["before", "after", None] = "before",
    csrf_exempt: bool = True,
    limiter_key: Literal["bailing", "remote", "lambda", None] = "bailing",
    login_view: bool = True,
    limit: str = "1000/minute",
    fresh_tool: bool = True,
    csrf_protect: CSRFProtect | None = None,
    **config: Any,
) -> Flask:
    app = Flask("legacy_app")
    app.config.update(
        SECRET_KEY="legacy-secret-key", SQLALCHEMY_DATABASE_URI="sqlite://",
        BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://",
        BAILING_CSRF_EXEMPT=csrf_exempt, RATELIMIT_STORAGE_URI="memory://", **config,
    )
    db.init_app(app)
    login_manager = LoginManager(app)
    if login_view:
        login_manager.login_view = "login"

    @login_manager.user_loader
    def load_session_user(user_id: str) -> User | None:
        return db.session.get(User, int(user_id))

    protect = csrf_protect or CSRFProtect()  # one instance may serve several apps
    if csrf == "before":
        protect.init_app(app)
    bailing = Bailing(app)
    if csrf == "after":
        protect.init_app(app)
    if bridge:
        bailing.bridge_flask_login(login_manager)
    limiter: Limiter | None = None
    if limiter_key is not None:
        keys: dict[str, Any] = {
            "bailing": bailing_flask.rate_limit_key, "remote": get_remote_address,
            # written by hand, as in many apps: the same bucket for everyone behind one address
            "lambda": lambda: request.remote_addr,
        }
        limiter = Limiter(key_func=keys[limiter_key], app=app, default_limits=[limit])

    @bailing.subject_loader
    def load_subject(subject: str) -> User | None:
        tenant, _, name = subject.partition(":")
        user = db.session.scalar(db.select(User).filter_by(name=name))
        return user if user is not None and user.tenant == tenant else None

    @bailing.authorizer
    def authorize(call: Any) -> bool:
        user: User | None = call.user
        return user is not None and (call.tool.readonly or user.can_write)

    if guard is not None:

        @app.before_request
        def require_session() -> Any:
            if guard == "aware" and bailing_flask.is_hub_request():
                return None  # the gate decides; the guard grants nothing
            if request.path.startswith("/api/") and not current_user.is_authenticated:
                return jsonify(error="session required"), 401
            return None

    api = Blueprint("api", __name__, url_prefix="/api/v1")

    @api.get("/me")
    @login_required
    @tool(scope="profile.read")
    def me() -> Any:
        """Who the acting user is."""
        return jsonify(name=current_user.name, tenant=current_user.tenant)

    @api.get("/hours")
    @login_required
    @tool(scope="hours.read", authorizer=lambda call: call.subject is None or call.user is not None)
    def opening_hours() -> Any:
        """Opening hours (anyone may ask the hub; the view still wants a login)."""
        return jsonify(hours="9-17")

    @api.get("/stats")
    @tool(scope="stats.read")
    async def stats() -> Any:
        """How many notes there are."""
        await asyncio.sleep(0)
        return jsonify(notes=len(notes()), user=current_user.name)

    class NotesAPI(MethodView):
        decorators = [login_required]

        @tool(scope="note.read")
        def get(self) -> Any:
            """The acting user's notes."""
            return jsonify(notes=[text for owner, text in notes() if owner == current_user.name])

        @tool(scope="note.write", body=NoteBody)
        def post(self) -> Any:
            """Write a note."""
            db.session.add(Note(owner=current_user.name, text=get_arguments().body_as(NoteBody).text))
            db.session.commit()
            return jsonify(count=len(notes())), 201

    api.add_url_rule("/notes", view_func=NotesAPI.as_view("notes"))

    if fresh_tool:

        @api.post("/notes/purge")
        @fresh_login_required
        @tool(scope="note.write")
        def notes_purge() -> Any:
            """Delete every note (asks for a fresh login)."""
            db.session.execute(db.delete(Note))
            db.session.commit()
            return jsonify(purged=True)

    @api.post("/feedback")
    @tool(scope="feedback.write", body=NoteBody, allow_unsigned=True, validate_unsigned=True)
    def feedback() -> Any:
        """Leave feedback (the web page posts here too)."""
        call = get_current_call()
        if call is None and not current_user.is_authenticated:
            return jsonify(error="session required"), 401
        db.session.add(Note(owner=current_user.name, text="feedback: " + get_arguments().body_as(NoteBody).text))
        db.session.commit()
        return jsonify(ok=True), 201

    @api.get("/profile")
    @login_required
    def profile_page() -> Any:
        """A human page: never a tool."""
        return jsonify(page="profile", name=current_user.name)

    app.register_blueprint(api)

    @app.get("/")
    def home() -> Any:
        return jsonify(page="home", user=current_user.name if current_user.is_authenticated else None)

    @app.get("/login")
    def login() -> Any:
        return jsonify(csrf_token=generate_csrf())

    @app.post("/login")
    def login_post() -> Any:
        user = db.session.scalar(db.select(User).filter_by(name=request.form["name"]))
        if user is None:
            return jsonify(error="unknown"), 401
        login_user(user)
        return jsonify(ok=True)

    @app.get("/whoami")
    def whoami() -> Any:
        return jsonify(user=current_user.name if current_user.is_authenticated else None,
                       session_keys=sorted(session.keys()))

    with app.app_context():
        db.create_all()
        if db.session.scalar(db.select(User).filter_by(name="alice")) is None:
            db.session.add_all([User(name="alice", tenant="t1", can_write=True),
                                User(name="bob", tenant="t1", can_write=False)])
            db.session.commit()
    return app
