"""Every configuration key: what it accepts, its default and its effect, in one place.

The table is :class:`Config`, a frozen dataclass with one field per
``BAILING_*`` key (``window`` is ``BAILING_WINDOW``). ``Bailing.init_app``
builds it once with :func:`load_config` from ``app.config`` over the
options given to ``Bailing(...)`` over these defaults, validating every
value by its type (with pydantic): a value of the wrong type, an unknown
``BAILING_*`` key or a setting that was renamed stops ``init_app`` with a
:class:`~bailing_flask.errors.ConfigurationError` naming each key to fix,
never showing a secret. Nothing reads ``app.config`` after that: the
package reads the frozen object, and later changes to ``app.config`` have
no effect.

Strings are read the way environment variables are written: ``"300"`` is a
number, ``"true"``/``"false"`` (also ``1``/``0``, ``yes``/``no``,
``on``/``off``) a flag, ``"10MiB"`` a size. ``"10MB"`` is refused as
ambiguous rather than guessed.

The documentation's configuration reference is generated from
:data:`SETTINGS`, which is derived from :class:`Config`.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Annotated, Any, Literal, TypeVar, get_args, get_origin, get_type_hints

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PlainValidator,
    Strict,
    TypeAdapter,
    ValidationError,
)

from bailing_flask.errors import ConfigurationError
from bailing_flask.wire.base_url import checked_base_url

__all__ = [
    "Config",
    "Setting",
    "SETTINGS",
    "DEFAULTS",
    "REMOVED_SETTINGS",
    "load_config",
    "CATALOG_NAME",
    "PROBE_NAME",
    "CALLBACK_NAMES",
]

MiB = 1024 * 1024
T = TypeVar("T")

#: Where the package's endpoints are, below ``BAILING_PATH_PREFIX``.
CATALOG_NAME = "/tools.json"
PROBE_NAME = "/authz-probe"
#: callback kind -> its path below ``BAILING_PATH_PREFIX``
CALLBACK_NAMES: Mapping[str, str] = MappingProxyType({
    "job": "/callbacks/job",
    "delivery": "/callbacks/delivery",
    "approval": "/callbacks/approval",
})

#: Settings that are gone (0.1.0 was never released: no shims), each with what to write
#: instead: ``init_app`` refuses them with this text.
REMOVED_SETTINGS: Mapping[str, str] = MappingProxyType({
    "BAILING_CATALOG_PATH": "set BAILING_PATH_PREFIX; the catalog is served at the prefix + "
                            f"'{CATALOG_NAME}'",
    "BAILING_PROBE_PATH": f"set BAILING_PATH_PREFIX; the probe is served at the prefix + '{PROBE_NAME}'",
    "BAILING_CALLBACK_PATH": "set BAILING_PATH_PREFIX; finished jobs are received at the prefix + "
                             f"'{CALLBACK_NAMES['job']}'",
    "BAILING_DELIVERY_PATH": "set BAILING_PATH_PREFIX; deliveries are received at the prefix + "
                             f"'{CALLBACK_NAMES['delivery']}'",
    "BAILING_APPROVAL_PATH": "set BAILING_PATH_PREFIX; approval requests are received at the "
                             f"prefix + '{CALLBACK_NAMES['approval']}'",
    "BAILING_CALLBACK_WINDOW_MS": "set BAILING_WINDOW, in seconds, which applies to the hub's "
                                  "callbacks as well",
    "BAILING_TRANSACTIONAL": "declare repeats='transaction' on each tool whose whole effect is in "
                             "the app's database, or tool_defaults(blueprint, "
                             "repeats='transaction') for a blueprint's tools",
})


# -- what a setting accepts -------------------------------------------------------------------


@dataclass(frozen=True)
class Accepts:
    """What a setting accepts, as the configuration reference shows it (``Annotated`` metadata)."""

    text: str


class _Problem(ValueError):
    """A validator's own message; ``where`` follows the key (``"['label']"`` of a secret)."""

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__(message)
        self.where = where


_DIGITS = re.compile(r"\s*[0-9]+\s*")
_NUMBER = re.compile(r"\s*[0-9]+(\.[0-9]+)?\s*")
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*")
_BINARY_UNITS = {"": 1, "b": 1, "kib": 1024, "mib": MiB, "gib": 1024 * MiB}
_DECIMAL_UNITS = {"k": "KiB", "kb": "KiB", "m": "MiB", "mb": "MiB", "g": "GiB", "gb": "GiB"}
_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


def _quoted(text: str) -> str:
    """A string a message may quote: not a long one (a secret pasted into the wrong key)."""
    text = text.strip()
    return repr(text) if len(text) <= _SHOWN_CHARS else f"a string of {len(text)} characters"


def _whole_text(value: Any) -> Any:
    """``"300"`` -> ``300``; anything else goes on to the strict type check."""
    if isinstance(value, str) and _DIGITS.fullmatch(value):
        return int(value)
    return value


def _number_text(value: Any) -> Any:
    if isinstance(value, str) and _NUMBER.fullmatch(value):
        return float(value)
    return value


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise _Problem("must be a finite number")
    return value


def _size_text(value: Any) -> Any:
    """``"10MiB"``, ``"512 KiB"``, ``"1048576"`` -> bytes; ``"10MB"`` is refused as ambiguous."""
    if not isinstance(value, str):
        return value
    match = _SIZE.fullmatch(value)
    if match is None:
        raise _Problem(f"{_quoted(value)} is not a size (write e.g. 10MiB or 1048576)")
    number, unit = match.group(1), match.group(2).lower()
    if unit in _DECIMAL_UNITS:
        binary = _DECIMAL_UNITS[unit]
        raise _Problem(
            f"{value.strip()!r} is ambiguous (1 MB is 1000000 bytes, 1 MiB is 1048576): "
            f"write {number}{binary} or a number of bytes")
    if unit not in _BINARY_UNITS:
        raise _Problem(f"{_quoted(value)} has an unknown unit (use KiB, MiB or GiB)")
    size = float(number) * _BINARY_UNITS[unit]
    if not size.is_integer():
        raise _Problem(f"{value.strip()!r} is not a whole number of bytes")
    return int(size)


def _flag_text(value: Any) -> Any:
    """``"true"``/``"false"`` and their usual spellings (and ``1``/``0``) -> ``bool``."""
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    elif type(value) is int and value in (0, 1):
        return bool(value)
    return value


def _prefixes_text(value: Any) -> Any:
    """One prefix, or several separated by commas, in a string -> a tuple."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


def _path(value: str) -> str:
    if not value.startswith("/"):
        raise _Problem(f"{_quoted(value)} must start with '/'")
    if any(c in value for c in "<>?#\\") or any(c.isspace() for c in value):
        raise _Problem(f"{_quoted(value)} must be a plain path (no <, >, ?, #, \\ or spaces)")
    return value


def _path_prefix(value: str) -> str:
    return "" if value in ("", "/") else _path(value).rstrip("/")


def _public_prefix(value: str | None) -> str | None:
    if value is None or value == "":
        return value
    return _path(value)


def _prefixes(value: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(_path(prefix) for prefix in value)


def _base_url(value: str | None) -> str | None:
    try:
        return checked_base_url(value)
    except ConfigurationError as exc:
        raise _Problem(str(exc).removeprefix("BAILING_BASE_URL ")) from None


def _secrets(value: Any) -> Any:
    """A string, a list of strings or a mapping label -> string; frozen. Never shows a value."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        pairs = [(label, secret) for label, secret in value.items()]
        frozen: Any = MappingProxyType(dict(pairs))
    elif isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        pairs = list(enumerate(value))
        frozen = tuple(value)
    else:
        raise _Problem(f"must be a string, a list of strings or a mapping label -> string, "
                       f"not {type(value).__name__}")
    for label, secret in pairs:
        where = f"[{str(label)!r}]"
        if not isinstance(secret, str):
            raise _Problem(f"must be a string, not {type(secret).__name__}", where)
        if not secret.strip():
            raise _Problem("is empty: an empty secret would accept forged requests", where)
    return frozen


def _object(value: Any) -> Any:
    """Store and transaction objects: their class is checked at ``init_app`` (``config_check``)."""
    if isinstance(value, (bool, int, float, bytes, list, tuple, dict)):
        raise ValueError("not a URL or an object")  # the message says what is accepted
    return value


def _audit_sink(value: Any) -> Any:
    """A :class:`~bailing_flask.audit.JsonLinesSink` or a path; ``init_app`` makes a path a sink."""
    from bailing_flask._audit_sink import JsonLinesSink  # loaded only when a sink is configured

    if value is None or value == "":
        return None
    if isinstance(value, (JsonLinesSink, str, os.PathLike)):
        return value
    raise ValueError("not a sink or a path")  # the message says what is accepted


def _flask_text(value: Any) -> str:
    return "" if value is None else str(value)


def _flask_root(value: Any) -> str:
    return _flask_text(value).rstrip("/")


_Whole = Annotated[int, BeforeValidator(_whole_text), Strict()]
Window = Annotated[_Whole, Field(ge=1, le=3600), Accepts("whole seconds, 1-3600")]
Count = Annotated[_Whole, Field(ge=0), Accepts("a whole number (0 or None: off)")]
Size = Annotated[int, BeforeValidator(_size_text), Strict(), Field(ge=0),
                 Accepts("bytes: a whole number, or a size such as `10MiB` (KiB, MiB, GiB)")]
Seconds = Annotated[float, BeforeValidator(_number_text), Strict(), AfterValidator(_finite), Field(gt=0),
                    Accepts("seconds, more than 0")]
Timeout = Annotated[float, BeforeValidator(_number_text), Strict(), AfterValidator(_finite),
                    Field(ge=0, le=3600), Accepts("seconds, 0-3600 (0 or None: off)")]
Flag = Annotated[bool, BeforeValidator(_flag_text), Strict(),
                 Accepts("`True` or `False` (or `\"true\"`/`\"false\"`, `1`/`0`, yes/no, on/off)")]
Text = Annotated[str, Strict(), Accepts("a string")]
OptionalText = Annotated[str | None, Strict(), Accepts("a string or None")]
SecretsValue = Annotated[str | tuple[str, ...] | Mapping[str, str] | None, PlainValidator(_secrets),
                    Accepts("a string, a list of strings or a mapping label -> string")]
PathPrefix = Annotated[str, Strict(), AfterValidator(_path_prefix),
                       Accepts("a path starting with `/` (`\"\"`: the application root)")]
PublicPrefix = Annotated[str | None, Strict(), AfterValidator(_public_prefix),
                         Accepts("a path starting with `/`, or None")]
Prefixes = Annotated[tuple[Annotated[str, Strict()], ...], BeforeValidator(_prefixes_text),
                     AfterValidator(_prefixes),
                     Accepts("a list of paths starting with `/` (a string: comma-separated)")]
BaseURL = Annotated[str | None, Strict(), AfterValidator(_base_url),
                    Accepts("an absolute http(s) URL, or None")]
URL = Annotated[str | None, Strict(), Accepts("an absolute http(s) URL, or None")]
RawTarget = Annotated[Literal["auto", "reconstruct"], Accepts("`\"auto\"` or `\"reconstruct\"`")]
StoreValue = Annotated[object, PlainValidator(_object),
                       Accepts("a store URL (`memory://`, `sqlite:///...`, `redis://...`, "
                               "`postgresql+psycopg://...`, ...), an `IdempotencyStore` such as "
                               "`SQLStore(db.engine)`, or None")]
TransactionValue = Annotated[object, PlainValidator(_object),
                             Accepts("`SQLAlchemyTransaction(db)`, `DBAPITransaction(get_db)`, "
                                     "`\"sqlalchemy\"`, or None")]
AuditSinkValue = Annotated[object, PlainValidator(_audit_sink),
                           Accepts("a `bailing_flask.audit.JsonLinesSink`, the path of a file to "
                                   "append to, or None")]
_FlaskText = Annotated[str, PlainValidator(_flask_text)]
_FlaskRoot = Annotated[str, PlainValidator(_flask_root)]


def setting(default: T, doc: str, *, secret: bool = False) -> T:
    """One row of the table: the default and the effect of a ``BAILING_*`` key."""
    return field(default=default, metadata={"doc": doc, "secret": secret})


def _from_flask(key: str, default: str) -> str:
    """A value of Flask's own configuration the package needs, read at ``init_app`` too."""
    return field(default=default, metadata={"flask": key})


# -- the table -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Config:
    """One app's configuration, read once at ``init_app``; attribute ``window`` is ``BAILING_WINDOW``.

    Frozen: ``dataclasses.replace`` makes a changed copy (the test fixtures
    do, for ``BAILING_HUB_URL``). Its ``repr`` never shows a secret.
    """

    secrets: SecretsValue = setting(
        None, "Provider secret(s) of this tool source in the hub: a string, a list (rotation; "
        "labelled by index) or a mapping label -> secret. `BAILING_SECRET` (one string) is "
        "accepted too. Without one the app still starts, so commands that do not talk to the hub "
        "(`flask routes`, migrations, your own) run, but every signed request is refused with "
        "503 `not_configured` and logged as an error; an empty or malformed secret in a list or "
        "mapping is refused at start-up.", secret=True)
    window: Window = setting(
        300, "Accepted clock difference in seconds, exclusive and symmetric, for tool calls and "
        "catalog fetches (seconds on the wire) and for the hub's callbacks, deliveries and "
        "approval requests (milliseconds on the wire). The hub's SDKs use 300 for both.")
    max_body_size: Size = setting(
        10 * MiB, "Largest signed request body accepted; larger ones get 413 `body_too_large` "
        "before they are read completely. The app's own `MAX_CONTENT_LENGTH` still applies "
        "below it: a tool's body over it gets Flask's 413 before the authorizer runs.")
    body_timeout: Timeout | None = setting(
        10, "Seconds a client may take to send a signed request body, or a hub callback's, once "
        "the middleware has begun to read it (a slow client sending a byte at a time holds a "
        "worker thread otherwise). Past it the connection's read side is shut and the "
        "request refused with 408 `body_timeout`. Enforced on gunicorn and Werkzeug's "
        "server, which hand the connection to the app; waitress reads the whole body before "
        "the app runs, and uWSGI has `--socket-timeout`. After a refusal made before the body "
        "was read (413 `body_too_large`, a bad header), the rest of a body declared at most "
        "four times the limit is read and dropped once the answer is sent, for at most this "
        "many seconds, so that the hub sees the answer rather than a reset (gunicorn, "
        "uWSGI, wsgiref); Werkzeug's server drains by itself and stops one second later (or "
        "after this many seconds, if fewer). Keep it below gunicorn's `--timeout`. `None` or "
        "`0`: off.")
    spool_threshold: Size = setting(
        1 * MiB, "Signed bodies above this size are buffered in a temporary file, not in memory.")
    base_url: BaseURL = setting(
        None, "The base URL this tool source is registered with in the hub, e.g. "
        "`https://shop.example.com/api` or `https://shop.example.com`. From its path the "
        "catalog's tool paths and the path tool calls are verified against are derived, so "
        "the app may be mounted under a prefix the base URL includes or not. Unset: the base "
        "URL is taken to be where the app's root is served (SCRIPT_NAME or "
        "BAILING_PUBLIC_PREFIX). `flask bailing check` prints what to register.")
    public_prefix: PublicPrefix = setting(
        None, "The public path prefix in front of the app, when a reverse proxy strips it without "
        "telling the app (no X-Forwarded-Prefix). The catalog fetch signs it (the full "
        "path of the hub's spec_url); tool calls only when BAILING_BASE_URL leaves it out. "
        "Defaults to SCRIPT_NAME.")
    raw_target: RawTarget = setting(
        "auto", "`auto`: sign the raw request target the server reports (RAW_URI/REQUEST_URI), "
        "else re-encode PATH_INFO. `reconstruct`: always re-encode (when REQUEST_URI was "
        "rewritten upstream).")
    require_signature: Prefixes = setting(
        (), "Extra path prefixes on which the middleware refuses unsigned requests outright "
        "(tool routes already refuse them).")
    path_prefix: PathPrefix = setting(
        "/.well-known/bailing", "Where the package's endpoints are served, relative to the "
        f"application root: the catalog at `{CATALOG_NAME}` below it, the authorization probe "
        f"at `{PROBE_NAME}` (advertised in the catalog's root `x-bailing-authz-probe`), and "
        f"the hub's POSTs at `{CALLBACK_NAMES['job']}` (finished jobs, `callback_url`), "
        f"`{CALLBACK_NAMES['delivery']}` (delivery webhooks) and "
        f"`{CALLBACK_NAMES['approval']}` (approval requests).")
    catalog_title: OptionalText = setting(
        None, "`info.title` of the catalog (default: the app's name).")
    catalog_version: Text = setting("1.0.0", "`info.version` of the catalog.")
    public_catalog: Flag = setting(
        False, "Serve the catalog to unsigned requests too (hub policy `public_allowed`). Off by "
        "default; logs a warning at start-up when on. Tool calls stay signed either way.")
    csrf_exempt: Flag = setting(
        True, "With Flask-WTF's `CSRFProtect` installed (before or after Bailing): skip its token "
        "check for requests that carry a verified hub signature and are routed to a declared tool, "
        "and for the package's own endpoints (the authorization probe and the callbacks the hub "
        "POSTs to, which verify their own signatures). An unsigned browser request to a tool "
        "route is still checked; no view is exempted.")
    audit_argument_values: Flag = setting(
        False, "Include argument values (not only names) in the audit log of non-sensitive tools.")
    response_size_warning: Count | None = setting(
        8192, "Warn when a successful tool response is longer than this many UTF-16 code units "
        "(the model only reads the first 8192).")
    response_max_items: Count | None = setting(
        50, "For tools with a declared `response=` shape: the most items any list in the answer "
        "keeps when the model does not set a `max_length` of its own. The rest are cut and the "
        "cut is named in the answer's `truncated` field. `None` or `0`: no default cap.")
    store: StoreValue = setting(
        None, "Idempotency store: a URL (`memory://`, `sqlite:///path.db`, `redis://host:6379/0`, "
        "or a PostgreSQL/MySQL/MariaDB SQLAlchemy URL such as "
        "`postgresql+psycopg://user:password@host/db` or `mysql+pymysql://user:password@host/db`, "
        "whose tables `flask bailing store init` creates), or a store object: "
        "`SQLStore(db.engine)` shares the app's own engine and pool. "
        "Default: a SQLite file `bailing.sqlite3` in the app's instance folder. "
        "`sqlite:///path.db?busy_timeout=2`: seconds a side effect waits for another "
        "process's lock on the file (default 5) before it is refused with 503 "
        "`idempotency_store_unavailable`.")
    idempotency_retention: Seconds = setting(
        24 * 3600, "Seconds a completed side effect's response is kept for replays. At least "
        "twice `BAILING_WINDOW` (a shorter one does not start): a signed request verifies for up "
        "to twice the window after it arrives, and a replay of it must find its record.")
    idempotency_lease: Seconds = setting(
        600, "Seconds after which an unfinished side effect counts as uncertain (a worker died). "
        "Must exceed the longest tool run time.")
    transaction: TransactionValue = setting(
        None, "The database whose transaction carries the idempotency record of tools in the "
        "transaction mode (exactly once instead of at most once): "
        "`SQLAlchemyTransaction(db)`, `DBAPITransaction(get_db)` (sqlite3, psycopg) from "
        "`bailing_flask.transactional`, or `'sqlalchemy'` for this app's Flask-SQLAlchemy "
        "(a tool chooses the mode with `repeats='transaction'`). "
        "The records go to a table `bailing_idempotency` in that database.")
    idempotency_defer_completion: Flag = setting(
        False, "Let a side effect's answer leave before its record is written: the record travels "
        "with the worker's next reservation (SQLite: the same transaction and disk flush; "
        "Redis: the same round trip), or a background thread writes it a few milliseconds "
        "later. One flush or round trip per call instead of two, and a call still never runs "
        "twice; but a worker killed in those milliseconds loses the record, and that call is "
        "then uncertain instead of replayable. Off by default; see the idempotency docs.")
    reject_replays: Flag = setting(
        False, "Refuse an exact signature seen twice within the window (reason `replayed`). Off "
        "by default: two identical read calls in the same second legitimately share one.")
    client_tokens: SecretsValue = setting(
        None, "Client token(s) of this business in the hub (string, list or mapping), used to "
        "verify callbacks, webhooks and approval requests and to sign tickets and decisions.",
        secret=True)
    hub_url: URL = setting(None, "Base URL of the hub, for the hub client.")
    callback_max_body_size: Size = setting(
        4 * MiB, "Largest body accepted on the three callback paths, signed or not; larger ones "
        "get 413 `body_too_large` before they are read past the limit (chunked uploads too). "
        "The hub's largest POST is a finished job's full record, which carries the `/run` "
        "request (at most 1 MiB at the hub's default) plus the result.")
    approval_retention: Seconds = setting(
        7 * 24 * 3600, "Seconds an approval request this app received (and its decision) is kept "
        "in the store: the window in which the hub may re-run an approved job and a "
        "`business_approval` tool still finds the approval.")
    otel: Flag = setting(
        False, "Emit an OpenTelemetry span per tool call and the call and refusal metrics through "
        "the global tracer and meter providers (needs the `otel` extra). "
        "`bailing_flask.otel.instrument(app, ...)` does the same with chosen providers.")
    audit_sink: AuditSinkValue = setting(
        None, "Also write every audit record as one JSON line, off the request path: a "
        "`bailing_flask.audit.JsonLinesSink` (to a file, a stream or a callable), or the path "
        "of a file to append to. The request only queues the record (a full queue drops it, "
        "counted and logged, and never waits); a thread in each worker process writes the "
        "same line the `bailing_flask.audit` logger would log. `None`: no sink.")
    #: Flask's ``APPLICATION_ROOT`` without a trailing ``/`` (where the CLI assumes the app is mounted)
    application_root: _FlaskRoot = _from_flask("APPLICATION_ROOT", "")
    #: Flask-WTF's ``WTF_CSRF_FIELD_NAME`` (left out of a human's form arguments)
    csrf_field_name: _FlaskText = _from_flask("WTF_CSRF_FIELD_NAME", "csrf_token")
    #: Flask's ``PREFERRED_URL_SCHEME`` (the scheme the hub simulator's in-process requests default to)
    preferred_url_scheme: _FlaskText = _from_flask("PREFERRED_URL_SCHEME", "http")

    # -- derived --------------------------------------------------------------------------

    @property
    def catalog_path(self) -> str:
        """Where the catalog is served, relative to the application root."""
        return self.path_prefix + CATALOG_NAME

    @property
    def probe_path(self) -> str:
        """Where the authorization probe is served and advertised."""
        return self.path_prefix + PROBE_NAME

    def callback_path(self, kind: str) -> str:
        """Where the hub's POSTs of ``kind`` (``job``, ``delivery``, ``approval``) are received."""
        return self.path_prefix + CALLBACK_NAMES[kind]

    @property
    def callback_paths(self) -> tuple[str, ...]:
        return tuple(self.path_prefix + name for name in CALLBACK_NAMES.values())

    @property
    def own_paths(self) -> frozenset[str]:
        """The paths of the package's own endpoints: catalog, probe and callbacks."""
        return frozenset((self.catalog_path, self.probe_path, *self.callback_paths))

    def __repr__(self) -> str:
        shown = []
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            shown.append(f"{item.name}={_shown(item.name, value)}")
        return f"Config({', '.join(shown)})"


@dataclass(frozen=True)
class Setting:
    """One ``BAILING_*`` key as the configuration reference lists it."""

    key: str
    default: Any
    doc: str
    #: what it accepts (the reference's "Type" column)
    type: str
    #: never shown: only labels and lengths
    secret: bool = False

    @property
    def name(self) -> str:
        """The attribute of :class:`Config` (and the ``Bailing(...)`` keyword)."""
        return self.key.removeprefix("BAILING_").lower()


def _accepts(annotation: Any) -> str:
    """The ``Accepts`` text in an ``Annotated`` type (or its ``| None``)."""
    optional = False
    if get_origin(annotation) is not Annotated:
        parts = [a for a in get_args(annotation) if a is not type(None)]
        optional = len(parts) < len(get_args(annotation))
        annotation = parts[0]
    for meta in reversed(get_args(annotation)[1:]):
        if isinstance(meta, Accepts):
            text = meta.text
            return text + " or None" if optional and "None" not in text else text
    raise TypeError(f"no Accepts() in {annotation!r}")  # pragma: no cover - the table's own test


def _table() -> tuple[Setting, ...]:
    hints = get_type_hints(Config, include_extras=True)
    return tuple(
        Setting("BAILING_" + item.name.upper(), item.default, item.metadata["doc"],
                _accepts(hints[item.name]), item.metadata["secret"])
        for item in dataclasses.fields(Config) if "doc" in item.metadata
    )


#: Every ``BAILING_*`` setting with its default, what it accepts and its effect, in documentation order.
SETTINGS: tuple[Setting, ...] = _table()
#: ``key -> default``.
DEFAULTS: Mapping[str, Any] = MappingProxyType({s.key: s.default for s in SETTINGS})
_BY_KEY: Mapping[str, Setting] = MappingProxyType({s.key: s for s in SETTINGS})
#: The one-string spelling of ``BAILING_SECRETS``, accepted when that is not set.
SECRET_ALIAS = "BAILING_SECRET"
_FLASK_KEYS = {item.name: item.metadata["flask"] for item in dataclasses.fields(Config)
               if "flask" in item.metadata}


# -- building it ------------------------------------------------------------------------------

_adapter: TypeAdapter[Config] | None = None
_adapter_lock = threading.Lock()


def _validator() -> TypeAdapter[Config]:
    """Built on the first ``init_app`` (not at import: most imports never configure an app)."""
    global _adapter
    if _adapter is None:
        with _adapter_lock:
            if _adapter is None:
                _adapter = TypeAdapter(Config)
    return _adapter


def option_key(name: str) -> str:
    """The setting a ``Bailing(...)`` keyword stands for; refuses unknown and renamed ones."""
    key = "BAILING_" + name.upper()
    if key in REMOVED_SETTINGS:
        raise ConfigurationError(f"Bailing option {name!r} is removed: {REMOVED_SETTINGS[key]}")
    if key not in _BY_KEY and key != SECRET_ALIAS:
        nearest = difflib.get_close_matches(name, [s.name for s in SETTINGS], n=1, cutoff=0.6)
        hint = f"; did you mean {nearest[0]}=?" if nearest else ""
        raise ConfigurationError(f"unknown Bailing option {name!r} (no setting {key}){hint}")
    return key


def _key_problems(config: Mapping[str, Any]) -> list[str]:
    problems = []
    known = sorted([*_BY_KEY, SECRET_ALIAS])
    for key in sorted(k for k in config if isinstance(k, str) and k.startswith("BAILING_")):
        if key in REMOVED_SETTINGS:
            problems.append(f"{key} is removed: {REMOVED_SETTINGS[key]}")
        elif key not in _BY_KEY and key != SECRET_ALIAS:
            nearest = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            hint = f"; did you mean {nearest[0]}?" if nearest else "; see the configuration reference"
            problems.append(f"{key} is not a bailing_flask setting{hint}")
    return problems


def load_config(config: Mapping[str, Any], options: Mapping[str, Any] | None = None) -> Config:
    """The validated configuration: ``config`` (``app.config``) over ``options`` over the defaults.

    ``options`` holds ``BAILING_*`` keys too (see :func:`option_key`).

    :raises ConfigurationError: listing every problem, each naming its key
        (and the ``Bailing(...)`` keyword when the value came from one).
    """
    options = options or {}
    problems = _key_problems(config)
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for s in SETTINGS:
        if s.key in config:
            values[s.name], origin[s.name] = config[s.key], s.key
        elif s.key in options:
            values[s.name], origin[s.name] = options[s.key], f"{s.key} (Bailing({s.name}=...))"
    if values.get("secrets") is None:
        for source, label in ((config, SECRET_ALIAS), (options, f"{SECRET_ALIAS} (Bailing(secret=...))")):
            if source.get(SECRET_ALIAS) is not None:
                values["secrets"], origin["secrets"] = source[SECRET_ALIAS], label
                if not isinstance(values["secrets"], str):
                    problems.append(f"{label} must be one string (several: BAILING_SECRETS)")
                break
    for name, key in _FLASK_KEYS.items():
        if config.get(key) is not None:
            values[name] = config[key]
    if not problems:
        try:
            built = _validator().validate_python(values)
        except ValidationError as exc:
            problems.extend(_messages(exc, values, origin))
        else:
            return built
    raise ConfigurationError("; ".join(problems) if len(problems) == 1
                             else "the configuration has problems:\n  " + "\n  ".join(problems))


def _messages(exc: ValidationError, values: Mapping[str, Any], origin: Mapping[str, str]
              ) -> list[str]:
    messages: dict[str, str] = {}
    for error in exc.errors(include_url=False, include_input=False):
        name = str(error["loc"][0]) if error["loc"] else ""
        if name in messages:
            continue  # one message per key (a union reports each of its branches)
        setting = _BY_KEY.get("BAILING_" + name.upper())
        where = origin.get(name, "BAILING_" + name.upper())
        raised = (error.get("ctx") or {}).get("error")
        if isinstance(raised, _Problem):  # its message shows what it may of the value
            message = f"{where}{raised.where} {raised}"
        else:
            accepts = setting.type if setting is not None else "valid"
            message = f"{where} must be {_plain(accepts)}"
            if not (setting is not None and setting.secret):
                message += f" (got {_shown(name, values.get(name))})"
        messages[name] = message
    return list(messages.values())


def _plain(text: str) -> str:
    return text.replace("`", "")


_SECRET_NAMES = frozenset(item.name for item in dataclasses.fields(Config)
                          if item.metadata.get("secret"))


_SHOWN_CHARS = 24


def _shown(name: str, value: Any) -> str:
    """A value as a message may show it: secrets never, URLs without credentials or query, and
    no long string (a secret pasted into the wrong key)."""
    if name in _SECRET_NAMES:
        if value is None:
            return "None"
        count = 1 if isinstance(value, str) else len(value) if hasattr(value, "__len__") else 0
        return f"<{count} secret{'s' if count != 1 else ''}>"
    if isinstance(value, str) and "://" in value:
        scheme, rest = value.split("://", 1)
        host = rest.split("/", 1)[0].rsplit("@", 1)[-1].split("?", 1)[0]
        return repr(f"{scheme[:20]}://{host[:80]}" + ("/..." if "/" in rest.split("?", 1)[0] else ""))
    if isinstance(value, str):
        return _quoted(value)
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    return f"a {type(value).__name__}"  # what a container holds may be a secret
