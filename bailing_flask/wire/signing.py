"""The hub's two signature schemes, with no web framework involved.

BailingHub signs in two ways:

* **tool calls** (also catalog fetches and authz probes): HMAC-SHA256 over
  ``ts.METHOD.pathWithQuery.sha256(body).onBehalfOf.jobId`` with the
  *provider secret*, ``ts`` in Unix **seconds**;
* **hub -> business POSTs and approval decisions**: HMAC-SHA256 over
  ``ts.rawBody`` with the *client token*, ``ts`` in **milliseconds**.

Each canonical string is built in exactly one function here
(:func:`canonical_tool_call`, :func:`canonical_callback`); the middleware,
the test client, the CLI and the doctor all go through them, so there is
one place to be right about bytes.

Verification is strict on purpose. Python's ``int()`` accepts ``" 1_0 "``,
``"+1"`` and non-ASCII digits, all of which the hub never sends; the
canonical string joins its fields with ``.`` and escapes nothing, so a
request is only accepted when its signed bytes cannot be read as another
request a forger could use (:func:`other_reading`: no ``.`` in the Job-Id,
no ``.<64 hex>.`` run in the subject, no empty-body hash between dots in a
GET's path); and signatures are compared in constant time as bytes.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from bailing_flask.errors import ConfigurationError, SignatureError
from bailing_flask.wire import digest as _digest

__all__ = [
    "EMPTY_BODY_SHA256",
    "SIGNATURE_PREFIX",
    "Clock",
    "Secrets",
    "canonical_tool_call",
    "other_reading",
    "sign_tool_call",
    "canonical_callback",
    "sign_callback",
    "Verifier",
    "CallbackVerifier",
    "verify_callback",
]

logger = logging.getLogger("bailing_flask")

#: sha256 of the empty body: every GET tool call and every catalog fetch.
EMPTY_BODY_SHA256 = hashlib.sha256(b"").hexdigest()
SIGNATURE_PREFIX = "sha256="

#: A source of the current Unix time in seconds (``time.time`` by default).
Clock = Callable[[], float]
#: One secret, several (rotation; labelled by index) or a mapping label -> secret.
Secrets = str | Sequence[str] | Mapping[str, str]

#: Below this many bytes a secret is warned about (at start-up and by ``flask bailing check``).
MIN_RECOMMENDED_SECRET_BYTES = 32
#: Unix seconds have 10 digits until the year 2286; 12 leaves room and keeps
#: ``int()`` cheap for hostile input.
_MAX_SECONDS_DIGITS = 12
_MAX_MILLIS_DIGITS = 15
_MAX_WINDOW_SECONDS = 3600


def _utf8(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8")


def _body_hash(body: str | bytes) -> str:
    return _digest.sha256_hex(_utf8(body))


def canonical_tool_call(
    ts: int | str,
    method: str,
    path_with_query: str,
    body_sha256: str,
    on_behalf_of: str = "",
    job_id: str = "",
) -> bytes:
    """Return the exact bytes the hub signs for a tool call, catalog fetch or probe.

    ``ts.METHOD.pathWithQuery.bodySha256Hex.onBehalfOf.jobId``, UTF-8 encoded.
    ``ts`` is used verbatim when given as a string: the verifier must put the
    header string, not a re-formatted number, into the canonical string.
    Header values arriving through WSGI are ISO-8859-1 decoded strings; their
    UTF-8 encoding reproduces what the hub hashed.
    """
    return (
        f"{ts}.{method.upper()}.{path_with_query}.{body_sha256}.{on_behalf_of}.{job_id}"
    ).encode("utf-8")


#: A run that could be read as the body-hash field: ``.`` 64 lowercase hex ``.``.
_HASH_FIELD = re.compile(r"\.[0-9a-f]{64}\.")
#: The only body hash the hub signs on a method without a body, as such a run.
_EMPTY_FIELD = "." + EMPTY_BODY_SHA256 + "."
#: Methods the hub never sends a body with (a body on them is refused: ``unexpected_body``).
_BODYLESS = frozenset(("GET", "HEAD"))

#: What to change, per field that allows another reading (the refusal's message).
_READING_FIXES = {
    "subject": (
        "The subject (X-Bailing-On-Behalf-Of) holds 64 lowercase hex digits with a '.' after "
        "them and a '.' or its start before them, so the same signature would also fit a "
        "request with another path, body and subject; such a subject is refused on every "
        "call. Build subjects without such a run (e.g. t1:u1001; ticket uids and e-mail "
        "addresses never hold one)."
    ),
    "path": (
        "This GET's path or query holds the sha256 of an empty body (e3b0c442...b855) with a "
        "'.' before it and a '.' or the end after it, so the same signature would also fit "
        "another GET with a shorter path and another subject. Send such a value without the "
        "dots around it, or in the body of a POST tool."
    ),
}


def other_reading(method: str, path_with_query: str, on_behalf_of: str) -> str | None:
    """Which field lets these signed bytes be read as another request a forger could use.

    ``"subject"``, ``"path"`` or ``None`` (the received split is the only one
    that matters). The canonical string is ``ts.METHOD.P.H.S.J`` with nothing
    escaped. The timestamp and method hold no ``.``, and neither does the
    Job-Id (checked by :meth:`Verifier.check_headers`), so only ``P.H.S`` can
    split another way, with the body hash on another ``.<64 hex>.`` run:

    * a run inside ``"." + S``: the other reading has a *longer* path (the
      received one was cut, its rest moved into the subject). The hub may
      have signed that one (a model-filled query value), so it is refused,
      whatever the method: the subject is the field to change;
    * a run inside ``P + "."``: the other reading has a *shorter* path and
      its subject is ``<rest of P>.H.S``, which holds the received body's
      hash between dots. On ``GET``/``HEAD`` both bodies are empty, so only
      the empty body's hash can form it, and that run is refused. On methods
      with a body it needs the hub to have signed a subject holding such a
      run, which the first rule refuses on every call; such readings are not
      refused, so content-addressed names (``build.<sha256>``,
      ``sha256.<hex>.sig``) keep working. ``flask bailing check`` warns about
      the write tools whose values could carry it (``hash_run_param``).
    """
    if len(on_behalf_of) >= 65 and "." in on_behalf_of and _HASH_FIELD.search("." + on_behalf_of):
        return "subject"
    if method in _BODYLESS and len(path_with_query) >= 65 and _EMPTY_FIELD in path_with_query + ".":
        return "path"
    return None


def _hmac_hex(key: bytes, message: bytes) -> str:
    return SIGNATURE_PREFIX + hmac.new(key, message, hashlib.sha256).hexdigest()


def sign_tool_call(
    secret: str,
    ts: int | str,
    method: str,
    path_with_query: str,
    body: bytes | str = b"",
    on_behalf_of: str = "",
    job_id: str = "",
) -> str:
    """Sign a tool call exactly as the hub does; returns ``"sha256=<hex>"``.

    Any secret is accepted (the hub's own test vectors use a short one);
    strength is checked where secrets are configured, not here.
    """
    canonical = canonical_tool_call(
        ts, method, path_with_query, _body_hash(body), on_behalf_of, job_id
    )
    return _hmac_hex(_utf8(secret), canonical)


def canonical_callback(ts_ms: int | str, body: bytes | str) -> bytes:
    """Return the bytes signed on hub -> business POSTs and approval decisions:
    ``<milliseconds>.<raw body>``."""
    return str(ts_ms).encode("ascii") + b"." + _utf8(body)


def sign_callback(secret: str, ts_ms: int | str, body: bytes | str) -> str:
    """Sign a callback, webhook, approval request or approval decision body."""
    return _hmac_hex(_utf8(secret), canonical_callback(ts_ms, body))


class _Key:
    """One secret, with its HMAC pad states hashed once.

    HMAC-SHA256 is ``H((K^opad) || H((K^ipad) || m))``. Both pads are one
    64-byte block, so their hash states can be computed once per key and
    copied per message: the result is the standard HMAC, at a fraction of
    the cost of setting up a fresh one for every request. A signed string
    is short, so its states are Python's own SHA-256
    (:data:`bailing_flask.wire.digest.builtin`, see that module); a message
    over :data:`~bailing_flask.wire.digest.SMALL` bytes (a callback's body)
    uses OpenSSL's.
    """

    __slots__ = ("label", "secret", "_inner", "_outer", "_inner_long", "_outer_long")

    def __init__(self, label: str, secret: bytes) -> None:
        self.label = label
        self.secret = secret
        block = hashlib.sha256(secret).digest() if len(secret) > 64 else secret
        block = block.ljust(64, b"\0")
        inner_pad = bytes(b ^ 0x36 for b in block)
        outer_pad = bytes(b ^ 0x5C for b in block)
        self._inner, self._outer = _digest.builtin(inner_pad), _digest.builtin(outer_pad)
        self._inner_long, self._outer_long = hashlib.sha256(inner_pad), hashlib.sha256(outer_pad)

    def mac(self, message: bytes) -> bytes:
        if len(message) <= _digest.SMALL:
            inner, outer = self._inner.copy(), self._outer.copy()
        else:
            inner, outer = self._inner_long.copy(), self._outer_long.copy()
        inner.update(message)
        outer.update(inner.digest())
        return outer.digest()


def _load_keys(secrets: Secrets | None, setting: str, warn: bool = True) -> tuple[_Key, ...]:
    """Normalise the accepted secret forms, refusing empty ones loudly."""
    if secrets is None:
        raise ConfigurationError(
            f"No secret configured: set {setting} to the secret(s) shared with BailingHub."
        )
    pairs: Iterable[tuple[str, object]]
    if isinstance(secrets, str):
        pairs = [("0", secrets)]
    elif isinstance(secrets, Mapping):
        pairs = [(str(label), value) for label, value in secrets.items()]
    elif isinstance(secrets, Sequence):
        pairs = [(str(index), value) for index, value in enumerate(secrets)]
    else:
        raise ConfigurationError(
            f"{setting} must be a string, a list of strings or a mapping label -> secret."
        )
    keys: list[_Key] = []
    for label, value in pairs:
        if not isinstance(value, str):
            raise ConfigurationError(f"{setting}[{label!r}] must be a string.")
        if not value.strip():
            raise ConfigurationError(
                f"{setting}[{label!r}] is empty: an empty secret would accept forged requests."
            )
        keys.append(_Key(label, value.encode("utf-8")))
    if not keys:
        raise ConfigurationError(
            f"{setting} is empty: configure at least one secret shared with BailingHub."
        )
    for key in keys:
        if warn and len(key.secret) < MIN_RECOMMENDED_SECRET_BYTES:
            logger.warning(
                "bailing: the secret %r in %s is only %d bytes long; ask the hub operator "
                "to set one of at least %d bytes, e.g. the output of "
                "`python -c \"import secrets; print(secrets.token_urlsafe(48))\"`.",
                key.label,
                setting,
                len(key.secret),
                MIN_RECOMMENDED_SECRET_BYTES,
            )
    return tuple(keys)


def primary_secret(secrets: Secrets | None) -> str | None:
    """The secret to *sign* with: the first one configured (``None`` if none).

    Verification accepts any configured secret; signing (tests, tickets,
    decisions) uses the first, so put the newest secret first when rotating.
    """
    if not secrets:
        return None
    if isinstance(secrets, str):
        return secrets
    if isinstance(secrets, Mapping):
        return str(next(iter(secrets.values())))
    return str(secrets[0])


def _parse_timestamp(raw: str | None, max_digits: int) -> int:
    """Digits only: no sign, no spaces, no underscores, no non-ASCII digits."""
    if raw is None or not raw or len(raw) > max_digits or not raw.isascii() or not raw.isdigit():
        raise SignatureError("malformed_timestamp")
    return int(raw)


def _check_signature_shape(signature: str | None) -> str:
    """The cheap part of the format check, done before the body is read.

    Length, prefix and ASCII are checked here; whether the 64 characters are
    lowercase hex only matters when the comparison fails, so it is decided
    there (:func:`_refusal`). A header sent twice arrives joined with ","
    and fails the length check.
    """
    if not signature:
        raise SignatureError("missing_signature")
    if len(signature) != 71 or not signature.startswith(SIGNATURE_PREFIX) or not signature.isascii():
        raise SignatureError("malformed_signature")
    return signature


_LOWER_HEX = frozenset("0123456789abcdef")


def _refusal(signature: str) -> SignatureError:
    """Why a signature of the right shape did not match."""
    if not _LOWER_HEX.issuperset(signature[7:]):
        return SignatureError("malformed_signature")
    return SignatureError("bad_signature")


def _check_window(window: float, name: str, upper: float) -> float:
    if isinstance(window, bool) or not isinstance(window, (int, float)) or not (
        1 <= window <= upper
    ):
        raise ConfigurationError(f"{name} must be a number between 1 and {upper:g}.")
    return window


class _KeyRing:
    """Secrets plus the constant-time search for the one that signed."""

    def __init__(
        self, secrets: Secrets | None, setting: str, clock: Clock, warn: bool = True
    ) -> None:
        self._keys = _load_keys(secrets, setting, warn)
        self.setting = setting
        self.clock = clock

    @property
    def labels(self) -> tuple[str, ...]:
        """Labels of the configured keys, in order (never the secrets)."""
        return tuple(key.label for key in self._keys)

    def _match(self, message: bytes, signature: str) -> str | None:
        """The label of the key whose signature of ``message`` equals ``signature``.

        ``signature`` is ASCII (checked by :func:`_check_signature_shape`),
        so the whole header string is compared in constant time. Every key
        is tried, so the time taken does not tell which one matched.
        """
        keys = self._keys
        if len(keys) == 1:
            key = keys[0]
            expected = SIGNATURE_PREFIX + key.mac(message).hex()
            return key.label if hmac.compare_digest(expected, signature) else None
        found: str | None = None
        for key in keys:
            if hmac.compare_digest(SIGNATURE_PREFIX + key.mac(message).hex(), signature):
                found = key.label if found is None else found
        return found


class Verifier(_KeyRing):
    """Verify tool-call signatures (flows A-D) for one or several secrets.

    :param secrets: the provider secret(s). Several may be active at once so
        a secret can be rotated without downtime; the label of the one that
        matched is reported (index for a list, key for a mapping).
    :param window: accepted clock difference in seconds, exclusive and
        symmetric like the hub's SDKs: a request is refused when
        ``abs(now - ts) >= window``.
    :param clock: returns the current Unix time (injectable for tests).
    :param setting: the configuration name quoted in error messages.
    """

    def __init__(
        self,
        secrets: Secrets | None,
        *,
        window: int = 300,
        clock: Clock = time.time,
        setting: str = "BAILING_SECRETS",
    ) -> None:
        super().__init__(secrets, setting, clock)
        self.window = _check_window(window, "window", _MAX_WINDOW_SECONDS)

    def check_headers(
        self, signature: str | None, timestamp: str | None, job_id: str | None = ""
    ) -> None:
        """Check everything that needs no body.

        Called before the body is read, so a refused request costs nothing.
        Pass ``job_id=None`` to skip the Job-Id rule (catalog fetches sign an
        empty job id whatever the headers say).
        """
        self.check_unread(signature, timestamp, job_id, "", "", "")

    def check_unread(
        self, signature: str | None, timestamp: str | None, job_id: str | None,
        path_with_query: str, on_behalf_of: str, method: str,
    ) -> None:
        """:meth:`check_headers` and :meth:`check_reading` in one call (the middleware's).

        Everything that needs no body, before the body is read.
        """
        # both parsers and the reading check's fast path are inlined: this runs on every
        # signed request
        if not signature:
            raise SignatureError("missing_signature")
        if len(signature) != 71 or not signature.startswith(SIGNATURE_PREFIX) or not signature.isascii():
            raise SignatureError("malformed_signature")
        if (
            not timestamp
            or len(timestamp) > _MAX_SECONDS_DIGITS
            or not timestamp.isascii()
            or not timestamp.isdigit()
        ):
            raise SignatureError("malformed_timestamp")
        if abs(math.floor(self.clock()) - int(timestamp)) >= self.window:
            raise SignatureError("timestamp_out_of_window")
        if job_id and "." in job_id:
            raise SignatureError("malformed_job_id")
        if len(on_behalf_of) >= 65 or len(path_with_query) >= 65:
            self.check_reading(path_with_query, on_behalf_of, method)

    @staticmethod
    def check_reading(path_with_query: str, on_behalf_of: str, method: str) -> None:
        """Refuse a request whose signed fields could be read as another request.

        See :func:`other_reading`; the refusal's message names the field to
        change. Needs no body, so it runs before the body is read.
        """
        if len(on_behalf_of) < 65 and len(path_with_query) < 65:
            return  # no 64-digit run fits: the common case costs two length checks
        field = other_reading(method, path_with_query, on_behalf_of)
        if field is not None:
            raise SignatureError("ambiguous_signature", detail=_READING_FIXES[field])

    @staticmethod
    def check_body(method: str, body_length: int) -> None:
        """Refuse a ``GET`` or ``HEAD`` that carries a body.

        The hub never sends one; an app that read it would act on bytes the
        hub never meant to send.
        """
        if body_length and method in _BODYLESS:
            raise SignatureError("unexpected_body")

    def match(
        self,
        signature: str,
        timestamp: str,
        method: str,
        path_with_query: str,
        body_sha256: str,
        on_behalf_of: str = "",
        job_id: str = "",
    ) -> str:
        """Return the label of the key that produced ``signature``, or raise.

        Call :meth:`check_headers` first.
        """
        # no body length: match() checks the signature only (match_read holds the one way)
        return self.match_read(signature, timestamp, method, path_with_query, body_sha256, 0,
                               on_behalf_of, job_id)

    def match_read(
        self, signature: str, timestamp: str, method: str, path_with_query: str,
        body_sha256: str, body_length: int, on_behalf_of: str, job_id: str,
    ) -> str:
        """:meth:`check_body` and :meth:`match` in one call (the middleware's, once the body is read).

        ``method`` is upper case already; :meth:`check_unread` came first.
        """
        if body_length and method in _BODYLESS:
            raise SignatureError("unexpected_body")
        # the signed string and its match, here rather than in match(): this runs on every
        # signed request, and match() is the caller that checks no body
        label = self._match(canonical_tool_call(
            timestamp, method, path_with_query, body_sha256, on_behalf_of, job_id), signature)
        if label is None:
            raise _refusal(signature)
        return label

    def verify(
        self,
        *,
        signature: str | None,
        timestamp: str | None,
        method: str,
        path_with_query: str,
        body: bytes | str = b"",
        on_behalf_of: str = "",
        job_id: str = "",
    ) -> str:
        """Verify one tool call in full; returns the matching key's label."""
        self.check_headers(signature, timestamp, job_id)
        if body.__class__ is not bytes:
            body = _utf8(body)
        method = method.upper()
        self.check_reading(path_with_query, on_behalf_of, method)
        return self.match_read(
            signature, timestamp,  # type: ignore[arg-type]  # checked above
            method, path_with_query, _digest.sha256_hex(body), len(body), on_behalf_of, job_id,
        )


class CallbackVerifier(_KeyRing):
    """Verify the millisecond ``ts.body`` scheme (callbacks, webhooks, approvals).

    :param secrets: the client token(s) of this business in the hub.
    :param window: exclusive symmetric window in seconds, like the hub's SDKs
        (300, as for tool calls; the hub's timestamps here are milliseconds,
        compared to the millisecond).
    :param foreign_secrets: keys that must *not* be used here (the provider
        secret); a match is refused as ``wrong_key`` so the log says which
        key was expected instead of a bare ``bad_signature``.
    """

    def __init__(
        self,
        secrets: Secrets | None,
        *,
        window: float = 300,
        clock: Clock = time.time,
        setting: str = "BAILING_CLIENT_TOKENS",
        foreign_secrets: Secrets | None = None,
        warn: bool = True,
    ) -> None:
        super().__init__(secrets, setting, clock, warn)
        self.window = _check_window(window, "window", _MAX_WINDOW_SECONDS)
        self.window_ms = self.window * 1000
        self._foreign = (
            _KeyRing(foreign_secrets, "foreign secrets", clock, warn=False)
            if foreign_secrets
            else None
        )

    def verify(self, signature: str | None, timestamp: str | None, body: bytes | str) -> str:
        """Return the matching key's label or raise :class:`SignatureError`."""
        checked = _check_signature_shape(signature)
        ts = _parse_timestamp(timestamp, _MAX_MILLIS_DIGITS)
        if abs(math.floor(self.clock() * 1000) - ts) >= self.window_ms:
            raise SignatureError("timestamp_out_of_window")
        assert timestamp is not None
        message = canonical_callback(timestamp, body)
        label = self._match(message, checked)
        if label is not None:
            return label
        if self._foreign is not None and self._foreign._match(message, checked) is not None:
            raise SignatureError("wrong_key")
        raise _refusal(checked)


def verify_callback(
    secrets: Secrets,
    timestamp: str | None,
    signature: str | None,
    body: bytes | str,
    *,
    window: float = 300,
    clock: Clock = time.time,
) -> str:
    """One-shot form of :meth:`CallbackVerifier.verify` (``window`` in seconds)."""
    return CallbackVerifier(secrets, window=window, clock=clock, warn=False).verify(
        signature, timestamp, body
    )
