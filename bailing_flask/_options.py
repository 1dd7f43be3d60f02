"""What the type checker knows about ``@tool(...)`` and ``Bailing(...)`` keywords.

Both accept keywords only, validated at run time (``ToolOptions`` and the
settings table). These ``TypedDict``\\ s let mypy and pyright catch a
misspelled option in the editor as well; the test suite keeps their keys
equal to ``ToolOptions``' fields and to the settings table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypedDict

if TYPE_CHECKING:  # pragma: no cover
    from pydantic import BaseModel

    import os

    from bailing_flask._audit_sink import JsonLinesSink
    from bailing_flask.stores import IdempotencyStore
    from bailing_flask.transactional import TransactionAdapter
    from bailing_flask.declare import ApprovalCondition, Outcome, Param, RateLimit

__all__ = ["ToolKwargs", "BailingKwargs"]


class ToolKwargs(TypedDict, total=False):
    """The keywords of :func:`~bailing_flask.tool` and :func:`~bailing_flask.tool_defaults`."""

    name: str
    name_prefix: str
    description: str
    scope: str
    scope_prefix: str
    risk: Literal["low", "medium", "high"]
    approval_required: bool
    approval_when: str | ApprovalCondition | Mapping[str, Any] | Sequence[
        str | ApprovalCondition | Mapping[str, Any]
    ]
    approval_prompt: str
    subject_required: bool
    sensitive: bool
    readonly: bool
    rate_limit: str | RateLimit | Mapping[str, Any]
    timeout_ms: int
    when_to_use: str
    returns: str
    examples: Sequence[Mapping[str, Any]]
    context: str | Sequence[str]
    tags: str | Sequence[str]
    deprecated: bool
    outcome: Outcome | Mapping[str, Any]
    extensions: Mapping[str, Any]
    enabled: bool
    methods: str | Sequence[str]
    query: type[BaseModel] | Any  # or a marshmallow Schema (class or instance)
    body: type[BaseModel] | Any  # or a marshmallow Schema (class or instance)
    params: Sequence[Param]
    authorizer: Callable[..., Any]
    allow_unsigned: bool
    repeats: Literal["replay", "transaction", "safe"]
    idempotency_key: Callable[..., Any]
    validate_unsigned: bool
    business_approval: bool
    response: type[BaseModel] | type[list[Any]]
    max_items: int
    error_response: type[BaseModel] | type[list[Any]]
    result: Callable[..., Any]
    model_chooses: Mapping[str, str]


class BailingKwargs(TypedDict, total=False):
    """The keywords of :class:`~bailing_flask.Bailing`: each ``BAILING_*`` setting, lower-cased."""

    secrets: str | Sequence[str] | Mapping[str, str]
    secret: str
    window: int | str
    max_body_size: int | str
    body_timeout: float | str | None
    spool_threshold: int | str
    public_prefix: str | None
    raw_target: Literal["auto", "reconstruct"]
    require_signature: Sequence[str] | str
    path_prefix: str
    catalog_title: str | None
    catalog_version: str
    public_catalog: bool | str
    audit_argument_values: bool | str
    response_size_warning: int | str | None
    response_max_items: int | str | None
    store: str | IdempotencyStore | None
    idempotency_retention: float | str
    idempotency_lease: float | str
    idempotency_defer_completion: bool | str
    reject_replays: bool | str
    transaction: TransactionAdapter | Literal["sqlalchemy"] | None
    client_tokens: str | Sequence[str] | Mapping[str, str] | None
    hub_url: str | None
    callback_max_body_size: int | str
    base_url: str | None
    csrf_exempt: bool | str
    approval_retention: float | str
    otel: bool | str
    audit_sink: JsonLinesSink | str | os.PathLike[str] | None
