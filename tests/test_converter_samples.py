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


def make_app() -> Flask:
    app = Flask(__name__)
    app.url_map.converters["hex8"] = Hex8
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    bailing = Bailing(app)
    bailing.subject_loader(lambda s: {"id": s} if s == "t1:alice" else None)
    bailing.authorizer(lambda call: call.user is not None)

    @app.get("/codes/<string(length=8):code>")
    @tool(scope="code.read", allow_unsigned=False, params=[Param("code", location="path", description="The code.")])
    def code_get(code: str):
        """Read a code."""
        return jsonify(code=code)

    @app.get("/words/<string(minlength=3, maxlength=12):word>")
    @tool(scope="code.read", allow_unsigned=False, params=[Param("word", location="path", description="The word.")])
    def word_get(word: str):
        """Read a word."""
        return jsonify(word=word)

    @app.get("/notes/<hex8:ref>")
    @tool(scope="note.read", allow_unsigned=False, params=[Param("ref", location="path", description="The note.")])
    def note_get(ref: str):
        """Read a note."""
        return jsonify(ref=ref)

    @app.get("/plain/<name>")
    @tool(scope="note.read", allow_unsigned=False, params=[Param("name", location="path", description="A name.")])
    def plain_get(name: str):
        """Read a name."""
        return jsonify(name=name)

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
