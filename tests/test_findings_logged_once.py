"""A catalog warning is shown once: once by ``flask bailing check``, once per serving process.

``check`` prints each finding itself, so the start-up log line of the same
finding no longer comes with it; a process that serves logs each finding
once, however many requests build or read the catalog. (Every gunicorn
worker is a process of its own and logs it once.)
"""

from __future__ import annotations

import http.client
import re
from collections import Counter
from urllib.parse import urlsplit

from ._servers import gunicorn_serving
from .helpers import flask_command

SPEC = "tests.apps.findings_app:create_app()"


def test_check_prints_the_warning_once():
    for args in (("check",), ("check", "--exercise"), ("check", "--json")):
        result = flask_command(SPEC, "bailing", *args)
        shown = (result.stdout + result.stderr).count("array_query_item_comma")
        assert shown == 1, (args, result.stdout, result.stderr)


def test_export_prints_the_warning_once_on_stderr():
    result = flask_command(SPEC, "bailing", "export")
    assert result.returncode == 0
    assert result.stderr.count("array_query_item_comma") == 1 and "array_query" not in result.stdout


def test_every_gunicorn_worker_logs_it_at_most_once(tmp_path):
    log = tmp_path / "gunicorn.log"
    with gunicorn_serving(SPEC.replace(":create_app()", ":app"), workers=2, log_path=log) as base:
        netloc = urlsplit(base).netloc
        for _ in range(30):  # enough for both workers to serve, each building and reading the catalog
            conn = http.client.HTTPConnection(netloc, timeout=60)
            conn.request("GET", "/.well-known/bailing/tools.json", headers={"Connection": "close"})
            conn.getresponse().read()
            conn.close()
    text = log.read_text(errors="replace")
    per_process = Counter(re.findall(r"pid=(\d+) bailing_flask .*array_query_item_comma", text))
    assert per_process and set(per_process.values()) == {1}, text
