"""``check --exercise --subject`` names a view that reads query or body keys its catalog lacks.

A view reading ``request.args`` by hand publishes no parameter: the catalog
is clean, ``check`` says nothing, and every argument the hub sends for it
is refused ``422 unknown_parameter``. While the views of read-only tools
run, the exercise records which keys they read, from ``request.args``,
``request.form`` and the JSON body, and reports those the catalog does not
declare.
"""

from __future__ import annotations

from typing import Any

import pytest

from bailing_flask.exercise import ExerciseReport, run_exercise

from .apps.reads_app import create_app


def reads(report: ExerciseReport, tool: str) -> list[Any]:
    return [r for r in report.results if r.check == "reads" and r.target.startswith(f"tool {tool} ")]


@pytest.fixture(scope="module")
def report() -> ExerciseReport:
    return run_exercise(create_app(), subject="t1:alice")


def test_a_view_that_reads_an_undeclared_query_key_by_hand_is_named(report):
    [found] = reads(report, "tickets")
    assert found.status == "warn"
    assert found.summary == ("GET /api/v1/tickets reads query key 'status' the catalog does not declare: "
                             "the hub's argument would be refused 422 unknown_parameter")
    assert found.fix == "declare it with query= (a model) or a Param(..., location='query')"


def test_a_marshmallow_schema_loading_request_args_is_seen_through(report):
    [found] = reads(report, "search")
    assert found.status == "warn" and "reads query key 'q' the catalog does not declare" in found.summary


def test_reading_the_whole_query_string_without_declaring_any_is_named(report):
    [found] = reads(report, "dump")
    assert found.status == "warn"
    assert "reads undeclared query input (request.args: to_dict())" in found.summary
    assert "the catalog declares no query parameter" in found.summary


def test_an_undeclared_key_of_the_json_body_is_named(report):
    [found] = reads(report, "lookup")  # 'sku' is declared by the body model, 'warehouse' is not
    assert found.status == "warn" and "reads body key 'warehouse' the catalog does not declare" in found.summary
    assert found.fix == "declare it in the tool's body= model"


@pytest.mark.parametrize("tool", ["orders", "typed", "declared_search"])
def test_views_that_read_only_what_they_declare_are_not_reported(report, tool):
    assert [r.status for r in reads(report, tool)] == ["pass"], report.render()


def test_the_gates_own_reading_of_the_arguments_is_not_counted(report):
    assert reads(report, "quiet") == []


def test_without_subject_no_view_runs_and_nothing_is_read():
    report = run_exercise(create_app())
    assert [r for r in report.results if r.check == "reads"] == []


def test_the_apps_request_class_is_its_own_again_after_the_run():
    app = create_app()
    before = app.request_class
    run_exercise(app, subject="t1:alice")
    assert app.request_class is before
    with app.test_request_context("/api/v1/tickets?status=open"):
        from flask import request

        assert type(request.args).__name__ == "ImmutableMultiDict"


def test_the_cli_reports_it():
    result = create_app().test_cli_runner().invoke(
        args=["bailing", "check", "--exercise", "--subject", "t1:alice"])
    assert "0 error(s)" in result.output  # the catalog alone looks clean
    assert ("WARN  reads    tool tickets (GET /api/v1/tickets): GET /api/v1/tickets reads query key 'status' "
            "the catalog does not declare") in result.output
    assert result.exit_code == 0, result.output  # a warning, like the exercise's others
