"""The deployment page's Python (docs/deployment.rst): a prefix, ProxyFix, the store of several hosts."""

import os

from flask import Flask

from bailing_flask import Bailing


def mounted() -> object:
    app = Flask(__name__)
    app.config["BAILING_SECRETS"] = [os.environ["BAILING_SECRET"]]
    Bailing(app)
    # [start:dispatcher]
    from werkzeug.exceptions import NotFound
    from werkzeug.middleware.dispatcher import DispatcherMiddleware

    application = DispatcherMiddleware(NotFound(), {"/openapi": app})
    # [end:dispatcher]
    return application


def behind_proxy_fix() -> Flask:
    # [start:proxyfix]
    from werkzeug.middleware.proxy_fix import ProxyFix

    app = Flask(__name__)
    app.config["BAILING_SECRETS"] = [os.environ["BAILING_SECRET"]]
    bailing = Bailing(app)                                   # installs the middleware
    app.wsgi_app = ProxyFix(app.wsgi_app, x_for=1, x_proto=1, x_host=1, x_prefix=1)
    # [end:proxyfix]
    assert bailing
    return app


def several_hosts() -> Flask:
    app = Flask(__name__)
    app.config["BAILING_SECRETS"] = [os.environ["BAILING_SECRET"]]
    # [start:redis]
    app.config["BAILING_STORE"] = os.environ["BAILING_STORE"]   # redis://:password@redis.internal:6379/2
    # [end:redis]
    Bailing(app)
    return app


__all__ = ["behind_proxy_fix", "mounted", "several_hosts"]
