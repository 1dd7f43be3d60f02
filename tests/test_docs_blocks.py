"""Every code block of the docs is run, generated, or one of a short list that cannot run here.

The docs build enforces it (``docs/_ext/bailing_run.py`` warns about any
literal block that is not included from ``docs/examples/``, generated from
the real command or object, a ``pycon`` session, or marked
``:class: unchecked``; the build runs with ``-W``). This file keeps the list
of unchecked blocks short and says why each cannot run, runs the ``pycon``
sessions as doctests, and checks that the build refuses a block nothing runs
on any page.
"""

from __future__ import annotations

import doctest
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

_RUNS = ("a run of minutes; tests/test_reliability_report.py checks that every command shown is one "
         "the benchmarks and pytest accept")

#: (page, first line of the block) -> why it cannot run in the suite
UNCHECKED = {
    ("quickstart", "git clone https://github.com/bailinghub/bailing_flask"):
        "an install from a checkout; the suite runs on the checkout it installed",
    ("testing", 'pip install -e "./bailing_flask[testing]"      # once released: pip install '
                '"bailing_flask[testing]"'):
        "an install from a checkout; the suite runs on the checkout it installed",
    ("quickstart", "$ flask --app shop bailing doctor --url https://shop.example.com --subject t1:alice"):
        "needs the deployed app; tests/test_doctor.py runs the doctor against real servers",
    ("contributing", "bash scripts/test.sh              # the test suite (installs what it needs)"):
        "the checks CI runs (.ci/run); the Sphinx line runs in a fresh venv in tests/test_docs_pages.py",
    ("cli", "$ flask --app shop bailing store init"):
        "needs PostgreSQL, which the docs build has not; tests/test_sql_store.py runs it against a real "
        "one and checks the page shows what it printed",
    ("concepts/idempotency", "$ flask --app shop bailing store init"):
        "needs PostgreSQL, which the docs build has not; tests/test_sql_store.py runs it against a real "
        "one and checks the page shows what it printed",
    ("concepts/idempotency", "appendonly yes"):
        "a Redis server's configuration; tests/test_redis_persistence.py runs real servers with and "
        "without it and checks the warnings the page lists",
    ("concepts/idempotency", "CREATE TABLE IF NOT EXISTS bailing_idempotency ("):
        "the DDL with a comment per column; tests/test_docs_idempotency.py compares it with what "
        "create_table_sql('postgresql') returns",
    ("existing-app", "$ flask bailing check --exercise --subject t1:alice"):
        "the reader's command on their own app; the guide's app needs extensions the docs extra has "
        "not, and tests/test_docs_existing_app.py runs this command on it and checks that it passes",
    ("concepts/base-url", "bailing doctor  base_url https://shop.example.com/api"):
        "needs the deployed app; tests/test_base_url.py runs the doctor against a real server mounted "
        "under /api and checks these lines",
    ("concepts/index", "hub ──► BailingMiddleware ─────────► Flask routing ──► "
                       "@tool gate ─────────────────────► your view"):
        "a drawing of a call's way through the package, not code",
    ("deployment", "$ gunicorn -b 127.0.0.1:8011 rawtarget:app &"):
        "a server in the background and curl; tests/test_docs_deployment.py runs rawtarget.py under a "
        "real gunicorn and checks these lines",
    ("deployment", 'gunicorn --bind 127.0.0.1:8000 --workers 4 --timeout 60 "shop:app"'):
        "the reader's production command line; tests/_servers.py runs gunicorn on the suite's apps",
    ("deployment", 'SCRIPT_NAME=/openapi gunicorn --bind 127.0.0.1:8000 "shop:app"'):
        "the reader's production command lines; tests/test_base_url.py serves an app under a prefix",
    ("deployment", "uwsgi --socket 127.0.0.1:8001 --plugin python3 --module shop:app --master "
                   "--processes 4"):
        "uWSGI's own protocol, for nginx in front of it; the suite has no nginx",
    ("deployment", "uwsgi --http-socket 127.0.0.1:8001 --module shop:app --master --processes 4 \\"):
        "the reader's production command line; tests/_servers.py runs uWSGI with these options",
    ("deployment", "upstream shop {"): "nginx's configuration; the suite has no nginx",
    ("deployment", "location / {"): "nginx's configuration; the suite has no nginx",
    ("deployment", "location /openapi/ {"): "nginx's configuration; the suite has no nginx",
    ("deployment", "FAIL  catalog.access        inconclusive: signed 401 (bad_signature); the hub "
                   "refuses the refresh and keeps"):
        "the doctor's report on a deployment behind a proxy that strips the prefix",
    ("deployment", "$ flask --app shop bailing doctor --url https://shop.example.com/openapi "
                   "--subject t1:u1"):
        "needs the deployed app; tests/test_doctor.py runs the doctor against real servers",
    ("concepts/verification", 'canonical = <ts> "." <METHOD> "." <pathWithQuery> "." <sha256 hex of the body> '
                              '"." <On-Behalf-Of> "." <Job-Id>'):
        "a formula; the pycon session below it computes it",
    ("concepts/verification", '{"error": "timestamp_out_of_window", "reason": "malformed_timestamp",'):
        "tests/test_docs_examples.py compares it with the answer such a request gets",
    ("concepts/callbacks", '<script src="https://hub.example.com/widget.js" data-entry="shop_help"'):
        "a ticket is new on every render; tests/test_docs_examples.py renders the template and checks "
        "the shape",
    ("concepts/catalog", '{"name": "keyword", "in": "query", "required": false,'):
        "a part of the catalog; tests/test_docs_examples.py compares it with the example's catalog",
    ("concepts/catalog", '{"error": "invalid_arguments", "reason": "invalid_parameter",'):
        "tests/test_docs_examples.py compares it with the example's answer to the same call",
    ("reliability", "python -m benchmarks.reliability                  # every part, full length"):
        _RUNS,
    ("reliability/load", "python -m benchmarks.reliability --parts load            "
                         "# the full run, about 6 minutes"): _RUNS,
    ("reliability/faults", "python -m pytest tests/test_faults_*.py -q"): _RUNS,
    ("reliability/faults", "python -m benchmarks.reliability.faults            # about two minutes"):
        _RUNS,
    ("reliability/fuzz", "pip install -e '.[test,fuzz]'"):
        "an install from the package index; tests/test_reliability_report.py checks the extras exist",
    ("reliability/fuzz", "python -m pytest tests/test_fuzz_middleware.py tests/test_fuzz_sockets.py \\"):
        _RUNS,
    ("reliability/fuzz", "python -m benchmarks.reliability.fuzz          # the fuzzing figures only"):
        _RUNS,
}

_BLOCK = re.compile(r"^(?P<indent> *)\.\. code-block:: *(?P<lang>\S+)\n(?P<options>(?:(?P=indent)   :.*\n)*)\n"
                    r"(?P<body>(?:(?P=indent)   .*\n|\n)+)", re.M)


def pages() -> dict[str, str]:
    return {str(p.relative_to(DOCS).with_suffix("")): p.read_text(encoding="utf-8")
            for p in sorted(DOCS.rglob("*.rst")) if "_build" not in p.parts}


def code_blocks(text: str) -> list[tuple[str, str, str]]:
    """``(language, options, body)`` of every ``code-block`` of a page."""
    found = []
    for match in _BLOCK.finditer(text):
        indent = len(match["indent"]) + 3
        body = "\n".join(line[indent:] for line in match["body"].splitlines()).strip("\n")
        found.append((match["lang"], match["options"], body))
    return found


def test_the_unchecked_blocks_are_the_short_list_with_its_reasons():
    marked = {(page, body.splitlines()[0].strip())
              for page, text in pages().items()
              for _, options, body in code_blocks(text) if ":class: unchecked" in options}
    assert marked == set(UNCHECKED)


@pytest.mark.parametrize("page", [p for p, t in pages().items() if "code-block:: pycon" in t])
def test_the_python_sessions_shown_are_what_python_answers(page):
    sessions = [body for lang, _, body in code_blocks(pages()[page]) if lang == "pycon"]
    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for number, session in enumerate(sessions):
        runner.run(parser.get_doctest(session, {}, f"{page}[{number}]", page, 0), out=sys.stdout.write)
    assert runner.failures == 0 and runner.tries > 0


def _build(source: Path, block: str) -> subprocess.CompletedProcess[str]:
    (source / "conf.py").write_text(f"import sys\nsys.path.insert(0, {str(DOCS / '_ext')!r})\n"
                                    "extensions = ['bailing_run']\n")
    (source / "index.rst").write_text(f"Page\n====\n\n{block}\n")
    return subprocess.run([sys.executable, "-m", "sphinx", "-q", "-W", "-b", "html", str(source),
                           str(source / "_build")], capture_output=True, text=True, timeout=900)


def test_every_page_is_checked_a_block_nothing_runs_fails_the_build(tmp_path):
    """No page is exempt any more: a plain block anywhere is an error under ``-W``, a marked one is not."""
    pytest.importorskip("sphinx")
    plain = _build(tmp_path, ".. code-block:: python\n\n   print('never run')\n")
    assert plain.returncode != 0 and "a code block that nothing runs (print('never run'))" in plain.stderr
    marked = _build(tmp_path, ".. code-block:: python\n   :class: unchecked\n\n   print('never run')\n")
    assert marked.returncode == 0, marked.stderr
