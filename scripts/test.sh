#!/usr/bin/env bash
# Run the test suite on a fresh machine: installs what the tests need, then pytest.
#
# The Redis tests use a real redis-server (Debian's package); the tests start
# and stop their own servers on loopback ports. Extra arguments go to pytest.
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
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -e ".[test]" ${BAILING_CONSTRAINTS:+-c "$BAILING_CONSTRAINTS"}

set +e
"$VENV/bin/python" -m pytest "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit "$status"
