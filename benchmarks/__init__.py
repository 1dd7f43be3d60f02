"""Benchmarks for bailing_flask (not part of the test suite).

Run them all with ``python -m benchmarks`` from the repository root; see
``benchmarks/README.md``.
"""

GROUPS = ("verify", "middleware", "toolcall", "ordinary", "idempotency", "transaction", "bigbody", "catalog",
          "imports", "e2e")
