"""Response headers a WSGI application may send, and the ones it may not.

PEP 3333 leaves connection management to the server: an application must
not set a hop-by-hop header (``Connection``, ``Keep-Alive``,
``Transfer-Encoding``, ...). Werkzeug, gunicorn and uWSGI let one through;
wsgiref and waitress raise and answer 500 instead of the response the
application meant. Every response this package builds itself goes through
:func:`end_to_end`, and a stored response replayed to a repeat never
carries one either.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["is_hop_by_hop", "end_to_end", "with_content_length"]

#: The hop-by-hop headers of RFC 2616 section 13.5.1, as ``wsgiref`` lists them
#: (kept here so that importing the package does not load ``wsgiref``).
_HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
    "transfer-encoding", "upgrade",
})


def is_hop_by_hop(name: str) -> bool:
    """Whether ``name`` is a hop-by-hop header (case-insensitive)."""
    return name.lower() in _HOP_BY_HOP


def end_to_end(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """``headers`` without any hop-by-hop header."""
    return [(name, value) for name, value in headers if not is_hop_by_hop(name)]


def with_content_length(headers: Iterable[tuple[str, str]], body: bytes) -> list[tuple[str, str]]:
    """End-to-end headers with exactly one ``Content-Length``, the body's.

    A renderer (such as an app's error handler going through Flask) may
    already have set one; two ``Content-Length`` fields make Node's HTTP
    parser, the hub's client, refuse the whole response.
    """
    kept = [(name, value) for name, value in end_to_end(headers) if name.lower() != "content-length"]
    kept.append(("Content-Length", str(len(body))))
    return kept
