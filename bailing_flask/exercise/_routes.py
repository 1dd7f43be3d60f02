"""Whether the exercise's sample path values reach the tool's route at all.

The samples come from the catalog's schema. A URL converter of the app's
own (``<hex8:ref>``), or a ``pattern`` the samples cannot meet, routes only
some strings: a request with another value is Flask's ``404`` before any
view, which is the exercise's sample failing, not the app's routing.
"""

from __future__ import annotations

import re
from typing import Any

from flask import Flask
from werkzeug.routing import ValidationError


def unroutable_sample(app: Flask, tool: Any, args: dict[str, Any]) -> str | None:
    """Which sample path value ``tool``'s URL rule does not accept, in words; ``None``: all route.

    ``tool`` is the registry's tool (its ``endpoint`` and ``rule``).
    """
    rule = next((r for r in app.url_map.iter_rules(tool.endpoint) if r.rule == tool.rule), None)
    converters: dict[str, Any] = getattr(rule, "_converters", None) or {}
    for name, converter in converters.items():
        if name not in args:
            continue
        text = str(args[name]).lower() if isinstance(args[name], bool) else str(args[name])
        try:
            accepted = re.fullmatch(f"(?:{converter.regex})", text) is not None
            if accepted:
                converter.to_python(text)
        except ValidationError:
            accepted = False
        except Exception:  # noqa: BLE001 - a converter of the app's: let the request tell
            continue
        if not accepted:
            return (f"{text!r} for path parameter {name!r} is not one its URL converter "
                    f"({type(converter).__name__}, regex {converter.regex!r}) accepts")
    return None
