"""Every finding code, in one table, and the :class:`Finding` it produces.

Each row of :data:`CODES` gives a code's severity, who reports it (the hub's
compiler, or this package for a hazard the hub does not report), the hub
function and file it mirrors, the message and how to fix it. The lint of a
catalog (:mod:`bailing_flask.lint`) and the registry of an app's routes build
every :class:`Finding` with :func:`finding`, so each message exists once, here,
and the "Lint and doctor codes" page of the documentation is generated from
this table.

Messages and fixes are :meth:`str.format` templates: the code that finds the
problem passes the observed values, already rendered, as fields (``{name!r}``
quotes a name, ``{{`` is a literal brace). A code may have *variants*: other
wordings of the same problem for another place it occurs (a body property
instead of a parameter, the registry instead of the catalog).

The table below is data, one entry per code; it is longer than a function may
be on purpose.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "Finding",
    "Severity",
    "Origin",
    "Stage",
    "HubRef",
    "Text",
    "Code",
    "CODES",
    "HUB_COMMIT",
    "finding",
]

Severity = Literal["error", "warning", "info"]
Origin = Literal["hub", "bailing"]
#: where a code is found: in a catalog (the lint), or in the app's routes (the registry)
Stage = Literal["lint", "registry"]

#: The BailingHub commit whose source the mirrored behaviour was checked against.
HUB_COMMIT = "c6f1d24911fc47df79bb144b6d8b7ac93b381008"


@dataclass(frozen=True)
class Finding:
    """One problem in a catalog.

    ``source="hub"`` findings are diagnostics the hub's compiler itself emits
    (``code`` is the hub's code); ``source="bailing"`` findings are hazards the
    hub does not report. ``path`` is ``"<METHOD> <path>"`` like the hub, or
    ``"-"`` for the document as a whole.
    """

    severity: Severity
    code: str
    path: str
    message: str
    suggestion: str | None = None
    source: Origin = "hub"


@dataclass(frozen=True)
class HubRef:
    """A function of the hub's source (at :data:`HUB_COMMIT`)."""

    file: str
    function: str

    def __str__(self) -> str:
        return f"{self.function}() in {self.file}"


@dataclass(frozen=True)
class Text:
    """A message template and the fix that goes with it."""

    message: str
    fix: str | None = None

    def fields(self) -> list[str]:
        """The names of the template fields, in order of first use."""
        names: list[str] = []
        for template in (self.message, self.fix or ""):
            for _, name, _, _ in string.Formatter().parse(template):
                if name and name not in names:
                    names.append(name)
        return names


@dataclass(frozen=True)
class Code:
    """One row of the table."""

    code: str
    severity: Severity
    #: ``"hub"``: the hub's compiler reports it; ``"bailing"``: a hazard only this package reports
    source: Origin
    #: the hub function whose behaviour the finding reproduces (``None``: a bailing_flask hazard)
    mirrors: HubRef | None
    text: Text
    #: other wordings of the same problem, by name
    variants: Mapping[str, Text] = field(default_factory=dict)
    stages: tuple[Stage, ...] = ("lint",)

    def texts(self) -> list[tuple[str | None, Text]]:
        """The default text, then every variant."""
        return [(None, self.text), *self.variants.items()]


_COMPILER = HubRef("src/core/contracts/openapi-tools.ts", "compileOpenApiTools")
_CONFIRM = HubRef("src/core/contracts/openapi-tools.ts", "parseConfirmWhen")
_VALIDATE = HubRef("src/core/contracts/tool-definition.ts", "validateToolDefinition")
_ANNOTATIONS = HubRef("src/core/contracts/tool-annotations.ts", "toolAnnotationsOf")
_RISK = HubRef("src/core/contracts/tool-annotations.ts", "deriveRisk")
_RATE_LIMIT = HubRef("src/core/contracts/tool-annotations.ts", "parseRateLimit")
_TIMEOUT = HubRef("src/core/contracts/tool-annotations.ts", "parseTimeout")
_OUTCOME = HubRef("src/core/contracts/tool-annotations.ts", "parseOutcome")
_PROBE_TARGET = HubRef("src/app/tool-specs.ts", "dedicatedAuthzProbeTarget")
_PICK_PROBE = HubRef("src/app/tool-specs.ts", "pickProbeTarget")
_TOOL_CALL = HubRef("src/core/contracts/tools.ts", "buildToolRuntime")

_EXAMPLE_CONDITION = '{{"param": "amount", "op": ">", "value": 1000}}'
_DESCRIBE = "Add a description, and an enum, format or default where one applies."
_UNSUPPORTED_LOCATION = (
    "Parameter {name!r} has in: {where}; only query, path and header are supported, so the "
    "operation is not exposed."
)
_GUIDANCE_TOO_LONG = Text(
    "guidance.{key} is {length} characters; the capability schema allows 500 (and the "
    "description is cut at 500 UTF-16 units anyway).",
    "Shorten it.",
)
_CATALOG_FAILS = (
    "so the whole catalog fails to compile and every tool of this source becomes unavailable."
)
_ASCII_SCOPE = "Use an ASCII scope such as order.refund.write."
_PATH_SENT = "the one path segment a%2Cb%2Cc, which the router hands over as the text 'a,b,c'"
_FLATTENED = 'nested arrays are flattened ([["a","b"],["c"]] is sent as '
_SCALAR_OR_QUERY_ARRAY = (
    "Declare a scalar type (or, in the query, an array of strings, integers, numbers or "
    "booleans), or move the value into the JSON body."
)


def _c(
    code: str,
    severity: Severity,
    source: Origin,
    mirrors: HubRef | None,
    message: str,
    fix: str | None = None,
    *,
    variants: Mapping[str, Text] | None = None,
    stages: tuple[Stage, ...] = ("lint",),
) -> Code:
    return Code(code, severity, source, mirrors, Text(message, fix), dict(variants or {}), stages)


_TABLE: tuple[Code, ...] = (
    # -- the document -------------------------------------------------------------------------
    _c("invalid_spec", "error", "hub", _COMPILER,
       "The catalog is not a usable OpenAPI document: {reason}. The hub compiles no tools.",
       "Serve an OpenAPI 3.x JSON object."),
    _c("document_too_deep", "error", "bailing", None,
       "The catalog is nested too deeply to be linted here (the hub itself may accept it).",
       "Flatten the schemas."),
    _c("openapi_field_missing", "warning", "bailing", None,
       "The document lacks {missing}, which the hub's tool-spec schema requires (its compiler "
       "does not check them).",
       "Emit openapi: 3.x, info.title, info.version and paths."),
    _c("servers_ignored", "info", "bailing", None,
       "servers is ignored by the hub: calls always go to the tool source's base_url."),
    _c("no_tools", "warning", "bailing", None,
       "The hub would expose no tool from this catalog.",
       "Mark operations with x-agent-capability: {{enabled: true, scope: ...}} and fix the "
       "errors reported."),
    # -- inputs that make the hub's compiler throw ------------------------------------------
    _c("crash_null_path_item", "error", "bailing", _COMPILER,
       "paths[{key!r}] is null; the hub's compiler throws on it, " + _CATALOG_FAILS,
       "Remove the path or give it an object of operations."),
    _c("crash_parameters_not_iterable", "error", "bailing", _COMPILER,
       "parameters is {value}, not an array; the hub iterates it and throws, so the whole "
       "catalog fails to compile.",
       "Make parameters a list of parameter objects."),
    _c("crash_body_required_not_iterable", "error", "bailing", _COMPILER,
       "The request body schema's required is {value}, not an array; the hub iterates it and "
       "throws, so the whole catalog fails to compile.",
       "Make required a list of property names."),
    _c("crash_to_string_key", "error", "bailing", _COMPILER,
       '{what} is (or contains) an object with its own "toString" key; the hub converts it '
       "with String(), which throws, " + _CATALOG_FAILS,
       'Use a plain string here, or rename the "toString" key.'),
    # -- the hub's compiler: which operations become tools -----------------------------------
    _c("invalid_agent_capability", "error", "hub", _COMPILER,
       "x-agent-capability must be an object, got {value}; the operation is not exposed.",
       "Give the operation an x-agent-capability object, or remove the key."),
    _c("deprecated", "error", "hub", _COMPILER,
       "The operation is marked deprecated: true, so the hub does not expose it.",
       "Remove deprecated (or set enabled: false) if the tool should be available."),
    _c("missing_scope", "error", "hub", _COMPILER,
       "x-agent-capability.scope is missing or blank; the operation is not exposed.",
       "Set a stable permission label, e.g. scope: tenant.staff.read, and allow it in the "
       "route."),
    _c("invalid_timeout_type", "error", "hub", _COMPILER,
       "x-agent-capability.execution.timeout_ms must be a JSON number, got {value}; the "
       "operation is not exposed.",
       "Write timeout_ms: 5000 without quotes, or remove it to inherit the source's timeout."),
    _c("unsupported_param_location", "error", "hub", _COMPILER,
       _UNSUPPORTED_LOCATION,
       "Declare in: query, in: path or in: header, or move the value into an application/json "
       "requestBody.",
       variants={"cookie": Text(
           _UNSUPPORTED_LOCATION,
           "Identity and session data come from the signed headers; put business parameters in "
           "query/path/header or an application/json requestBody.",
       )}),
    _c("param_missing_description", "warning", "hub", _COMPILER,
       "Parameter {name!r} has no description (neither on the parameter nor on its schema); "
       "the model fills it less reliably.",
       _DESCRIBE,
       variants={"body": Text(
           "Request body property {name!r} has no description; the model fills it less "
           "reliably.",
           _DESCRIBE,
       )}),
    _c("write_without_schema", "error", "hub", _COMPILER,
       "{method} operation declares no parameters and no application/json body properties, "
       "and its body schema is not type: object; the hub refuses to expose a write without a "
       "schema.",
       'Declare parameters or an application/json requestBody schema (a zero-argument write '
       'may use {{"type": "object"}}).'),
    _c("missing_summary", "warning", "hub", _COMPILER,
       "No summary or description; the tool description falls back to the scope.",
       "Add an agent-oriented summary and guidance.when_to_use."),
    _c("missing_operation_id", "warning", "hub", _COMPILER,
       "No operationId; the tool name is derived from method and path and changes whenever "
       "the path does.",
       "Set a stable operationId; it becomes the tool name."),
    # -- approval conditions, as the compiler parses them --------------------------------------
    _c("invalid_confirm_when", "error", "hub", _CONFIRM,
       "x-agent-capability.approval.when must be an array, got {value}.",
       f"Example: [{_EXAMPLE_CONDITION}]",
       variants={"item": Text(
           "{where} must be an object, got {value}.", f"Example: {_EXAMPLE_CONDITION}"
       )}),
    _c("invalid_confirm_when_param", "error", "hub", _CONFIRM,
       "{where}.param is missing or blank.",
       'Name the argument to test, e.g. "amount" or "order.total".'),
    _c("invalid_confirm_when_op", "error", "hub", _CONFIRM,
       "{where}.op {op!r} is not supported.",
       "Use one of > >= < <= == != in contains exists."),
    _c("invalid_confirm_when_value", "error", "hub", _CONFIRM,
       "{where} uses op {op!r} but has no value.",
       "Add a value (only op: exists needs none)."),
    # -- the hub's validation of the tool it built ---------------------------------------------
    _c("invalid_name", "error", "hub", _VALIDATE,
       "Tool name {name!r} (operationId, or the method+path slug, cut to 64 UTF-16 units) does "
       "not match ^[A-Za-z_][A-Za-z0-9_]{{0,63}}$.",
       "Use an operationId of letters, digits and underscores that starts with a letter or "
       "underscore (no '.' or '-')."),
    _c("invalid_method", "error", "hub", _VALIDATE,
       "{method!r} is not an HTTP method the hub can call.",
       "Use get, post, put, patch, delete or options."),
    _c("invalid_path", "error", "hub", _VALIDATE,
       "Path {value!r} does not start with '/'.",
       "Write the path key as /resource/..."),
    _c("invalid_description", "error", "hub", _VALIDATE,
       "The composed tool description (summary, else description, else scope, plus guidance, "
       "cut to 500 UTF-16 units) is blank.",
       "Write a one-sentence summary of what the tool does."),
    _c("invalid_rate_limit", "error", "hub", _VALIDATE,
       "execution.rate_limit.count is so large that the per-minute limit overflows.",
       "Use a realistic count."),
    _c("invalid_timeout", "error", "hub", _VALIDATE,
       "execution.timeout_ms {value} is not an integer between 0 and 600000.",
       "Use whole milliseconds from 1 to 600000 (0 inherits the source's timeout)."),
    _c("invalid_context", "error", "hub", _VALIDATE,
       "guidance.context contains a whitespace-only entry.",
       "Remove blank entries from guidance.context."),
    _c("invalid_input_schema_required", "error", "hub", _VALIDATE,
       "The required list contains a non-string ({value}); names in required (and parameter "
       "names that are required or in: path) must be strings.",
       "List property names as strings."),
    _c("required_param_missing_schema", "error", "hub", _VALIDATE,
       "Required argument {name!r} is not among the declared properties/parameters.",
       "Declare a schema for every required name, or remove it from required."),
    _c("confirm_when_param_missing_schema", "error", "hub", _VALIDATE,
       "{where}.param {param!r} does not resolve to a declared argument (dot paths follow "
       "nested properties).",
       "Point param at a declared parameter or body property."),
    _c("confirm_when_param_untyped", "error", "hub", _VALIDATE,
       "{where}.param {param!r} has no JSON Schema type to compare against.",
       "Give the argument an explicit type."),
    _c("confirm_when_numeric_type", "error", "hub", _VALIDATE,
       "{where} uses {op} but the argument is not number/integer or the value ({value}) is not "
       "a finite {numeric}.",
       "Declare the argument as number or integer and use a JSON number value."),
    _c("confirm_when_in_type", "error", "hub", _VALIDATE,
       "{where} uses in, but the value is not an array of {types} values.",
       'E.g. ["pending", "blocked"] for a string argument, [1, 2] for a number.'),
    _c("confirm_when_contains_type", "error", "hub", _VALIDATE,
       "{where} uses contains on a string argument, so the value must be a string.",
       'E.g. {{"param": "reason", "op": "contains", "value": "refund"}}',
       variants={"argument": Text(
           "{where} uses contains, which needs a string or array argument.",
           "Use == or in, or declare the argument as string or array.",
       )}),
    _c("confirm_when_value_type", "error", "hub", _VALIDATE,
       "{where} compares with {value}, which does not have the argument's type ({types}); the "
       "hub never coerces.",
       "Use a value of the same JSON type as the argument."),
    _c("path_param_missing", "error", "hub", _VALIDATE,
       "Path placeholder {{{name}}} is not declared as an in: path parameter of this operation "
       "(path-level and $ref parameters are not read).",
       'Add {{"name": "{name}", "in": "path", "required": true, "schema": {{...}}}} to the '
       "operation's parameters."),
    _c("path_param_not_in_path", "warning", "hub", _VALIDATE,
       "Parameter {name!r} is in: path but the path has no {{{name}}} placeholder.",
       "Fix the placeholder or declare the parameter in query/header/body."),
    # -- hazards of one operation ----------------------------------------------------------------
    _c("enabled_not_boolean", "warning", "bailing", _ANNOTATIONS,
       "x-agent-capability.enabled is {value}; the hub exposes an operation only for the JSON "
       "boolean true, so this one is silently hidden.",
       "Write enabled: true (or false) without quotes."),
    _c("head_operation", "error", "bailing", _TOOL_CALL,
       "HEAD tools always fail: the hub sends a JSON body on every non-GET call and its HTTP "
       "client refuses a body on HEAD.",
       "Expose a GET operation instead."),
    _c("scope_not_latin1", "error", "bailing", _TOOL_CALL,
       "The scope contains characters above U+00FF ({chars}); it is sent in the "
       "X-Bailing-Tool-Scope header, so the hub's HTTP client throws and every call of this "
       "tool fails.",
       _ASCII_SCOPE),
    _c("scope_invalid_header_value", "error", "bailing", _TOOL_CALL,
       "The scope contains CR, LF or NUL; it is not a valid header value, so every call of "
       "this tool fails.",
       _ASCII_SCOPE),
    _c("scope_too_long", "warning", "bailing", None,
       "The scope is {length} characters; the capability schema allows 191.",
       "Use a shorter permission label."),
    _c("path_template_rewritten", "error", "bailing", None,
       "The path template contains {problems}. The hub signs the template as written but the "
       "URL on the wire differs, so no call can be verified.",
       "Use only ASCII letters, digits and - _ ~ . in literal path segments."),
    _c("path_template_fragile", "warning", "bailing", None,
       "The path template contains {problems}.",
       "Keep path templates to plain ASCII segments and {{placeholders}}."),
    _c("path_level_parameters_ignored", "warning", "bailing", _COMPILER,
       "The path item declares parameters, but the hub never merges path-level parameters into "
       "operations; they are invisible to the tool.",
       "Repeat the parameters in the operation's own parameters list."),
    _c("parameters_ignored", "warning", "bailing", _COMPILER,
       "parameters is a string; the hub reads no parameter from it.",
       "Make parameters a list of parameter objects."),
    _c("param_ignored", "warning", "bailing", _COMPILER,
       "parameters[{index}] is silently ignored by the hub: {reason}.",
       "Inline every parameter with a name, an in and a schema."),
    _c("reserved_param_name", "error", "bailing", _COMPILER,
       "A parameter named __proto__ is swallowed by the hub's JavaScript objects: it never "
       "becomes an argument.",
       "Rename the parameter.",
       variants={"body": Text(
           "A body property named __proto__ is swallowed by the hub's JavaScript objects: it "
           "never becomes an argument.",
           "Rename the property.",
       )}),
    _c("param_required_not_boolean", "warning", "bailing", _COMPILER,
       'Parameter {name!r} has required: {value}; the hub uses JS truthiness, so e.g. "false" '
       "makes it required.",
       "Write required: true or false without quotes."),
    _c("non_scalar_param", "warning", "bailing", _TOOL_CALL,
       "{where} parameter {name!r} has type {types}; the hub sends String(value): arrays "
       "comma-joined, objects as [object Object] (nothing of the object arrives).",
       "Declare scalar types for query/path/header parameters, or move the value into the "
       "JSON body.",
       variants={
           "path": Text(
               "Path parameter {name!r} is an array of {shape} items; the hub sends "
               'String(value): ["a","b","c"] is sent as ' + _PATH_SENT + ", not a list (an "
               "item containing ',' cannot be told apart either).",
               _SCALAR_OR_QUERY_ARRAY,
           ),
           "nested": Text(
               "Query parameter {name!r} is an array of {shape} items; the hub sends "
               "String(value): " + _FLATTENED + "{name}=a%2Cb%2Cc, and the app receives the "
               "text 'a,b,c') and objects become [object Object].",
               _SCALAR_OR_QUERY_ARRAY,
           ),
           "nestedpath": Text(
               "Path parameter {name!r} is an array of {shape} items; the hub sends "
               "String(value): " + _FLATTENED + _PATH_SENT + ") and objects become "
               "[object Object].",
               _SCALAR_OR_QUERY_ARRAY,
           ),
       }),
    _c("array_query_item_comma", "warning", "bailing", _TOOL_CALL,
       "Query parameter {name!r} is an array of strings. The hub sends String(value), the "
       "items joined with ',' in one pair: [\"a,b\",\"c\"] is sent as {name}=a%2Cb%2Cc and "
       "the app receives the text 'a,b,c', which bailing_flask splits into "
       "[\"a\",\"b\",\"c\"]: an item containing ',' cannot travel. [] and [\"\"] both "
       "arrive as an empty value (the empty array).",
       "Give the items an enum (or format uuid/date) without ',', or move the list into the "
       "JSON body of a non-GET tool."),
    _c("free_text_path_param", "warning", "bailing", None,
       "Path parameter {name!r} accepts free text; values containing '/', '?' or equal to "
       "'.'/'..' break routing (%2F is decoded by WSGI) or the signature.",
       "Give it an enum, a pattern, format: uuid or a numeric type, or move it to the query."),
    _c("hash_run_param", "warning", "bailing", None,
       "Write tool with free-text {names} at the end of its path or query: if the hub ever "
       "signs a subject holding '.<64 lowercase hex>.' (a dot, a sha256, a dot), one captured "
       "call could be re-sent with '.<its body hash>.<start of that subject>' appended there, "
       "another body and the rest of the subject as the acting user.",
       "Keep such runs out of your subjects (bailing_flask refuses them on every call and its "
       "tickets cannot hold one: uids of at most 64 characters, e-mail addresses and numeric "
       "ids never do), or give the value an enum, a pattern without '.', format: uuid or a "
       "numeric type."),
    _c("unsafe_integer_param", "warning", "bailing", None,
       "Integer argument {name!r} has no maximum at or below 2^53; larger values are rounded "
       "by the hub (JavaScript numbers) before they are sent.",
       "Add a maximum, or use a string for large identifiers."),
    _c("header_param_reserved", "error", "bailing", _TOOL_CALL,
       "Header parameter {name!r} collides with a header the hub or its HTTP client controls; "
       "the model's value replaces or merges with it and the call fails.",
       "Rename the parameter, or move it to the query or body."),
    _c("header_param_invalid_name", "error", "bailing", _TOOL_CALL,
       "Header parameter {name!r} is not a valid HTTP header name; the hub's HTTP client "
       "throws and every call fails.",
       "Use letters, digits and '-' only."),
    _c("header_param_underscore", "warning", "bailing", None,
       "Header parameter {name!r} contains '_'; many proxies and servers drop such headers, "
       "and WSGI cannot tell '_' from '-'.",
       "Use '-' instead of '_'."),
    _c("header_param_unsigned", "warning", "bailing", None,
       "Header parameter {name!r} is outside the hub's signature: treat it as untrusted model "
       "input, never as identity or authorization.",
       "Prefer query or body parameters; take identity from X-Bailing-On-Behalf-Of."),
    _c("request_body_ignored", "warning", "bailing", _COMPILER,
       "The requestBody is invisible to the hub: {why}.",
       'Inline the schema under content["application/json"].schema.'),
    _c("body_required_string", "warning", "bailing", _COMPILER,
       "The body schema's required is the string {value!r}; the hub treats each character as "
       "a required name.",
       "Make required a list of property names."),
    _c("get_request_body_ignored", "warning", "bailing", _TOOL_CALL,
       "GET operation declares body properties ({names}); GET calls carry no body, so these "
       "arguments are silently dropped.",
       "Declare them as query parameters, or use POST."),
    _c("param_shadowed_by_body", "warning", "bailing", _COMPILER,
       "Body property {name!r} has the same name as a {where} parameter; the hub keeps only the "
       "body one.",
       "Rename one of them."),
    _c("name_truncated", "warning", "bailing", _COMPILER,
       "The tool name is {length} UTF-16 units long; the hub cuts it to {name!r}, which may "
       "collide with another tool.",
       "Use an operationId of at most 64 characters."),
    _c("description_truncated", "warning", "bailing", _COMPILER,
       "The composed description is {length} UTF-16 units; the hub keeps the first 500, so the "
       "end of the guidance or the example is lost.",
       "Shorten summary, guidance.when_to_use, guidance.returns or the first example."),
    # -- hazards of x-agent-capability -------------------------------------------------------------
    _c("capability_version", "warning", "bailing", None,
       "x-agent-capability.version should be 1 (the capability schema requires it; the "
       "compiler ignores it).",
       "Add version: 1."),
    _c("timeout_ms_zero", "warning", "bailing", _TIMEOUT,
       "execution.timeout_ms is 0: the hub inherits the source's timeout, but the capability "
       "schema requires at least 1.",
       "Remove timeout_ms to inherit, or give a value from 1 to 600000."),
    _c("rate_limit_ignored", "warning", "bailing", _RATE_LIMIT,
       "execution.rate_limit {value} is not {{count: positive integer, window: 1s|1m|1h|1d}}; "
       "the hub silently applies no limit.",
       'E.g. rate_limit: {{"count": 10, "window": "1m"}}'),
    _c("risk_level_ignored", "warning", "bailing", _RISK,
       "risk.level {value} is not low, medium or high; the hub silently uses the default "
       "(medium for writes, low for reads).",
       "Use low, medium or high."),
    _c("outcome_ignored", "warning", "bailing", _OUTCOME,
       "outcome needs a non-empty result and side_effect none|read|write|notify|external; the "
       "hub silently drops it.",
       'E.g. outcome: {{"result": "refund created", "side_effect": "write"}}'),
    Code("guidance_when_to_use_too_long", "warning", "bailing", None, _GUIDANCE_TOO_LONG),
    Code("guidance_returns_too_long", "warning", "bailing", None, _GUIDANCE_TOO_LONG),
    _c("guidance_too_many_examples", "warning", "bailing", _COMPILER,
       "guidance.examples has {count} items; the schema allows 5 and the hub only ever uses the "
       "first.",
       "Keep one to five examples, the best first."),
    _c("guidance_context_truncated", "warning", "bailing", _ANNOTATIONS,
       "guidance.context has {count} items; the hub keeps the first 50.",
       "Keep at most 50 entries."),
    _c("guidance_context_item_length", "warning", "bailing", None,
       "guidance.context entries must be strings of 1 to 100 characters.",
       "Split or shorten long entries; remove empty ones."),
    _c("approval_prompt_truncated", "warning", "bailing", _ANNOTATIONS,
       "approval.prompt is longer than 200 characters; the hub keeps the first 200.",
       "Shorten the prompt."),
    _c("approval_when_truncated", "warning", "bailing", _CONFIRM,
       "approval.when has {count} conditions; the hub evaluates only the first 20, so the rest "
       "never trigger an approval.",
       "Merge conditions (e.g. with in) to stay within 20."),
    _c("approval_when_param_too_long", "warning", "bailing", None,
       "approval.when[{index}].param is {length} characters; the schema allows 191.",
       "Use a shorter argument path."),
    _c("approval_when_label_length", "warning", "bailing", _CONFIRM,
       "approval.when[{index}].label must be a string of 1 to 120 characters; the hub drops "
       "other values and cuts longer ones.",
       'Write a short label such as "large refund".'),
    # -- hazards across operations ----------------------------------------------------------------
    _c("duplicate_tool_name", "error", "bailing", None,
       "Tool name {name!r} is also used by {other}{how}. When both are allowed for a job the "
       "hub cannot assemble its tools and every tool of that job becomes unavailable.",
       "Give each operation a unique operationId (unique across all sources of a route).",
       variants={"registry": Text(
           "tool name {name!r} is used by both {first} ({first_key}) and {second} "
           "({second_key})",
           "give one of them another name=",
       )},
       stages=("lint", "registry")),
    _c("authz_probe_root_invalid", "warning", "bailing", _PROBE_TARGET,
       "Root x-bailing-authz-probe must be an object whose path starts with '/' and has at most "
       "512 characters; the hub ignores this one and falls back.",
       'E.g. {{"path": "/bailing/authz-probe", "method": "POST"}}'),
    _c("authz_probe_method", "warning", "bailing", _PROBE_TARGET,
       "Root x-bailing-authz-probe.method {method!r} is neither GET nor POST; the hub probes "
       "with POST.",
       "Use GET or POST and serve the probe with that method.",
       variants={"operation": Text(
           "x-bailing-authz-probe is set on a {method} operation; the hub probes it with POST, "
           "which this operation does not serve.",
           "Flag a GET or POST operation.",
       )}),
    _c("authz_probe_flag_ignored", "warning", "bailing", _PROBE_TARGET,
       "x-bailing-authz-probe is {value}; only the JSON boolean true marks the probe endpoint.",
       "Write x-bailing-authz-probe: true.",
       variants={"path": Text(
           "x-bailing-authz-probe is ignored on a path that does not start with '/' or is longer "
           "than 512 characters.",
           "Use a short absolute path for the probe endpoint.",
       )}),
    _c("authz_probe_shadowed", "info", "bailing", _PROBE_TARGET,
       "x-bailing-authz-probe here is unused: an earlier probe target takes precedence."),
    _c("authz_probe_unavailable", "info", "bailing", _PICK_PROBE,
       "The hub will skip its authorization probe: there is no x-bailing-authz-probe target and "
       "no GET tool without required arguments.",
       "Add a dedicated probe endpoint and declare it with root x-bailing-authz-probe."),
    _c("authz_probe_path_rewritten", "warning", "bailing", None,
       "The probe is sent to this path verbatim and it contains {problems}, so its signature "
       "cannot be verified and the result is inconclusive.",
       "Use a fixed ASCII path for the probe endpoint."),
    # -- the registry: an app's routes, before any catalog exists ----------------------------------
    _c("no_authorizer", "error", "bailing", None,
       "tool {name!r} ({view}) has no authorizer: every call would be refused with 403",
       "register one with @bailing.authorizer or pass authorizer= to @tool",
       stages=("registry",)),
    _c("float_path_param", "warning", "bailing", None,
       "path parameter {name!r} uses Werkzeug's float converter, which does not match whole "
       "numbers; the hub sends 9.0 as '9', so such calls would 404",
       "use a query or body parameter of type number",
       stages=("registry",)),
    _c("custom_converter", "info", "bailing", None,
       "path parameter {name!r} uses a custom converter; it is published as a plain string",
       stages=("registry",)),
    _c("rule_literal_not_reproducible", "warning", "bailing", None,
       "the route {rule!r} contains characters outside A-Z a-z 0-9 - . _ ~ ! * ' ( ); they "
       "verify only on servers that report the raw request target (RAW_URI/REQUEST_URI)",
       "rename the route or make sure the server sets REQUEST_URI",
       stages=("registry",)),
    _c("path_array_not_received", "error", "bailing", _TOOL_CALL,
       "path parameter {name!r} is published as an array, but the hub sends "
       'encodeURIComponent(String(value)): ["a","b"] arrives as the one segment a%2Cb and '
       "Werkzeug's {kind} converter hands the view the string 'a,b', not a list",
       "declare a scalar type for the path parameter, move the list to the query (the gate "
       "splits it on ',') or use a URL converter that splits on ','",
       stages=("registry",)),
    _c("validate_unsigned_without_allow_unsigned", "warning", "bailing", None,
       "validate_unsigned=True on {name!r} has no effect: without allow_unsigned=True unsigned "
       "requests are refused before any validation",
       "add allow_unsigned=True, or drop validate_unsigned",
       stages=("registry",)),
    _c("async_view_without_flask_async", "error", "bailing", None,
       "{view} is async def, which Flask only runs with its async support; every call would "
       "fail with a server error",
       "install flask[async] (asgiref)",
       stages=("registry",)),
    _c("outside_base_url", "error", "bailing", None,
       "tool {name!r} is served at {public!r}, which is not under the path {base!r} of "
       "BAILING_BASE_URL: the hub calls base_url + a catalog path, which can never reach this "
       "route",
       "set BAILING_BASE_URL to a URL this route is under, or move the route",
       stages=("registry",)),
    _c("authz_probe_outside_base_url", "warning", "bailing", None,
       "the authorization probe at {public!r} is not under the path {base!r} of "
       "BAILING_BASE_URL, so the catalog does not advertise it and the hub probes a "
       "parameter-less GET tool instead",
       "set BAILING_PROBE_PATH to a path under the base URL",
       stages=("registry",)),
    _c("decorator_order", "info", "bailing", None,
       "@tool on {view} sits above the route decorator; the gate guards the route either way, "
       "but below the route decorator reads as intended",
       stages=("registry",)),
    _c("identity_param", "warning", "bailing", None,
       "{names} of {tool} would come from the model: who acts, for which tenant and with which "
       "roles, departments or permissions must come from the signed subject, not from the model "
       "(or a prompt injection in what it read), or the call has two sources of truth for the actor",
       "read the subject (current_call.subject, current_call.user from your subject loader) and "
       "look the tenant, roles, departments and permissions up in your own tables; if the model "
       "really picks this value (the target of an administrator's action), authorize it and say "
       "why: model_chooses={example}",
       stages=("registry",)),
    _c("credential_param", "warning", "bailing", None,
       "{names} of {tool} would come from the model: a credential the model sends sits in its "
       "prompt, in the hub's audit and in logs, and a model that has to hold it has leaked it already",
       "read credentials from the app's configuration or secret store (per acting user: your own "
       "tables, keyed by the signed subject); if the model must send this value, say why: "
       "model_chooses={example}",
       stages=("registry",)),
    _c("infrastructure_param", "warning", "bailing", None,
       "{names} of {tool} would come from the model: a target the model picks lets a prompt "
       "injection send the app's own requests (with its credentials) anywhere -- internal services, "
       "cloud metadata, an attacker's server -- or redirect users there",
       "keep hosts, base URLs and callbacks in the app's configuration, or let the model pick an "
       "id from your own table of allowed targets; if the model must give it, check it against an "
       "allow-list and say why: model_chooses={example}",
       stages=("registry",)),
    _c("model_chooses_unknown", "warning", "bailing", None,
       "model_chooses of {tool!r} names {name!r}, which is not one of its parameters "
       "(it silences nothing)",
       "use the parameter's name as the catalog shows it (a nested body property by its dotted "
       "path, e.g. 'filter.tenant_id')",
       stages=("registry",)),
    _c("transaction_not_configured", "error", "bailing", None,
       "{name!r} runs in the transaction mode (repeats='transaction'), "
       "but BAILING_TRANSACTION names no database: every call would be refused with 503",
       "set BAILING_TRANSACTION = SQLAlchemyTransaction(db) or DBAPITransaction(get_db)",
       stages=("registry",)),
    _c("transactional_external_effect", "warning", "bailing", None,
       "{name!r} declares an {effect} side effect but runs in the transaction mode: a rollback "
       "cannot take back a message sent or an API called, so that part is not exactly-once",
       "use the store mode (repeats='replay', the default) for views that call other systems",
       stages=("registry",)),
)

#: Every code by name, in the order of the documentation.
CODES: Mapping[str, Code] = {entry.code: entry for entry in _TABLE}
assert len(CODES) == len(_TABLE), "a code is listed twice"


def finding(code: str, path: str, variant: str | None = None, **fields: object) -> Finding:
    """The :class:`Finding` for ``code`` at ``path``, its text filled in with ``fields``.

    ``variant`` picks another wording of the same code (see :attr:`Code.variants`).
    """
    entry = CODES[code]
    text = entry.text if variant is None else entry.variants[variant]
    fix = None if text.fix is None else text.fix.format(**fields)
    return Finding(entry.severity, code, path, text.message.format(**fields), fix, entry.source)
