"""Typed where users touch it: ``mypy --strict`` on a user app.

A ``@tool`` view keeps its type, ``tool_defaults`` gives back what it was
given, ``bailing.hub_client()`` is a ``HubClient``, and a misspelled tool
option or ``Bailing(...)`` keyword is a type error, not only an import-time
one.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

HERE = Path(__file__).resolve().parent


def run_mypy(*paths: str) -> tuple[str, int]:
    stdout, stderr, status = mypy_api.run(
        ["--strict", "--no-error-summary", "--cache-dir", str(HERE.parent / ".mypy_cache"), *paths]
    )
    return stdout + stderr, status


def test_the_typed_user_app_passes_mypy_strict():
    output, status = run_mypy(str(HERE / "apps" / "typed_app.py"))
    assert status == 0, output


def test_types_survive_the_decorators_and_misspellings_are_type_errors(tmp_path):
    snippet = tmp_path / "user_code.py"
    snippet.write_text(textwrap.dedent('''
        from flask import Blueprint, Flask
        from bailing_flask import Bailing, tool, tool_defaults

        app = Flask(__name__)
        bailing = Bailing(app, windows=300)

        @app.get("/orders/<int:order_id>")
        @tool(scop="order.read")
        def order_get(order_id: int) -> str:
            return str(order_id)

        @tool(scope="order.read", risk="extreme")
        def other() -> str:
            return ""

        @app.get("/orders")
        @tool(scope="order.read", risk="low", subject_required=True)
        def order_list(page: int) -> str:
            return str(page)

        bp = tool_defaults(Blueprint("bp", __name__), scope_prefix="x.")
        reveal_type(order_list)
        reveal_type(bp)
        reveal_type(bailing.hub_client())
    '''))
    output, status = run_mypy(str(snippet))
    assert status == 1
    assert 'Unexpected keyword argument "windows" for "Bailing"' in output
    assert 'Unexpected keyword argument "scop"' in output
    assert 'No overload variant of "tool" matches argument types "str", "str"' in output  # risk: Literal
    assert re.search(r'Revealed type is "def \(page: (builtins\.)?int\) -> (builtins\.)?str"', output)
    assert 'Revealed type is "flask.blueprints.Blueprint"' in output
    assert 'Revealed type is "bailing_flask.hub.client.HubClient"' in output


def test_the_typed_keywords_match_the_runtime_tables():
    """One fact in one place: the TypedDicts mirror ToolOptions and the settings table."""
    from bailing_flask._options import BailingKwargs, ToolKwargs
    from bailing_flask.settings import SETTINGS
    from bailing_flask.declare import ToolOptions

    assert set(ToolKwargs.__annotations__) == set(ToolOptions.model_fields)
    settings = {s.key.removeprefix("BAILING_").lower() for s in SETTINGS} | {"secret"}
    assert set(BailingKwargs.__annotations__) == settings
