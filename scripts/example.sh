#!/usr/bin/env bash
# Run the example app on a fresh machine: a virtualenv in .venv with the package, then
# `python -m example_app` (http://127.0.0.1:5000; arguments such as --port go to it).
#
# Debian's own python3 makes virtualenvs only with its python3-venv package: as root, this
# script installs it (and python3 itself, if there is none); otherwise it says what to install.
# Environment (optional): BAILING_VENV (default .venv), BAILING_PYTHON (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/_lib.sh

VENV="${BAILING_VENV:-.venv}"
make_venv "$VENV" "${BAILING_PYTHON:-python3}"
pip_install "$VENV" -e .
step "python -m example_app $* (Ctrl-C stops it; next time: $VENV/bin/python -m example_app)"
exec "$VENV/bin/python" -m example_app "$@"
