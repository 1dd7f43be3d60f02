"""The hub's ``base_url``, stated once (``BAILING_BASE_URL``).

The hub calls a tool at ``base_url`` (trailing ``/`` removed) + the tool's
catalog path, and signs only the catalog path. So everything follows from
the path ``P`` of the base URL and the public path ``M`` the application is
served under (``BAILING_PUBLIC_PREFIX``, else ``SCRIPT_NAME``): a route
``r`` of the application is reached at ``M + r``, which the hub can only
call as ``P + (M + r minus P)``.

* the catalog lists ``M + r`` minus ``P`` (a route outside ``P`` cannot be
  reached, and is left out with an error);
* a tool call is verified against ``M + r`` minus ``P`` as well.

Without ``BAILING_BASE_URL`` the package assumes ``P == M`` (the hub's base
URL is where the application's root is served): catalog paths are the
routes and tool calls are verified relative to the application, as before.
With ``base_url = https://shop.example.com`` and the app mounted under
``/api``, catalog paths and signed paths include ``/api``; with ``base_url =
https://shop.example.com/api`` and the app at the root with its tools under
``/api``, they do not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from bailing_flask.errors import ConfigurationError

__all__ = [
    "BaseURL",
    "PathMap",
    "parse_base_url",
    "checked_base_url",
    "strip_base",
]

#: What a base URL path may contain so that the hub's URL parser sends it unchanged.
_SAFE_PATH = re.compile(r"(?:/[A-Za-z0-9\-._~!$&'()*+,;=:@%]*)*")


@dataclass(frozen=True)
class BaseURL:
    """A parsed ``BAILING_BASE_URL``."""

    #: as configured, trailing ``/`` removed (what to register in the hub)
    url: str
    #: ``scheme://host[:port]``
    origin: str
    #: the path, without trailing ``/``; ``""`` for a bare origin
    path: str


def parse_base_url(value: object, setting: str = "BAILING_BASE_URL") -> BaseURL | None:
    """Check and split a base URL; ``None`` (or ``""``) means "not set".

    :raises ConfigurationError: naming ``setting`` for anything the hub would
        send differently or refuse (no http(s) scheme or host, credentials,
        a query or fragment, characters its URL parser would re-encode, dot
        segments).
    """
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ConfigurationError(f"{setting} must be a URL string such as 'https://shop.example.com/api'.")
    text = value.strip().rstrip("/")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise ConfigurationError(f"{setting} is not a valid URL.") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"{setting} must be the tool source's base URL in the hub, e.g. "
            "'https://shop.example.com' or 'https://shop.example.com/api' (http or https, with a host)."
        )
    if parts.username is not None or parts.password is not None:
        raise ConfigurationError(f"{setting} must not contain credentials (the hub's client refuses them).")
    if parts.query or parts.fragment or "?" in text or "#" in text:
        raise ConfigurationError(
            f"{setting} must not have a query or fragment: the hub appends the tool path to it."
        )
    path = parts.path.rstrip("/")
    segments = path.split("/")[1:]
    if not _SAFE_PATH.fullmatch(path) or any(s in (".", "..", "") for s in segments):
        raise ConfigurationError(
            f"{setting} has a path the hub's URL parser would rewrite ({path!r}): use plain "
            "ASCII segments and percent-encode anything else."
        )
    host = parts.hostname
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    origin = f"{parts.scheme.lower()}://{netloc}"
    return BaseURL(url=origin + path, origin=origin, path=path)


def strip_base(public_path: str, base_path: str) -> str | None:
    """``public_path`` relative to ``base_path``; ``None`` if it is not under it."""
    if not base_path:
        return public_path
    if public_path.startswith(base_path + "/"):
        return public_path[len(base_path):]
    return None


@dataclass(frozen=True)
class PathMap:
    """From application routes to the paths the hub calls and signs.

    :param mount: ``M``, the public path the application is served under.
    :param base: ``P``, the path of ``BAILING_BASE_URL``.
    """

    mount: str
    base: str

    def public(self, app_path: str) -> str:
        """Where the public reaches ``app_path`` (a route, or a raw request path)."""
        return self.mount + app_path

    def catalog_path(self, app_path: str) -> str | None:
        """The path the hub appends to the base URL to reach ``app_path``; ``None`` if it cannot."""
        return strip_base(self.public(app_path), self.base)

    @property
    def identity(self) -> bool:
        """Whether catalog paths are the application's routes (the default set-up)."""
        return self.mount == self.base


def checked_base_url(value: object) -> str | None:
    """``BAILING_BASE_URL`` validated (errors name the setting), normalised; ``None`` if unset."""
    parsed = parse_base_url(value)
    return None if parsed is None else parsed.url
