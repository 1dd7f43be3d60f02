"""Where idempotent side effects, callback de-duplication and seen signatures are kept.

Four backends share one contract (:class:`IdempotencyStore`) and one test
suite: :class:`MemoryStore` for tests, :class:`SQLiteStore` as the embedded
default for one host, :class:`RedisStore` or :class:`SQLStore` (PostgreSQL,
MySQL/MariaDB) when the app runs on several hosts. :func:`store_from_url`
picks one from a configuration string.

Each backend is imported when first used (``store_from_url``, or its name
imported from here): an app on one backend never loads the others (nor
``sqlite3``, redis-py or SQLAlchemy).
"""

from __future__ import annotations

import importlib
import re
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from bailing_flask.errors import ConfigurationError
from bailing_flask.stores.approvals import ApprovalClaim, ApprovalRecord, ApprovalStatus
from bailing_flask.stores.base import (
    Clock,
    Entry,
    EntryMeta,
    IdempotencyStore,
    Reservation,
    StoreBusy,
    StoredResponse,
    StoreUnavailable,
)

if TYPE_CHECKING:  # pragma: no cover
    from bailing_flask.stores.memory import MemoryStore
    from bailing_flask.stores.redis import RedisStore
    from bailing_flask.stores.sql import SQLStore
    from bailing_flask.stores.sqlite import SQLiteStore

#: Each backend's module, imported on first use.
_BACKENDS = {"MemoryStore": ".memory", "RedisStore": ".redis", "SQLStore": ".sql", "SQLiteStore": ".sqlite"}


def __getattr__(name: str) -> Any:
    module = _BACKENDS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value

__all__ = [
    "ApprovalClaim",
    "ApprovalRecord",
    "ApprovalStatus",
    "Entry",
    "EntryMeta",
    "IdempotencyStore",
    "MemoryStore",
    "RedisStore",
    "Reservation",
    "SQLStore",
    "SQLiteStore",
    "StoreBusy",
    "StoreUnavailable",
    "StoredResponse",
    "store_from_url",
]

_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_EXPECTED = (
    "memory://, sqlite:///relative/path.db, sqlite:////absolute/path.db, redis://host:6379/0, "
    "postgresql+psycopg://user:password@host/db or mysql+pymysql://user:password@host/db"
)
#: SQLAlchemy's dialect names the SQL store takes (any driver: ``postgresql+psycopg2``, ...)
_SQL_SCHEMES = ("postgresql", "mysql", "mariadb")


def store_from_url(url: str, *, clock: Clock = time.time) -> IdempotencyStore:
    """Build the store a URL names.

    * ``memory://`` -- :class:`MemoryStore` (one process only);
    * ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``
      (three slashes, then the path; a fourth slash makes it absolute) --
      :class:`SQLiteStore`; ``?busy_timeout=2`` sets how many seconds a call
      waits for another process's write lock (default 5) before it is
      refused with 503;
    * ``redis://[:password@]host[:port][/db]`` or ``rediss://...`` (TLS) --
      :class:`RedisStore`;
    * a SQLAlchemy URL of PostgreSQL or MySQL/MariaDB
      (``postgresql+psycopg://user:password@host/db``,
      ``mysql+pymysql://user:password@host/db``) -- :class:`SQLStore`, with an
      engine of its own (to share the app's, configure ``SQLStore(db.engine)``).

    Nothing is connected or created yet; call :meth:`~IdempotencyStore.ping`
    to check at start-up. Error messages never repeat the URL, which may
    hold a password.
    """
    if not isinstance(url, str) or "://" not in url:
        raise ConfigurationError(f"The idempotency store URL must look like {_EXPECTED}.")
    scheme, rest = url.split("://", 1)
    scheme = scheme.lower()
    if scheme == "memory":
        if rest not in ("", "/"):
            raise ConfigurationError("A memory:// store URL takes nothing after 'memory://'.")
        from bailing_flask.stores.memory import MemoryStore

        return MemoryStore(clock=clock)
    if scheme == "sqlite":
        path, _, query = rest.partition("?")
        from bailing_flask.stores.sqlite import SQLiteStore

        return SQLiteStore(_sqlite_path(path), clock=clock, **_sqlite_options(query))
    if scheme in ("redis", "rediss"):
        from bailing_flask.stores.redis import RedisStore

        return RedisStore(url, clock=clock)
    if scheme.split("+", 1)[0] in _SQL_SCHEMES:
        from bailing_flask.stores.sql import SQLStore

        return SQLStore(url, clock=clock)
    shown = repr(scheme) if _SCHEME_RE.fullmatch(scheme) else "this scheme"
    raise ConfigurationError(
        f"Unsupported idempotency store URL scheme {shown}; use {_EXPECTED}."
    )


def _sqlite_options(query: str) -> dict[str, float]:
    """``busy_timeout=<seconds>``, the one option a sqlite URL takes."""
    if not query:
        return {}
    name, equals, value = query.partition("=")
    if name != "busy_timeout" or not equals or "&" in value:
        raise ConfigurationError("A sqlite store URL takes one option: ?busy_timeout=<seconds>.")
    try:
        return {"busy_timeout": float(value)}
    except ValueError:
        raise ConfigurationError("busy_timeout in a sqlite store URL must be a number of "
                                 "seconds.") from None


def _sqlite_path(rest: str) -> str:
    """The file path of ``sqlite://<rest>``, SQLAlchemy's spelling.

    ``sqlite:///data/x.db`` is relative to the working directory,
    ``sqlite:////var/lib/x.db`` is absolute.
    """
    if not rest.startswith("/"):
        raise ConfigurationError(
            "A sqlite URL has no host: use sqlite:///relative/path.db or "
            "sqlite:////absolute/path.db (three slashes, then the path)."
        )
    if "#" in rest:
        raise ConfigurationError("sqlite store URLs take no fragment.")
    path = unquote(rest[1:])
    if not path or path == ":memory:":
        raise ConfigurationError(
            "The sqlite store URL needs a file path (for an in-memory store use memory://)."
        )
    return path
