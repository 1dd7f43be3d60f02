"""Raw-socket clients for the fault tests: slow bodies, huge headers, answers and closes.

The standard library's clients send a request at once and hide when the
server closed; these send byte by byte and report what arrived and when.
The one internal name the fault tests use (how many body deadlines are
armed) is imported here, and only here.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass

from bailing_flask.wire.deadline import armed_count as deadlines_armed

__all__ = ["Exchange", "deadlines_armed", "send_slowly", "send_raw", "status_of"]


@dataclass
class Exchange:
    """What one raw exchange saw: the answer, and when the server stopped listening."""

    #: everything the server sent (``b""`` if nothing)
    answer: bytes
    #: seconds from the end of the headers to the first byte of the answer (``None``: none)
    answered_after: float | None
    #: seconds from the end of the headers until the server closed or refused more bytes
    closed_after: float | None
    #: bytes of the body the client could send
    sent: int

    @property
    def status(self) -> int | None:
        return status_of(self.answer)


def status_of(answer: bytes) -> int | None:
    """The status code of a raw HTTP answer, ``None`` if there is none."""
    if not answer.startswith(b"HTTP/1."):
        return None
    return int(answer.split(b" ", 2)[1])


def _address(base: str) -> tuple[str, int]:
    host, port = base.split("//", 1)[1].rsplit(":", 1)
    return host, int(port)


def send_slowly(base: str, path: str, headers: dict[str, str], *, length: int | None,
                piece: bytes = b"x", interval: float = 0.05, give_up: float = 15.0) -> Exchange:
    """POST ``headers``, then the body one ``piece`` per ``interval`` until the server stops us.

    ``length`` is the declared Content-Length; ``None`` sends the body chunked
    (one chunk per piece). Sending ends when the server closes (or resets),
    after ``give_up`` seconds otherwise.
    """
    host, port = _address(base)
    head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\n" + "".join(
        f"{name}: {value}\r\n" for name, value in headers.items())
    head += "Transfer-Encoding: chunked\r\n\r\n" if length is None else f"Content-Length: {length}\r\n\r\n"
    data = piece if length is not None else b"%x\r\n" % len(piece) + piece + b"\r\n"
    answer = b""
    answered = closed = None
    sent = 0
    with socket.create_connection((host, port), timeout=give_up) as sock:
        sock.sendall(head.encode("latin-1"))
        started = time.monotonic()
        sock.settimeout(interval)
        while time.monotonic() - started < give_up:
            try:
                sock.sendall(data)
                sent += len(piece)
            except OSError:
                closed = time.monotonic() - started
                break
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                closed = time.monotonic() - started
                break
            if not chunk:
                closed = time.monotonic() - started
                break
            if answered is None:
                answered = time.monotonic() - started
            answer += chunk
        answer += _rest(sock)
    return Exchange(answer, answered, closed, sent)


def _rest(sock: socket.socket) -> bytes:
    """Whatever the server still has for us (it may already have closed)."""
    sock.settimeout(0.5)
    rest = b""
    try:
        while chunk := sock.recv(65536):
            rest += chunk
    except OSError:
        pass
    return rest


def send_raw(base: str, request: bytes, timeout: float = 15.0) -> bytes:
    """Send ``request`` as it is and read the answer until the server closes."""
    with socket.create_connection(_address(base), timeout=timeout) as sock:
        try:
            sock.sendall(request)
        except OSError:  # refused mid-way: read what was answered
            pass
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
                if b"\r\n\r\n" in answer and _complete(answer):
                    break
        except OSError:
            pass
        return answer


def _complete(answer: bytes) -> bool:
    head, _, body = answer.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value.strip())
    return False
