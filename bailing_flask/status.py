"""``flask bailing status``: what this deployment is configured to do, secrets redacted.

One report, as JSON (:func:`collect_status`) or text (:func:`render_status`):

* every ``BAILING_*`` setting, with secrets shown only as labels and
  lengths and passwords left out of store URLs;
* whether the idempotency store answers, and for Redis whether it persists
  every write (``appendonly``) or only snapshots (``save``);
* each registered hub event handler, its path and whether a client token
  is there to verify it;
* the hub URL the chat widget and the hub client use, and the templates
  that render the widget;
* the number of tools and the SHA-256 of the catalog bytes the hub is
  served (compare it with what the hub fetched);
* approval requests waiting for this business's decision;
* where audit records go: whether the ``bailing_flask.audit`` logger would
  emit them, and the direct sink with its counts in this process (records
  dropped by the workers of a server are logged by each worker);
* the configuration problems ``flask bailing check`` reports.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from bailing_flask.config_check import check_all, secret_items, widget_templates
from bailing_flask.settings import CALLBACK_NAMES, SETTINGS
from bailing_flask._pipeline.registry import registry_of
from bailing_flask._pipeline.idempotency import idempotency_of
from bailing_flask._pipeline.catalog import catalog_of
from bailing_flask.approvals import approvals_of
from bailing_flask.audit import telemetry_of

if TYPE_CHECKING:  # pragma: no cover
    from bailing_flask._state import BailingState

__all__ = ["collect_status", "render_status", "redacted_url", "redis_persistence"]

def redacted_url(url: str) -> str:
    """A URL without user name and password."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<invalid URL>"
    if not parts.netloc:
        return url
    return urlunsplit((parts.scheme, host + port, parts.path, "", ""))


def _secret_summary(value: Any) -> dict[str, Any]:
    items = secret_items(value)
    return {
        "configured": bool(items),
        "secrets": [{"label": label, "length": len(secret) if isinstance(secret, str) else None}
                    for label, secret in items],
    }


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return repr(value)


def _configuration(state: BailingState) -> dict[str, Any]:
    shown: dict[str, Any] = {}
    for setting in SETTINGS:
        key, value = setting.key, getattr(state.config, setting.name)
        if setting.secret:
            shown[key] = _secret_summary(value)
        elif key == "BAILING_STORE" and isinstance(value, str):
            shown[key] = redacted_url(value)
        else:
            shown[key] = _plain(value)
    return shown


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def redis_persistence(store: Any) -> dict[str, Any]:
    """How Redis keeps the store's writes: ``CONFIG GET appendonly`` and ``save``.

    Managed Redis often disables ``CONFIG``; the answer is then
    ``"unknown"``, with the error.
    """
    client = getattr(store, "_client", None)
    if client is None:
        return {"mode": "unknown", "error": "no Redis client"}
    try:
        answer: dict[str, str] = {}
        for name in ("appendonly", "save"):
            for key, value in dict(client.config_get(name)).items():
                answer[_text(key)] = _text(value)
    except Exception as exc:
        return {"mode": "unknown", "error": f"{type(exc).__name__}: {exc}"}
    appendonly = answer.get("appendonly", "").lower() == "yes"
    save = answer.get("save", "").strip()
    if appendonly:
        mode, warning = "appendonly", None
    elif save:
        mode = "snapshots"
        warning = ("Redis persists only snapshots (save " + save + "): a restart loses the writes "
                   "since the last one, so a completed side effect could run again; set "
                   "appendonly yes")
    else:
        mode = "none"
        warning = ("Redis does not persist at all: a restart forgets every completed side "
                   "effect and approval; set appendonly yes")
    return {"mode": mode, "appendonly": answer.get("appendonly"), "save": save,
            "warning": warning}


def _store(state: BailingState) -> dict[str, Any]:
    from bailing_flask.stores import RedisStore, SQLiteStore, SQLStore, StoreUnavailable

    report: dict[str, Any] = {"backend": None, "reachable": False, "error": None,
                              "persistence": None}
    try:
        store = idempotency_of(state).store()
    except Exception as exc:
        report["error"] = f"{type(exc).__name__}: {exc}"
        return report
    report["backend"] = type(store).__name__
    if isinstance(store, SQLiteStore):
        report["location"] = store.path
    elif isinstance(store, (RedisStore, SQLStore)):
        report["location"] = store.display
    try:
        store.ping()
        report["reachable"] = True
    except StoreUnavailable as exc:
        report["error"] = str(exc)
    if isinstance(store, RedisStore) and report["reachable"]:
        report["persistence"] = redis_persistence(store)
    return report


def _catalog(state: BailingState) -> dict[str, Any]:
    try:
        catalog = catalog_of(state)
    except Exception as exc:
        return {"tools": None, "error": f"{type(exc).__name__}: {exc}"}
    served = catalog.served_bytes
    return {
        "tools": len(registry_of(state).tools),
        "served_tools": sum(len(ops) for ops in catalog.served.get("paths", {}).values()),
        "excluded": list(catalog.excluded),
        "catalog_bytes": len(served),
        "catalog_sha256": hashlib.sha256(served).hexdigest(),
        "path": state.config.catalog_path,
    }


def _approvals(state: BailingState) -> dict[str, Any]:
    try:
        pending = approvals_of(state).pending(limit=1000)
    except Exception as exc:
        return {"pending": None, "error": f"{type(exc).__name__}: {exc}"}
    return {"pending": len(pending),
            "oldest": pending[0].to_dict() if pending else None}


def _audit(state: BailingState) -> dict[str, Any]:
    from bailing_flask.audit import logger_emits

    sink = state.audit_sink
    return {
        "logger": logger_emits(),
        "sink": None if sink is None else {
            "target": sink.target, "max_queued": sink.max_queued, "queued": sink.queued,
            "written": sink.written, "dropped": sink.dropped,
        },
    }


def collect_status(state: BailingState) -> dict[str, Any]:
    """The whole report as a JSON-ready ``dict``."""
    from bailing_flask._version import __version__

    has_tokens = bool(secret_items(state.config.client_tokens))
    handlers = {
        kind: {"registered": kind in state.callbacks.callback_handlers,
               "path": state.config.callback_path(kind), "client_token": has_tokens}
        for kind in CALLBACK_NAMES
    }
    hub_url = state.config.hub_url
    return {
        "version": __version__,
        "app": state.app.name,
        "configuration": _configuration(state),
        "store": _store(state),
        "handlers": handlers,
        "hub": {"url": redacted_url(hub_url) if hub_url else None,
                "widget_templates": widget_templates(state.app)},
        "catalog": _catalog(state),
        "approvals": _approvals(state),
        "telemetry": {"opentelemetry": telemetry_of(state) is not None},
        "audit": _audit(state),
        "problems": [problem.to_dict() for problem in check_all(state)],
    }


def render_status(data: Mapping[str, Any]) -> str:
    """The report as text for a terminal."""
    lines = [f"bailing_flask {data['version']} on app {data['app']!r}", "", "Configuration:"]
    for key, value in data["configuration"].items():
        if isinstance(value, dict) and "secrets" in value:
            shown = ", ".join(f"{s['label']} ({s['length']} chars)" for s in value["secrets"])
            value = shown or "not set"
        lines.append(f"  {key:34} {value}")
    store = data["store"]
    lines += ["", "Store:"]
    state = "reachable" if store["reachable"] else f"NOT reachable: {store['error']}"
    lines.append(f"  {store['backend'] or '?'} {store.get('location') or ''} {state}".rstrip())
    persistence = store.get("persistence")
    if persistence:
        lines.append(f"  persistence: {persistence['mode']}")
        if persistence.get("warning"):
            lines.append(f"  WARNING: {persistence['warning']}")
        if persistence.get("error"):
            lines.append(f"  ({persistence['error']})")
    lines += ["", "Hub event handlers:"]
    for kind, handler in data["handlers"].items():
        if handler["registered"]:
            token = "client token set" if handler["client_token"] else "NO CLIENT TOKEN"
            lines.append(f"  {kind:9} {handler['path']}  {token}")
        else:
            lines.append(f"  {kind:9} (no handler)")
    hub = data["hub"]
    lines += ["", f"Hub URL: {hub['url'] or 'not set'}"]
    if hub["widget_templates"]:
        lines.append("  chat widget in: " + ", ".join(hub["widget_templates"]))
    catalog = data["catalog"]
    lines += [""]
    if catalog.get("error"):
        lines.append(f"Catalog: cannot be built: {catalog['error']}")
    else:
        lines.append(f"Catalog: {catalog['tools']} tool(s), {catalog['served_tools']} served, "
                     f"{catalog['catalog_bytes']} bytes, sha256 {catalog['catalog_sha256']}")
        if catalog["excluded"]:
            lines.append("  left out (errors): " + ", ".join(catalog["excluded"]))
    approvals = data["approvals"]
    if approvals.get("error"):
        lines.append(f"Approvals: unavailable ({approvals['error']})")
    else:
        lines.append(f"Approvals waiting for a decision: {approvals['pending']}")
    lines.append(f"OpenTelemetry: {'on' if data['telemetry']['opentelemetry'] else 'off'}")
    audit = data["audit"]
    lines.append("Audit logger bailing_flask.audit: "
                 + ("a handler takes INFO" if audit["logger"] else "no handler takes INFO"))
    sink = audit["sink"]
    if sink is None:
        lines.append("Audit sink: none")
    else:
        lines.append(f"Audit sink: {sink['target']} (in this process: {sink['written']} written, "
                     f"{sink['queued']} queued of at most {sink['max_queued']}, {sink['dropped']} dropped)")
    if data["problems"]:
        lines += ["", "Problems:"]
        lines += [f"  {p['severity'].upper():7} {p['code']:32} {p['setting']}: {p['message']}"
                  for p in data["problems"]]
    return "\n".join(lines)
