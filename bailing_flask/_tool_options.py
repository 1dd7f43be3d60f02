"""The options of a tool declaration, validated: the pydantic models behind ``@tool``.

Loaded by the first ``@tool`` or ``tool_defaults`` that runs (and by the
registry), not by ``from bailing_flask import tool``: an import of the
package's names builds no pydantic model. :mod:`bailing_flask.declare`
re-exports the public models.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from bailing_flask.errors import ConfigurationError, ToolDeclarationError

__all__ = [
    "ApprovalCondition",
    "HTTP_METHODS",
    "Outcome",
    "Param",
    "RateLimit",
    "ToolOptions",
    "effective_repeats",
    "validate_options",
]

#: The HTTP methods a tool (or a class's method) may be.
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")

_CONDITION_RE = re.compile(
    r"^\s*(?P<param>[A-Za-z_][A-Za-z0-9_.]*)\s*(?P<op>>=|<=|==|!=|>|<|\bin\b|\bcontains\b|\bexists\b)\s*(?P<value>.*?)\s*$"
)
_RATE_UNITS = {
    "s": "1s", "sec": "1s", "second": "1s", "seconds": "1s",
    "m": "1m", "min": "1m", "minute": "1m", "minutes": "1m",
    "h": "1h", "hr": "1h", "hour": "1h", "hours": "1h",
    "d": "1d", "day": "1d", "days": "1d",
}

_SAFE_WITH_KEY = (
    "repeats='safe' runs every call, and idempotency_key= says which calls are repeats of each "
    "other to run them once; drop one of them"
)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True,
                              protected_namespaces=())


class ApprovalCondition(_Model):
    """One ``approval.when`` condition.

    Also accepted as a string such as ``"amount > 500"`` or
    ``"currency in [\\"USD\\",\\"EUR\\"]"`` (the value is JSON, else text).
    """

    param: str = Field(min_length=1, max_length=191)
    op: Literal[">", ">=", "<", "<=", "==", "!=", "in", "contains", "exists"]
    value: Any = None
    label: str | None = Field(default=None, min_length=1, max_length=120)
    has_value: bool = Field(default=False, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, data: Any) -> Any:
        if isinstance(data, str):
            match = _CONDITION_RE.match(data)
            if match is None:
                raise ValueError(f"cannot parse condition {data!r}; write e.g. 'amount > 500'")
            result: dict[str, Any] = {"param": match["param"], "op": match["op"]}
            if match["value"]:
                try:
                    result["value"] = json.loads(match["value"])
                except ValueError:
                    result["value"] = match["value"]
                result["has_value"] = True
            return result
        if isinstance(data, dict) and "value" in data:
            return {**data, "has_value": True}
        return data

    @model_validator(mode="after")
    def _value_present(self) -> ApprovalCondition:
        if self.op != "exists" and not self.has_value:
            raise ValueError(f"operator {self.op!r} needs a value")
        return self

    def to_capability(self) -> dict[str, Any]:
        """The JSON object the hub reads."""
        data: dict[str, Any] = {"param": self.param, "op": self.op}
        if self.op != "exists" or self.has_value:
            data["value"] = self.value
        if self.label:
            data["label"] = self.label
        return data


class RateLimit(_Model):
    """A hub-side per-tool rate limit: ``count`` calls per one ``window``.

    Accepted as ``"30/min"``, ``"5/s"``, ``"1000/day"`` or
    ``{"count": 30, "window": "1m"}``.
    """

    count: int = Field(gt=0)
    window: Literal["1s", "1m", "1h", "1d"]

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, data: Any) -> Any:
        if isinstance(data, str):
            count, sep, unit = data.strip().partition("/")
            unit = unit.strip().lower()
            if unit.startswith("1") and unit[1:].strip() in _RATE_UNITS:
                unit = unit[1:].strip()
            if not sep or unit not in _RATE_UNITS or not count.strip().isdigit():
                raise ValueError(
                    f"cannot parse rate limit {data!r}; write e.g. '30/min', '5/s', '100/hour'"
                )
            return {"count": int(count), "window": _RATE_UNITS[unit]}
        return data


class Outcome(_Model):
    """What a successful call achieves (``x-agent-capability.outcome``)."""

    result: str = Field(min_length=1, max_length=300)
    side_effect: Literal["none", "read", "write", "notify", "external"]


@dataclass(frozen=True)
class Param:
    """An explicit parameter, for views that read ``request.args`` by hand.

    :param name: the parameter name as sent by the hub.
    :param type: a Python type (``str``, ``int``, ``float``, ``bool``, an
        ``Enum``, ``Literal[...]``) or a JSON schema ``dict``. Left out, a
        query or header parameter is a string and a path parameter keeps the
        schema of its URL converter (so ``Param("order_id", location="path",
        description=...)`` only adds the description).
    :param location: ``"query"``, ``"path"`` (to describe a route
        variable) or ``"header"`` (unsigned: avoid, see the security page's trap T12).
    """

    name: str
    type: Any = None
    location: Literal["query", "path", "header"] = "query"
    required: bool = False
    description: str | None = None


class ToolOptions(_Model):
    """Every option of a tool declaration; see the configuration reference.

    ``None`` means "not set here" so that blueprint and class defaults can
    fill it in.
    """

    name: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
    name_prefix: str | None = Field(default=None, pattern=r"^([A-Za-z_][A-Za-z0-9_]{0,40})?$")
    description: str | None = None
    scope: str | None = Field(default=None, max_length=191)
    scope_prefix: str | None = None
    risk: Literal["low", "medium", "high"] | None = None
    approval_required: bool | None = None
    approval_when: tuple[ApprovalCondition, ...] | None = None
    approval_prompt: str | None = Field(default=None, max_length=200)
    subject_required: bool | None = None
    sensitive: bool | None = None
    readonly: bool | None = None
    rate_limit: RateLimit | None = None
    timeout_ms: int | None = Field(default=None, ge=1, le=600_000)
    when_to_use: str | None = Field(default=None, max_length=500)
    returns: str | None = Field(default=None, max_length=500)
    examples: tuple[dict[str, Any], ...] | None = Field(default=None, max_length=5)
    context: tuple[str, ...] | None = Field(default=None, max_length=50)
    tags: tuple[str, ...] | None = None
    deprecated: bool | None = None
    outcome: Outcome | None = None
    extensions: dict[str, Any] | None = None
    enabled: bool | None = None
    methods: tuple[str, ...] | None = None
    #: A pydantic model class, or a marshmallow ``Schema`` (class or instance).
    query: Any = None
    body: Any = None
    params: tuple[Param, ...] | None = None
    authorizer: Callable[..., Any] | None = None
    allow_unsigned: bool | None = None
    #: What happens to a repeat of the same call (see :data:`REPEATS`). Default: ``"replay"``
    #: for a write tool; a read tool (GET, ``readonly=True``) runs every call.
    repeats: Literal["replay", "transaction", "safe"] | None = None
    #: ``idempotency_key(call) -> str``: which calls are repeats of each other (a domain key).
    #: Default: the signed call (job, tool, arguments, subject).
    idempotency_key: Callable[..., Any] | None = None

    validate_unsigned: bool | None = None
    business_approval: bool | None = None
    #: The declared return shape: a pydantic model class or ``list[Model]``.
    #: Only its fields leave, within its limits (:mod:`bailing_flask._pipeline.projection`).
    response: Any = None
    #: With ``response=``: the most items a list keeps when the model sets no
    #: ``max_length`` (the top-level list of ``list[Model]`` included); ``0``:
    #: no cap. Default: ``BAILING_RESPONSE_MAX_ITEMS``.
    max_items: int | None = Field(default=None, ge=0, le=1_000_000, strict=True)
    #: The declared shape of non-2xx answers (a pydantic model class or ``list[Model]``);
    #: without it, a tool with ``response=`` answers errors in the package's error shape.
    error_response: Any = None
    #: ``result(value) -> value``: shapes a successful result before ``response=``.
    result: Callable[..., Any] | None = None
    #: Parameters the lint flags as identity, credential or infrastructure that
    #: the model may choose all the same, each with the reason why.
    model_chooses: dict[str, str] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ToolOptions:
        if self.repeats == "safe" and self.idempotency_key is not None:
            raise ValueError(_SAFE_WITH_KEY)
        if self.validate_unsigned and self.allow_unsigned is False:
            raise ValueError("validate_unsigned=True needs allow_unsigned=True (it validates unsigned requests)")
        return self

    @field_validator("query", "body")
    @classmethod
    def _input_model(cls, value: Any) -> Any:
        from bailing_flask._pipeline.foreign import is_marshmallow
        from bailing_flask._pipeline.schema import subclass_of

        if value is None or subclass_of(value, BaseModel):
            return value
        if is_marshmallow(value) and not get_origin(value):
            return value
        raise ValueError("expected a pydantic model class or a marshmallow Schema")

    @field_validator("response", "error_response")
    @classmethod
    def _response_shape(cls, value: Any) -> Any:
        if value is None:
            return None
        from bailing_flask._pipeline.projection import check_response_shape

        check_response_shape(value)  # raises ValueError naming the problem
        return value

    @field_validator("model_chooses", mode="before")
    @classmethod
    def _reasons_given(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, Mapping):
            value = dict(value)
        else:
            raise ValueError(
                "model_chooses needs a reason per parameter, e.g. {'user_id': 'the admin picks "
                "the user to unlock; the authorizer checks it is in their tenant'}"
            )
        for name, reason in value.items():
            if not isinstance(name, str) or not name.strip():
                raise ValueError("model_chooses keys are parameter names")
            if not isinstance(reason, str) or len(reason.strip()) < 10:
                raise ValueError(
                    f"model_chooses[{name!r}] needs a reason (at least 10 characters): why the "
                    "model may choose this value, and what checks it"
                )
            if len(reason) > 500:
                raise ValueError(f"model_chooses[{name!r}]: keep the reason under 500 characters")
        return value

    @field_validator("context")
    @classmethod
    def _context_items(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for item in value or ():
            if not item.strip() or len(item) > 100:
                raise ValueError("context entries must be 1-100 characters and not blank")
        return value

    @field_validator("scope")
    @classmethod
    def _scope_text(cls, value: str | None) -> str | None:
        if value is not None:
            if not value.strip():
                raise ValueError("scope must not be blank")
            if any(ord(ch) > 0xFF for ch in value):
                raise ValueError("scope must be ISO-8859-1 (ASCII recommended): the hub sends it in a header")
        return value

    @field_validator("methods")
    @classmethod
    def _methods_known(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is None:
            return None
        upper = tuple(m.upper() for m in value)
        for method in upper:
            if method not in HTTP_METHODS:
                raise ValueError(f"unknown HTTP method {method!r}")
        return upper

    @field_validator("extensions")
    @classmethod
    def _extension_keys(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        for key in value or {}:
            if not (key.startswith("x-business-") or key.startswith("x-bailing-")):
                raise ValueError(f"extension key {key!r} must start with 'x-business-' or 'x-bailing-'")
            if key == "x-bailing-authz-probe":
                raise ValueError("'x-bailing-authz-probe' is managed by bailing_flask")
        return value

    @field_validator("examples")
    @classmethod
    def _examples_json(cls, value: tuple[dict[str, Any], ...] | None) -> tuple[dict[str, Any], ...] | None:
        for example in value or ():
            try:
                json.dumps(example, allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"examples must be JSON objects: {exc}") from None
        return value

    def explicit(self) -> dict[str, Any]:
        """Only the options that were set (used to layer defaults)."""
        return {name: getattr(self, name) for name in self.model_fields_set}


def validate_options(options: dict[str, Any], where: str) -> ToolOptions:
    """``options`` as given to ``@tool`` or ``tool_defaults`` on ``where``, validated.

    Raises :class:`ToolDeclarationError` naming ``where`` and each field's problem.
    """
    for key in ("approval_when", "examples", "context", "tags", "methods", "params"):
        value = options.get(key)
        if isinstance(value, (list, set)):
            options[key] = tuple(value)
        elif isinstance(value, str) and key in ("approval_when", "tags", "methods", "context"):
            options[key] = (value,)
    try:
        validated = ToolOptions(**options)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'options'}: {err['msg']}" for err in exc.errors()
        )
        raise ToolDeclarationError(f"invalid tool declaration on {where}: {problems}") from None
    from bailing_flask._sync import check_async_support

    for option in ("authorizer", "idempotency_key", "result"):
        try:
            check_async_support(getattr(validated, option), f"{option}= of {where}")
        except ConfigurationError as exc:
            raise ToolDeclarationError(str(exc)) from None
    return validated


def effective_repeats(options: ToolOptions, readonly: bool, where: str) -> str | None:
    """What a repeat of a call to this tool gets: ``repeats=``, else ``"replay"`` for a write
    tool; ``None`` for a read tool (it runs every call) unless a domain key makes its repeats
    recognisable. Raises :class:`ToolDeclarationError` for ``"safe"`` with a domain key (one of
    them given through ``tool_defaults``, so the decorator could not see both)."""
    if options.repeats == "safe":
        if options.idempotency_key is not None:
            raise ToolDeclarationError(f"{where}: {_SAFE_WITH_KEY}")
        return "safe"
    if readonly and options.idempotency_key is None:
        return None
    return options.repeats or "replay"
