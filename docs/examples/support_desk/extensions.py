"""The extensions, created once and initialised in the factory."""

from __future__ import annotations

from flask_cors import CORS
from flask_httpauth import HTTPTokenAuth
from flask_sqlalchemy import SQLAlchemy

from bailing_flask import Bailing

db = SQLAlchemy()
cors = CORS()

# [start:bridge]
auth = HTTPTokenAuth(scheme="Bearer")
bailing = Bailing()
bailing.bridge_flask_httpauth(auth)
# [end:bridge]
