"""The support-desk API of the "Adding to an existing app" guide's REST sections.

An app factory, Flask-SQLAlchemy, Flask-HTTPAuth token auth, Flask-CORS,
a flask-restx ``Api`` on the ``/api/v1`` blueprint and an older Flask-RESTful
``Api`` on the ``/api/v0`` blueprint, the way such APIs were written around
2016. Every snippet of those sections is included from these files, and the
test suite imports and runs them (tests/test_docs_existing_app_rest.py).
"""
