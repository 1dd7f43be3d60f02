#!/usr/bin/env bash
# Run the test suite on a fresh machine: installs what the tests need, then pytest.
#
# The Redis tests use a real redis-server (Debian's package); the tests start
# and stop their own servers on loopback ports. Extra arguments go to pytest.
#
# Environment (all optional): BAILING_VENV (default .venv), BAILING_PYTHON
# (the interpreter that creates it, default python3), BAILING_CONSTRAINTS (a
# pip constraints file), BAILING_COVERAGE=1 (run under coverage and report).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
  else
    echo "redis-server is needed by the tests: install Debian's redis-server package" >&2
    exit 1
  fi
fi

VENV="${BAILING_VENV:-.venv}"
[ -x "$VENV/bin/python" ] || "${BAILING_PYTHON:-python3}" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -e ".[test]" ${BAILING_CONSTRAINTS:+-c "$BAILING_CONSTRAINTS"}

set +e
if [ "${BAILING_COVERAGE:-}" = 1 ]; then
  # coverage starts before pytest, so the pytest plugin's early import of the package counts
  "$VENV/bin/python" -m coverage run -m pytest "$@"
  status=$?
  "$VENV/bin/python" -m coverage report | tail -n 25
else
  "$VENV/bin/python" -m pytest "$@"
  status=$?
fi
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit "$status"
