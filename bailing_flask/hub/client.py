"""A small client for the business -> hub calls, on the standard library only.

Three calls matter to a business:

* ``POST /approvals/{id}/decision`` to answer an approval request, signed
  with the millisecond ``ts.body`` scheme or sent with the client token as
  a Bearer token;
* ``POST /run`` to start a job; the hub refuses (400) any field it does not
  declare, so only its five fields are ever sent;
* ``GET /jobs/{job_id}`` to read a job this client started.

Failures raise :class:`HubError` subclasses carrying the hub's status and
its ``error`` text. The client token is only ever put into a header (never
into a URL, where proxies and the hub's access logs would keep it), and never
into a message, a ``repr`` or a log line. Redirects are not followed, so the
token cannot be forwarded to another host.
"""

from __future__ import annotations

import datetime as _dt
import http.client
import json
import logging
import math
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.message import Message
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from bailing_flask.wire.jsenc import js_trim, utf16_len as _utf16_len
from bailing_flask.errors import BailingError, ConfigurationError
from bailing_flask.hub.payloads import (
    ApprovalDecision,
    ApprovalRequest,
    JobRecord,
    PayloadError,
    parse_approval_request,
    parse_job_record,
)
from bailing_flask.wire.signing import Clock, other_reading, sign_callback

if TYPE_CHECKING:  # pragma: no cover
    from bailing_flask.settings import Config

__all__ = [
    "HubClient",
    "DecisionResult",
    "RunAccepted",
    "HubRequestError",
    "HubError",
    "HubConnectionError",
    "HubBadRequestError",
    "HubUnauthorizedError",
    "HubForbiddenError",
    "HubNotFoundError",
    "HubConflictError",
    "HubRateLimitedError",
    "HubUnavailableError",
    "HubPausedError",
]

logger = logging.getLogger("bailing_flask")

AuthMode = Literal["signature", "bearer"]

#: The hub's client route keys (``src/routes/run.ts``); ``auto`` also matches.
_ROUTE_RE = re.compile(r"[a-z0-9][a-z0-9_-]{1,63}")
#: Job ids are UUIDs; the hub compares the raw path segment, so only
#: characters that need no escaping are accepted.
_JOB_ID_RE = re.compile(r"[A-Za-z0-9_:-][A-Za-z0-9_.:-]{0,127}")
_MAX_REQUEST_ID = 128
_MAX_INPUT = 100_000
_MAX_CALLBACK_URL = 2048
#: The hub's rate limit window is one minute and it sends no Retry-After.
_DEFAULT_RETRY_AFTER = 60.0
#: Enough for any job record; a larger answer is not the hub.
_MAX_RESPONSE_BYTES = 16 * 1024 * 1024


def _default_user_agent() -> str:
    try:
        from importlib.metadata import version

        return f"bailing-flask/{version('bailing_flask')}"
    except Exception:  # not installed (e.g. run from a source tree)
        return "bailing-flask"


# --- errors


class HubRequestError(BailingError, ValueError):
    """A request was refused locally, before anything was sent, because the
    hub would refuse it (the message says which rule)."""


class HubError(BailingError):
    """The hub answered with an error, or could not be reached.

    :ivar status: the HTTP status, or ``None`` when no answer arrived.
    :ivar message: the hub's ``error`` text (or a description of the failure).
    :ivar body: the hub's JSON answer, if it sent one.
    """

    def __init__(
        self, message: str, status: int | None = None, body: Mapping[str, Any] | None = None
    ) -> None:
        self.status = status
        self.message = message
        self.body: dict[str, Any] = dict(body or {})
        super().__init__(f"{message} (HTTP {status})" if status is not None else message)


class HubConnectionError(HubError):
    """No HTTP answer: DNS, connection, TLS or timeout failure."""


class HubBadRequestError(HubError):
    """400 (or 413): the hub refused the request's content."""


class HubUnauthorizedError(HubError):
    """401: wrong or disabled client token, bad signature, clock skew, or a
    token that may not decide this job."""


class HubForbiddenError(HubError):
    """403: route not allowed for this client, audience mismatch, or a
    field reserved to the hub's administrators."""


class HubNotFoundError(HubError):
    """404: unknown approval, job, or a job started by another client."""


class HubConflictError(HubError):
    """409: the approval was already decided differently (or by the console),
    the ``decision_id`` belongs to another approval, a concurrent decision won,
    a ``request_id`` clashes with another client's, or ``route: "auto"`` was
    ambiguous.

    For an already-decided approval, :attr:`current_status` and
    :attr:`current_decision_id` tell what the hub has recorded.
    """

    @property
    def current_status(self) -> str | None:
        value = self.body.get("status")
        return value if isinstance(value, str) else None

    @property
    def current_decision_id(self) -> str | None:
        value = self.body.get("decision_id")
        return value if isinstance(value, str) else None


class HubRateLimitedError(HubError):
    """429: this client's per-minute budget is spent.

    Retry after :attr:`retry_after` seconds **with the same** ``request_id``.
    """

    def __init__(
        self,
        message: str,
        status: int | None = 429,
        body: Mapping[str, Any] | None = None,
        retry_after: float = _DEFAULT_RETRY_AFTER,
    ) -> None:
        super().__init__(message, status, body)
        self.retry_after = retry_after


class HubUnavailableError(HubError):
    """503: the hub cannot take requests now (shutting down or paused)."""


class HubPausedError(HubUnavailableError):
    """503 ``{"status": "paused"}``: the hub's kill switch is on.

    Degrade (e.g. to a human queue); do not retry in a loop.
    """


_ERRORS_BY_STATUS: dict[int, type[HubError]] = {
    400: HubBadRequestError,
    401: HubUnauthorizedError,
    403: HubForbiddenError,
    404: HubNotFoundError,
    409: HubConflictError,
    413: HubBadRequestError,
    429: HubRateLimitedError,
    503: HubUnavailableError,
}


# --- results


@dataclass(frozen=True)
class DecisionResult:
    """The hub's answer to a decision it accepted."""

    ok: bool
    #: The approval's status now: ``approved`` or ``denied``.
    status: str
    approval_id: int
    decision_id: str
    #: True when this exact decision had already been recorded (a safe retry).
    idempotent: bool
    #: True when approving re-queued the finished job so it can run the call.
    rerun: bool


@dataclass(frozen=True)
class RunAccepted:
    """The hub's 202 answer to ``POST /run``.

    A repeated ``request_id`` returns the existing job (``job_id``, ``status``,
    ``request_id`` only), so the other fields may be ``None``.
    """

    job_id: str
    status: str
    request_id: str
    route: str | None = None
    target: str | None = None
    session_id: str | None = None
    is_continue: bool | None = None
    data: dict[str, Any] = field(default_factory=dict, repr=False)


# --- helpers




def _blank(value: str) -> bool:
    return not js_trim(value)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Turn every 3xx into an error instead of re-sending the token elsewhere."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def normalize_hub_url(hub_url: object) -> str:
    """The hub's base URL, checked (absolute http(s), no credentials) and without a trailing slash."""
    if not isinstance(hub_url, str):
        raise ConfigurationError("hub_url must be the hub's base URL, e.g. 'https://hub.example.com'.")
    parts = urlsplit(hub_url.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise ConfigurationError(
            "hub_url must be the hub's absolute http(s) base URL, e.g. 'https://hub.example.com'."
        )
    if parts.query or parts.fragment or "@" in parts.netloc:
        raise ConfigurationError("hub_url must not contain credentials, a query or a fragment.")
    return f"{parts.scheme.lower()}://{parts.netloc}{parts.path.rstrip('/')}"


def _check_callback_url(value: object) -> str:
    if not isinstance(value, str):
        raise HubRequestError("callback_url must be a string.")
    if len(value) > _MAX_CALLBACK_URL:
        raise HubRequestError(f"callback_url must be at most {_MAX_CALLBACK_URL} characters.")
    parts = urlsplit(value)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise HubRequestError("callback_url must be an absolute http(s) URL.")
    return value


def _retry_after(headers: Message | None) -> float:
    raw = headers.get("Retry-After") if headers is not None else None
    try:
        seconds = float(raw) if raw is not None else _DEFAULT_RETRY_AFTER
    except ValueError:
        return _DEFAULT_RETRY_AFTER
    return seconds if math.isfinite(seconds) and seconds >= 0 else _DEFAULT_RETRY_AFTER


def _answered_id(value: object) -> int:
    """The approval id in the hub's answer: a JSON integer (``7`` or ``7.0``) or its digits.

    Anything else, ``1e400`` (infinity to Python) and ``1.5`` included, is
    not an id the hub sends, so it raises ``ValueError`` instead of being
    rounded into some other approval's id.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    raise ValueError("not an approval id")


class HubClient:
    """Talk to BailingHub as one of its clients (``bz_clients`` entry).

    :param hub_url: the hub's base URL, with its mount path if any.
    :param client_token: the client token the hub issued to this business.
    :param timeout: seconds per request (connect and each read).
    :param clock: current Unix time in seconds (for signed decisions).
    :param user_agent: the ``User-Agent`` header.
    :param on_decision: called with the envelope and the result of every
        decision the hub accepted (``Bailing.hub_client()`` records them for
        ``business_approval`` tools); its exceptions are logged.
    """

    def __init__(
        self,
        hub_url: str,
        client_token: str,
        *,
        timeout: float = 10.0,
        clock: Clock = time.time,
        user_agent: str | None = None,
        on_decision: Callable[[ApprovalDecision, DecisionResult], None] | None = None,
    ) -> None:
        self.hub_url = normalize_hub_url(hub_url)
        self.on_decision = on_decision
        if not isinstance(client_token, str) or not client_token.strip():
            raise ConfigurationError(
                "client_token is empty: use the client token the hub issued to this business."
            )
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ConfigurationError("timeout must be a positive number of seconds.")
        self._token = client_token
        self.timeout = float(timeout)
        self.clock = clock
        self.user_agent = user_agent or _default_user_agent()
        self._opener = urllib.request.build_opener(_NoRedirects)

    def __repr__(self) -> str:
        return f"HubClient({self.hub_url!r})"

    # --- approvals

    def decide_approval(
        self,
        request: ApprovalRequest | Mapping[str, Any] | bytes | str,
        decision: str,
        *,
        approver: str,
        decision_id: str,
        comment: str | None = None,
        decided_at: str | _dt.datetime | None = None,
        auth: AuthMode = "signature",
    ) -> DecisionResult:
        """Send the business's decision on an approval request.

        ``request`` is the parsed request or the raw body the hub POSTed.
        Sending the same decision with the same ``decision_id`` again is
        safe: the hub answers it as an idempotent success
        (:attr:`DecisionResult.idempotent`).

        :param auth: ``"signature"`` signs the body with the client token
            (``X-Bailing-Timestamp`` in ms + ``X-Bailing-Signature``);
            ``"bearer"`` sends ``Authorization: Bearer``. Either way the
            token must belong to the client that started the job (or that
            issues tickets for the job's chat entry).
        :raises PayloadError: for a decision the hub would refuse.
        :raises HubConflictError: already decided differently, or
            ``decision_id`` used for another approval.
        """
        if not isinstance(request, ApprovalRequest):
            request = parse_approval_request(request)
        envelope = ApprovalDecision.for_request(
            request,
            decision,
            approver=approver,
            decision_id=decision_id,
            comment=comment,
            decided_at=decided_at,
        )
        return self.send_decision(envelope, auth=auth)

    def send_decision(
        self, envelope: ApprovalDecision, *, auth: AuthMode = "signature"
    ) -> DecisionResult:
        """POST a ready-made decision envelope (see :meth:`decide_approval`)."""
        body = envelope.body()
        headers = {"Content-Type": "application/json"}
        if auth == "signature":
            ts = str(math.floor(self.clock() * 1000))
            headers["X-Bailing-Timestamp"] = ts
            headers["X-Bailing-Signature"] = sign_callback(self._token, ts, body)
        elif auth == "bearer":
            headers.update(self._bearer())
        else:
            raise HubRequestError("auth must be 'signature' or 'bearer'.")
        data = self._call("POST", envelope.path, body, headers)
        try:
            result = DecisionResult(
                ok=bool(data["ok"]),
                status=str(data["status"]),
                approval_id=_answered_id(data.get("id", envelope.approval_id)),
                decision_id=str(data.get("decision_id", envelope.decision_id)),
                idempotent=bool(data.get("idempotent", False)),
                rerun=bool(data.get("rerun", False)),
            )
        except (KeyError, TypeError, ValueError):
            raise HubError("The hub's answer to the decision is not in the expected shape.",
                           200, data) from None
        if self.on_decision is not None and result.ok:
            try:
                self.on_decision(envelope, result)
            except Exception:
                logger.exception("bailing: recording decision %s failed", envelope.decision_id)
        return result

    # --- jobs

    def run(
        self,
        route: str,
        input: str,
        *,
        request_id: str,
        metadata: Mapping[str, Any] | None = None,
        callback_url: str | None = None,
    ) -> RunAccepted:
        """Start a job on ``route`` (or ``"auto"``) with ``input``.

        ``request_id`` is the idempotency key: retry with the same value and
        the hub returns the same job. Put the acting user into ``metadata``
        under the key the tool source's ``subject_field`` names.

        :raises HubRequestError: for a field the hub would refuse.
        :raises HubPausedError: the hub is paused; degrade, don't retry-storm.
        :raises HubRateLimitedError: retry later with the same ``request_id``.
        """
        payload: dict[str, Any] = {
            "request_id": self._check_request_id(request_id),
            "route": self._check_route(route),
            "input": self._check_input(input),
        }
        if metadata is not None:
            if not isinstance(metadata, Mapping):
                raise HubRequestError("metadata must be a mapping (a JSON object).")
            payload["metadata"] = dict(metadata)
            _warn_unusable_subjects(metadata)
        if callback_url is not None:
            payload["callback_url"] = _check_callback_url(callback_url)
        try:
            body = json.dumps(
                payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False
            ).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise HubRequestError(f"metadata is not JSON-serialisable: {exc}") from None
        headers = {"Content-Type": "application/json", **self._bearer()}
        data = self._call("POST", "/run", body, headers)
        try:
            is_continue = data.get("continue")
            return RunAccepted(
                job_id=str(data["job_id"]),
                status=str(data["status"]),
                request_id=str(data.get("request_id", payload["request_id"])),
                route=data.get("route"),
                target=data.get("target"),
                session_id=data.get("session_id"),
                is_continue=is_continue if isinstance(is_continue, bool) else None,
                data=data,
            )
        except (KeyError, TypeError):
            raise HubError("The hub's answer to /run has no job_id.", 202, data) from None

    def job(self, job_id: str) -> JobRecord:
        """Read a job this client started (``GET /jobs/{job_id}``).

        :raises HubNotFoundError: unknown, or started by someone else.
        """
        if not isinstance(job_id, str) or _JOB_ID_RE.fullmatch(job_id) is None:
            raise HubRequestError("job_id must be a job id returned by the hub (a UUID).")
        data = self._call("GET", f"/jobs/{job_id}", None, self._bearer())
        try:
            return parse_job_record(data)
        except PayloadError as exc:
            raise HubError(f"The hub's job record is not in the expected shape: {exc}",
                           200, None) from None

    # --- validation (mirrors src/routes/run.ts)

    @staticmethod
    def _check_request_id(value: object) -> str:
        if not isinstance(value, str) or _blank(value):
            raise HubRequestError("request_id must be a non-blank string.")
        if _utf16_len(value) > _MAX_REQUEST_ID:
            raise HubRequestError(f"request_id must be at most {_MAX_REQUEST_ID} characters.")
        return value

    @staticmethod
    def _check_route(value: object) -> str:
        if not isinstance(value, str) or _ROUTE_RE.fullmatch(value) is None:
            raise HubRequestError(
                "route must be 'auto' or a route key matching ^[a-z0-9][a-z0-9_-]{1,63}$."
            )
        return value

    @staticmethod
    def _check_input(value: object) -> str:
        if not isinstance(value, str) or _blank(value):
            raise HubRequestError("input must be a non-blank string.")
        if _utf16_len(value) > _MAX_INPUT:
            raise HubRequestError(f"input must be at most {_MAX_INPUT} characters.")
        return value

    # --- transport

    def _bearer(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._token}"}

    def _scrub(self, text: str) -> str:
        return text.replace(self._token, "[client token]") if self._token in text else text

    def _call(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> dict[str, Any]:
        request = urllib.request.Request(
            self.hub_url + path,
            data=body,
            headers={"Accept": "application/json", "User-Agent": self.user_agent, **headers},
            method=method,
        )
        reply_headers: Message | None = None
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                status = response.status
                reply_headers = response.headers
                raw = response.read(_MAX_RESPONSE_BYTES + 1)
        except urllib.error.HTTPError as exc:
            status, reply_headers = exc.code, exc.headers
            try:
                raw = exc.read(_MAX_RESPONSE_BYTES + 1)
            except (OSError, http.client.HTTPException):
                raw = b""
            finally:
                exc.close()
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            logger.warning("bailing: %s %s failed: %s", method, path, self._scrub(str(reason)))
            raise HubConnectionError(
                self._scrub(f"Could not reach the hub at {self.hub_url}: {reason}")
            ) from None
        logger.debug("bailing: %s %s -> %d", method, path, status)
        data = self._decode(raw)
        if 200 <= status < 300:
            if data is None:
                raise HubError("The hub's answer is not a JSON object.", status)
            return data
        self._raise_for(status, data or {}, reply_headers)
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _decode(raw: bytes) -> dict[str, Any] | None:
        if len(raw) > _MAX_RESPONSE_BYTES:
            return None
        try:
            value = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            return None
        return value if isinstance(value, dict) else None

    def _raise_for(self, status: int, data: dict[str, Any], headers: Message | None) -> None:
        error = data.get("error")
        message = self._scrub(error) if isinstance(error, str) and error else f"HTTP {status}"
        if status == 503 and data.get("status") == "paused":
            raise HubPausedError("The hub is paused (kill switch).", status, data)
        if status == 429:
            raise HubRateLimitedError(message, status, data, retry_after=_retry_after(headers))
        if 300 <= status < 400:
            raise HubError(f"The hub answered with a redirect ({status}); check hub_url.", status)
        raise _ERRORS_BY_STATUS.get(status, HubError)(message, status, data)


def _warn_unusable_subjects(metadata: Mapping[str, Any]) -> None:
    """Say so when a metadata value could be a subject that every tool call refuses.

    The tool source's ``subject_field`` names which key is the subject, and
    only the hub knows it, so every top-level string is looked at: one
    holding 64 lowercase hex digits between dots would make every call of
    the job ``401 ambiguous_signature`` (see the subject rule in
    :func:`bailing_flask.wire.signing.other_reading`).
    """
    for key, value in metadata.items():
        if isinstance(value, str) and other_reading("POST", "/", value) is not None:
            logger.warning(
                "bailing: metadata[%r] holds 64 lowercase hex digits between dots; if it is the "
                "tool source's subject_field, every tool call of this job is refused "
                "(ambiguous_signature): build subjects without such a run", str(key)[:64])


def client_token(config: Config) -> str:
    """The client token the hub issued (the first of ``BAILING_CLIENT_TOKENS``)."""
    from bailing_flask.wire.signing import primary_secret

    token = primary_secret(config.client_tokens)
    if token is None:
        raise ConfigurationError("set BAILING_CLIENT_TOKENS (the client token the hub issued)")
    return token


def hub_client_for(config: Config, on_decision: Callable[..., Any] | None = None) -> HubClient:
    """A client for the configured hub (``BAILING_HUB_URL``) and client token."""
    hub_url = config.hub_url
    if not hub_url:
        raise ConfigurationError("set BAILING_HUB_URL to talk to the hub")
    return HubClient(hub_url, client_token(config), on_decision=on_decision)
