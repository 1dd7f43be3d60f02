"""Path parameters whose URL converter takes only some strings.

A ``<string(length=8):code>`` rule routes only eight characters: the catalog
must say so (the hub's model is told, and the exercise's sample routes). A
custom converter, or a ``pattern`` the exercise cannot sample, is not the
app's routing failing: the exercise must say its own sample did not route,
not blame ``SERVER_NAME``.
"""

from __future__ import annotations

from flask import Flask, jsonify
from werkzeug.routing import BaseConverter

from bailing_flask import Bailing, Param, tool
from bailing_flask.exercise import run_exercise
from bailing_flask.testing import HubSimulator

from .helpers import STRONG_SECRET


class Hex8(BaseConverter):
    regex = "[0-9a-f]{8}"


def _path_tool(app: Flask, rule: str, name: str, endpoint: str, scope: str) -> None:
    """A GET tool ``endpoint`` answering its one path parameter, ``name``, back."""
    def view(**kwargs: str):
        return jsonify(kwargs)

    view.__name__ = view.__qualname__ = endpoint
    view.__doc__ = f"Read a {name}."
    declared = tool(scope=scope, allow_unsigned=False,
                    params=[Param(name, location="path", description=f"The {name}.")])(view)
    app.add_url_rule(rule, view.__name__, declared)


def make_app() -> Flask:
    app = Flask(__name__)
    app.url_map.converters["hex8"] = Hex8
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    bailing = Bailing(app)
    bailing.subject_loader(lambda s: {"id": s} if s == "t1:alice" else None)
    bailing.authorizer(lambda call: call.user is not None)

    for rule, name, endpoint, scope in (
            ("/codes/<string(length=8):code>", "code", "code_get", "code.read"),
            ("/words/<string(minlength=3, maxlength=12):word>", "word", "word_get", "code.read"),
            ("/notes/<hex8:ref>", "ref", "note_get", "note.read"),
            ("/plain/<name>", "name", "plain_get", "note.read")):
        _path_tool(app, rule, name, endpoint, scope)

    return app


def schema_of(app: Flask, path: str) -> dict:
    document = HubSimulator(app, STRONG_SECRET).document()
    return document["paths"][path]["get"]["parameters"][0]["schema"]


def test_string_converter_lengths_are_published():
    app = make_app()
    assert schema_of(app, "/codes/{code}") == {"type": "string", "minLength": 8, "maxLength": 8}
    assert schema_of(app, "/words/{word}") == {"type": "string", "minLength": 3, "maxLength": 12}
    assert schema_of(app, "/plain/{name}") == {"type": "string"}  # the default: unchanged


def test_exercise_routes_a_length_limited_string():
    report = run_exercise(make_app(), subject="t1:alice")
    mine = [r for r in report.results if r.target.startswith(("tool code_get", "tool word_get"))]
    assert mine and all(r.status == "pass" for r in mine), report.render()


def test_exercise_says_its_sample_does_not_route_instead_of_blaming_routing():
    report = run_exercise(make_app(), subject="t1:alice")
    mine = [r for r in report.results if r.target.startswith("tool note_get")]
    assert [(r.check, r.status) for r in mine] == [("probe", "warn")], report.render()
    assert "'ref'" in mine[0].summary and "converter" in mine[0].summary
    assert "SERVER_NAME" not in (mine[0].fix or "")
    assert "flask bailing call" in (mine[0].fix or "")
    assert report.ok, report.render()
