"""A load-generating process for the end-to-end benchmarks (``python -m benchmarks._loadgen``).

Runs in its own process, so its CPU never competes with the benchmark's
parent for the GIL. It reads one JSON command per line on stdin and answers
one JSON line on stdout:

``{"op": "block", "port": P, "spec": {...}, "n": N, "concurrency": C}``
    builds ``N`` requests (signed like the hub **before** the clock starts,
    each with its own job id and the current timestamp, so the pool stays
    well inside the 300 s window), then sends them over ``C`` concurrent
    loopback connections (HTTP/1.1, kept alive unless the server closes,
    as gunicorn's sync worker does after every response) and answers
    ``{"n", "elapsed_ns", "latency_us": [...], "statuses": {...},
    "errors", "client_cpu_ns", "response_bytes"}``;
``{"op": "quit"}``
    exits.

``spec``: ``method``, ``path_with_query``, ``body`` (text), ``headers``
(unsigned extra headers, e.g. Content-Type) and either ``sign`` - the
signing inputs (``secret``, ``subject``, ``client``, ``tool_scope``, and
``tool`` + ``args`` when the hub sends an idempotency key) - or
``catalog_secret`` for a signed catalog fetch.
"""

from __future__ import annotations

import json
import selectors
import socket
import sys
import time
import uuid
from typing import Any

from bailing_flask.testing import catalog_headers, idempotency_key, signed_headers

RECV = 1024 * 1024


def build_requests(port: int, spec: dict[str, Any], n: int) -> list[bytes]:
    method = spec["method"]
    target = spec["path_with_query"]
    body = spec.get("body", "").encode("utf-8")
    extra = spec.get("headers") or {}
    sign = spec.get("sign")
    head = [f"{method} {target} HTTP/1.1", f"Host: 127.0.0.1:{port}", "User-Agent: node",
            "Accept: application/json"]
    for name, value in extra.items():
        head.append(f"{name}: {value}")
    if body or method not in ("GET", "HEAD"):
        head.append(f"Content-Length: {len(body)}")
    prefix = "\r\n".join(head)
    out: list[bytes] = []
    for _ in range(n):
        if sign is not None:
            job = str(uuid.uuid4())
            key = (idempotency_key(sign["tool"], sign["args"], job, sign.get("subject"))
                   if sign.get("tool") else None)
            headers = signed_headers(sign["secret"], method, target, body, subject=sign.get("subject"),
                                     job_id=job, client=sign.get("client"),
                                     tool_scope=sign.get("tool_scope"), idempotency_key=key)
        elif spec.get("catalog_secret"):
            headers = catalog_headers(spec["catalog_secret"], target)
        else:
            headers = {}
        lines = prefix + "".join(f"\r\n{k}: {v}" for k, v in headers.items()) + "\r\n\r\n"
        out.append(lines.encode("latin-1") + body)
    return out


class _Conn:
    """One connection; reads into a shared buffer and keeps only the response head."""

    __slots__ = ("sock", "head", "sent_at", "body_left", "close", "status", "length")

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reset()

    def reset(self) -> None:
        self.head = bytearray()  # until the blank line; the body is only counted
        self.sent_at = 0
        self.body_left = -1  # unknown until the head is parsed
        self.close = False
        self.status = 0
        self.length = 0

    def feed(self, data: memoryview) -> bool:
        """Take received bytes; True when the response is complete."""
        if self.body_left < 0:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return False
            lines = bytes(self.head[:end]).decode("latin-1").split("\r\n")
            self.status = int(lines[0].split(" ", 2)[1])
            length = -1
            for line in lines[1:]:
                name, _, value = line.partition(":")
                lname = name.strip().lower()
                if lname == "content-length":
                    length = int(value.strip())
                elif lname == "connection" and value.strip().lower() == "close":
                    self.close = True
            if length < 0:
                raise RuntimeError("response without Content-Length")
            self.length = length
            self.body_left = length - (len(self.head) - end - 4)
            del self.head[:]
        else:
            self.body_left -= len(data)
        return self.body_left <= 0


def run_block(port: int, requests: list[bytes], concurrency: int) -> dict[str, Any]:
    sel = selectors.DefaultSelector()
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    errors = 0
    received = 0
    pending = iter(requests)
    perf = time.perf_counter_ns
    buffer = bytearray(RECV)
    view = memoryview(buffer)

    def send_next(conn: _Conn | None) -> None:
        request = next(pending, None)
        if request is None:
            if conn is not None:
                sel.unregister(conn.sock)
                conn.sock.close()
            return
        if conn is None:
            conn = _Conn(port)
            sel.register(conn.sock, selectors.EVENT_READ, conn)
        conn.reset()
        conn.sent_at = perf()
        conn.sock.sendall(request)

    cpu0 = time.process_time_ns()
    start = perf()
    for _ in range(concurrency):
        send_next(None)
    while sel.get_map():
        for key, _ in sel.select():
            conn: _Conn = key.data
            try:
                size = conn.sock.recv_into(buffer)
            except OSError:
                size = 0
            if size:
                if not conn.feed(view[:size]):
                    continue
                latencies.append((perf() - conn.sent_at) / 1000.0)
                received += conn.length
                statuses[str(conn.status)] = statuses.get(str(conn.status), 0) + 1
                if conn.close:
                    sel.unregister(conn.sock)
                    conn.sock.close()
                    send_next(None)
                else:
                    send_next(conn)
            else:  # closed by the server before a whole response
                sel.unregister(conn.sock)
                conn.sock.close()
                errors += 1
                send_next(None)
    elapsed = perf() - start
    return {
        "n": len(latencies),
        "elapsed_ns": elapsed,
        "latency_us": latencies,
        "statuses": statuses,
        "errors": errors,
        "client_cpu_ns": time.process_time_ns() - cpu0,
        "response_bytes": received,
    }


def main() -> None:
    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] == "quit":
            break
        if command["op"] == "block":
            requests = build_requests(command["port"], command["spec"], command["n"])
            answer = run_block(command["port"], requests, command["concurrency"])
        else:
            answer = {"error": f"unknown op {command['op']!r}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
