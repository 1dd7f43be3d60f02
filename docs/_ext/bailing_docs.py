"""Sphinx helpers that generate reference material from the package itself.

Nothing here is copied from the code by hand, so the documentation cannot
drift from it:

``.. bailing-settings::``
    A table of every configuration key in :data:`bailing_flask.settings.SETTINGS`
    (key, type, default, effect). Each key becomes a link target for the
    ``:setting:`` role; a ``:setting:`` reference to a key that does not exist
    is a build warning (so an error under ``-W``).

``.. bailing-reasons::``
    The refusal reason codes (:data:`bailing_flask.reasons.REASONS`) with their HTTP
    status, the coarse ``error`` field and the message callers see.

``.. bailing-codes:: TABLE``
    The lint's finding codes (:data:`bailing_flask.lint.codes.CODES`, ``TABLE``
    is ``findings``, with ``:stage: lint`` or ``:stage: registry``), or the
    doctor's tables (:mod:`bailing_flask.doctor.codes`: ``checks``,
    ``statuses``, ``access`` or ``probe``). Each finding code becomes a link
    target for the ``:finding:`` role.

``.. bailing-cli:: COMMAND [SUBCOMMAND]``
    The ``--help`` text of a ``flask bailing`` command, rendered from the
    click command object. With ``:optional:``, a command that this version
    does not have renders nothing instead of failing the build.

``.. bailing-audit-fields::``
    The fields of an audit record (:data:`bailing_flask.audit.AUDIT_FIELD_DOCS`).

``.. bailing-json::``
    The JSON of a Python expression, evaluated with the builders of
    :mod:`bailing_flask.hub.posts` and the samples below in scope
    (``JOB``, ``capability(...)``), so the payloads shown are the ones the
    package builds and its typed models read.
"""

from __future__ import annotations

import re
import string
from typing import Any

import click
from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective
from bailing_flask._state import state_of
from bailing_flask._pipeline.catalog import catalog_of

logger = logging.getLogger(__name__)

MiB = 1024 * 1024


# -- settings -----------------------------------------------------------------------------


def _format_default(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        if value >= MiB and value % MiB == 0:
            return f"{value} ({value // MiB} MiB)"
        if value >= 3600 and value % 3600 == 0:
            return f"{value} ({value // 3600} h)"
        return str(value)
    if isinstance(value, (tuple, list)) and not value:
        return "()"
    return repr(value)


_BACKTICKS = re.compile(r"`([^`]+)`")


def _text_with_literals(text: str) -> list[nodes.Node]:
    """Plain text in which `backticked` words become inline literals."""
    result: list[nodes.Node] = []
    position = 0
    for match in _BACKTICKS.finditer(text):
        if match.start() > position:
            result.append(nodes.Text(text[position : match.start()]))
        result.append(nodes.literal(match.group(1), match.group(1)))
        position = match.end()
    if position < len(text):
        result.append(nodes.Text(text[position:]))
    return result


def _table(
    headers: list[str], widths: list[int], rows: list[list[nodes.Node]], *classes: str
) -> nodes.table:
    table = nodes.table(classes=["bailing-generated", *classes])
    group = nodes.tgroup(cols=len(headers))
    table += group
    for width in widths:
        group += nodes.colspec(colwidth=width)
    head = nodes.thead()
    group += head
    head_row = nodes.row()
    for header in headers:
        entry = nodes.entry()
        entry += nodes.paragraph(header, header)
        head_row += entry
    head += head_row
    body = nodes.tbody()
    group += body
    for cells in rows:
        row = nodes.row()
        for cell in cells:
            entry = nodes.entry()
            entry += cell
            row += entry
        body += row
    return table


def setting_id(key: str) -> str:
    return "setting-" + key.lower().replace("_", "-")


class SettingsDirective(SphinxDirective):
    """Render ``bailing_flask.settings.SETTINGS`` as a table."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        from bailing_flask.settings import SETTINGS

        self.env.note_dependency(_module_file("bailing_flask.settings"))
        std = self.env.get_domain("std")
        rows: list[list[nodes.Node]] = []
        for setting in SETTINGS:
            node_id = setting_id(setting.key)
            key_paragraph = nodes.paragraph()
            target = nodes.target("", "", ids=[node_id])
            key_paragraph += target
            key_paragraph += nodes.literal(setting.key, setting.key)
            std.note_object("setting", setting.key, node_id, location=(self.env.docname, self.lineno))
            default = _format_default(setting.default)
            default_paragraph = nodes.paragraph()
            default_paragraph += nodes.literal(default, default)
            type_paragraph = nodes.paragraph()
            type_paragraph.extend(_text_with_literals(setting.type))
            doc_paragraph = nodes.paragraph()
            doc_paragraph.extend(_text_with_literals(setting.doc))
            rows.append([key_paragraph, type_paragraph, default_paragraph, doc_paragraph])
        return [_table(["Key", "Type", "Default", "Effect"], [22, 18, 14, 46], rows)]


def _missing_setting(app: Sphinx, env: Any, node: nodes.Element, contnode: nodes.Node) -> None:
    if node.get("reftype") == "setting" and node.get("refdomain") == "std":
        logger.warning(
            "unknown configuration key %r (not in bailing_flask.settings.SETTINGS)",
            node.get("reftarget"),
            location=node,
        )
    if node.get("reftype") == "finding" and node.get("refdomain") == "std":
        logger.warning(
            "unknown finding code %r (not in bailing_flask.lint.codes.CODES)",
            node.get("reftarget"),
            location=node,
        )
    return None


def _module_file(module: str) -> str:
    import importlib

    return importlib.import_module(module).__file__ or ""


# -- refusal reasons ---------------------------------------------------------------------------


class ReasonsDirective(SphinxDirective):
    """Render every refusal reason code with status, coarse error and message."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        from bailing_flask.reasons import REASONS

        self.env.note_dependency(_module_file("bailing_flask.reasons"))
        rows: list[list[nodes.Node]] = []
        for entry in REASONS.values():
            cells: list[nodes.Node] = []
            for text, literal in ((entry.code, True), (str(entry.status), False),
                                  (entry.sdk_error, True), (entry.message, False)):
                paragraph = nodes.paragraph()
                paragraph += nodes.literal(text, text) if literal else nodes.Text(text)
                cells.append(paragraph)
            rows.append(cells)
        return [_table(["reason", "HTTP", "error", "message (sent to the caller)"], [22, 8, 18, 52], rows)]


# -- lint and doctor codes ---------------------------------------------------------------------

HUB_REPOSITORY = "https://github.com/bailinghub/bailinghub"


def finding_id(code: str) -> str:
    return "finding-" + code.replace("_", "-")


def _template(template: str) -> list[nodes.Node]:
    """A message template as text, each ``{field}`` shown as an emphasised placeholder."""
    result: list[nodes.Node] = []
    for literal, field, _, conversion in string.Formatter().parse(template):
        if literal:
            result.extend(_text_with_literals(literal))
        if field is not None:
            quote = "'" if conversion == "r" else ""
            result.append(nodes.Text(quote))
            result.append(nodes.emphasis(field, field))
            result.append(nodes.Text(quote))
    return result


def _hub_link(ref: Any) -> list[nodes.Node]:
    """``function()`` linked to its file in the hub's repository at the checked commit."""
    from bailing_flask.lint.codes import HUB_COMMIT

    url = f"{HUB_REPOSITORY}/blob/{HUB_COMMIT}/{ref.file}"
    reference = nodes.reference("", "", refuri=url)
    reference += nodes.literal(f"{ref.function}()", f"{ref.function}()")
    return [reference, nodes.Text(f" in {ref.file.rsplit('/', 1)[-1]}")]


def _paragraph(*children: nodes.Node) -> nodes.paragraph:
    paragraph = nodes.paragraph()
    paragraph.extend(children)
    return paragraph


class CodesDirective(SphinxDirective):
    """Render one of the code tables of bailing_flask.lint.codes and bailing_flask.doctor.codes."""

    required_arguments = 1
    has_content = False
    option_spec = {"stage": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        self.env.note_dependency(_module_file("bailing_flask.lint.codes"))
        self.env.note_dependency(_module_file("bailing_flask.doctor.codes"))
        table = self.arguments[0]
        if table == "findings":
            return [self._findings(self.options.get("stage", "lint"))]
        if table == "checks":
            return [self._checks()]
        if table in ("statuses", "access", "probe"):
            return [self._verdicts(table)]
        logger.warning("bailing-codes: unknown table %r", table, location=(self.env.docname, self.lineno))
        return []

    def _findings(self, stage: str) -> nodes.table:
        from bailing_flask.lint.codes import CODES

        std = self.env.get_domain("std")
        stages = ("lint", "registry")
        rows: list[list[nodes.Node]] = []
        for entry in CODES.values():
            if stage not in entry.stages:
                continue
            code_paragraph = nodes.paragraph()
            if stage == entry.stages[0]:
                node_id = finding_id(entry.code)
                code_paragraph += nodes.target("", "", ids=[node_id])
                std.note_object("finding", entry.code, node_id, location=(self.env.docname, self.lineno))
            code_paragraph += nodes.literal(entry.code, entry.code)
            code_cell = nodes.container()
            code_cell += code_paragraph
            code_cell += _paragraph(nodes.Text(entry.severity))
            if entry.source == "hub":
                assert entry.mirrors is not None
                origin = _paragraph(nodes.Text("Reported by the hub's compiler: "),
                                    *_hub_link(entry.mirrors), nodes.Text("."))
            elif entry.mirrors is not None:
                origin = _paragraph(nodes.Text("A bailing_flask hazard; predicts what "),
                                    *_hub_link(entry.mirrors), nodes.Text(" does."))
            else:
                origin = _paragraph(nodes.Text("A bailing_flask hazard."))
            origin["classes"].append("bailing-origin")
            text = nodes.container()
            for variant, wording in entry.texts():
                # a variant named after a stage is that stage's wording; the rest go with the default
                if (variant if variant in stages else entry.stages[0]) != stage:
                    continue
                message = nodes.paragraph()
                if variant is not None and variant not in stages:
                    message += nodes.strong(f"({variant}) ", f"({variant}) ")
                message.extend(_template(wording.message))
                text += message
                if wording.fix:
                    text += _paragraph(nodes.strong("Fix: ", "Fix: "), *_template(wording.fix))
            text += origin
            rows.append([code_cell, text])
        return _table(["Code", "Message, fix, and what it mirrors"], [30, 70], rows, "bailing-codes")

    def _checks(self) -> nodes.table:
        from bailing_flask.doctor.codes import CHECKS

        rows: list[list[nodes.Node]] = []
        for check in CHECKS:
            name = _paragraph(nodes.literal(check.name, check.name))
            what = nodes.container()
            what += _paragraph(*_text_with_literals(check.what))
            for ref in check.mirrors:
                what += _paragraph(*_hub_link(ref))
            if not check.mirrors:
                what += _paragraph(nodes.emphasis("the doctor's own check", "the doctor's own check"))
            outcomes = nodes.container()
            for status, text in (("pass", check.passes), ("warn", check.warns),
                                 ("fail", check.fails), ("skip", check.skipped)):
                if text:
                    outcomes += _paragraph(nodes.strong(f"{status}: ", f"{status}: "),
                                           *_text_with_literals(text))
            rows.append([name, what, outcomes])
        return _table(
            ["Check", "What it does (and mirrors in the hub)", "Outcomes"], [18, 42, 40], rows,
            "bailing-codes",
        )

    def _verdicts(self, table: str) -> nodes.table:
        from bailing_flask.doctor import codes

        verdicts = {"statuses": codes.STATUSES, "access": codes.ACCESS_VERDICTS,
                    "probe": codes.PROBE_VERDICTS}[table]
        rows = [[_paragraph(nodes.literal(v.value, v.value)), _paragraph(*_text_with_literals(v.meaning))]
                for v in verdicts]
        return _table(["Value", "Meaning"], [20, 80], rows)


# -- CLI help ----------------------------------------------------------------------------------


class CliDirective(SphinxDirective):
    """Render ``flask bailing <command> --help`` from the click objects."""

    required_arguments = 1
    optional_arguments = 3
    has_content = False
    option_spec = {"optional": directives.flag}

    def run(self) -> list[nodes.Node]:
        from bailing_flask.cli import bailing_cli

        self.env.note_dependency(_module_file("bailing_flask.cli"))
        names = list(self.arguments)
        command: click.Command = bailing_cli
        info_name = "flask bailing"
        parent = click.Context(bailing_cli, info_name=info_name)
        for name in names:
            sub = command.commands.get(name) if isinstance(command, click.Group) else None
            if sub is None:
                if "optional" in self.options:
                    logger.info("bailing-cli: no command %r in this version; skipped", " ".join(names))
                    return []
                logger.warning(
                    "bailing-cli: no command %r in bailing_flask.cli", " ".join(names),
                    location=(self.env.docname, self.lineno),
                )
                return []
            command = sub
            parent = click.Context(command, info_name=name, parent=parent)
        formatter = parent.make_formatter()
        command.format_help(parent, formatter)
        text = formatter.getvalue().rstrip()
        block = nodes.literal_block(text, text, classes=["bailing-generated"])
        block["language"] = "text"
        return [block]


# -- audit fields ---------------------------------------------------------------------


class AuditFieldsDirective(SphinxDirective):
    has_content = False

    def run(self) -> list[nodes.Node]:
        from bailing_flask.audit import AUDIT_FIELD_DOCS

        self.env.note_dependency(_module_file("bailing_flask.audit"))
        rows: list[list[nodes.Node]] = []
        for name, doc in AUDIT_FIELD_DOCS.items():
            key = nodes.paragraph()
            key += nodes.literal(name, name)
            text = nodes.paragraph()
            text.extend(_text_with_literals(doc))
            rows.append([key, text])
        return [_table(["Field", "Meaning"], [20, 80], rows)]


# -- example payloads -------------------------------------------------------------------


def _sample_namespace() -> dict[str, Any]:
    from bailing_flask.hub import posts as hub_payloads

    job = hub_payloads.job_record(
        job_id="7d7f0c5e-2b8a-4f7e-9d43-1c2a9e5b6f10", request_id="crm-ticket-4711",
        subject="t1:u1", callback_url="https://shop.example.com/.well-known/bailing/callbacks/job",
        created_at="2024-06-10T06:13:20.000Z", updated_at="2024-06-10T06:13:25.412Z",
        text="退款申请已提交：订单 1001，金额 12.50。",
    )
    job["session_id"] = "3f6d2a9c-8b1e-4c57-a0d2-5e9f7b3c1a84"

    def capability(**options: Any) -> dict[str, Any]:
        from flask import Flask

        from bailing_flask import Bailing, Param, tool

        app = Flask("docs_example")
        app.config.update(BAILING_SECRETS=["x" * 40], BAILING_STORE="memory://")
        bailing = Bailing(app)
        bailing.authorizer(lambda call: True)

        @app.post("/api/refunds/<int:request_id>/execute")
        @tool(name="refund_execute", params=[Param("request_id", location="path",
                                                    description="The refund request to pay out.")],
              **options)
        def refund_execute(request_id: int) -> Any:
            """Pay out a submitted refund request."""
            return {}

        operation = catalog_of(state_of(app)).document["paths"][
            "/api/refunds/{request_id}/execute"]["post"]
        return {"operationId": operation["operationId"],
                "x-agent-capability": operation["x-agent-capability"]}

    return {**{name: getattr(hub_payloads, name) for name in hub_payloads.__all__},
            "JOB": job, "capability": capability}


class JsonDirective(SphinxDirective):
    has_content = True

    def run(self) -> list[nodes.Node]:
        import json

        self.env.note_dependency(_module_file("bailing_flask.hub.posts"))
        expression = "\n".join(self.content)
        try:
            value = eval(expression, _sample_namespace())  # noqa: S307 - the docs' own text
        except Exception as exc:
            logger.warning("bailing-json: %s: %s", type(exc).__name__, exc,
                           location=(self.env.docname, self.lineno))
            return []
        text = json.dumps(value, ensure_ascii=False, indent=2)
        block = nodes.literal_block(text, text, classes=["bailing-generated"])
        block["language"] = "json"
        return [block]


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_crossref_type("setting", "setting", indextemplate="pair: %s; configuration key")
    app.add_crossref_type("finding", "finding", indextemplate="pair: %s; finding code")
    app.add_directive("bailing-codes", CodesDirective)
    app.add_directive("bailing-settings", SettingsDirective)
    app.add_directive("bailing-reasons", ReasonsDirective)
    app.add_directive("bailing-cli", CliDirective)
    app.add_directive("bailing-audit-fields", AuditFieldsDirective)
    app.add_directive("bailing-json", JsonDirective)
    app.connect("missing-reference", _missing_setting)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
