"""What of the app's own code stands in a tool's view stack, found by walking it.

Flask dispatches a tool endpoint to the gate, which wraps what the app
registered: the decorators between the route and ``@tool``,
``MethodView.decorators``, the ``as_view`` function and the method. Every
wrapper made with ``functools.wraps`` copies the name of what it wraps, so
a decorator is named from its *code* (``charge_credit.<locals>.wrapper``
is ``charge_credit``), never from ``__qualname__``. Flask-Caching's layers
are recognised by what they carry (``uncached`` is the function right
below), and their key is read from the decorator's closure.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from flask import Flask

from bailing_flask.integrations import cache_key

__all__ = ["CacheLayer", "cache_layers", "closure", "code_name", "decorators_of", "view_name", "wrappers"]

_FIX = ("key it on the acting subject: @cache.cached(key_prefix=bailing_flask.cache_key) or "
        "@cache.memoize(make_name=bailing_flask.cache_key); browsers keep their entries")
_FIX_QUERY = ("Flask-Caching 2.5 or later (Python 3.11+, Flask 3+) adds the query to key_prefix; "
              "before it, query_string=True keys on the path and query alone and ignores key_prefix: "
              "upgrade, or pass make_cache_key= a function of the app's that starts with "
              "bailing_flask.cache_key() and adds the sorted query")


def code_name(func: Any) -> str:
    """``module.qualname`` of the code ``func`` runs (a wrapper's own name, not the one it copied)."""
    func = getattr(func, "__func__", func)
    code = getattr(func, "__code__", None)
    if code is None:
        return f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}"
    module = getattr(func, "__globals__", {}).get("__name__", "?")
    qualname = getattr(code, "co_qualname", None)  # Python 3.11+
    if qualname is None:  # 3.10: the function's own __qualname__, unless functools.wraps copied one
        qualname = code.co_name if hasattr(func, "__wrapped__") else getattr(func, "__qualname__", code.co_name)
    return f"{module}.{qualname}"


def view_name(func: Any) -> str:
    """The name a wrapper copied from the view (``module.qualname``)."""
    func = getattr(func, "func", func) if isinstance(func, functools.partial) else func
    return f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}"


def _decorator(func: Any) -> str:
    """``charge_credit.<locals>.wrapper`` -> ``charge_credit``: the decorator that made ``func``."""
    return code_name(func).rsplit(".<locals>.", 1)[0]


def _module(func: Any) -> str:
    """The module whose code ``func`` runs (a callable object's: its class's, like the gate's)."""
    func = getattr(func, "__func__", func)
    module_globals = getattr(func, "__globals__", None)
    if module_globals is None:
        return str(type(func).__module__)
    return str(module_globals.get("__name__", ""))


def _chain(func: Any) -> Iterator[Any]:
    seen: set[int] = set()
    while func is not None and id(func) not in seen:
        seen.add(id(func))
        yield func
        func = getattr(func, "__wrapped__", None)


def _stack(app: Flask, endpoint: str, method: str) -> Iterator[Any]:
    """The wrappers Flask's dispatch goes through before the ``@tool`` wrapper, outermost first."""
    view = app.view_functions.get(endpoint)
    for func in _chain(view):
        module = _module(func)
        if module.startswith("bailing_flask."):
            if module == "bailing_flask.declare":
                return  # the @tool wrapper: what follows is the declared view
            continue  # the gate
        view_class = getattr(func, "view_class", None)
        if module == "flask.views" and view_class is not None:  # as_view: on into the method
            target = getattr(view_class, method.lower(), None)
            if target is None and method == "HEAD":
                target = getattr(view_class, "get", None)
            yield from _method_decorators(view_class, method)
            for inner in _chain(target):
                if _module(inner) == "bailing_flask.declare" or getattr(inner, "__wrapped__", None) is None:
                    return  # the @tool wrapper, or the method itself
                yield inner
            return
        if getattr(func, "__wrapped__", None) is None:
            return  # the view itself (a tool declared above its route)
        yield func


def wrappers(app: Flask, endpoint: str, method: str) -> list[Any]:
    """The wrappers in front of a tool's view, outermost first: what :func:`decorators_of` names."""
    return list(_stack(app, endpoint, method))


def _method_decorators(view_class: type, method: str) -> list[Any]:
    """flask-restx's and Flask-RESTful's ``Resource.method_decorators``, outermost first.

    Each is applied to the bound method when a request is dispatched (the
    last one listed runs first); Flask-RESTful also takes a mapping from the
    method's name to its list.
    """
    listed: Any = getattr(view_class, "method_decorators", None) or ()
    if isinstance(listed, Mapping):
        listed = listed.get(method.lower(), ())
    return [decorator for decorator in reversed(list(listed)) if callable(decorator)]


def decorators_of(app: Flask, endpoint: str, method: str) -> list[str]:
    """The app's decorators that run before a tool's view, outermost first, by name."""
    names = []
    for func in _stack(app, endpoint, method):
        layer = _cache_layer(func)
        names.append(f"{layer.decorator} ({layer.key})" if layer is not None else _decorator(func))
    return names


@dataclass(frozen=True)
class CacheLayer:
    """One Flask-Caching decorator in a tool's view stack."""

    #: ``"cached"`` or ``"memoize"``
    kind: str
    #: the function it caches
    view: str
    #: keyed with :func:`bailing_flask.cache_key` (``True``), on the path or the
    #: arguments alone (``False``), or with a function of the app's (``None``)
    per_subject: bool | None
    #: what the key is made of, in words
    key: str
    #: how to key it on the subject, where the usual fix does not apply
    remedy: str = _FIX

    @property
    def decorator(self) -> str:
        return f"Flask-Caching's @cache.{self.kind}"

    def describe(self) -> str:
        return f"{self.decorator} on {self.view} ({self.key})"

    @property
    def fix(self) -> str:
        return self.remedy


def closure(func: Any) -> dict[str, Any]:
    """The values a function closes over, by name (a decorator's arguments, the function it wraps)."""
    code = getattr(func, "__code__", None)
    cells = getattr(func, "__closure__", None) or ()
    values: dict[str, Any] = {}
    for name, cell in zip(getattr(code, "co_freevars", ()), cells):
        try:
            values[name] = cell.cell_contents
        except ValueError:  # a cell not filled yet
            continue
    return values


def _find(func: Any, name: str, depth: int = 3) -> tuple[bool, Any]:
    """``name`` in the closure of ``func`` or of the functions it closes over."""
    values = closure(func)
    if name in values:
        return True, values[name]
    if depth:
        for value in values.values():
            if callable(value) and getattr(value, "__closure__", None):
                found, inner = _find(value, name, depth - 1)
                if found:
                    return True, inner
    return False, None


def _query_key_ignores_prefix(make_key: Any) -> bool:
    """``query_string=True`` on a Flask-Caching whose query key leaves ``key_prefix`` out (before 2.5)."""
    found, query_string = _find(make_key, "query_string")
    if not (found and query_string is True):
        return False
    found, keyer = _find(make_key, "_make_cache_key_query_string")
    return found and "key_prefix" not in getattr(getattr(keyer, "__code__", None), "co_freevars", ("key_prefix",))


def _cache_layer(func: Any) -> CacheLayer | None:
    if not _module(func).startswith("flask_caching"):
        return None
    if getattr(func, "uncached", None) is not getattr(func, "__wrapped__", object()):
        return None
    view = view_name(func)
    values = closure(func)
    if hasattr(func, "delete_memoized") or "memoize" in code_name(func):
        make_name = values.get("make_name")
        if make_name is None:
            return CacheLayer("memoize", view, False, "the function and its arguments")
        if make_name is cache_key:
            return CacheLayer("memoize", view, True, "bailing_flask.cache_key")
        return CacheLayer("memoize", view, None, f"make_name={code_name(make_name)}")
    custom = values.get("make_cache_key")
    if callable(custom):
        if custom is cache_key:
            return CacheLayer("cached", view, True, "bailing_flask.cache_key")
        return CacheLayer("cached", view, None, f"make_cache_key={code_name(custom)}")
    make_key = getattr(func, "make_cache_key", None)
    found, prefix = _find(make_key, "key_prefix")
    if found and callable(prefix) and _query_key_ignores_prefix(make_key):
        return CacheLayer("cached", view, False, f"query_string=True: the path and query alone, not "
                          f"key_prefix={code_name(prefix)}", _FIX_QUERY)
    if found and prefix is cache_key:
        return CacheLayer("cached", view, True, "bailing_flask.cache_key")
    if found and callable(prefix):
        return CacheLayer("cached", view, None, f"key_prefix={code_name(prefix)}")
    shown = f"key {prefix!r}" if found else "its default key"
    return CacheLayer("cached", view, False, f"{shown}: the path")


def cache_layers(app: Flask, endpoint: str, method: str) -> list[CacheLayer]:
    """The Flask-Caching decorators in front of a tool's view."""
    found = [_cache_layer(func) for func in _stack(app, endpoint, method)]
    return [layer for layer in found if layer is not None]


def watched_names(funcs: dict[str | None, list[Callable[..., Any]]]) -> list[str]:
    """``name (blueprint 'x')`` of every function in a Flask hook table."""
    return [view_name(getattr(func, "__wrapped__", func)) + (f" (blueprint {key!r})" if key else "")
            for key, listed in funcs.items() for func in listed]
