"""Render the registry as the OpenAPI 3.0 catalog the hub compiles.

Every field the hub consumes is emitted explicitly,
so what the hub decides (risk, read-only, subject, approval) is visible in
the document rather than left to its defaults. Output is deterministic:
paths sorted, methods in a fixed order, so the same app gives the same
bytes and the hub's change detection stays quiet.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import logging

from flask import has_request_context, request

from bailing_flask.wire.base_url import PathMap
from bailing_flask._pipeline.mount import path_map_for
from bailing_flask._pipeline.registry import Registry, Tool, registry_of
from bailing_flask._state import BailingState, Cache

if TYPE_CHECKING:  # pragma: no cover
    from bailing_flask.lint.codes import Finding

__all__ = ["Catalog", "build_catalog", "tool_operation", "catalog_of", "path_map_of"]

OPENAPI_VERSION = "3.0.3"


def _capability(tool: Tool) -> dict[str, Any]:
    options = tool.options
    capability: dict[str, Any] = {
        "version": 1,
        "enabled": not options.deprecated,
        "scope": tool.scope,
        "risk": {"level": tool.risk},
        "subject": {"required": tool.subject_required},
        "audit": {"sensitive": tool.sensitive},
    }
    execution: dict[str, Any] = {"readonly": tool.readonly, "idempotent": tool.idempotent}
    if options.rate_limit is not None:
        execution["rate_limit"] = {"count": options.rate_limit.count, "window": options.rate_limit.window}
    if options.timeout_ms is not None:
        execution["timeout_ms"] = options.timeout_ms
    capability["execution"] = execution
    approval: dict[str, Any] = {}
    if options.approval_required or options.business_approval:
        # a tool the business must approve is worth nothing to the hub without an approval
        approval["required"] = True
    if options.approval_when:
        approval["when"] = [condition.to_capability() for condition in options.approval_when]
    if options.approval_prompt:
        approval["prompt"] = options.approval_prompt
    if approval:
        approval.setdefault("required", False)
        capability["approval"] = approval
    guidance: dict[str, Any] = {}
    if options.when_to_use:
        guidance["when_to_use"] = options.when_to_use
    if options.returns:
        guidance["returns"] = options.returns
    elif tool.shaper is not None and tool.shaper.returns:
        guidance["returns"] = tool.shaper.returns  # what response= lets through
    if options.examples:
        guidance["examples"] = list(options.examples)
    if options.context:
        guidance["context"] = list(options.context)
    if guidance:
        capability["guidance"] = guidance
    if options.outcome is not None:
        capability["outcome"] = options.outcome.model_dump()
    return capability


def _responses(tool: Tool) -> dict[str, Any]:
    responses: dict[str, Any] = {
        "200": {"description": "Success."},
        "401": {"description": "Not signed by BailingHub (JSON body with a `reason`)."},
        "403": {"description": "This subject may not use this tool (JSON body with a `reason`)."},
        "422": {"description": "Invalid arguments (JSON body naming the parameters)."},
    }
    if tool.side_effecting:
        responses["409"] = {"description": "The same call is still running or its outcome is uncertain."}
    return responses


def tool_operation(tool: Tool) -> dict[str, Any]:
    """The OpenAPI operation object of one tool."""
    operation: dict[str, Any] = {"operationId": tool.name}
    if tool.description:
        operation["summary"] = tool.description
    if tool.options.tags:
        operation["tags"] = list(tool.options.tags)
    if tool.options.deprecated:
        operation["deprecated"] = True
    if tool.parameters:
        operation["parameters"] = [dict(p) for p in tool.parameters]
    if tool.body_schema is not None:
        operation["requestBody"] = {
            "required": bool(tool.body_schema.get("required")),
            "content": {"application/json": {"schema": tool.body_schema}},
        }
    elif tool.method != "GET":
        # a write tool without arguments: the hub accepts an empty object schema
        operation["requestBody"] = {
            "required": False,
            "content": {"application/json": {"schema": {"type": "object", "additionalProperties": False}}},
        }
    operation["responses"] = _responses(tool)
    operation["x-agent-capability"] = _capability(tool)
    for key, value in sorted((tool.options.extensions or {}).items()):
        operation[key] = value
    return operation


@dataclass
class Catalog:
    """The full document, its findings, and the served (error-free) bytes.

    Operation keys (``excluded``, finding paths) use the catalog paths: with
    ``BAILING_BASE_URL`` these may differ from the routes (:meth:`key_of`).
    """

    document: dict[str, Any]
    findings: list[Finding]
    served: dict[str, Any]
    served_bytes: bytes
    excluded: list[str]
    #: how routes became catalog paths (``None``: they are the routes)
    path_map: PathMap | None = None

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    def path_of(self, tool: Tool) -> str | None:
        """The catalog path of a registry tool; ``None`` if the base URL cannot reach it."""
        return tool.path if self.path_map is None else self.path_map.catalog_path(tool.path)

    def key_of(self, tool: Tool) -> str:
        """The operation key the findings and ``excluded`` use for a registry tool."""
        path = self.path_of(tool)
        return tool.operation_key if path is None else f"{tool.method} {path}"


def _document(tools: list[Tool], title: str, version: str, probe_path: str | None) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for tool in tools:
        paths.setdefault(tool.path, {})[tool.method.lower()] = tool_operation(tool)
    document: dict[str, Any] = {"openapi": OPENAPI_VERSION, "info": {"title": title, "version": version}}
    if probe_path:
        document["x-bailing-authz-probe"] = {
            "path": probe_path,
            "method": "POST",
            "operationId": "authz_probe",
        }
    document["paths"] = paths
    return document


def serialize(document: dict[str, Any]) -> bytes:
    """Compact UTF-8 JSON (the hub decodes UTF-8 and re-serialises anyway)."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def _placed(
    registry: Registry, probe_path: str | None, path_map: PathMap | None
) -> tuple[list[Tool], list[Finding], str | None]:
    """The tools at their catalog paths, the registry's findings keyed the same way, the probe.

    Without a path map (no ``BAILING_BASE_URL``) nothing moves.
    """
    from bailing_flask.lint.codes import finding  # the linter loads with the first compile

    if path_map is None or path_map.identity:
        return list(registry.tools), list(registry.findings), probe_path
    placed: list[Tool] = []
    renamed: dict[str, str] = {}
    findings: list[Finding] = []
    for tool in registry.tools:
        public = path_map.catalog_path(tool.path)
        if public is None:
            findings.append(finding(
                "outside_base_url", tool.operation_key,
                name=tool.name, public=path_map.public(tool.path), base=path_map.base,
            ))
            placed.append(tool)
            continue
        moved = dataclasses.replace(tool, path=public)
        renamed[tool.operation_key] = moved.operation_key
        placed.append(moved)
    findings.extend(dataclasses.replace(f, path=renamed.get(f.path, f.path)) for f in registry.findings)
    probe = path_map.catalog_path(probe_path) if probe_path else None
    if probe_path and probe is None:
        findings.append(finding(
            "authz_probe_outside_base_url", "-", public=path_map.public(probe_path), base=path_map.base,
        ))
    return placed, findings, probe


def build_catalog(
    registry: Registry, *, title: str, version: str, probe_path: str | None,
    path_map: PathMap | None = None,
) -> Catalog:
    """Render, lint, and drop the operations the hub would reject.

    An operation with an error is left out of the served catalog (and
    logged by the caller) instead of publishing something the hub would
    refuse or, worse, misread; ``flask bailing export`` refuses outright.
    ``path_map`` places the tools under ``BAILING_BASE_URL``
    (:mod:`bailing_flask.wire.base_url`); tools it cannot place are errors.
    """
    from bailing_flask.lint import lint_document  # the linter loads with the first catalog

    tools, findings, probe = _placed(registry, probe_path, path_map)
    document = _document(tools, title, version, probe)
    known = {(f.code, f.path) for f in findings}
    findings.extend(
        f for f in lint_document(document, trusted=True) if (f.code, f.path) not in known
    )
    broken = {f.path for f in findings if f.severity == "error"}
    served_tools = [t for t in tools if t.operation_key not in broken]
    served = (
        document if len(served_tools) == len(tools)
        else _document(served_tools, title, version, probe)
    )
    excluded = sorted(t.operation_key for t in tools if t.operation_key in broken)
    return Catalog(document, findings, served, serialize(served), excluded, path_map)


#: the app's catalog and the registry it was built from (read through :func:`catalog_of`)
_CATALOG: Cache[tuple[Registry, Catalog]] = Cache("catalog")


def catalog_of(state: BailingState, *, log_findings: bool = True) -> Catalog:
    """The catalog of the app's current registry, cached on its state (with the path map).

    Its findings are logged once per process when it is built;
    ``log_findings=False`` counts them as shown without logging them
    (``flask bailing check`` prints them itself).
    """
    registry = registry_of(state)
    paths = path_map_of(state)
    built = _CATALOG.get(state)
    if built is not None and built[0] is registry and built[1].path_map == paths:
        if not log_findings:
            _log_findings(state, built[1], emit=False)
        return built[1]
    with state.lock:
        built = _CATALOG.get(state)
        if built is None or built[0] is not registry or built[1].path_map != paths:
            catalog = build_catalog(
                registry,
                title=state.config.catalog_title or state.app.name,
                version=state.config.catalog_version,
                probe_path=state.config.probe_path,
                path_map=paths,
            )
            _CATALOG.put(state, (registry, catalog))
            _log_findings(state, catalog, emit=log_findings)
        else:
            catalog = built[1]
            if not log_findings:
                _log_findings(state, catalog, emit=False)
    return catalog


def path_map_of(state: BailingState) -> PathMap | None:
    """How routes become catalog paths under ``BAILING_BASE_URL``; ``None`` when unset.

    The mount prefix is the request's (``BAILING_PUBLIC_PREFIX``, else
    ``SCRIPT_NAME``); outside a request (CLI) ``BAILING_PUBLIC_PREFIX``,
    else Flask's ``APPLICATION_ROOT``.
    """
    return path_map_for(state.middleware, state.app, request.environ if has_request_context() else None)


def _log_findings(state: BailingState, catalog: Catalog, emit: bool = True) -> None:
    for finding in catalog.findings:
        key = ("finding", finding.code, finding.path)
        if not emit:
            state.warned.add(key)
        elif finding.severity == "error":
            state.warn_once(key, "bailing: %s %s: %s", finding.path, finding.code, finding.message,
                            level=logging.ERROR)
        elif finding.severity == "warning":
            state.warn_once(key, "bailing: %s %s: %s", finding.path, finding.code, finding.message)
    for excluded in catalog.excluded:
        if not emit:
            state.warned.add(("excluded", excluded))
            continue
        state.warn_once(("excluded", excluded),
                        "bailing: %s is left out of the served catalog because of the errors above",
                        excluded, level=logging.ERROR)
