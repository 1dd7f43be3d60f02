"""``BailingMiddleware``: verify hub signatures below any WSGI application.

Verification happens here, under Flask, for three reasons: the signature covers the raw body, which a framework may already have
consumed or re-parsed; the signed path is the raw request target, which
frameworks decode; and a refusal must not be swallowable by another
extension's error handler. A request without ``X-Bailing-Signature`` passes
through untouched, so a legacy application keeps working; a request that
carries one is verified, always, and never reaches the app when it fails.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Iterable, Sequence
from typing import IO, TYPE_CHECKING, Any, Literal, NamedTuple
from urllib.parse import unquote_to_bytes

from bailing_flask.wire import deadline as _deadline
from bailing_flask.wire import drain as _drain
from bailing_flask.wire.body import BodyParts, read_body_parts
from bailing_flask.wire.digest import sha256_hex
from bailing_flask.wire.base_url import BaseURL, parse_base_url, strip_base
from bailing_flask.wire.jsenc import encode_uri_component
from bailing_flask.wire.headers import with_content_length
from bailing_flask.errors import ConfigurationError, SignatureError
from bailing_flask.wire.signing import Clock, Secrets, Verifier, _check_window

if TYPE_CHECKING:  # pragma: no cover
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

__all__ = [
    "ENVIRON_KEY",
    "AS_VERIFIED_KEY",
    "AFTER_CALL_KEY",
    "AsVerified",
    "altered_part",
    "DEFAULT_CATALOG_PATH",
    "BailingMiddleware",
    "VerifiedCall",
    "UnsignedHeaders",
    "ErrorRenderer",
    "RefusalListener",
]

logger = logging.getLogger("bailing_flask")

#: Where the verified call is stored in the WSGI environ (``None`` when unsigned).
ENVIRON_KEY = "bailing.call"
#: Where the request as it was when verified is stored (see :class:`AsVerified`).
AS_VERIFIED_KEY = "bailing.as_verified"
#: A list of functions a verified call registered to run once the app is done with it
#: (answered or raised); the middleware runs them after the app returns.
AFTER_CALL_KEY = "bailing.after_call"
DEFAULT_CATALOG_PATH = "/.well-known/bailing/tools.json"
MiB = 1024 * 1024

#: Renders a refusal: returns ``(status, headers, body)``; ``None`` keeps the default.
ErrorRenderer = Callable[[SignatureError], "tuple[int, list[tuple[str, str]], bytes] | None"]
#: Told about every refusal: ``(error, environ, path)`` (audit, signals, metrics).
RefusalListener = Callable[[SignatureError, "dict[str, Any]", str], None]

#: ``tuple.__new__``: builds a named tuple from a tuple without a Python call
_new_tuple: Any = tuple.__new__

_STATUS_TEXT = {400: "400 Bad Request", 401: "401 Unauthorized", 408: "408 Request Timeout",
                422: "422 Unprocessable Content",
                413: "413 Content Too Large", 415: "415 Unsupported Media Type",
                503: "503 Service Unavailable"}


def secrets_missing(secrets: Secrets | None) -> bool:
    """No secret at all (``None``, ``""``, an empty list or mapping): not configured yet.

    A configured but unusable secret (``[""]``, a number) is a different
    thing, a mistake, and still refused at start-up.
    """
    if secrets is None:
        return True
    if isinstance(secrets, str):
        return not secrets
    try:
        return len(secrets) == 0
    except TypeError:
        return False


class UnsignedHeaders(NamedTuple):
    """Hub headers that are *not* covered by the signature.

    Anyone who captured one signed request can change these within the
    window: record them, correlate with them, never authorize on them.
    """

    client: str | None = None
    tool_scope: str | None = None
    idempotency_key: str | None = None
    conversation: str | None = None


class VerifiedCall(NamedTuple):
    """A request whose hub signature was verified; immutable.

    ``subject`` and ``job_id`` are signed and can be trusted; everything in
    :attr:`unsigned` cannot. (A named tuple: it is built on every signed
    request, and that is the cheapest immutable record Python has.)
    """

    #: ``"tool"`` (tool call or authz probe) or ``"catalog"`` (catalog fetch).
    kind: Literal["tool", "catalog"]
    #: The signed ``X-Bailing-On-Behalf-Of``; ``None`` for an anonymous call.
    subject: str | None
    #: The signed ``X-Bailing-Job-Id`` (``""`` when absent or empty).
    job_id: str
    #: Label of the secret that matched (index or mapping key, never the secret).
    key_label: str
    #: The signed Unix timestamp (seconds), as sent.
    timestamp: str
    method: str
    #: The path+query that was signed (after the base_url prefix rules).
    signed_path: str
    body_sha256: str
    #: The signature header itself (public on the wire; kept for replay checks).
    signature: str
    unsigned: UnsignedHeaders = UnsignedHeaders()

    @property
    def identity(self) -> str:
        """A digest of everything the signature covers except the timestamp.

        Two requests with the same identity are the same call: same method,
        path+query, body, subject and job. Used to de-duplicate side effects
        on signed material only (the idempotency header is unsigned).
        """
        material = "\n".join(
            (self.method, self.signed_path, self.body_sha256, self.subject or "", self.job_id)
        )
        return sha256_hex(material.encode("utf-8"))


class AsVerified(NamedTuple):
    """The routing-relevant parts of the environ at the moment of verification.

    A WSGI middleware installed between the verifier and the app (a method
    override, a path rewrite, a body filter) could change the request after
    its signature was checked; the gate compares these with what is routed.
    """

    #: ``REQUEST_METHOD`` that was signed.
    method: str
    #: The raw path that was verified, relative to the app (still percent-encoded).
    raw_path: str
    #: ``QUERY_STRING`` that was signed.
    query: str
    #: ``CONTENT_LENGTH`` handed to the app.
    content_length: str | None
    #: The body stream handed to the app.
    stream: Any


def _quote_path(decoded: str) -> str:
    """Re-encode a WSGI (latin-1 decoded, percent-decoded) path segment by segment.

    Exact for every value the hub sends except an encoded ``/`` (``%2F``),
    which WSGI has already turned into a separator.
    """
    raw = decoded.encode("latin-1", "replace").decode("utf-8", "surrogateescape")
    parts = []
    for segment in raw.split("/"):
        try:
            parts.append(encode_uri_component(segment))
        except ValueError:  # bytes that were not UTF-8
            parts.append(
                "".join(
                    f"%{ord(ch) - 0xDC00:02X}" if 0xDC80 <= ord(ch) <= 0xDCFF else encode_uri_component(ch)
                    for ch in segment
                )
            )
    return "/".join(parts)


def _raw_path(environ: dict[str, Any], raw_target: str) -> str:
    """The request path relative to the application, still percent-encoded."""
    raw: str | None = (
        (environ.get("RAW_URI") or environ.get("REQUEST_URI")) if raw_target == "auto" else None
    )
    if not raw:
        return _quote_path(environ.get("PATH_INFO", "") or "/")
    cut = raw.find("?")
    path = raw if cut < 0 else raw[:cut]
    if "#" in path:
        path = path[: path.find("#")]
    if path[:1] != "/":
        lowered = path[:8].lower()
        if lowered.startswith("http://") or lowered.startswith("https://"):
            # absolute-form request target: drop scheme and authority
            slash = path.find("/", path.find("//") + 2)
            path = path[slash:] if slash >= 0 else "/"
    script = environ.get("SCRIPT_NAME")
    if script:
        mount = _quote_path(script)
        if path == mount or path.startswith(mount + "/"):
            path = path[len(mount) :] or "/"
    return path


def _routed_path(environ: dict[str, Any]) -> str:
    """``PATH_INFO`` as Flask routes it: leading slashes collapse into one."""
    path: str = environ.get("PATH_INFO") or "/"
    return "/" + path.lstrip("/") if path.startswith("//") else path


def _prefix_matches(path: str, prefix: str) -> bool:
    prefix = prefix.rstrip("/")
    return path == prefix or path.startswith(prefix + "/")


def mount_prefix(environ: dict[str, Any], public_prefix: str | None) -> str:
    """The public path in front of the application, percent-encoded, no trailing ``/``.

    ``BAILING_PUBLIC_PREFIX`` when set (a proxy strips the prefix without
    telling the app), else ``SCRIPT_NAME``.
    """
    if public_prefix is not None:
        return public_prefix.rstrip("/")
    return _quote_path(environ.get("SCRIPT_NAME", "")).rstrip("/")


class BailingMiddleware:
    """Verify BailingHub's signed requests in front of a WSGI application.

    :param app: the WSGI application to protect.
    :param secrets: provider secret(s) of this tool source in the hub.
        Several are accepted at once for rotation.
    :param window: accepted clock difference in seconds (exclusive,
        symmetric, default 300 like the hub's SDKs).
    :param max_body_size: larger signed bodies are refused with 413.
    :param spool_threshold: signed bodies above this size are spooled to a
        temporary file instead of memory.
    :param catalog_path: the catalog's path relative to the application
        (verified with the full public path and an empty subject and job,
        as the hub signs its fetch); ``None`` if this app serves no catalog.
    :param public_prefix: the public path in front of the application.
        Defaults to ``SCRIPT_NAME``; set it when a proxy strips the prefix
        without telling the app (no ``X-Forwarded-Prefix``).
    :param require_signature: path prefixes (relative to the app) on which
        unsigned requests are refused, for applications that are not Flask.
    :param raw_target: ``"auto"`` signs the raw request target the server
        reports (``RAW_URI``/``REQUEST_URI``) and falls back to re-encoding
        ``PATH_INFO``; ``"reconstruct"`` always re-encodes, for servers whose
        ``REQUEST_URI`` was rewritten upstream.
    :param error_renderer: restyles refusals; receives the
        :class:`~bailing_flask.errors.SignatureError`.
    :param on_refuse: called with the error, the environ and the path of
        every refused request, before the refusal is answered (the Flask
        extension audits it and sends a signal); its exceptions are logged,
        never raised.
    :param verified_elsewhere: exact paths whose signature uses another
        scheme (the hub's callbacks: client token, milliseconds); they pass
        through and the endpoint verifies them itself, but their bodies are
        bounded here first, signed or not.
    :param elsewhere_max_body_size: the largest body accepted on those
        paths; larger ones get 413 ``body_too_large`` before they are read
        past the limit (chunked uploads included).
    :param body_timeout: seconds a client may take to send a body the
        middleware reads (signed requests, hub callbacks) once the read has
        begun; past it the read side of the connection is shut down and the
        request refused with ``408 body_timeout``. Needs a server that hands
        out the connection (gunicorn, Werkzeug). A request refused before
        its body was read gets its answer first; then the rest of the body
        is read and dropped for at most ``body_timeout`` (no more than four
        times the limit: :mod:`bailing_flask.wire.drain`), or on Werkzeug's
        server, which drains by itself, the read side is shut after a
        one-second linger. ``None`` or ``0`` turns all of it off.
    :param clock: current Unix time (tests).
    :param base_url: the base URL this tool source is registered with in
        the hub (``BAILING_BASE_URL``). Tool calls are then verified against
        the public path (mount prefix + path) minus its path, so both an
        origin base URL and one with the prefix work; ``None`` verifies
        relative to the application, i.e. assumes the base URL is where the
        application's root is served.
    :param missing_secret: what to do when ``secrets`` is empty or ``None``.
        ``"raise"`` (the default) refuses to build the middleware;
        ``"refuse"`` builds it, logs an error, and answers every signed
        request ``503 not_configured`` until a secret is configured, so an
        application whose commands do not need the hub (``flask routes``,
        migrations) still starts. Unsigned requests pass through as usual.
    """

    def __init__(
        self,
        app: WSGIApplication,
        secrets: Secrets | None,
        *,
        window: int = 300,
        max_body_size: int = 10 * MiB,
        spool_threshold: int = 1 * MiB,
        catalog_path: str | None = DEFAULT_CATALOG_PATH,
        public_prefix: str | None = None,
        require_signature: Sequence[str] = (),
        raw_target: Literal["auto", "reconstruct"] = "auto",
        error_renderer: ErrorRenderer | None = None,
        on_refuse: RefusalListener | None = None,
        verified_elsewhere: Sequence[str] = (),
        elsewhere_max_body_size: int = 4 * MiB,
        body_timeout: float | None = 10.0,
        clock: Clock = time.time,
        setting: str = "BAILING_SECRETS",
        base_url: str | None = None,
        missing_secret: Literal["raise", "refuse"] = "raise",
    ) -> None:
        self.app = app
        self.base_url: BaseURL | None = parse_base_url(base_url, setting="base_url")
        self.setting = setting
        self.verifier: Verifier | None
        if missing_secret not in ("raise", "refuse"):
            raise ConfigurationError("missing_secret must be 'raise' or 'refuse'.")
        if missing_secret == "refuse" and secrets_missing(secrets):
            logger.error(
                "bailing: %s is not set: every request signed by BailingHub will be refused with "
                "503 not_configured until it holds the tool source's provider secret", setting,
            )
            _check_window(window, "window", 3600)
            self.verifier = None
        else:
            self.verifier = Verifier(secrets, window=window, clock=clock, setting=setting)
        if max_body_size < 0 or spool_threshold < 0 or elsewhere_max_body_size < 0:
            raise ConfigurationError(
                "max_body_size, spool_threshold and elsewhere_max_body_size must not be negative."
            )
        if raw_target not in ("auto", "reconstruct"):
            raise ConfigurationError("raw_target must be 'auto' or 'reconstruct'.")
        if public_prefix is not None and public_prefix not in ("",) and not public_prefix.startswith("/"):
            raise ConfigurationError("public_prefix must be empty or start with '/'.")
        self.body_timeout = _check_body_timeout(body_timeout)
        self.max_body_size = max_body_size
        self.spool_threshold = spool_threshold
        self.catalog_path = catalog_path
        self.public_prefix = public_prefix.rstrip("/") if public_prefix else public_prefix
        self.require_signature = tuple(require_signature)
        self.raw_target = raw_target
        self.error_renderer = error_renderer
        self.on_refuse = on_refuse
        self.verified_elsewhere = frozenset(verified_elsewhere)
        self.elsewhere_max_body_size = elsewhere_max_body_size

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        elsewhere = self.verified_elsewhere
        if elsewhere:
            routed = environ.get("PATH_INFO") or "/"  # as _routed_path, inlined: every request
            if routed[:2] == "//":
                routed = "/" + routed.lstrip("/")
            if routed in elsewhere:
                return self._pass_elsewhere(environ, start_response)
        signature = environ.get("HTTP_X_BAILING_SIGNATURE")
        if signature is None:
            environ[ENVIRON_KEY] = None
            # the raw target and the routed path: a middleware outside this one may have
            # rewritten PATH_INFO, and the app serves what it routes
            if self.require_signature and any(
                _prefix_matches(_raw_path(environ, self.raw_target), p)
                or _prefix_matches(_routed_path(environ), p)
                for p in self.require_signature
            ):
                return self._refuse(SignatureError("missing_signature"), environ, start_response)
            return self.app(environ, start_response)
        if self.verifier is None:
            return self._refuse(SignatureError("not_configured", status=503), environ, start_response)
        source = environ.get("wsgi.input")
        try:
            spilled = self._verify(environ, signature, _raw_path(environ, self.raw_target))
        except SignatureError as error:
            unread = environ.get("wsgi.input") is source  # the body was not handed back
            return self._refuse(error, environ, start_response, unread)
        # the hub sends no cookies: one on a signed request was added by someone else, and
        # must not make the hub's call ride (or become) a browser session
        environ.pop("HTTP_COOKIE", None)
        try:
            result = self.app(environ, start_response)
        finally:
            # what the call set up for itself only (a pending audit record, a bridged user)
            # ends here, whether the app answered or raised: ordinary requests register nothing
            after = environ.pop(AFTER_CALL_KEY, None)
            if after is not None:
                for function in after:
                    function()
        if spilled is not None:
            return _ClosingIterable(result, spilled.close)
        return result

    def _pass_elsewhere(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        """A hub callback path: bound the body, then let the endpoint verify it.

        The endpoint must read the body to verify its signature, so the body
        is read here first, never past the limit, and handed back.
        """
        environ[ENVIRON_KEY] = None
        limit = self.elsewhere_max_body_size  # any method: an inner middleware may turn it into POST
        try:
            _sha256, length, stream, spilled = self._read_body(
                environ, limit, min(limit, self.spool_threshold))
        except SignatureError as error:
            return self._refuse(error, environ, start_response)
        _hand_over(environ, stream, length)
        result = self.app(environ, start_response)
        if spilled:
            return _ClosingIterable(result, stream.close)
        return result

    def _verify(self, environ: dict[str, Any], signature: str, path: str) -> IO[bytes] | None:
        """Verify the signed request; store the call and the request as verified in the environ.

        Returns the spooled body file to close after the response (``None``
        when the body stayed in memory). One function and no per-call
        objects beyond the records the app reads: this runs on every signed
        request.
        """
        method = environ.get("REQUEST_METHOD", "GET").upper()
        query = environ.get("QUERY_STRING", "")
        timestamp = environ.get("HTTP_X_BAILING_TIMESTAMP")
        get = environ.get
        if self.catalog_path is not None and path == self.catalog_path:
            prefix = self.public_prefix
            if prefix is None:
                prefix = _quote_path(environ.get("SCRIPT_NAME", "")).rstrip("/")
            signed_path = prefix + path
            kind, subject_raw, job_id, job_rule = "catalog", "", "", None
        else:
            signed_path = path if self.base_url is None else self._base_relative(environ, path)
            subject_raw = get("HTTP_X_BAILING_ON_BEHALF_OF", "")
            job_id = job_rule = get("HTTP_X_BAILING_JOB_ID", "")
            kind = "tool"
        if query:
            signed_path += "?" + query
        verifier = self.verifier
        assert verifier is not None  # __call__ refused the request without one
        verifier.check_unread(signature, timestamp, job_rule, signed_path, subject_raw, method)
        sha256, length, stream, spilled = self._read_body(
            environ, self.max_body_size, self.spool_threshold)
        _hand_over(environ, stream, length)
        assert timestamp is not None  # check_unread refused a missing one
        # WSGI decodes header bytes as ISO-8859-1; the hub signed UTF-8.
        try:
            label = verifier.match_read(
                signature, timestamp, method, signed_path, sha256, length, subject_raw, job_id)
        except SignatureError as error:
            if error.reason == "bad_signature" and "%7" in signed_path:  # %7B/%7b, a brace
                _refuse_unfilled_placeholder(
                    verifier, signature, timestamp, method, signed_path, sha256, subject_raw, job_id)
            raise
        if length and (media := get("CONTENT_TYPE")) and media != "application/json" \
                and not _json_media_type(media):  # the hub's own label: no call
            raise SignatureError("body_not_json")
        # the records are built with tuple.__new__: a named tuple's own __new__ is a Python call
        environ[AS_VERIFIED_KEY] = _new_tuple(
            AsVerified, (method, path, query, get("CONTENT_LENGTH"), stream))
        environ[ENVIRON_KEY] = _new_tuple(VerifiedCall, (
            kind, subject_raw or None, job_id, label, timestamp, method, signed_path, sha256,
            signature,
            _new_tuple(UnsignedHeaders, (
                get("HTTP_X_BAILING_CLIENT"), get("HTTP_X_BAILING_TOOL_SCOPE"),
                get("HTTP_X_BAILING_IDEMPOTENCY_KEY"), get("HTTP_X_BAILING_CONVERSATION"),
            )),
        ))
        return stream if spilled else None

    def _read_body(self, environ: dict[str, Any], max_size: int, spool: int) -> BodyParts:
        """:func:`read_body_parts` within :attr:`body_timeout` where the server allows it."""
        timeout = self.body_timeout
        sock = _deadline.connection_socket(environ) if timeout else None
        if sock is None or not _announces_body(environ):
            return read_body_parts(environ, max_size, spool)
        armed = _deadline.arm(sock, timeout)  # type: ignore[arg-type]
        try:
            body = read_body_parts(environ, max_size, spool)
        except SignatureError:
            if _deadline.disarm(armed):
                raise SignatureError("body_timeout", status=408) from None
            raise
        if _deadline.disarm(armed):  # the read side was shut as the last byte came in
            raise SignatureError("body_timeout", status=408)
        return body

    def _refuse(
        self, error: SignatureError, environ: dict[str, Any], start_response: StartResponse,
        unread: bool = True,
    ) -> Iterable[bytes]:
        settle = None
        if unread and self.body_timeout and error.reason != "body_timeout" \
                and _announces_body(environ):
            # refused before its body was read: answer now, then drain it (bounded) or stop
            # reading it, so that the client sees the answer rather than a reset
            settle = _drain.after_refusal(environ, self._body_limit(environ), self.body_timeout)
        job = environ.get("HTTP_X_BAILING_JOB_ID", "")
        path = _raw_path(environ, self.raw_target)
        expected = (  # the hub's own negative probe of every catalog refresh
            path == self.catalog_path
            and environ.get("HTTP_X_BAILING_SIGNATURE") == "sha256=" + "0" * 64
        )
        if error.reason == "not_configured":
            logger.error(
                "bailing: refused %s %s: %s is not set, so no hub request can be verified (job %r)",
                str(environ.get("REQUEST_METHOD", "?"))[:16], path[:200], self.setting, job[:64],
            )
        else:
            logger.log(
                logging.INFO if expected else logging.WARNING,
                "bailing: refused %s %s: %s (job %r)",
                str(environ.get("REQUEST_METHOD", "?"))[:16],  # both chosen by the sender
                path[:200],
                error.reason,
                job[:64],
            )
        if self.on_refuse is not None:
            try:
                self.on_refuse(error, environ, path)
            except Exception:
                logger.exception("bailing: the refusal listener failed")
        rendered = self.error_renderer(error) if self.error_renderer else None
        if rendered is None:
            rendered = default_error_response(error)
        status, headers, body = rendered
        status_line = _STATUS_TEXT.get(status) or f"{status} Error"
        # no hop-by-hop header (PEP 3333): after a 413 the server itself closes
        # or drains the connection whose body was left unread
        headers = [(name, value) for name, value in headers if name.lower() != "x-bailing-reason"]
        headers.append(("X-Bailing-Reason", error.reason))
        start_response(status_line, with_content_length(headers, body))
        if settle is not None:
            return _ClosingIterable([body], settle)
        return [body]

    def _body_limit(self, environ: dict[str, Any]) -> int:
        """The body limit of this request's path (a hub callback's, or a signed request's)."""
        if self.verified_elsewhere and _routed_path(environ) in self.verified_elsewhere:
            return self.elsewhere_max_body_size
        return self.max_body_size

    def _base_relative(self, environ: dict[str, Any], path: str) -> str:
        """What the hub signed for a tool call: the public path minus the base URL's path."""
        assert self.base_url is not None
        public = mount_prefix(environ, self.public_prefix) + path
        relative = strip_base(public, self.base_url.path)
        return public if relative is None else relative  # not under base_url: cannot verify


def _refuse_unfilled_placeholder(
    verifier: Verifier, signature: str, timestamp: str, method: str, signed_path: str,
    sha256: str, subject: str, job_id: str,
) -> None:
    """Raise ``missing_path_argument`` if the hub signed this path with a placeholder left in.

    When the model leaves out a path argument, the hub signs the template
    itself (``/orders/{order_id}``) but its URL parser sends the braces
    percent-encoded (``/orders/%7Border_id%7D``), so the received path never
    matches. A substituted value cannot produce this: the hub encodes braces
    in values before signing. The request is refused either way; this only
    names the real problem instead of a secret or proxy mismatch.
    """
    cut = signed_path.find("?")
    path, query = (signed_path, "") if cut < 0 else (signed_path[:cut], signed_path[cut:])
    template = _ENCODED_BRACE.sub(lambda match: "{" if match[0][2] in "Bb" else "}", path)
    if template == path or not _PLACEHOLDER.search(template):
        return
    try:
        verifier.match(signature, timestamp, method, template + query, sha256, subject, job_id)
    except SignatureError:
        return
    raise SignatureError("missing_path_argument")


#: A brace the URL parser (or a proxy that lowers escapes) percent-encoded.
_ENCODED_BRACE = re.compile("%7[BbDd]")
#: A path template placeholder as the hub substitutes it (``{name}``).
_PLACEHOLDER = re.compile(r"\{[^{}]+\}")


#: Types no framework reads fields from: what a server puts for a body sent without one
#: (``wsgiref`` says ``text/plain``), besides JSON itself.
_UNPARSED_TYPES = frozenset(("application/json", "text/plain"))


def _json_media_type(content_type: str) -> bool:
    """Whether a signed body's ``Content-Type`` lets the app read it only as the JSON it is.

    The hub sends exactly ``application/json`` with every body; a parameter
    (``charset``), another case, no type at all, or the ``text/plain`` a
    server such as ``wsgiref`` puts for a missing one read the same. Any
    other type (a form, multipart) would let the app's framework
    (``request.form``, webargs' ``json_or_form``) read the signed bytes as
    other arguments than the ones verified: the header is not signed.
    """
    return content_type.partition(";")[0].strip().lower() in _UNPARSED_TYPES


def _announces_body(environ: dict[str, Any]) -> bool:
    """Whether the request says a body follows (a non-zero length, or chunked)."""
    length = environ.get("CONTENT_LENGTH")
    if length:
        return length.strip() not in ("0", "")
    return "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()


def _check_body_timeout(value: float | None) -> float | None:
    if value is None or value == 0:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
        0 < value <= 3600
    ):
        raise ConfigurationError("body_timeout must be a number of seconds (0-3600) or None.")
    return float(value)


def _hand_over(environ: dict[str, Any], stream: IO[bytes], length: int) -> None:
    """Give the app the body that was read, as a plain body of known length.

    The bytes were read (and, for a chunked upload, de-chunked) already, so
    ``Transfer-Encoding`` no longer describes them: left in place, a framework
    would read nothing from a server that does not mark the stream as ended
    (wsgiref, for one), and the view would not see the body that was verified.
    """
    environ["wsgi.input"] = stream
    if environ.pop("HTTP_TRANSFER_ENCODING", None) is not None or length or environ.get(
            "CONTENT_LENGTH"):
        environ["CONTENT_LENGTH"] = str(length)


def default_error_response(error: SignatureError) -> tuple[int, list[tuple[str, str]], bytes]:
    """The JSON body of a refusal: coarse SDK code, precise reason, explanation."""
    body = json.dumps(
        {"error": error.sdk_error, "reason": error.reason, "message": error.message},
        separators=(",", ":"),
    ).encode("utf-8")
    headers = [
        ("Content-Type", "application/json; charset=utf-8"),
        ("Cache-Control", "no-store"),
    ]
    if error.status == 401:
        headers.append(("WWW-Authenticate", 'Bailing realm="bailinghub"'))
    return error.status, headers, body


class _ClosingIterable:
    """Close the spooled body file once the response has been sent."""

    def __init__(self, iterable: Iterable[bytes], close: Callable[[], None]) -> None:
        self._iterable = iterable
        self._close = close

    def __iter__(self) -> Any:
        return iter(self._iterable)

    def close(self) -> None:
        try:
            inner_close = getattr(self._iterable, "close", None)
            if inner_close is not None:
                inner_close()
        finally:
            self._close()


def _decoded_path(raw_path: str) -> str:
    """A raw (percent-encoded) path in the form WSGI servers give ``PATH_INFO``."""
    if "%" not in raw_path:
        return raw_path
    try:
        raw = raw_path.encode("latin-1")
    except UnicodeEncodeError:
        raw = raw_path.encode("utf-8")
    return unquote_to_bytes(raw).decode("latin-1")


def altered_part(environ: dict[str, Any]) -> str | None:
    """Which part of the request changed after verification, or ``None``.

    Compares what Flask routes on (method, ``PATH_INFO``, ``QUERY_STRING``,
    the body stream and its length) with what the middleware verified, in
    decoded form, so ``%2F``, non-ASCII paths and prefix mounts compare
    equal exactly when they are the same request.
    """
    seen: AsVerified | None = environ.get(AS_VERIFIED_KEY)
    if seen is None:
        return "request"
    if environ.get("REQUEST_METHOD", "GET").upper() != seen.method:
        return "method"
    raw_path = seen.raw_path
    routed = raw_path if "%" not in raw_path else _decoded_path(raw_path)
    if (routed or "/") != (environ.get("PATH_INFO") or "/"):
        return "path"
    if environ.get("QUERY_STRING", "") != seen.query:
        return "query"
    if environ.get("wsgi.input") is not seen.stream or environ.get("CONTENT_LENGTH") != seen.content_length:
        return "body"
    return None
