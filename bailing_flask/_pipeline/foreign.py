"""Does a declaration use marshmallow or webargs? Answered without importing either.

An app that never imports marshmallow cannot have declared a marshmallow
schema, so nothing is loaded for it; one that did gets its declarations
compiled by :mod:`bailing_flask._pipeline.marshmallow_models`.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, get_args, get_origin

if TYPE_CHECKING:  # pragma: no cover
    from flask import Response

    from bailing_flask._pipeline.marshmallow_models import MarshmallowModel

__all__ = ["is_marshmallow", "marshmallow_shape", "tool_inputs", "webargs_finish"]

#: webargs' locations, by where the hub puts a tool's arguments
_QUERY = ("query", "querystring")
_BODY = ("json", "form", "json_or_form")


def is_marshmallow(value: Any) -> bool:
    """A marshmallow ``Schema`` class or instance (or ``list[Schema]``)."""
    ma = sys.modules.get("marshmallow")
    if ma is None:
        return False
    if get_origin(value) is list and len(get_args(value)) == 1:
        value = get_args(value)[0]
    from bailing_flask._pipeline.schema import subclass_of

    return isinstance(value, ma.Schema) or subclass_of(value, ma.Schema)


def marshmallow_shape(declared: Any, counts: Any, budget: int) -> Any:
    """``response=`` / ``error_response=`` given a marshmallow schema, compiled like a pydantic one
    (``counts`` records a projection's cuts, ``budget`` bounds the ``returns`` text)."""
    from bailing_flask._pipeline.marshmallow_models import MarshmallowShape

    return MarshmallowShape(declared, counts, budget)


def webargs_finish(*args: Any) -> Response:
    """Run a webargs tool's view; a refusal of webargs' own is answered as the gate's (see there)."""
    from bailing_flask._pipeline.marshmallow_models import webargs_finish as run

    return run(*args)


def _is_webargs(view: Any) -> bool:
    code = getattr(view, "__code__", None)
    return code is not None and {"argmap", "location", "self"} <= set(code.co_freevars)


def _webargs_view(view: Any) -> bool:
    if "webargs" not in sys.modules:
        return False
    while view is not None:
        if _is_webargs(view):
            return True
        view = getattr(view, "__wrapped__", None)
    return False


def _webargs_above(registered: Any, view: Any) -> bool:
    """A webargs decorator between the route and ``@tool`` (whose wrapper wraps ``view``)."""
    while registered is not None and getattr(registered, "__wrapped__", None) is not view:
        if _is_webargs(registered):
            return True
        registered = getattr(registered, "__wrapped__", None)
    return False


def tool_inputs(
    query: Any, body: Any, view: Any, method: str, where: str, registered: Any = None,
) -> tuple[Any, Any, bool]:
    """``query=`` and ``body=`` as the pipeline validates them: pydantic models as given,
    marshmallow schemas adapted, webargs' ``@use_args`` schemas when neither is declared;
    and whether a webargs decorator parses the view's arguments.

    ``registered`` is the route's view: a webargs decorator above ``@tool`` is refused
    (the tool would publish none of its parameters and refuse every one the model sends).
    """
    if "webargs" in sys.modules and _webargs_above(registered, view):
        from bailing_flask.errors import ToolDeclarationError

        raise ToolDeclarationError(
            f"{where}: @use_args/@use_kwargs is above @tool; put it below @tool (next to the view), "
            "where the tool's parameters are read from it")
    webargs = _webargs_view(view)
    if not (webargs or is_marshmallow(query) or is_marshmallow(body)):
        return query, body, False
    from bailing_flask._pipeline import marshmallow_models as mm
    from bailing_flask.errors import ToolDeclarationError

    for location, argmap in webargs_argmaps(view).items():
        if not is_marshmallow(argmap):  # a function of the request making the schema
            raise ToolDeclarationError(
                f"{where}: @use_args is given {argmap!r}; the tool's parameters are read from a "
                "Schema or a dict of fields, not from a function of the request")
        if location in _QUERY and query is None:
            query = argmap
        elif location in _BODY and body is None:
            if method == "GET":
                raise ToolDeclarationError(
                    f"{where}: @use_args(location={location!r}) on a GET tool: the hub sends a GET "
                    "tool's arguments in the query string (location='query')")
            body = argmap
        elif location not in _QUERY + _BODY:
            raise ToolDeclarationError(
                f"{where}: @use_args(location={location!r}) is not where the hub sends arguments "
                "(use 'query' or 'json')")
    adapted: list[MarshmallowModel | Any] = [
        mm.adapt_schema(value, where) if is_marshmallow(value) else value for value in (query, body)
    ]
    return adapted[0], adapted[1], webargs


def webargs_argmaps(view: Any) -> dict[str, Any]:
    """``{"query": schema, "json": schema}`` read from the webargs decorators under ``@tool``.

    webargs keeps the schema and the location in the closure of the wrapper
    it makes (nothing else records them), so that is where they are read.
    """
    import webargs.core  # imported by the app already

    found: dict[str, Any] = {}
    while view is not None:
        if _is_webargs(view):
            cells = dict(zip(view.__code__.co_freevars, view.__closure__ or ()))
            try:
                parser = cells["self"].cell_contents
                argmap = cells["argmap"].cell_contents
                location = cells["location"].cell_contents
            except (KeyError, ValueError):
                view = getattr(view, "__wrapped__", None)
                continue
            if isinstance(parser, webargs.core.Parser):
                found[location or parser.location] = argmap
        view = getattr(view, "__wrapped__", None)
    return found
