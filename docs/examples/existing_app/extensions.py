"""The extensions, created once and initialised in the factory (the usual layout)."""

from __future__ import annotations

from flask_caching import Cache
from flask_limiter import Limiter
from flask_login import LoginManager
from flask_sqlalchemy import SQLAlchemy
from flask_wtf.csrf import CSRFProtect

# [start:bailing]
import bailing_flask
from bailing_flask import Bailing

bailing = Bailing()
# [end:bailing]

db = SQLAlchemy()
login_manager = LoginManager()
login_manager.login_view = "auth.login"
csrf = CSRFProtect()

cache = Cache()

# [start:limiter]
limiter = Limiter(key_func=bailing_flask.rate_limit_key, default_limits=["600/hour"])
# [end:limiter]

# [start:bridge]
bailing.bridge_flask_login(login_manager)
# [end:bridge]
