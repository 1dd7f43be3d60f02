#!/usr/bin/env bash
# Run the test suite on a fresh machine: installs what the tests need, then pytest.
#
# The tests start their own servers (redis-server, PostgreSQL), as the user running them, in
# temporary folders, on free loopback ports, and stop them afterwards. As root, this script
# installs the Debian packages they come from, without starting or enabling any service;
# otherwise the tests that need a missing one are skipped with one line in pytest's summary,
# except in CI (CI set), where they fail. Extra arguments go to pytest.
#
# Environment (all optional): BAILING_VENV (default .venv), BAILING_PYTHON
# (the interpreter that creates it, default python3), BAILING_CONSTRAINTS (a
# pip constraints file), BAILING_COVERAGE=1 (run under coverage and report).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_lib.sh

# The servers the tests start, one line each: the Debian package, then how to find it installed
# (a command on PATH, or a file; globs allowed). tests/_installed.py has the same list.
SERVERS=(
  "redis-server  redis-server"
  "postgresql    initdb /usr/lib/postgresql/*/bin/initdb"
  "mariadb-server mariadbd /usr/sbin/mariadbd"
)

missing=()
for line in "${SERVERS[@]}"; do
  read -r package probes <<<"$line"
  # shellcheck disable=SC2086  # the probes are words (and globs)
  found $probes || missing+=("$package")
done
# not servers, but programs some tests drive: node's fetch (the hub's HTTP client) and the
# headless Chromium that looks at the built docs pages
if can_apt; then
  found node || missing+=(nodejs)
  found chromedriver || missing+=(chromium chromium-driver)
fi
# uWSGI (in the test extra) is built from source: it needs a C compiler, and Python's headers
# (Debian's own python3 has them in its pythonX.Y-dev package; pyenv's carry them)
python="${BAILING_PYTHON:-python3}"
if can_apt; then
  found cc gcc || missing+=(gcc libc6-dev)
  if command -v "$python" >/dev/null 2>&1 && dpkg-query -S "$(command -v "$python")" >/dev/null 2>&1 \
      && ! "$python" -c 'import os, sysconfig; assert os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' 2>/dev/null; then
    missing+=("$("$python" -c 'import sys; print("python%d.%d-dev" % sys.version_info[:2])')")
  fi
fi
if [ "${#missing[@]}" -gt 0 ]; then
  if can_apt; then
    apt_install "${missing[@]}"
  elif [ -n "${CI:-}" ]; then
    echo "CI needs Debian's ${missing[*]} for the tests: run this script as root, or install them" >&2
    exit 1
  else
    step "not installed: ${missing[*]} (installing needs root); the tests that start them are skipped"
  fi
fi

VENV="${BAILING_VENV:-.venv}"
make_venv "$VENV" "$python"
pip_install "$VENV" -e ".[test]" ${BAILING_CONSTRAINTS:+-c "$BAILING_CONSTRAINTS"}

step "pytest $*"
set +e
if [ "${BAILING_COVERAGE:-}" = 1 ]; then
  # under coverage from the start, so the modules the test modules import at collection count
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
