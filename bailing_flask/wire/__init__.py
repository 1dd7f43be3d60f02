"""The wire: what the hub sends, byte for byte, with no web framework involved.

Signing and verifying (:mod:`~bailing_flask.wire.signing`), the verifying
WSGI middleware (:mod:`~bailing_flask.wire.middleware`), reading a body once
(:mod:`~bailing_flask.wire.body`), JavaScript's encoders
(:mod:`~bailing_flask.wire.jsenc`), the hub's ``base_url``
(:mod:`~bailing_flask.wire.base_url`) and the response headers a WSGI
application may send (:mod:`~bailing_flask.wire.headers`). Nothing here
imports Flask; everything above builds on it.
"""
