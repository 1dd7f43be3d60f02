"""What the type checker knows about ``@tool(...)`` and ``Bailing(...)`` keywords.

Both accept keywords only, validated at run time (``ToolOptions`` and the
settings table). These ``TypedDict``\\ s let mypy and pyright catch a
misspelled option in the editor as well; the test suite keeps their keys
equal to ``ToolOptions``' fields and to the settings table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypedDict

if TYPE_CHECKING:  # pragma: no cover

    import os

    from bailing_flask._audit_sink import JsonLinesSink
    from bailing_flask.stores import IdempotencyStore
    from bailing_flask.transactional import TransactionAdapter

from bailing_flask.declare import ToolKwargs as ToolKwargs  # it lives with the options it types

__all__ = ["ToolKwargs", "BailingKwargs"]


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
