#!/usr/bin/env bash
# Run the test suite on a fresh machine: installs what the tests need, then pytest.
#
# The Redis tests use a real redis-server (Debian's package), the PostgreSQL
# tests a real PostgreSQL (Debian's postgresql); the tests start and stop their
# own servers on loopback ports; some tests send requests with node's fetch, the
# hub's HTTP client (Debian's nodejs). Extra arguments go to pytest.
#
# Environment (all optional): BAILING_VENV (default .venv), BAILING_PYTHON
# (the interpreter that creates it, default python3), BAILING_CONSTRAINTS (a
# pip constraints file), BAILING_COVERAGE=1 (run under coverage and report).
set -euo pipefail
cd "$(dirname "$0")/.."

# PostgreSQL likewise (Debian's postgresql): the transaction-mode tests start a
# throwaway cluster of their own with initdb/pg_ctl; with CI set, a missing
# server fails those tests instead of skipping them.
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium chromium-driver)  # the docs' page check

command -v node >/dev/null 2>&1 || missing+=(nodejs)
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
  missing+=(postgresql)
fi
# MariaDB (Debian's mariadb-server) for the SQL store's tests, started by them like PostgreSQL
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server)
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    # the tests start their own servers: no system service may be started (or left running)
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
      trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "the tests need Debian's ${missing[*]}: install the package(s)" >&2
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
