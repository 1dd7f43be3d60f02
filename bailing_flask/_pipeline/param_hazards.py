"""Minimal parameters: who is acting, with which credentials and against which host never come from the model.

A tool parameter is whatever the model (or a prompt injection in what it
read) chose to put there. Parameters that name the acting tenant, user,
role, department or permission create a second source of truth next to the
signed subject; a token, secret or password sent by the model sits in its
prompt and in the hub's logs; a URL, host or callback lets a prompt
injection point the app's own requests anywhere. The registry runs
:func:`param_findings` on every compiled tool: one warning per tool and
kind, naming the parameters and where the value must come from instead.

A tool where the model really does choose such a value (the account an
administrator unlocks, a public page to summarise) says so with
``@tool(model_chooses={"user_id": "<why, and what checks it>"})``: the
reason is mandatory, and a name that is not a parameter of the tool is a
warning of its own (it would silence nothing).

Matching works on the words of a name (``tenantId``, ``X-Tenant-Id`` and
``tenant_id`` are all *tenant* + *id*) and on the schema's ``format``
(``uri``, ``hostname``, ``password``). Nested body properties are checked
too, named by their dotted path (``filter.tenant_id``, ``hooks[].url``).

A department is not always the actor's: on a read-only tool, a
``department`` (or ``dept``) outside the headers picks which rows to read,
as any column filter does (``GET /tickets?department=billing``), and is
not reported. The tenant, the user, roles and permissions are reported on
every tool: a tenant filter the model chooses is how one tenant reads
another's rows.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from bailing_flask._pipeline.tool_view import ToolView as Tool

if TYPE_CHECKING:  # pragma: no cover
    from bailing_flask.lint.codes import Finding

__all__ = ["param_findings", "classify", "CODES"]

_WORDS_RE = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
_MAX_DEPTH = 6

IDENTITY, CREDENTIAL, INFRASTRUCTURE = "identity_param", "credential_param", "infrastructure_param"
#: Every code this module reports.
CODES = (IDENTITY, CREDENTIAL, INFRASTRUCTURE, "model_chooses_unknown")

#: word -> (code, kind) for words that mark a parameter wherever they stand
_ANYWHERE: dict[str, tuple[str, str]] = {
    **dict.fromkeys(("tenant", "tenants", "tenantid"), (IDENTITY, "tenant")),
    **dict.fromkeys(("department", "departments", "dept", "depts", "deptid"), (IDENTITY, "department")),
    **dict.fromkeys(("role", "roles", "roleid", "admin", "superuser", "sudo"), (IDENTITY, "role")),
    **dict.fromkeys(("permission", "permissions", "perm", "perms", "acl", "acls", "entitlement",
                     "entitlements", "privilege", "privileges", "scope", "scopes"), (IDENTITY, "permission")),
    **dict.fromkeys(("userid", "uid", "username", "ownerid", "actorid", "onbehalfof", "impersonate"),
                    (IDENTITY, "user")),
    **dict.fromkeys(("password", "passwd", "pwd", "passphrase"), (CREDENTIAL, "password")),
    **dict.fromkeys(("secret", "secrets", "credential", "credentials", "apikey", "jwt", "bearer",
                     "cookie", "cookies", "authorization", "auth"), (CREDENTIAL, "secret")),
    **dict.fromkeys(("url", "urls", "uri", "uris", "href", "baseurl", "endpoint", "endpoints", "dsn",
                     "proxy"), (INFRASTRUCTURE, "URL")),
    **dict.fromkeys(("host", "hosts", "hostname", "hostnames"), (INFRASTRUCTURE, "host")),
    **dict.fromkeys(("webhook", "webhooks", "callback", "callbacks", "redirect"), (INFRASTRUCTURE, "callback")),
}
#: a name ending in one of these is the acting person
_PERSON_LAST = {"user", "users", "owner", "owners", "actor", "operator", "principal", "requester"}
#: ``<person>_id``, ``<person>_name``...
_PERSON_BEFORE = _PERSON_LAST | {"subject", "caller"}
_PERSON_QUALIFIERS = {"id", "ids", "name", "names", "email", "login"}
#: whole names (words joined) that say who acts
_PERSON_NAMES = {"createdby", "requestedby", "approvedby", "executedby", "updatedby", "performedby",
                 "actingas", "runas", "asuser", "behalfof", "currentuser", "actinguser", "loginuser"}
#: ``token`` preceded by one of these is pagination or a count, not a credential
_NOT_CREDENTIAL_BEFORE = {"page", "next", "prev", "previous", "continuation", "cursor", "pagination",
                          "sync", "resume", "max", "min", "num", "count"}
_NOT_CREDENTIAL_AFTER = {"count", "counts", "limit", "limits", "budget", "usage"}
_KEY_QUALIFIERS = {"api", "access", "secret", "private", "signing", "encryption", "client", "auth",
                   "master", "ssh", "session", "license"}
_FORMATS = {
    **dict.fromkeys(("uri", "url", "uri-reference", "iri", "iri-reference", "uri-template"),
                    (INFRASTRUCTURE, "URL")),
    **dict.fromkeys(("hostname", "idn-hostname"), (INFRASTRUCTURE, "host")),
    "password": (CREDENTIAL, "password"),
}


def _words(name: str) -> list[str]:
    return [word.lower() for word in _WORDS_RE.findall(name)]


def classify(name: str, schema: Any = None) -> tuple[str, str] | None:
    """``(code, kind)`` when a parameter's name or schema marks it as a hazard, else ``None``.

    >>> classify("tenantId")
    ('identity_param', 'tenant')
    >>> classify("page_token") is None
    True
    """
    words = _words(name)
    if words:
        joined = "".join(words)
        if joined in _PERSON_NAMES or words[-1] in _PERSON_LAST:
            return IDENTITY, "user"
        if len(words) > 1 and words[-1] in _PERSON_QUALIFIERS and words[-2] in _PERSON_BEFORE:
            return IDENTITY, "user"
        for index, word in enumerate(words):
            before = words[index - 1] if index else ""
            after = words[index + 1] if index + 1 < len(words) else ""
            if word in ("token", "tokens"):
                if before not in _NOT_CREDENTIAL_BEFORE and after not in _NOT_CREDENTIAL_AFTER:
                    return CREDENTIAL, "token"
                continue
            if word in ("key", "keys") and before in _KEY_QUALIFIERS:
                return CREDENTIAL, "token"
            if word == "session" and after in ("id", "key", "token", "cookie"):
                return CREDENTIAL, "token"
            if word in ("org", "organization", "organisation", "workspace") and after == "id":
                return IDENTITY, "tenant"
            if word == "account" and after in ("id", "ids") and words[:index] in ([], ["x"]):
                return IDENTITY, "tenant"  # account_id, X-Account-Id; not bank_account_id
            found = _ANYWHERE.get(word)
            if found is not None:
                return found
        if joined in _ANYWHERE:  # "api" + "key" written as one word, "base" + "url"
            return _ANYWHERE[joined]
    return _from_schema(schema)


def _from_schema(schema: Any) -> tuple[str, str] | None:
    if not isinstance(schema, dict):
        return None
    fmt = schema.get("format")
    if isinstance(fmt, str) and fmt in _FORMATS:
        return _FORMATS[fmt]
    if schema.get("writeOnly") is True and schema.get("type") == "string":
        return CREDENTIAL, "secret"
    items = schema.get("items")
    if isinstance(items, dict) and not isinstance(items.get("properties"), dict):
        return _from_schema(items)
    return None


def _parameters(tool: Tool) -> Iterator[tuple[str, Any, str]]:
    """``(name, schema, in)`` of every parameter the model fills: path, query, header, body (nested)."""
    for parameter in tool.parameters:
        name = parameter.get("name")
        if isinstance(name, str):
            yield name, parameter.get("schema"), str(parameter.get("in") or "query")
    if tool.body_schema is not None:
        for name, schema in _properties(tool.body_schema, "", 0):
            yield name, schema, "body"


def _row_filter(tool: Tool, hazard: tuple[str, str], where: str) -> bool:
    """A department that picks the rows a read-only tool reads (see the module docstring)."""
    return hazard == (IDENTITY, "department") and tool.readonly and where != "header"


def _properties(schema: Any, prefix: str, depth: int) -> Iterator[tuple[str, Any]]:
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name, sub in properties.items():
            path = f"{prefix}{name}"
            yield path, sub
            yield from _properties(sub, path + ".", depth + 1)
    items = schema.get("items")
    if isinstance(items, dict) and isinstance(items.get("properties"), dict):
        yield from _properties(items, prefix[:-1] + "[]." if prefix else "[].", depth + 1)


def param_findings(tool: Tool) -> list[Finding]:
    """The minimal-parameter warnings of one tool (see the module docstring)."""
    from bailing_flask.lint.codes import finding  # the linter loads with the first compile

    chosen = dict(tool.options.model_chooses or {})
    found: dict[str, list[tuple[str, str]]] = {}
    names: set[str] = set()
    for name, schema, where in _parameters(tool):
        if name in names or name in chosen:
            names.add(name)
            continue
        names.add(name)
        hazard = classify(name.rsplit(".", 1)[-1], schema)
        if hazard is not None and not _row_filter(tool, hazard, where):
            found.setdefault(hazard[0], []).append((name, hazard[1]))
    findings: list[Finding] = []
    key = tool.operation_key
    for code in (IDENTITY, CREDENTIAL, INFRASTRUCTURE):
        hits = found.get(code)
        if not hits:
            continue
        listed = ", ".join(f"{name!r} ({kind})" for name, kind in hits)
        example = "{" + f"{hits[0][0]!r}: '<why the model chooses it, and what checks it>'" + "}"
        kind = code.removesuffix("_param")  # identity, credential, infrastructure
        findings.append(finding(
            f"{kind}_param", key, names=("parameter " if len(hits) == 1 else "parameters ") + listed,
            tool=repr(tool.name), example=example,
        ))
    for name in sorted(set(chosen) - names):
        findings.append(finding("model_chooses_unknown", key, tool=tool.name, name=name))
    return findings
