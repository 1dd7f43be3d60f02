"""Where the demo's secrets and paths come from, and how to register it in the hub.

Precedence for each value: the ``config`` passed to ``create_app``, then
the environment, then a default that works on a fresh machine (a generated
secret, files in the instance folder). A generated hub secret is printed
once at start-up with every setting the hub operator needs, because the
operator has to paste it into the hub's tool-source form.
"""

from __future__ import annotations

import logging
import os
import secrets

from flask import Flask

__all__ = ["DEFAULT_BASE_URL", "announce", "apply", "registration_banner"]

DEFAULT_BASE_URL = "http://127.0.0.1:5000"


def _hub_secrets(app: Flask) -> tuple[list[str], bool]:
    """The provider secret(s), and whether this process made one up."""
    configured = app.config.get("BAILING_SECRETS")
    if configured:
        return (list(configured) if isinstance(configured, (list, tuple)) else [configured]), False
    from_env = os.environ.get("BAILING_SECRET", "").strip()
    if from_env:
        return [from_env], False
    return [secrets.token_urlsafe(48)], True


def apply(app: Flask) -> bool:
    """Fill in ``BAILING_SECRETS``, ``SECRET_KEY``, ``DATABASE``, ``PUBLIC_BASE_URL``, the catalog
    title, and ``BAILING_CLIENT_TOKENS``/``BAILING_HUB_URL`` from the environment when set.

    Returns ``True`` when the hub secret was generated for this run.
    """
    app.config["BAILING_SECRETS"], generated = _hub_secrets(app)
    if not app.config.get("SECRET_KEY"):
        # sessions then end at every restart; set SECRET_KEY to keep them
        app.config["SECRET_KEY"] = os.environ.get("SECRET_KEY") or secrets.token_hex(32)
    if not app.config.get("DATABASE"):
        os.makedirs(app.instance_path, exist_ok=True)
        app.config["DATABASE"] = os.path.join(app.instance_path, "example_app.sqlite3")
    if not app.config.get("PUBLIC_BASE_URL"):
        app.config["PUBLIC_BASE_URL"] = os.environ.get("PUBLIC_BASE_URL") or DEFAULT_BASE_URL
    app.config.setdefault("BAILING_CATALOG_TITLE", "Shop back office (bailing_flask example)")
    # the client token the hub issued, and its URL: to verify approval requests and answer them
    token = os.environ.get("BAILING_CLIENT_TOKEN", "").strip()
    if token and not app.config.get("BAILING_CLIENT_TOKENS"):
        app.config["BAILING_CLIENT_TOKENS"] = [token]
    hub_url = os.environ.get("BAILING_HUB_URL", "").strip()
    if hub_url and not app.config.get("BAILING_HUB_URL"):
        app.config["BAILING_HUB_URL"] = hub_url
    return generated


def registration_banner(app: Flask, *, show_secret: bool) -> str:
    """The hub's "add tool source" settings for this app, ready to copy (after ``init_app``)."""
    from bailing_flask import Bailing

    config = Bailing.config(app)  # what init_app read: the paths below BAILING_PATH_PREFIX
    base_url = str(app.config["PUBLIC_BASE_URL"]).rstrip("/")
    spec_url = base_url + config.catalog_path
    secret = app.config["BAILING_SECRETS"][0] if show_secret else "(configured, not shown)"
    lines = [
        "Register this app in BailingHub as a tool source:",
        f"  base URL:           {base_url}",
        f"  spec URL:           {spec_url}",
        "  spec access policy: signed_required",
        f"  secret:             {secret}",
        "  subject:            structured tenant:user, e.g. t1:u1 (see example_app/seed.py)",
        "and in the route's tools.approval (type business_webhook):",
        f"  url:                {base_url}{config.callback_path('approval')}",
    ]
    if not app.config.get("BAILING_CLIENT_TOKENS") or not app.config.get("BAILING_HUB_URL"):
        lines.append("Set BAILING_CLIENT_TOKEN and BAILING_HUB_URL so staff can approve refund "
                     "payouts on /activity; until then refund_execute is refused.")
    if show_secret:
        lines.append("This secret was generated for this run only; export BAILING_SECRET=... to keep it.")
    return "\n".join(lines)


def announce(app: Flask, *, generated: bool) -> None:
    """Log the registration settings; as a warning when the secret is a throwaway one."""
    level = logging.WARNING if generated else logging.INFO
    app.logger.log(level, "%s", registration_banner(app, show_secret=generated))
