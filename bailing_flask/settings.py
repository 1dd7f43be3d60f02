"""Every configuration key, its default and its effect, in one place.

``Bailing.init_app`` applies these with ``app.config.setdefault``, after
any options given to the ``Bailing(...)`` constructor. The documentation's
configuration reference is generated from :data:`SETTINGS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any

__all__ = ["Setting", "SETTINGS", "DEFAULTS", "REMOVED_SETTINGS", "provider_secrets"]

MiB = 1024 * 1024


@dataclass(frozen=True)
class Setting:
    key: str
    default: Any
    doc: str


#: Every ``BAILING_*`` setting with its default and effect, in documentation order.
SETTINGS: tuple[Setting, ...] = (
    Setting("BAILING_SECRETS", None,
            "Provider secret(s) of this tool source in the hub: a string, a list (rotation; "
            "labelled by index) or a mapping label -> secret. `BAILING_SECRET` (one string) is "
            "accepted too. Without one the app still starts, so commands that do not talk to the hub "
            "(`flask routes`, migrations, your own) run, but every signed request is refused with "
            "503 `not_configured` and logged as an error; an empty or malformed secret in a list or "
            "mapping is refused at start-up."),
    Setting("BAILING_WINDOW", 300,
            "Accepted clock difference in seconds for tool calls, exclusive and symmetric "
            "(1-3600). The hub's SDKs use 300."),
    Setting("BAILING_MAX_BODY_SIZE", 10 * MiB,
            "Largest signed request body accepted; larger ones get 413 `body_too_large` "
            "before they are read completely."),
    Setting("BAILING_BODY_TIMEOUT", 10,
            "Seconds a client may take to send a signed request body, or a hub callback's, once "
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
            "`0`: off."),
    Setting("BAILING_SPOOL_THRESHOLD", 1 * MiB,
            "Signed bodies above this size are buffered in a temporary file, not in memory."),
    Setting("BAILING_BASE_URL", None,
            "The base URL this tool source is registered with in the hub, e.g. "
            "`https://shop.example.com/api` or `https://shop.example.com`. From its path the "
            "catalog's tool paths and the path tool calls are verified against are derived, so "
            "the app may be mounted under a prefix the base URL includes or not. Unset: the base "
            "URL is taken to be where the app's root is served (SCRIPT_NAME or "
            "BAILING_PUBLIC_PREFIX). `flask bailing check` prints what to register."),
    Setting("BAILING_PUBLIC_PREFIX", None,
            "The public path prefix in front of the app, when a reverse proxy strips it without "
            "telling the app (no X-Forwarded-Prefix). The catalog fetch signs it (the full "
            "path of the hub's spec_url); tool calls only when BAILING_BASE_URL leaves it out. "
            "Defaults to SCRIPT_NAME."),
    Setting("BAILING_RAW_TARGET", "auto",
            "`auto`: sign the raw request target the server reports (RAW_URI/REQUEST_URI), "
            "else re-encode PATH_INFO. `reconstruct`: always re-encode (when REQUEST_URI was "
            "rewritten upstream)."),
    Setting("BAILING_REQUIRE_SIGNATURE", (),
            "Extra path prefixes on which the middleware refuses unsigned requests outright "
            "(tool routes already refuse them)."),
    Setting("BAILING_CATALOG_PATH", "/.well-known/bailing/tools.json",
            "Where the catalog is served, relative to the application root."),
    Setting("BAILING_PROBE_PATH", "/.well-known/bailing/authz-probe",
            "Where the authorization probe is served and advertised (root "
            "`x-bailing-authz-probe`)."),
    Setting("BAILING_CATALOG_TITLE", None, "`info.title` of the catalog (default: the app's name)."),
    Setting("BAILING_CATALOG_VERSION", "1.0.0", "`info.version` of the catalog."),
    Setting("BAILING_PUBLIC_CATALOG", False,
            "Serve the catalog to unsigned requests too (hub policy `public_allowed`). Off by "
            "default; logs a warning at start-up when on. Tool calls stay signed either way."),
    Setting("BAILING_CSRF_EXEMPT", True,
            "With Flask-WTF's `CSRFProtect` installed (before or after Bailing): skip its token check "
            "for requests that carry a verified hub signature and are routed to a declared tool, and "
            "for the package's own endpoints (the authorization probe and the callbacks the hub POSTs "
            "to, which verify their own signatures). An unsigned browser request to a tool route is "
            "still checked; no view is exempted."),
    Setting("BAILING_AUDIT_ARGUMENT_VALUES", False,
            "Include argument values (not only names) in the audit log of non-sensitive tools."),
    Setting("BAILING_RESPONSE_SIZE_WARNING", 8192,
            "Warn when a successful tool response is longer than this many UTF-16 code units "
            "(the model only reads the first 8192)."),
    Setting("BAILING_RESPONSE_MAX_ITEMS", 50,
            "For tools with a declared `response=` shape: the most items any list in the answer "
            "keeps when the model does not set a `max_length` of its own. The rest are cut and the "
            "cut is named in the answer's `truncated` field. `None` or `0`: no default cap."),
    Setting("BAILING_STORE", None,
            "Idempotency store: a URL (`memory://`, `sqlite:///path.db`, `redis://host:6379/0`, "
            "or a PostgreSQL/MySQL/MariaDB SQLAlchemy URL such as "
            "`postgresql+psycopg://user:password@host/db` or `mysql+pymysql://user:password@host/db`, "
            "whose tables `flask bailing store init` creates), or a store object: "
            "`SQLStore(db.engine)` shares the app's own engine and pool. "
            "Default: a SQLite file `bailing.sqlite3` in the app's instance folder. "
            "`sqlite:///path.db?busy_timeout=2`: seconds a side effect waits for another "
            "process's lock on the file (default 5) before it is refused with 503 "
            "`idempotency_store_unavailable`."),
    Setting("BAILING_IDEMPOTENCY_RETENTION", 24 * 3600,
            "Seconds a completed side effect's response is kept for replays."),
    Setting("BAILING_IDEMPOTENCY_LEASE", 600,
            "Seconds after which an unfinished side effect counts as uncertain (a worker died). "
            "Must exceed the longest tool run time."),
    Setting("BAILING_TRANSACTION", None,
            "The database whose transaction carries the idempotency record of tools in the "
            "transaction mode (exactly once instead of at most once): "
            "`SQLAlchemyTransaction(db)`, `DBAPITransaction(get_db)` (sqlite3, psycopg) from "
            "`bailing_flask.transactional`, or `'sqlalchemy'` for this app's Flask-SQLAlchemy "
            "(a tool chooses the mode with `repeats='transaction'`). "
            "The records go to a table `bailing_idempotency` in that database."),
    Setting("BAILING_IDEMPOTENCY_DEFER_COMPLETION", False,
            "Let a side effect's answer leave before its record is written: the record travels "
            "with the worker's next reservation (SQLite: the same transaction and disk flush; "
            "Redis: the same round trip), or a background thread writes it a few milliseconds "
            "later. One flush or round trip per call instead of two, and a call still never runs "
            "twice; but a worker killed in those milliseconds loses the record, and that call is "
            "then uncertain instead of replayable. Off by default; see the idempotency docs."),
    Setting("BAILING_REJECT_REPLAYS", False,
            "Refuse an exact signature seen twice within the window (reason `replayed`). Off by "
            "default: two identical read calls in the same second legitimately share one."),
    Setting("BAILING_CLIENT_TOKENS", None,
            "Client token(s) of this business in the hub (string, list or mapping), used to "
            "verify callbacks, webhooks and approval requests and to sign tickets and decisions."),
    Setting("BAILING_HUB_URL", None, "Base URL of the hub, for the hub client."),
    Setting("BAILING_CALLBACK_PATH", "/.well-known/bailing/callbacks/job",
            "Where finished-job callbacks (`callback_url`) are received."),
    Setting("BAILING_DELIVERY_PATH", "/.well-known/bailing/callbacks/delivery",
            "Where delivery webhooks are received."),
    Setting("BAILING_APPROVAL_PATH", "/.well-known/bailing/callbacks/approval",
            "Where approval requests are received."),
    Setting("BAILING_CALLBACK_WINDOW_MS", 300_000,
            "Accepted clock difference for callbacks, in milliseconds (exclusive)."),
    Setting("BAILING_CALLBACK_MAX_BODY_SIZE", 4 * MiB,
            "Largest body accepted on the three callback paths, signed or not; larger ones get "
            "413 `body_too_large` before they are read past the limit (chunked uploads too). "
            "The hub's largest POST is a finished job's full record, which carries the `/run` "
            "request (at most 1 MiB at the hub's default) plus the result."),
    Setting("BAILING_APPROVAL_RETENTION", 7 * 24 * 3600,
            "Seconds an approval request this app received (and its decision) is kept in the "
            "store: the window in which the hub may re-run an approved job and a "
            "`business_approval` tool still finds the approval."),
    Setting("BAILING_OTEL", False,
            "Emit an OpenTelemetry span per tool call and the call and refusal metrics through "
            "the global tracer and meter providers (needs the `otel` extra). "
            "`bailing_flask.otel.instrument(app, ...)` does the same with chosen providers."),
    Setting("BAILING_AUDIT_SINK", None,
            "Also write every audit record as one JSON line, off the request path: a "
            "`bailing_flask.audit.JsonLinesSink` (to a file, a stream or a callable), or the path "
            "of a file to append to. The request only queues the record (a full queue drops it, "
            "counted and logged, and never waits); a thread in each worker process writes the "
            "same line the `bailing_flask.audit` logger would log. `None`: no sink."),
)

def provider_secrets(config: Mapping[str, Any]) -> Any:
    """The provider secret(s) configured: ``BAILING_SECRETS``, else its one-string alias
    ``BAILING_SECRET``, else ``None``. Every reader of the secret goes through here."""
    secrets = config.get("BAILING_SECRETS")
    if secrets is None:
        secrets = config.get("BAILING_SECRET")
    return secrets


#: ``key -> default``, applied with ``app.config.setdefault`` by ``init_app``.
DEFAULTS: dict[str, Any] = {setting.key: setting.default for setting in SETTINGS}

#: Settings that are gone, each with what to write instead: ``init_app`` refuses them.
REMOVED_SETTINGS: Mapping[str, str] = {
    "BAILING_TRANSACTIONAL": "declare repeats='transaction' on each tool whose whole effect is in "
                             "the app's database, or tool_defaults(blueprint, "
                             "repeats='transaction') for a blueprint's tools",
}
