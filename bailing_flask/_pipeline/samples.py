"""Plausible argument values from a catalog's JSON schemas (for the exercise and the doctor).

With ``authored`` (the exercise, in process), the tool's own first example
(``@tool(examples=[...])``, its arguments the operation declares) comes first,
then a schema's ``example`` (pydantic's ``Field(examples=[...])``): values
the author chose, such as an id that exists. The doctor, whose write probes
go to a live deployment, asks for made-up values only: an example's id may
name a real record. Otherwise best effort: a value the schema accepts when
that is easy to find (the first enum value, the lower bound, a well-known
format), so that a checker can route a request and get past argument
validation. Where it is not, the gate answers 422, which is still the
gate's own answer.
"""

from __future__ import annotations

from typing import Any

__all__ = ["sample_value", "sample_arguments"]

_FORMATS = {
    "uuid": "00000000-0000-4000-8000-000000000000",
    "date": "2024-01-01",
    "date-time": "2024-01-01T00:00:00Z",
    "email": "probe@example.com",
    "uri": "https://example.com/",
}


def _number(schema: dict[str, Any], integer: bool) -> int | float:
    low = schema.get("minimum")
    high = schema.get("maximum")
    value: float = 1
    if isinstance(low, (int, float)) and not isinstance(low, bool):
        value = low + (1 if schema.get("exclusiveMinimum") is True else 0)
    if isinstance(high, (int, float)) and not isinstance(high, bool) and value > high:
        value = high - (1 if schema.get("exclusiveMaximum") is True else 0)
    return int(value) if integer else value


def _authored(schema: dict[str, Any]) -> Any:
    """The schema's own example (OpenAPI 3.0's ``example``, which the catalog makes of pydantic's
    ``examples``; or ``examples``), ``None`` without one or when its ``enum`` leaves it out."""
    example = schema.get("example")
    listed = schema.get("examples")
    if example is None and isinstance(listed, list) and listed:
        example = listed[0]
    enum = schema.get("enum")
    return None if isinstance(enum, list) and enum and example not in enum else example


def sample_value(schema: Any, depth: int = 0, *, authored: bool = True) -> Any:
    """A value ``schema`` accepts, as far as it is easy to tell (its example, with ``authored``)."""
    if not isinstance(schema, dict) or depth > 8:
        return "x"
    example = _authored(schema) if authored else None
    if example is not None:
        return example
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    if "default" in schema and schema["default"] is not None:
        return schema["default"]
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return sample_value(schema[key][0], depth + 1, authored=authored)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "integer":
        return _number(schema, True)
    if kind == "number":
        return _number(schema, False)
    if kind == "boolean":
        return False
    if kind == "array":
        min_items: Any = schema.get("minItems")
        count = min_items if isinstance(min_items, int) else 0
        return [sample_value(schema.get("items"), depth + 1, authored=authored) for _ in range(count)]
    if kind == "object":
        declared: Any = schema.get("properties")
        properties: dict[str, Any] = declared if isinstance(declared, dict) else {}
        listed: Any = schema.get("required")
        required: list[Any] = listed if isinstance(listed, list) else []
        return {name: sample_value(properties.get(name), depth + 1, authored=authored) for name in required
                if isinstance(name, str)}
    text = _FORMATS.get(str(schema.get("format")), "x")
    minimum = schema.get("minLength")
    if isinstance(minimum, int) and len(text) < minimum:
        text = text + "x" * (minimum - len(text))
    return text


def sample_arguments(operation: dict[str, Any], *, authored: bool = True) -> dict[str, Any]:
    """Values for an operation's path parameters and required arguments; with ``authored``,
    also each argument of the tool's first example (``guidance.examples`` of its
    ``x-agent-capability``) that the operation declares."""
    args: dict[str, Any] = {}
    declared: set[str] = set()
    for parameter in operation.get("parameters") or []:
        if not isinstance(parameter, dict):
            continue
        declared.add(str(parameter.get("name")))
        if parameter.get("required") or parameter.get("in") == "path":
            args[str(parameter.get("name"))] = sample_value(parameter.get("schema"), authored=authored)
    body = (((operation.get("requestBody") or {}).get("content") or {}).get("application/json") or {})
    schema = body.get("schema") if isinstance(body, dict) else None
    free_form = False  # a body without declared properties takes any name
    if isinstance(schema, dict):
        properties = schema.get("properties")
        if isinstance(properties, dict):
            declared.update(map(str, properties))
        else:
            free_form = True
        sampled = sample_value({**schema, "type": "object"}, authored=authored)
        for name, value in (sampled.items() if isinstance(sampled, dict) else ()):
            args.setdefault(name, value)
    capability = operation.get("x-agent-capability")
    guidance = capability.get("guidance") if isinstance(capability, dict) else None
    examples = guidance.get("examples") if isinstance(guidance, dict) else None
    if authored and isinstance(examples, list) and examples and isinstance(examples[0], dict):
        args.update((name, value) for name, value in examples[0].items()
                    if name in declared or free_form)
    return args
