"""What a serving process never loads: each part of the package is imported when first needed.

A fresh interpreter imports ``bailing_flask``, builds ``Bailing(app)`` with a
tool on the memory store and serves one signed call. The hub's payload
models (read only by the callback endpoints), the other store backends
(and ``sqlite3``), the transaction mode, OpenTelemetry, the CLI, the doctor,
the exercise and marshmallow support are not imported at any point; the linter loads with the
first request (which compiles the catalog, so that declaration problems are
logged at start-up), not before.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: never imported by serving a tool call on the memory store
NEVER = (
    "bailing_flask.hub.payloads",
    "bailing_flask.stores.sqlite",
    "bailing_flask.stores.redis",
    "bailing_flask.stores.sql",
    "sqlite3",
    "bailing_flask.transactional",
    "bailing_flask.otel",
    "bailing_flask.cli",
    "bailing_flask.doctor",
    "bailing_flask.exercise",
    # marshmallow support: only for an app that declares a marshmallow schema or uses webargs
    "bailing_flask._pipeline.marshmallow_models",
    "marshmallow",
    "apispec",
    "webargs",
)
#: not imported until the first request compiles the catalog
LINTER = ("bailing_flask.lint", "bailing_flask.lint.codes", "bailing_flask.lint.compiler",
          "bailing_flask.lint.hazards")

_SERVE = """
import json, sys, time

report = {}
import bailing_flask
report["import"] = set(sys.modules)
from flask import Flask, jsonify
from bailing_flask import Bailing, tool
from bailing_flask.wire.signing import sign_tool_call

app = Flask("imports_app")
app.config.update(BAILING_SECRETS=["s" * 40], BAILING_STORE="memory://")
bailing = Bailing(app)
bailing.authorizer(lambda call: call.subject == "t1:u1")

@app.post("/notes")
@tool(scope="note.write")
def note():
    \"\"\"Write a note.\"\"\"
    return jsonify(saved=True)

report["init"] = set(sys.modules)
body = b"{}"
headers = {"X-Bailing-Timestamp": str(int(time.time())), "X-Bailing-Job-Id": "job-1",
           "X-Bailing-On-Behalf-Of": "t1:u1", "Content-Type": "application/json"}
headers["X-Bailing-Signature"] = sign_tool_call("s" * 40, headers["X-Bailing-Timestamp"], "POST",
                                                "/notes", body, "t1:u1", "job-1")
answer = app.test_client().post("/notes", data=body, headers=headers)
assert answer.status_code == 200, answer.get_data()
report["call"] = set(sys.modules)
names = json.loads(sys.argv[1])
print(json.dumps({stage: sorted(n for n in names if n in modules) for stage, modules in report.items()}))
"""


def _loaded() -> dict[str, list[str]]:
    done = subprocess.run([sys.executable, "-c", _SERVE, json.dumps([*NEVER, *LINTER])], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    result: dict[str, list[str]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_serving_a_tool_call_on_the_memory_store_never_loads_the_rest_of_the_package() -> None:
    loaded = _loaded()
    assert loaded["import"] == []
    assert loaded["init"] == []
    assert [name for name in loaded["call"] if name in NEVER] == []
    assert sorted(name for name in loaded["call"] if name in LINTER) == sorted(LINTER)


#: what ``import bailing_flask`` alone must not load: the Flask side and pydantic's models are
#: loaded by the first name an application takes from the package, not by the import
NOT_ON_IMPORT = (
    "flask",
    "pydantic",
    "bailing_flask.extension",
    "bailing_flask.declare",
    "bailing_flask.context",
    "bailing_flask.settings",
    "bailing_flask.approvals",
    "bailing_flask.stores",
    "bailing_flask._pipeline",
    "bailing_flask.wire",
)
#: what the verifying middleware in front of a WSGI app that is not Flask must not load
NOT_FOR_THE_WIRE = ("flask", "werkzeug", "pydantic", "bailing_flask.extension",
                    "bailing_flask.declare", "bailing_flask.settings", "bailing_flask.stores",
                    "bailing_flask._pipeline")


def _modules_after(statement: str, names: tuple[str, ...]) -> list[str]:
    code = f"import json, sys\n{statement}\nprint(json.dumps([n for n in {list(names)!r} if n in sys.modules]))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_importing_the_package_loads_neither_flask_nor_pydantic_nor_the_extension() -> None:
    assert _modules_after("import bailing_flask", NOT_ON_IMPORT) == []


def test_the_middleware_alone_loads_neither_flask_nor_pydantic() -> None:
    statement = ("from bailing_flask.wire import BailingMiddleware\n"
                 "BailingMiddleware(lambda environ, start_response: [], 's' * 40)")
    assert _modules_after(statement, NOT_FOR_THE_WIRE) == []


def test_the_first_name_taken_from_the_package_loads_what_it_needs() -> None:
    assert _modules_after("from bailing_flask import Bailing", ("bailing_flask.extension", "flask")) \
        == ["bailing_flask.extension", "flask"]


#: what an application's ``from bailing_flask import Bailing, tool`` must not load: the options'
#: pydantic models come with the first declaration, the pipeline and settings with ``init_app``
NOT_ON_APP_IMPORT = ("pydantic.main", "bailing_flask._tool_options", "bailing_flask.settings",
                     "bailing_flask._pipeline", "bailing_flask.wire", "bailing_flask.stores",
                     "bailing_flask.approvals", "bailing_flask.audit")


def test_taking_bailing_and_tool_builds_no_model_and_loads_no_pipeline() -> None:
    assert _modules_after("from bailing_flask import Bailing, tool", NOT_ON_APP_IMPORT) == []
    # the app-factory pattern: the extension made at import, init_app(app) later
    assert _modules_after("from bailing_flask import Bailing\nbailing = Bailing()",
                          NOT_ON_APP_IMPORT) == []


def test_the_first_declaration_and_init_app_load_what_they_use() -> None:
    declared = ("from bailing_flask import tool\n"
                "@tool(scope='orders.read')\n"
                "def view(): pass")
    assert _modules_after(declared, ("bailing_flask._tool_options", "pydantic.main",
                                     "bailing_flask._pipeline")) \
        == ["bailing_flask._tool_options", "pydantic.main"]
    initialised = ("import flask\nfrom bailing_flask import Bailing\n"
                   "Bailing(flask.Flask('app'), secrets='s' * 40)")
    assert _modules_after(initialised, ("bailing_flask.settings", "bailing_flask._pipeline.gate",
                                        "bailing_flask.wire.middleware")) \
        == ["bailing_flask.settings", "bailing_flask._pipeline.gate", "bailing_flask.wire.middleware"]


def test_a_bad_declaration_still_fails_where_it_is_written() -> None:
    statement = ("from bailing_flask import tool\n"
                 "try:\n"
                 "    @tool(risk='extreme')\n"
                 "    def view(): pass\n"
                 "except Exception as exc:\n"
                 "    print(type(exc).__name__, str(exc).split(':')[0])")
    code = f"{statement}"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ToolDeclarationError invalid tool declaration on __main__.view"


def test_the_option_types_are_listed_before_they_load_and_resolve_once_declared() -> None:
    """``dir()`` (so ``help()`` and Sphinx's ``automodule :members: ToolOptions``) lists the option
    types without loading them; after a declaration ``typing.get_type_hints`` resolves
    ``Declaration`` and ``ToolKwargs`` (pydantic's dataclass and TypedDict support reads them)."""
    code = ("import sys, typing\n"
            "import bailing_flask.declare as declare\n"
            "listed = set(declare._OPTION_TYPES) <= set(dir(declare))\n"
            "print(listed, 'pydantic.main' in sys.modules)\n"
            "@declare.tool(scope='orders.read')\n"
            "def view(): pass\n"
            "options = typing.get_type_hints(declare.Declaration)['options']\n"
            "print(options is type(declare.get_declaration(view).options),\n"
            "      typing.get_type_hints(declare.ToolKwargs)['params'])\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "True False", "True collections.abc.Sequence[bailing_flask._tool_options.Param]"]
