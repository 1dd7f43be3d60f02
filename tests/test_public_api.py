"""The top-level package exports what an app writes; the wire exports the signing primitives.

An app reads ``from bailing_flask import ...`` for the extension, its
declarations, the current call and the errors: about twenty names, each one
documented. The hub's signing scheme and the verifying middleware are for
the app that verifies below Flask or tests its own signatures, and come from
``bailing_flask.wire``. A name that moved fails with the import to write.
"""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import bailing_flask
import bailing_flask.wire

API_DOCS = Path(__file__).resolve().parents[1] / "docs" / "api.rst"

WIRE_PRIMITIVES = {
    "BailingMiddleware", "VerifiedCall", "UnsignedHeaders", "Verifier", "CallbackVerifier",
    "SignatureError", "canonical_tool_call", "canonical_callback", "sign_tool_call",
    "sign_callback", "verify_callback",
}


def documented(page: str) -> set[str]:
    """Every object the API reference documents with an autodoc or py directive."""
    return set(re.findall(r"^\.\. (?:auto\w+|py:\w+):: ([\w.]+)", page, re.M))


def test_the_top_level_exports_about_twenty_names_each_documented():
    names = set(bailing_flask.__all__)
    assert len(bailing_flask.__all__) == len(names) <= 22
    page = documented(API_DOCS.read_text(encoding="utf-8"))
    undocumented = {n for n in names if f"bailing_flask.{n}" not in page and n not in page}
    assert undocumented == set()
    for name in names:
        assert getattr(bailing_flask, name) is not None


def test_what_an_app_writes_is_there():
    assert {"Bailing", "tool", "tool_defaults", "Param", "current_call", "current_subject",
            "get_current_call", "get_current_subject", "get_arguments", "ToolCall", "ToolInfo",
            "Arguments", "ErrorInfo", "tool_result", "is_tool_call", "is_hub_request",
            "rate_limit_key", "cache_key", "BailingError", "ConfigurationError",
            "NotVerifiedError", "ToolDeclarationError"} == set(bailing_flask.__all__)


def test_the_wire_exports_the_signing_primitives_and_the_middleware():
    assert set(bailing_flask.wire.__all__) == WIRE_PRIMITIVES
    page = documented(API_DOCS.read_text(encoding="utf-8"))
    for name in WIRE_PRIMITIVES:
        assert getattr(bailing_flask.wire, name) is not None
        assert f"bailing_flask.wire.{name}" in page, name
    assert not WIRE_PRIMITIVES & set(bailing_flask.__all__)


#: Loads ``bailing_flask`` as an empty package (its ``__init__`` imports Flask), then the wire.
_WIRE_ALONE = """
import importlib.machinery, importlib.util, pathlib, sys
root = pathlib.Path(sys.argv[1])
spec = importlib.machinery.ModuleSpec("bailing_flask", None, is_package=True)
spec.submodule_search_locations = [str(root)]
sys.modules["bailing_flask"] = importlib.util.module_from_spec(spec)
import bailing_flask.wire
print(sorted(m for m in ("flask", "werkzeug", "pydantic") if m in sys.modules))
"""


def test_the_wire_imports_no_web_framework_or_pydantic():
    result = subprocess.run(
        [sys.executable, "-c", _WIRE_ALONE, str(Path(bailing_flask.__file__).parent)],
        capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", result.stdout


@pytest.mark.parametrize("name, new", [
    *[(name, f"from bailing_flask.wire import {name}") for name in sorted(WIRE_PRIMITIVES)],
    ("REPLAY_HEADER", "from bailing_flask.responses import REPLAY_HEADER"),
    ("dedupe_key", "from bailing_flask.hub.payloads import dedupe_key"),
    ("call_key", "current_call.verified.identity"),
])
def test_a_moved_name_fails_to_import_naming_its_new_place(name, new):
    with pytest.raises(ImportError) as info:
        exec(f"from bailing_flask import {name}", {})
    assert new in str(info.value)
    with pytest.raises(ImportError, match=re.escape(new)):
        getattr(bailing_flask, name)


def test_an_unknown_name_is_still_an_attribute_error():
    with pytest.raises(AttributeError):
        bailing_flask.no_such_name  # noqa: B018
    assert not hasattr(bailing_flask, "no_such_name")


def test_the_moved_names_live_where_the_message_says():
    from bailing_flask.hub.payloads import dedupe_key
    from bailing_flask.responses import REPLAY_HEADER

    assert REPLAY_HEADER == "Idempotent-Replayed"
    assert callable(dedupe_key)
    assert importlib.import_module("bailing_flask.wire").Verifier.__name__ == "Verifier"


def test_each_exported_name_is_the_object_of_the_module_that_owns_it():
    # the names load on first use: what comes out must be the owner's object, not a copy
    for name, home in bailing_flask._EXPORTS.items():
        assert getattr(bailing_flask, name) is getattr(importlib.import_module(home), name), name
    assert set(bailing_flask._EXPORTS) == set(bailing_flask.__all__)
    assert set(bailing_flask.__all__) <= set(dir(bailing_flask))


@pytest.fixture(params=["context variable", "through flask.request"])
def request_lookup(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The current call is found through Flask's context variable where Flask has it by the name
    Flask 2.3 and 3.x give it, else through ``flask.request``: both answer alike."""
    from bailing_flask import context

    if request.param == "context variable":
        import flask.globals

        assert context._REQUEST_CONTEXT is flask.globals._cv_request  # what this Flask runs
    else:
        monkeypatch.setattr(context, "_REQUEST_CONTEXT", context._ThroughTheProxy())
    return str(request.param)


def test_a_signed_call_is_found_alike_by_either_lookup(request_lookup):
    from flask import Flask

    from bailing_flask import Bailing, NotVerifiedError, current_call, get_current_call, tool
    from bailing_flask.testing import HubSimulator, signed_headers

    from .helpers import STRONG_SECRET

    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=STRONG_SECRET, BAILING_STORE="memory://")
    Bailing(app).authorizer(lambda call: True)

    @app.get("/mine")
    @tool(scope="x.read")
    def mine() -> object:
        return {"subject": current_call.subject, "tool": get_current_call().tool.name}

    @app.get("/plain")
    def plain() -> object:  # a signed request to a route that is not a tool
        return {"subject": current_call.subject, "admitted": current_call.authorized}

    hub = HubSimulator(app, STRONG_SECRET)
    assert hub.call("mine", subject="t1:u1").json() == {"subject": "t1:u1", "tool": "mine"}
    headers = signed_headers(STRONG_SECRET, "GET", "/plain", b"", subject="t1:u2", job_id="job-1")
    plain_answer = app.test_client().get("/plain", headers=headers)
    assert plain_answer.get_json() == {"subject": "t1:u2", "admitted": False}
    with app.test_request_context("/plain"), pytest.raises(NotVerifiedError, match="not signed"):
        current_call.subject  # noqa: B018


def test_the_current_call_outside_a_request_says_it_needs_one_and_inside_an_unsigned_one_is_none(
        request_lookup):
    from flask import Flask

    from bailing_flask import current_call, get_current_call

    with pytest.raises(RuntimeError, match="current_call needs an active request"):
        get_current_call()
    with pytest.raises(RuntimeError, match="current_call needs an active request"):
        current_call.subject  # noqa: B018  (the proxy looks the call up on access)
    with Flask(__name__).test_request_context("/"):
        assert get_current_call() is None


def test_the_current_call_in_an_app_context_alone_needs_a_request_and_a_handed_request_has_it(
        request_lookup):
    import threading
    from collections.abc import Iterator

    from flask import Flask, copy_current_request_context, stream_with_context

    from bailing_flask import get_current_call

    app = Flask(__name__)

    def looked_up() -> str:
        try:
            return repr(get_current_call())
        except RuntimeError as exc:
            return str(exc)

    with app.app_context():  # a CLI command, a job: no request
        assert looked_up() == "bailing_flask: current_call needs an active request"
    with app.test_request_context("/"):
        seen: list[str] = []
        thread = threading.Thread(target=copy_current_request_context(lambda: seen.append(looked_up())))
        thread.start()
        thread.join(60)
        assert seen == ["None"]  # the thread is in the (unsigned) request

    @app.get("/streamed")
    def streamed() -> object:
        def body() -> Iterator[str]:  # runs after the view returned, in the request it keeps
            yield looked_up()

        return app.response_class(stream_with_context(body()))

    assert app.test_client().get("/streamed").get_data(as_text=True) == "None"
