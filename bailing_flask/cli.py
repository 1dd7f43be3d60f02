"""``flask bailing ...``: export, check and list the catalog (and more).

Each command works on the app's compiled registry, the very object that
serves the catalog, so what the CLI says is what the hub gets.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import TYPE_CHECKING, Any

import click
from flask import current_app
from flask.cli import AppGroup

from bailing_flask._pipeline.catalog import serialize
from bailing_flask.stores import StoreUnavailable
from bailing_flask._pipeline.registry import registry_of
from bailing_flask._pipeline.idempotency import idempotency_of
from bailing_flask._pipeline.catalog import catalog_of

if TYPE_CHECKING:  # pragma: no cover
    from bailing_flask._state import BailingState

__all__ = ["bailing_cli"]

bailing_cli = AppGroup("bailing", help="BailingHub integration: catalog, checks and diagnostics.")


def _state() -> BailingState:
    from bailing_flask._state import current_state

    return current_state()


_COLOURS = {"error": "red", "warning": "yellow", "info": "cyan"}


def _paint(text: str, stream: Any, **style: Any) -> str:
    """``text`` styled only when it goes to a terminal."""
    target: Any = stream if stream is not None else sys.stdout
    try:
        tty = bool(target.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        tty = False
    return click.style(text, **style) if tty else text


def _severity(severity: str, stream: Any) -> str:
    return _paint(f"{severity.upper():7}", stream, fg=_COLOURS.get(severity), bold=severity == "error")


def _print_findings(findings, stream=None) -> None:  # type: ignore[no-untyped-def]
    for finding in findings:
        line = f"{_severity(finding.severity, stream)} {finding.code:32} {finding.path}: {finding.message}"
        click.echo(line, file=stream)
        if finding.suggestion:
            click.echo(f"        -> {finding.suggestion}", file=stream)


def _print_problems(problems, stream=None) -> None:  # type: ignore[no-untyped-def]
    for problem in problems:
        click.echo(f"{_severity(problem.severity, stream)} {problem.code:32} {problem.setting}: "
                   f"{problem.message}", file=stream)


@bailing_cli.command("export")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write to this file instead of standard output.")
@click.option("--indent", type=int, default=None, help="Pretty-print with this indent.")
def export_command(output: str | None, indent: int | None) -> None:
    """Write the tool catalog (OpenAPI 3 + x-agent-capability). Errors stop the export."""
    catalog = catalog_of(_state(), log_findings=False)  # printed below, once
    warnings = [f for f in catalog.findings if f.severity == "warning"]
    if catalog.errors:
        _print_findings(catalog.errors, sys.stderr)
        raise click.ClickException(f"{len(catalog.errors)} error(s): the catalog was not exported")
    _print_findings(warnings, sys.stderr)
    data = (
        json.dumps(catalog.document, ensure_ascii=False, indent=indent).encode("utf-8")
        if indent is not None
        else serialize(catalog.document)
    )
    if output:
        with open(output, "wb") as handle:
            handle.write(data + b"\n")
        click.echo(f"wrote {len(catalog.document['paths'])} path(s) to {output}", err=True)
    else:
        click.echo(data.decode("utf-8"))


def _registration() -> list[str]:
    """What to register in the hub for this app: base_url and spec_url."""
    from bailing_flask.wire.base_url import parse_base_url

    state = _state()
    base = parse_base_url(state.config.base_url)
    prefix = state.middleware.public_prefix
    mount = prefix if prefix is not None else state.config.application_root
    catalog_path = state.config.catalog_path
    if base is not None:
        lines = [f"register in the hub: base_url {base.url}  (BAILING_BASE_URL)"]
        lines.append(f"                     spec_url {base.origin}{mount}{catalog_path}  "
                     f"(the app served under {mount or '/'!r})")
        return lines
    root = f"https://<public host>{mount}"
    lines = [f"register in the hub: base_url {root}  (where the app's root is served; "
             "set BAILING_BASE_URL to state it)"]
    lines.append(f"                     spec_url {root}{catalog_path}")
    return lines


def _unsigned_note(tools: Any, exercise: bool) -> str | None:
    """Which tool routes now refuse the app's own (unsigned) clients, said by every ``check``."""
    refused = [tool.name for tool in tools if tool.options.allow_unsigned is None]
    if not refused:
        return None
    shown = ", ".join(refused[:8]) + (f" and {len(refused) - 8} more" if len(refused) > 8 else "")
    return (f"unsigned requests: refused (401 missing_signature) by {len(refused)} tool route(s) that do "
            f"not set allow_unsigned: {shown}; any client of the app's own that calls them is refused "
            + ("(the exercise's unsigned check below names the routes the app's own code serves)" if exercise
               else "(check --exercise names the routes the app's own code serves)"))


@bailing_cli.command("check")
@click.option("--exercise", is_flag=True,
              help="Also send, in process, a request signed like the hub's to every declared tool "
                   "(every method) and check that bailing_flask answered it, naming whatever else did.")
@click.option("--subject", "subjects", multiple=True,
              help="With --exercise: a real subject, for the view's decorators and for calls to "
                   "read-only tools (their views run). Twice (two users, best of two tenants): each "
                   "read-only tool is called as both, and a cached answer shared between them is found.")
@click.option("--probe-only", is_flag=True,
              help="With --exercise: send only the probe requests, which the gate refuses (the "
                   "before_request functions, the subject loader and the authorizer run; no decorator "
                   "of a view, no view).")
@click.option("--https", is_flag=True,
              help="With --exercise: send the requests as arriving over HTTPS, behind TLS (default: "
                   "the scheme of BAILING_BASE_URL).")
@click.option("--json", "as_json", is_flag=True, help="Print the findings (and the exercise) as JSON.")
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too, not only on errors.")
def check_command(exercise: bool, subjects: tuple[str, ...], probe_only: bool, https: bool,
                  as_json: bool, strict: bool) -> None:
    """Lint the catalog like the hub compiles it, and the configuration; exit 1 on errors.

    With --exercise, every tool also gets the hub's request with the probe
    subject __bailing_authz_probe__:nobody, which the gate must refuse, so
    no view and no side effect runs; then the same request as the --subject
    user, through the whole gate (its authorizer included), so the view's
    own decorators run while the view itself is stopped before it starts.
    The arguments are each tool's first example (@tool(examples=...)) where
    it has one. Anything that answered instead of
    the package (a before_request function, Flask-Login, CSRF, a limiter, a
    redirect, a 404, an HTML error page, a cached response, an after_request
    function that rewrote a refusal) is named with a fix, and the exit
    status is 1. Before it sends anything it prints which of the app's
    functions will run and on which databases, and it rolls back what they
    write where it can (Flask-SQLAlchemy, BAILING_TRANSACTION).
    """
    from bailing_flask.config_check import check_all

    state = _state()
    if (subjects or probe_only or https) and not exercise:
        raise click.UsageError("--subject, --probe-only and --https go with --exercise")
    if exercise and not (state.middleware.verifier is not None):
        raise click.ClickException(
            "--exercise needs the provider secret (it signs like the hub): set BAILING_SECRETS"
        )
    if not (state.middleware.verifier is not None):
        click.echo("note: BAILING_SECRETS is not set: the catalog is linted, but this app refuses "
                   "every hub request (503 not_configured) until it holds the provider secret", err=True)
    catalog = catalog_of(state, log_findings=False)  # printed below, once
    problems = check_all(state)
    errors = len(catalog.errors) + sum(1 for p in problems if p.severity == "error")
    warnings = sum(1 for f in catalog.findings if f.severity == "warning") + sum(
        1 for p in problems if p.severity == "warning")
    tools = len(registry_of(state).tools)
    failed = bool(errors or (strict and warnings))
    report = None
    if not as_json:  # what check found, before the exercise runs anything
        _print_findings(catalog.findings)
        _print_problems(problems)
        click.echo(f"{tools} tool(s), {errors} error(s), {warnings} warning(s)")
        for line in _registration():
            click.echo(line)
        note = _unsigned_note(registry_of(state).tools, exercise)
        if note is not None:
            click.echo(note)
    if exercise:
        from bailing_flask.exercise import run_exercise

        if not as_json:
            click.echo("")

        report = run_exercise(current_app._get_current_object(), subject=subjects,  # type: ignore[attr-defined]
                              probe_only=probe_only, https=https or None,
                              on_plan=lambda plan: click.echo(plan + "\n", err=as_json))
        failed = failed or not report.ok
    if as_json:
        click.echo(json.dumps({
            "ok": not failed, "tools": tools, "errors": errors, "warnings": warnings,
            "findings": [dataclasses.asdict(f) for f in catalog.findings],
            "configuration": [p.to_dict() for p in problems],
            "exercise": report.to_dict() if report is not None else None,
        }, ensure_ascii=False, indent=2))
    elif report is not None:
        click.echo(report.render())
    if failed:
        sys.exit(1)


@bailing_cli.command("tools")
@click.option("--json", "as_json", is_flag=True, help="Print the list as one JSON object.")
def tools_command(as_json: bool) -> None:
    """List exported tools, and declared routes that are not exported (and why)."""
    state = _state()
    registry = registry_of(state)
    catalog = catalog_of(state)
    excluded = set(catalog.excluded)
    if as_json:
        click.echo(json.dumps({
            "tools": [{
                "name": t.name, "method": t.method, "path": t.path, "scope": t.scope,
                "risk": t.risk, "served": t.operation_key not in excluded and not t.options.deprecated,
                "deprecated": bool(t.options.deprecated), "subject_required": t.subject_required,
                "sensitive": t.sensitive, "side_effecting": t.side_effecting,
                "business_approval": bool(t.options.business_approval),
                "repeats": t.repeats, "domain_key": t.options.idempotency_key is not None,
                "allow_unsigned": bool(t.options.allow_unsigned),
            } for t in registry.tools],
            "not_exported": [{"endpoint": i.endpoint, "method": i.method, "rule": i.rule,
                              "reason": i.reason} for i in registry.not_exported],
        }, ensure_ascii=False, indent=2))
        return
    rows = [("NAME", "METHOD", "PATH", "SCOPE", "RISK", "REPEATS", "UNSIGNED", "NOTE")]
    for tool in registry.tools:
        note = []
        path = catalog.path_of(tool)
        if path is None:
            note.append("outside BAILING_BASE_URL")
        if catalog.key_of(tool) in excluded:
            note.append("NOT SERVED: has errors (flask bailing check)")
        if tool.options.deprecated:
            note.append("deprecated: not exposed")
        if tool.subject_required:
            note.append("subject required")
        if tool.sensitive:
            note.append("sensitive")
        if tool.side_effecting:
            note.append("side effect (hub sends an idempotency key)")
        elif tool.idempotent and tool.method != "GET" and not tool.readonly:
            note.append("idempotent: the hub may retry")
        if tool.options.business_approval:
            note.append("business approval")
        rows.append((tool.name, tool.method, path or tool.path, tool.scope, tool.risk,
                     tool.repeats_shown, "allowed" if tool.options.allow_unsigned else "refused",
                     ", ".join(note)))
    widths = [max(len(row[i]) for row in rows) for i in range(7)]
    for row in rows:
        click.echo(("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:7])) + "  " + row[7])
                   .rstrip())
    if registry.not_exported:
        click.echo("\nDeclared but not exported:")
        for item in registry.not_exported:
            click.echo(f"  {item.method:7} {item.rule}  ({item.endpoint}): {item.reason}")
    for finding in catalog.findings:
        if finding.code == "decorator_order":
            click.echo(f"\n{finding.message}")


@bailing_cli.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
def status_command(as_json: bool) -> None:
    """Show the configuration (secrets redacted), the store, handlers, catalog digest and approvals."""
    from bailing_flask.status import collect_status, render_status

    data = collect_status(_state())
    if as_json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        click.echo(render_status(data))


@bailing_cli.group("idempotency")
def idempotency_group() -> None:
    """Show and resolve recorded side effects (uncertain ones above all)."""


@idempotency_group.command("list")
@click.option("--state", type=click.Choice(["uncertain", "in_progress", "completed", "all"]),
              default="uncertain", show_default=True)
@click.option("--limit", type=int, default=100, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def idempotency_list(state: str, limit: int, as_json: bool) -> None:
    """List entries; uncertain ones need a decision (the side effect may have happened)."""
    import time as _time

    store = idempotency_of(_state()).store()
    wanted = None if state == "all" else state
    entries = store.list(state=wanted, limit=limit)  # type: ignore[arg-type,unused-ignore]
    adapter = idempotency_of(_state()).transactional().adapter()
    if adapter is not None:  # the records of the transaction mode, in the app's database
        try:
            recorded = adapter.list(state=wanted, limit=limit)  # type: ignore[arg-type,unused-ignore]
        except StoreUnavailable as exc:
            click.echo(f"warning: cannot read {adapter.table_name} ({exc})", err=True)
            recorded = []
        entries = sorted(entries + recorded, key=lambda entry: entry.created_at)[:limit]
    now = _time.time()
    for entry in entries:
        data = entry.to_dict(now=now)
        if as_json:
            click.echo(json.dumps(data, ensure_ascii=False))
        else:
            status = data["response"]["status"] if data["response"] else "-"
            note = f"  note={data['note']}" if data["note"] else ""
            click.echo(f"{data['key']}  {data['state']:11}  {data['tool']:24}  job={data['job_id']!s}  "
                       f"subject={data['subject']!s}  status={status}{note}")
    if not as_json:
        click.echo(f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}", err=True)


@idempotency_group.command("resolve")
@click.argument("key")
@click.option("--note", required=True, help="Why, for the record (who checked what).")
@click.option("--rerun", is_flag=True,
              help="Forget the entry: the next identical call runs the view again.")
@click.option("--status", "status_code", type=int, default=200, show_default=True,
              help="Status of the response repeats will get (when not --rerun).")
@click.option("--body", default='{"ok":true,"status":"reconciled"}', show_default=True,
              help="JSON body repeats will get (when not --rerun).")
def idempotency_resolve(key: str, note: str, rerun: bool, status_code: int, body: str) -> None:
    """Decide an uncertain call: answer repeats with a response, or allow a re-run."""
    import time as _time

    from bailing_flask.stores import Entry, StoredResponse
    from bailing_flask.stores.base import _takes_keyword

    store = idempotency_of(_state()).store()
    retention = float(_state().config.idempotency_retention)
    response = None
    if not rerun:
        try:
            json.loads(body)
        except ValueError as exc:
            raise click.BadParameter(f"--body must be JSON: {exc}") from None
        response = StoredResponse(
            status=status_code,
            headers=(("Content-Type", "application/json; charset=utf-8"),),
            body=body.encode("utf-8"),
        )
    adapter = idempotency_of(_state()).transactional().adapter()

    def read() -> tuple[Entry | None, bool]:
        recorded = adapter.get(key) if adapter is not None else None
        return (recorded, True) if recorded is not None else (store.get(key), False)

    entry, in_transaction_table = read()
    now = _time.time()
    if entry is None or entry.expires_at <= now:
        raise click.ClickException(f"no entry {key!r} (expired, or never recorded)")
    if entry.state == "in_progress" and not entry.is_uncertain(now):
        # its worker may still be running it: deciding now would let a repeat run beside it
        raise click.ClickException(
            f"call {key} is still running (its lease ends in {entry.lease_expires_at - now:.0f} s): "
            "resolving it now would let a repeat run beside it; if its worker died, it shows as "
            "uncertain once the lease ends, and can be resolved then")
    # the decision applies to the entry as read here, checked in the same step as the write: a
    # worker finishing the call meanwhile (or a new call after it expired) keeps what it wrote
    if adapter is not None and in_transaction_table:
        seen = {"seen": entry} if _takes_keyword(type(adapter).resolve, "seen") else {}
        resolved = adapter.resolve(key, response=response, note=note, retention_seconds=retention,
                                   now=now, **seen)  # an adapter written before seen=: as before
    else:
        resolved = store.resolve(key, response=response, note=note, retention_seconds=retention,
                                 seen=entry)
    if not resolved:
        now_entry, _ = read()
        if now_entry is None or now_entry.expires_at <= _time.time():
            raise click.ClickException(f"no entry {key!r} any more: it expired, or another "
                                       "decision deleted it meanwhile; nothing was changed")
        state = "uncertain" if now_entry.is_uncertain(_time.time()) else now_entry.state
        raise click.ClickException(
            f"call {key} changed while it was being resolved (it is {state} now); nothing was "
            "changed: look at it again (`flask bailing idempotency list --state all`) and decide "
            "on it as it is now")
    current_app.logger.warning("bailing: idempotency entry %s resolved (%s): %s", key,
                               "re-run allowed" if rerun else f"answered {status_code}", note)
    click.echo(f"resolved {key}: " + ("the next identical call runs again" if rerun
                                      else f"repeats get HTTP {status_code}")
               + (_spent_approval_note(entry.meta.tool) if rerun and entry is not None else ""))


def _spent_approval_note(tool_name: str) -> str:
    """What ``--rerun`` means for a ``business_approval`` tool: its approval stays spent."""
    tools = [tool for tool in registry_of(_state()).tools if tool.name == tool_name]
    if not any(tool.options.business_approval for tool in tools):
        return ""
    return (f", once approved again: {tool_name} is a business_approval tool, and the first "
            "attempt spent its approval (one approval runs one call)")


@bailing_cli.group("store")
def store_group() -> None:
    """The idempotency store's tables (the SQL store on PostgreSQL or MySQL/MariaDB)."""


@store_group.command("init")
@click.option("--sql", "show_sql", is_flag=True,
              help="Print the DDL instead of running it (to migrate by hand).")
@click.option("--dialect", type=click.Choice(["postgresql", "mysql"]),
              help="With --sql: the DDL for this database, whatever BAILING_STORE names.")
def store_init(show_sql: bool, dialect: str | None) -> None:
    """Create or upgrade the SQL store's tables (safe to run on every deploy)."""
    from bailing_flask.stores._sql_schema import init_command

    try:
        click.echo(init_command(None if dialect and show_sql else idempotency_of(_state()).store(),
                                show_sql, dialect), nl=False)
    except (StoreUnavailable, ValueError) as exc:
        raise click.ClickException(str(exc)) from None


def _expected_base_url(catalog_url: str | None) -> tuple[str | None, str | None]:
    """The base URL this app's catalog paths are relative to, and where that comes from.

    ``BAILING_BASE_URL`` if set; otherwise the URL the app's root is served at,
    read off ``--catalog-url`` (the public catalog URL minus the catalog's path).
    """
    from urllib.parse import urlsplit

    from bailing_flask.wire.base_url import parse_base_url

    state = _state()
    base = parse_base_url(state.config.base_url)
    if base is not None:
        return base.url, "BAILING_BASE_URL"
    catalog_path = state.config.catalog_path
    if catalog_url:
        parts = urlsplit(catalog_url.strip())
        if parts.scheme and parts.netloc and parts.path.endswith(catalog_path):
            root = parts.path[: len(parts.path) - len(catalog_path)].rstrip("/")
            return (f"{parts.scheme}://{parts.netloc}{root}",
                    "where the app's root is served, read off --catalog-url (BAILING_BASE_URL unset)")
    return None, None


def _first_secret() -> str:
    from bailing_flask.wire.signing import primary_secret

    secret = primary_secret(_state().config.secrets)
    if secret is None:
        raise click.ClickException(
            "this command needs the provider secret: set BAILING_SECRETS (the tool source's secret "
            "in the hub) or pass --secret"
        )
    return secret


def _show_request(request) -> None:  # type: ignore[no-untyped-def]
    click.echo(f"> {request.method} {request.path_with_query}")
    for name, value in request.headers.items():
        click.echo(f"> {name}: {value}")
    if request.body:
        click.echo(">")
        click.echo("> " + request.body.decode("utf-8", "replace"))


def _show_response(response) -> None:  # type: ignore[no-untyped-def]
    click.echo(f"< HTTP {response.status}")
    for name, value in response.headers.items():
        click.echo(f"< {name}: {value}")
    click.echo("<")
    text = response.text
    try:
        text = json.dumps(json.loads(text), ensure_ascii=False, indent=2)
    except ValueError:
        pass
    click.echo(text)


@bailing_cli.command("call")
@click.argument("tool_name")
@click.argument("args_json", default="{}")
@click.option("--subject", default=None, help="X-Bailing-On-Behalf-Of (omit for an anonymous call).")
@click.option("--job", "job_id", default=None, help="X-Bailing-Job-Id (default: a fresh UUID).")
@click.option("--url", default=None,
              help="Base URL of a live deployment (the hub's base_url); default: in-process.")
@click.option("--secret", default=None, help="Provider secret (default: the app's BAILING_SECRETS).")
@click.option("--catalog-url", default=None,
              help="With --url: the spec_url, when it is not URL + /.well-known/bailing/tools.json "
                   "(BAILING_BASE_URL without the app's mount prefix).")
@click.option("--client", default="admin-debug", show_default=True,
              help="X-Bailing-Client: admin-debug as the console's debug invoke sends it; '' for a "
                   "job no client triggered, or a client's app id.")
@click.option("--https", is_flag=True,
              help="In-process: send the call as arriving over HTTPS, behind TLS (default: the scheme "
                   "of BAILING_BASE_URL).")
def call_command(tool_name: str, args_json: str, subject: str | None, job_id: str | None,
                 url: str | None, secret: str | None, catalog_url: str | None, client: str,
                 https: bool) -> None:
    """Make one signed call exactly as the hub would; print request and response.

    The tool is looked up in the catalog that is actually served (fetched
    signed), its arguments placed and encoded with the hub's rules.
    """
    from bailing_flask.testing import HubSimulator

    try:
        args = json.loads(args_json)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="ARGS_JSON") from None
    if not isinstance(args, dict):
        raise click.BadParameter("must be a JSON object", param_hint="ARGS_JSON")
    if https and url:
        raise click.UsageError("--https is for the in-process call: with --url the URL's scheme decides")
    target = url or current_app._get_current_object()  # type: ignore[attr-defined]
    # the console's debug invoke names itself admin-debug; the idempotency key of a real job is
    # still sent on side effects, so that --job shows the idempotency record answering
    hub = HubSimulator(target, secret or _first_secret(), client=client,
                       catalog_url=catalog_url if url else None, https=https or None)
    try:
        missing = hub.missing_path_arguments(tool_name, args)
        if missing:
            names = ", ".join(missing)
            example = json.dumps({**args, **{name: "..." for name in missing}}, ensure_ascii=False)
            raise click.ClickException(
                f"tool {tool_name!r} needs the path argument(s) {names}: put them in ARGS_JSON, "
                f"e.g. '{example}' (without them the hub would request the literal placeholder "
                "and get 422 missing_path_argument)")
        request = hub.build_call(tool_name, args, subject=subject, job_id=job_id)
    except KeyError as exc:
        raise click.ClickException(str(exc.args[0])) from None
    except AssertionError as exc:  # the catalog could not be fetched
        raise click.ClickException(str(exc)) from None
    _show_request(request)
    click.echo()
    response = hub.replay(request)
    _show_response(response)
    if not 200 <= response.status < 300:
        sys.exit(1)


@bailing_cli.command("doctor")
@click.option("--url", default=None,
              help="The base_url registered in the hub (default: BAILING_BASE_URL).")
@click.option("--catalog-url", default=None,
              help="The spec_url registered in the hub (default: URL + /.well-known/bailing/tools.json).")
@click.option("--subject", default=None, help="Subject for the one signed tool call (default: anonymous).")
@click.option("--secret", default=None, help="Provider secret (default: the app's BAILING_SECRETS).")
@click.option("--policy", type=click.Choice(["signed_required", "public_allowed"]),
              default="signed_required", show_default=True, help="The catalog access policy in the hub.")
@click.option("--timeout", type=float, default=10.0, show_default=True)
@click.option("--cacert", type=click.Path(dir_okay=False), default=None,
              help="Verify an https server against the CA certificates in this PEM file instead of "
                   "the system's (a self-signed or internal CA the hub trusts).")
@click.option("--no-write-tools", "write_tools", flag_value=False, default=True,
              help="Send no request to POST/PUT/PATCH/DELETE tools (skips the write_tools check).")
@click.option("--verbose", is_flag=True, help="Show details of passing checks too.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def doctor_command(url: str | None, catalog_url: str | None, subject: str | None,
                   secret: str | None, policy: str, timeout: float, cacert: str | None,
                   write_tools: bool, verbose: bool, as_json: bool) -> None:
    """Check a live deployment the way the hub will see it; exit 1 on any failure.

    Prints the base_url to register: BAILING_BASE_URL, or else where the app's
    root is served (from --catalog-url), and fails if --url differs from it.
    """
    from bailing_flask.doctor import run_doctor

    expected, source = _expected_base_url(catalog_url)
    if url is None:
        if expected is None or source != "BAILING_BASE_URL":
            raise click.UsageError("pass --url (the base_url registered in the hub), or set "
                                   "BAILING_BASE_URL")
        url = expected
    try:
        report = run_doctor(url, secret or _first_secret(), catalog_url=catalog_url,
                            subject=subject, timeout=timeout, policy=policy,  # type: ignore[arg-type]
                            expected_base_url=expected, expected_source=source,
                            write_tools=write_tools, cacert=cacert)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    if as_json:
        click.echo(json.dumps(report.to_dict(), ensure_ascii=False, indent=2))
    else:
        click.echo(report.render(verbose=verbose))
    if not report.ok:
        sys.exit(1)
