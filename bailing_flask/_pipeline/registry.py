"""From ``app.url_map`` and the declarations to the list of tools.

The registry is the one compiled view of "what tools does this app have":
the catalog renders it, the gate looks calls up in it, the CLI lists it,
the probe walks it. It is built lazily (after every blueprint is
registered) and rebuilt when routes are added, so it never goes stale.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from flask import Flask
from pydantic import BaseModel, ConfigDict, create_model

from bailing_flask._pipeline.foreign import tool_inputs
from bailing_flask._pipeline.schema import converter_schema, model_schema, type_schema
from bailing_flask._pipeline.strict_body import StrictBody, compile_body, dumps_as_stored
from bailing_flask._sync import asgiref_available, is_async_callable
from bailing_flask.context import ToolInfo
from bailing_flask.errors import ToolDeclarationError
from bailing_flask._pipeline.param_hazards import param_findings
from bailing_flask._pipeline.projection import Shaper, make_shaper
from bailing_flask.declare import Declaration, get_declaration, get_defaults, get_wrapped_by
from bailing_flask._tool_options import Param, ToolOptions, effective_repeats
from bailing_flask.settings import Config
from bailing_flask._state import BailingState, Cache

if TYPE_CHECKING:  # pragma: no cover
    from bailing_flask._pipeline.marshmallow_models import MarshmallowModel
    from bailing_flask.lint.codes import Finding

__all__ = ["Tool", "Registry", "NotExported", "build_registry", "registry_of"]

_RULE_VAR = re.compile(
    r"<(?:(?P<converter>[a-zA-Z_][a-zA-Z0-9_]*)(?:\((?P<args>.*?)\))?:)?(?P<variable>[a-zA-Z_][a-zA-Z0-9_]*)>"
)
_METHOD_ORDER = {m: i for i, m in enumerate(("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"))}
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
#: Characters a route's literal text may contain and still be reproduced
#: exactly when the server gives no raw request target.
_SAFE_LITERAL = re.compile(r"^[A-Za-z0-9\-._~!*'()/]*$")


def is_array_schema(schema: Any) -> bool:
    """Whether a JSON schema describes an array (``"type": "array"``, or a list of types with it)."""
    raw = schema.get("type") if isinstance(schema, dict) else None
    return raw == "array" or (isinstance(raw, list) and "array" in raw)


@dataclass(frozen=True)
class Tool:
    """One exported (or exportable) tool: a route, a method and its options."""

    name: str
    method: str
    #: OpenAPI path template, relative to the application root.
    path: str
    rule: str
    endpoint: str
    view_name: str
    options: ToolOptions
    scope: str
    risk: str
    description: str | None
    readonly: bool
    idempotent: bool
    #: What a repeat of the same call gets: ``"replay"``, ``"transaction"``, ``"safe"``, or
    #: ``None`` for a read tool (it runs every call), worked out once from ``repeats=``.
    repeats: str | None
    subject_required: bool
    sensitive: bool
    parameters: tuple[dict[str, Any], ...]
    body_schema: dict[str, Any] | None
    query_model: type[BaseModel] | MarshmallowModel | None
    body_model: type[BaseModel] | MarshmallowModel | None
    path_kinds: dict[str, str] = field(default_factory=dict)
    #: A webargs decorator parses the view's arguments (its refusals answer like the gate's).
    webargs: bool = False
    #: The declaration this tool was compiled from.
    declaration: Declaration | None = field(default=None, compare=False, repr=False)
    #: What ``result=`` and ``response=`` make of a successful answer (``None``: nothing).
    shaper: Shaper | None = field(default=None, compare=False, repr=False)
    #: The body model compiled to validate the raw body in one pass (``None``: the two-step way).
    body_plan: StrictBody | None = field(default=None, compare=False, repr=False)

    @functools.cached_property
    def info(self) -> ToolInfo:
        """The tool as authorizers and views see it: built once, shared by every call."""
        return ToolInfo(
            name=self.name, scope=self.scope, method=self.method, path=self.path, risk=self.risk,
            readonly=self.readonly, idempotent=self.idempotent,
            subject_required=self.subject_required, sensitive=self.sensitive,
        )

    @functools.cached_property
    def query_properties(self) -> dict[str, Any]:
        """Schema of each query parameter by name (argument validation reads it per call)."""
        return {p["name"]: p.get("schema") for p in self.parameters if p.get("in") == "query"}

    @functools.cached_property
    def query_arrays(self) -> tuple[str, ...]:
        """The query parameters whose schema is an array: the hub joins their values with commas."""
        return tuple(name for name, schema in self.query_properties.items() if is_array_schema(schema))

    @functools.cached_property
    def query_as_stored(self) -> bool:
        """Whether the query model's instance holds its arguments as a dump would give them."""
        return dumps_as_stored(self.query_model)

    @functools.cached_property
    def body_as_stored(self) -> bool:
        """Whether the body model's instance holds its arguments as a dump would give them."""
        return dumps_as_stored(self.body_model)

    @property
    def side_effecting(self) -> bool:
        """Exactly when the hub sends ``X-Bailing-Idempotency-Key``: a write without ``idempotent``."""
        return not self.readonly and not self.idempotent

    @property
    def deduplicated(self) -> bool:
        """Whether bailing_flask runs a repeated identical call once (see idempotency).

        Every write tool (a non-GET tool not declared ``readonly``), unless it
        says ``repeats="safe"``; a read tool only with a domain key.
        """
        return self.repeats == "replay" or self.repeats == "transaction"

    @property
    def repeats_shown(self) -> str:
        """``repeats`` for listings, with how repeats are recognised: ``-`` for a read tool."""
        if self.repeats is None:
            return "-"
        if self.repeats != "safe" and self.options.idempotency_key is not None:
            return f"{self.repeats} (domain key)"
        return self.repeats

    @property
    def operation_key(self) -> str:
        """``"<METHOD> <path>"``, the key the hub's diagnostics use."""
        return f"{self.method} {self.path}"

    @property
    def authorizer(self) -> Callable[..., Any] | None:
        return self.options.authorizer


@dataclass(frozen=True)
class NotExported:
    """A declared route that is not in the catalog, and why."""

    endpoint: str
    method: str
    rule: str
    reason: str


@dataclass
class Registry:
    tools: list[Tool]
    not_exported: list[NotExported]
    findings: list[Finding]
    by_endpoint: dict[tuple[str, str], Tool]
    rule_count: int
    #: ``(endpoint, method)`` -> the declaration of the view that method runs, for
    #: the methods of a tool endpoint that are plain routes: left out explicitly (``methods=``,
    #: ``enabled=False``, also through ``tool_defaults``), or a class view's handler without
    #: ``@tool`` (``None``: no declaration).
    passthrough: Mapping[tuple[str, str], Declaration | None] = field(default_factory=dict)
    #: compiled with an app-wide authorizer registered (a tool without one of its own is
    #: otherwise a ``no_authorizer`` error, left out of the catalog)
    app_authorizer: bool = False

    def passes(self, endpoint: str | None, method: str, declaration: Declaration) -> bool:
        """Whether ``method`` on ``endpoint`` is a plain route that runs ``declaration``'s view.

        Only on the declaration's own route: another route that calls the
        tool's function is never one, whatever the method.
        """
        return endpoint is not None and self.passthrough.get((endpoint, method)) is declaration

    def tool_of(self, declaration: Declaration, method: str) -> Tool | None:
        """The tool compiled from ``declaration`` for ``method`` (HEAD is served by GET)."""
        for wanted in (method, "GET") if method == "HEAD" else (method,):
            for candidate in self.tools:
                if candidate.declaration is declaration and candidate.method == wanted:
                    return candidate
        return None

    def lookup(self, endpoint: str | None, method: str) -> Tool | None:
        """The tool serving ``method`` on ``endpoint`` (HEAD is served by GET)."""
        if endpoint is None:
            return None
        found = self.by_endpoint.get((endpoint, method))
        if found is None and method == "HEAD":
            found = self.by_endpoint.get((endpoint, "GET"))
        return found


def _openapi_path(rule: str) -> str:
    return _RULE_VAR.sub(lambda m: "{" + m["variable"] + "}", rule)


def _snake(text: str) -> str:
    text = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", text)
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower()


def _doc_summary(view: Callable[..., Any]) -> str | None:
    doc = inspect.getdoc(view)
    if not doc:
        return None
    return doc.strip().split("\n\n", 1)[0].replace("\n", " ").strip() or None


def _blueprint_defaults(app: Flask, endpoint: str) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    name = endpoint.rpartition(".")[0]
    parts = name.split(".") if name else []
    for depth in range(1, len(parts) + 1):
        blueprint = app.blueprints.get(".".join(parts[:depth]))
        defaults = get_defaults(blueprint) if blueprint is not None else None
        if defaults is not None:
            merged.update(defaults.explicit())
    return merged


def _declarations(view: Callable[..., Any], methods: Iterable[str]) -> dict[str, tuple[Declaration, dict[str, Any]]]:
    """Per HTTP method: the declaration and its class-level defaults."""
    found: dict[str, tuple[Declaration, dict[str, Any]]] = {}
    view_class = getattr(view, "view_class", None)
    if view_class is not None:
        class_defaults = get_defaults(view_class)
        defaults = class_defaults.explicit() if class_defaults else {}
        for method in methods:
            declaration = get_declaration(getattr(view_class, method.lower(), None))
            if declaration is not None:
                found[method] = (declaration, defaults)
        return found
    declaration = get_declaration(view)
    if declaration is not None:
        for method in methods:
            found[method] = (declaration, {})
    return found


def _param_model(name: str, params: list[Param], where: str) -> type[BaseModel] | None:
    if not params:
        return None
    fields: dict[str, Any] = {}
    for param in params:
        annotation = Any if isinstance(param.type, dict) else (param.type or str)
        if param.required:
            fields[param.name] = (annotation, ...)
        else:
            fields[param.name] = (annotation | None if annotation is not Any else Any, None)
    return create_model(  # type: ignore[call-overload,no-any-return,unused-ignore]
        f"{name}_query", __config__=ConfigDict(extra="forbid"), **fields
    )


def _comma_joined(parameter: dict[str, Any]) -> dict[str, Any]:
    """Say in OpenAPI terms how the hub sends an array query parameter.

    The hub sends ``String(value)``, the items joined with ``,`` in one
    ``name=a,b`` pair: OpenAPI's ``style: form`` without ``explode``. The
    gate splits it back (:mod:`bailing_flask._pipeline.arguments`).
    """
    if "array" in _types(parameter.get("schema")):
        parameter["style"] = "form"
        parameter["explode"] = False
    return parameter


def _types(schema: Any) -> list[str]:
    raw = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(raw, list):
        return [t for t in raw if isinstance(t, str)]
    return [raw] if isinstance(raw, str) else []


def _input_schema(model: type[BaseModel] | MarshmallowModel, where: str) -> dict[str, Any]:
    return model_schema(model, where) if isinstance(model, type) else model.json_schema()


def _parameters(
    rule: Any, options: ToolOptions, name: str, method: str, where: str, query: Any = None,
) -> tuple[list[dict[str, Any]], dict[str, str], type[BaseModel] | MarshmallowModel | None]:
    """OpenAPI parameter objects from the route and the declaration."""
    explicit = {(p.location, p.name): p for p in options.params or ()}
    converters = getattr(rule, "_converters", None) or {}
    parameters: list[dict[str, Any]] = []
    kinds: dict[str, str] = {}
    for match in _RULE_VAR.finditer(rule.rule):
        variable = match["variable"]
        converter = converters.get(variable)
        if converter is not None:
            schema, kind = converter_schema(converter)
        else:  # a Werkzeug without ``_converters``: fall back to the rule text
            kind = {"int": "int", "float": "float", "uuid": "uuid", "any": "any", "path": "path"}.get(
                match["converter"] or "string", "string"
            )
            schema = {"int": {"type": "integer"}, "float": {"type": "number"}}.get(
                kind, {"type": "string"}
            )
        kinds[variable] = kind
        described = explicit.pop(("path", variable), None)
        if described is not None and described.type is not None:
            schema = type_schema(described.type, where)
        parameter: dict[str, Any] = {"name": variable, "in": "path", "required": True}
        if described is not None and described.description:
            parameter["description"] = described.description
        parameter["schema"] = schema
        parameters.append(parameter)
    for location, param_name in explicit:
        if location == "path":
            raise ToolDeclarationError(
                f"{where}: Param({param_name!r}, location='path') is not a variable of {rule.rule!r}"
            )
    query_model = query
    if query_model is not None:
        schema = _input_schema(query_model, where)
        required = set(schema.get("required", []))
        for prop, prop_schema in (schema.get("properties") or {}).items():
            prop_schema = dict(prop_schema)
            description = prop_schema.pop("description", None)
            parameter = {"name": prop, "in": "query", "required": prop in required}
            if description:
                parameter["description"] = description
            parameter["schema"] = prop_schema
            parameters.append(_comma_joined(parameter))
    query_params = [p for p in explicit.values() if p.location == "query"]
    header_params = [p for p in explicit.values() if p.location == "header"]
    for param in query_params + header_params:
        parameter = {"name": param.name, "in": param.location, "required": param.required}
        if param.description:
            parameter["description"] = param.description
        parameter["schema"] = type_schema(param.type or str, where)
        parameters.append(_comma_joined(parameter) if param.location == "query" else parameter)
    if query_model is None:
        query_model = _param_model(name, query_params, where)
    elif query_params:
        raise ToolDeclarationError(
            f"{where}: declare query parameters either with query= or with params=, not both"
        )
    return parameters, kinds, query_model


def _effective_options(
    app: Flask, endpoint: str, declaration: Declaration, class_defaults: dict[str, Any]
) -> ToolOptions:
    layered = _blueprint_defaults(app, endpoint)
    if not layered and not class_defaults:
        return declaration.options
    layered.update(class_defaults)
    layered.update(declaration.options.explicit())
    return ToolOptions.model_construct(**layered)


def _default_name(endpoint: str, method: str, several: bool, prefix: str | None) -> str:
    """``blueprint_view`` (``name_prefix`` replaces the blueprint part), plus the
    method when one view serves several tools."""
    if prefix is None:
        base = _snake(endpoint.replace(".", "_"))
    else:
        base = prefix + _snake(endpoint.rpartition(".")[2])
    return f"{base}_{method.lower()}" if several else base


def _compile_tool(
    rule: Any, method: str, declaration: Declaration, options: ToolOptions, several: bool,
    max_items: int | None = None, registered: Any = None,
) -> Tool:
    where = f"{declaration.qualname} ({method} {rule.rule})"
    name = options.name or _default_name(rule.endpoint, method, several, options.name_prefix)
    query, body, webargs = tool_inputs(options.query, options.body, declaration.view, method, where, registered)
    parameters, kinds, query_model = _parameters(rule, options, name, method, where, query)
    body_schema: dict[str, Any] | None = None
    if body is not None:
        body_schema = _input_schema(body, where)
    scope = options.scope or ""
    if options.scope_prefix and scope:
        scope = options.scope_prefix + scope
    readonly = method == "GET" or bool(options.readonly)
    repeats = effective_repeats(options, readonly, where)
    idempotent = method == "GET" or repeats == "safe"
    risk = options.risk or ("medium" if method != "GET" and not readonly else "low")
    description = options.description or _doc_summary(declaration.view)
    try:
        shaper = make_shaper(options, max_items)
    except ValueError as exc:  # response= given through tool_defaults, never validated
        raise ToolDeclarationError(f"{where}: {exc}") from None
    return Tool(
        name=name,
        method=method,
        path=_openapi_path(rule.rule),
        rule=rule.rule,
        endpoint=rule.endpoint,
        view_name=declaration.qualname,
        options=options,
        scope=scope,
        risk=risk,
        description=description,
        readonly=readonly,
        idempotent=idempotent,
        repeats=repeats,
        subject_required=bool(options.subject_required),
        sensitive=bool(options.sensitive),
        parameters=tuple(parameters),
        body_schema=body_schema,
        query_model=query_model,
        body_model=body,
        webargs=webargs,
        path_kinds=kinds,
        declaration=declaration,
        shaper=shaper,
        body_plan=None if method == "GET" else compile_body(body),
    )


def _route_findings(tool: Tool, has_app_authorizer: bool) -> list[Finding]:
    from bailing_flask.lint.codes import finding  # the linter loads with the first compile

    findings: list[Finding] = []
    key = tool.operation_key
    if tool.authorizer is None and not has_app_authorizer:
        findings.append(finding("no_authorizer", key, name=tool.name, view=tool.view_name))
    for variable, kind in tool.path_kinds.items():
        if kind == "float":
            findings.append(finding("float_path_param", key, name=variable))
        elif kind in ("custom",):
            findings.append(finding("custom_converter", key, name=variable))
    for parameter in tool.parameters:
        if parameter.get("in") != "path" or "array" not in _types(parameter.get("schema")):
            continue
        variable = str(parameter.get("name"))
        kind = tool.path_kinds.get(variable, "string")
        if kind != "custom":
            findings.append(finding("path_array_not_received", key, name=variable, kind=kind))
    if tool.options.validate_unsigned and not tool.options.allow_unsigned:
        findings.append(finding("validate_unsigned_without_allow_unsigned", key, name=tool.name))
    view = tool.declaration.view if tool.declaration is not None else None
    if view is not None and is_async_callable(view) and not asgiref_available():
        findings.append(finding("async_view_without_flask_async", key, view=tool.view_name))
    findings.extend(param_findings(tool))
    literal = _RULE_VAR.sub("", tool.rule)
    if not _SAFE_LITERAL.match(literal):
        findings.append(finding("rule_literal_not_reproducible", key, rule=tool.rule))
    return findings


def build_registry(app: Flask, has_app_authorizer: bool, config: Config) -> Registry:
    """Compile every declared route of ``app``; never raises for lint-level problems.

    Declaration errors that make a tool impossible to describe (a bad model,
    a Param naming no route variable) raise :class:`ToolDeclarationError`.
    """
    from bailing_flask.lint.codes import finding  # the linter loads with the first compile

    tools: list[Tool] = []
    not_exported: list[NotExported] = []
    findings: list[Finding] = []
    by_endpoint: dict[tuple[str, str], Tool] = {}
    passthrough: dict[tuple[str, str], Declaration | None] = {}
    max_items = config.response_max_items or None  # None or 0: no default cap
    rules = list(app.url_map.iter_rules())
    for rule in rules:
        view = app.view_functions.get(rule.endpoint)
        if view is None:
            continue
        methods = sorted((rule.methods or set()) - {"OPTIONS"}, key=lambda m: _METHOD_ORDER.get(m, 99))
        declared = _declarations(view, methods)
        if not declared:
            wrapped_by = get_wrapped_by(view)
            if wrapped_by is None:
                continue
            # ``@tool`` above the route decorator: the route holds the undecorated
            # function, but the gate in front of the endpoint guards it all the same
            findings.append(finding("decorator_order", f"- {rule.rule}", view=wrapped_by.qualname))
            declared = {method: (wrapped_by, {}) for method in methods}
        # HEAD is added by Flask to every GET route; it is only a tool if declared so.
        candidates = [
            m for m in methods
            if m in declared and (m != "HEAD" or "HEAD" in (declared[m][0].options.methods or ()))
        ]
        enabled: dict[str, ToolOptions] = {}
        for method in candidates:
            declaration, class_defaults = declared[method]
            options = _effective_options(app, rule.endpoint, declaration, class_defaults)
            if options.enabled is False:
                not_exported.append(NotExported(rule.endpoint, method, rule.rule, "enabled=False"))
                passthrough[(rule.endpoint, method)] = declaration
            elif options.methods is not None and method not in options.methods:
                not_exported.append(NotExported(rule.endpoint, method, rule.rule, "method not in methods="))
                passthrough[(rule.endpoint, method)] = declaration
            else:
                enabled[method] = options
        if getattr(view, "view_class", None) is not None:
            # a class view's handler without @tool is a plain route of the class (HEAD goes
            # with GET, the tool's when GET is one)
            for method in methods:
                if method not in declared and not (method == "HEAD" and "GET" in declared):
                    passthrough[(rule.endpoint, method)] = None
        if (rule.endpoint, "GET") in passthrough and "HEAD" in methods and "HEAD" not in enabled:
            passthrough[(rule.endpoint, "HEAD")] = passthrough[(rule.endpoint, "GET")]  # as Flask
        several = len(enabled) > 1
        for method, options in enabled.items():
            if (rule.endpoint, method) in by_endpoint:
                first = by_endpoint[(rule.endpoint, method)]
                not_exported.append(NotExported(
                    rule.endpoint, method, rule.rule, f"alias of {first.rule!r} (one rule per tool)"
                ))
                continue
            compiled = _compile_tool(rule, method, declared[method][0], options, several, max_items, view)
            if compiled.options.deprecated:
                not_exported.append(NotExported(rule.endpoint, method, rule.rule, "deprecated=True"))
            by_endpoint[(rule.endpoint, method)] = compiled
            tools.append(compiled)
            findings.extend(_route_findings(compiled, has_app_authorizer))
            findings.extend(_transaction_findings(config, compiled))
    tools.sort(key=lambda t: (t.path, _METHOD_ORDER.get(t.method, 99)))
    findings.extend(_duplicate_names(tools))
    return Registry(tools, not_exported, findings, by_endpoint, len(rules), passthrough, has_app_authorizer)


def _transaction_findings(config: Config, tool: Tool) -> list[Finding]:
    """What ``flask bailing check`` says about a tool's transaction mode (``repeats="transaction"``)."""
    if tool.repeats != "transaction":
        return []
    from bailing_flask.lint.codes import finding  # the linter loads with the first compile

    out: list[Finding] = []
    key = tool.operation_key
    if config.transaction is None:
        out.append(finding("transaction_not_configured", key, name=tool.name))
    outcome = tool.options.outcome
    if outcome is not None and outcome.side_effect in ("external", "notify"):
        out.append(finding("transactional_external_effect", key, name=tool.name,
                           effect=outcome.side_effect))
    return out


def _duplicate_names(tools: list[Tool]) -> list[Finding]:
    """Two tools with one name break every tool of a job in the hub: name both views."""
    from bailing_flask.lint.codes import finding  # the linter loads with the first compile

    first_by_name: dict[str, Tool] = {}
    findings = []
    for tool in tools:
        if tool.options.deprecated:
            continue
        first = first_by_name.setdefault(tool.name, tool)
        if first is not tool:
            findings.append(finding(
                "duplicate_tool_name", tool.operation_key, "registry", name=tool.name,
                first=first.view_name, first_key=first.operation_key,
                second=tool.view_name, second_key=tool.operation_key,
            ))
    return findings


def _rule_count(app: Flask) -> int:
    return sum(1 for _ in app.url_map.iter_rules())


#: the app's compiled registry (read through :func:`registry_of`)
_REGISTRY: Cache[Registry] = Cache("registry")


def registry_of(state: BailingState) -> Registry:
    """The app's compiled tools, cached on its state; rebuilt if routes were added since.

    Flask refuses new routes once it has handled a request, so a registry
    built after that is final and the check is skipped (counting the
    rules is not free on a large app). An app-wide authorizer registered
    after a build (an app factory that compiled early) rebuilds it too, so
    the catalog lists the tools the calls now admit. Each build calls
    ``state.on_compile`` (which puts the gates in front of the tool endpoints).
    """
    current = _REGISTRY.get(state)
    if current is not None and (current.app_authorizer or state.callbacks.authorizer_func is None):
        if state.registry_final:
            return current
        if current.rule_count == _rule_count(state.app):
            state.registry_final = bool(getattr(state.app, "_got_first_request", False))
            return current
    with state.lock:
        current = _REGISTRY.get(state)
        if (current is None or current.rule_count != _rule_count(state.app)
                or current.app_authorizer != (state.callbacks.authorizer_func is not None)):
            current = recompile(state)
    return current


def recompile(state: BailingState) -> Registry:
    """Compile the app's tools now, from the views in ``view_functions``; the caller holds ``state.lock``.

    :func:`registry_of` calls it when routes were added; the gate calls it
    when a view carrying a declaration is written over a tool endpoint's, so
    the new view is governed by its own declaration.
    """
    started = bool(getattr(state.app, "_got_first_request", False))
    current = build_registry(state.app, state.callbacks.authorizer_func is not None, state.config)
    state.on_compile(state, current)
    _REGISTRY.put(state, current)
    state.registry_final = started
    return current
