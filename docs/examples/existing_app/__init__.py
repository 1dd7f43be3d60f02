"""The code of the "Adding to an existing app" guide (docs/existing-app.rst).

Every snippet of the guide is included from these files, and the test suite
imports and runs them (tests/test_docs_existing_app.py), so the guide cannot
show code that does not work.
"""
