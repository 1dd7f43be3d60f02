"""One load-generating process of the load run (``python -m benchmarks.reliability._load_client``).

Runs in its own process, so its work never competes with the parent's or
the other generators' for a GIL. It reads one JSON command per line on
stdin and answers one JSON line on stdout:

``{"op": "init", "secret", "client_token", "index", "seed"}``
    the provider secret and client token to sign with, this process's
    number (which keeps its job and approval ids apart from the others')
    and the seed of its random choices; answers ``{"ok": true}``;
``{"op": "run", "port", "mix", "seconds", "threads", "check_ledger"}``
    sends the ``full`` or ``signed`` mix (``_load_mix.FULL_WEIGHTS`` /
    ``SIGNED_WEIGHTS``, or the class weights given as ``weights``) to ``127.0.0.1:port``
    (the classes listed in ``sweep`` once each first) from ``threads`` threads for
    ``seconds`` (each request signed when it is built, right before it is
    sent), and answers the counts (see :func:`run`);
``{"op": "quit"}``
    exits.

Each thread keeps one HTTP/1.1 connection alive while the server lets it
(gunicorn's sync worker closes after every response) and opens fresh ones
for a burst, whose requests are all written before any answer is read.
"""

from __future__ import annotations

import json
import select
import socket
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._load_mix import FULL_WEIGHTS, SIGNED_WEIGHTS, Mix, Req, Step, classify, ledger_detail

__all__ = ["Answer", "Http", "run"]

_TIMEOUT = 60.0
_CHUNK = 1024 * 1024
#: requests longer than this are written in pieces of this size
_PIECE = 256 * 1024
_EXAMPLES_PER_KIND = 5


@dataclass
class Answer:
    status: int  # 0: no answer (the connection failed or closed first)
    reason: str | None = None
    replayed: bool = False
    body: bytes = b""
    close: bool = False
    error: str = ""


class Http:
    """One client connection to ``127.0.0.1:port``."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock: socket.socket | None = None

    def open(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=_TIMEOUT)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        return sock

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None

    def send(self, req: Req) -> None:
        """Write the request; stop early when the server answers (or closes) before the end.

        Like a careful HTTP client, a large body goes out in pieces with a
        look for an early answer in between: a server that refuses a request
        without reading its body answers and closes while it is still being
        sent, and the answer is read all the same.
        """
        sock = self.sock or self.open()
        if not req.chunked and len(req.data) <= _PIECE:
            sock.sendall(req.data)
            return
        pieces: list[bytes] = [req.data[i:i + _PIECE] for i in range(0, len(req.data), _PIECE)]
        if req.chunked:
            chunk = b"%x\r\n" % _CHUNK + b"x" * _CHUNK + b"\r\n"
            pieces += [chunk] * -(-req.chunked // _CHUNK) + [b"0\r\n\r\n"]
        try:
            for piece in pieces:
                readable, _, _ = select.select([sock], [], [], 0)
                if readable:  # the server answered before the end: read it
                    return
                sock.sendall(piece)
        except OSError:
            pass  # refused and closed while we were still sending: read what it said

    def read(self) -> Answer:
        sock = self.sock
        assert sock is not None
        buffer = bytearray()
        while True:
            end = buffer.find(b"\r\n\r\n")
            if end >= 0:
                break
            data = sock.recv(65536)
            if not data:
                return Answer(0, error="closed before an answer" if not buffer else "cut answer")
            buffer += data
        lines = bytes(buffer[:end]).decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        body = bytearray(buffer[end + 4:])
        length = headers.get("content-length")
        close = headers.get("connection", "").lower() == "close"
        if length is not None:
            want = int(length)
            while len(body) < want:
                data = sock.recv(max(65536, want - len(body)))
                if not data:
                    return Answer(0, error="cut body")
                body += data
            del body[want:]
        else:  # no length: the body runs until the server closes
            close = True
            while data := sock.recv(65536):
                body += data
        reason = headers.get("x-bailing-reason")
        if reason is None and body[:1] == b"{" and "json" in headers.get("content-type", ""):
            try:
                parsed = json.loads(bytes(body))
            except ValueError:
                parsed = None
            if isinstance(parsed, dict) and isinstance(parsed.get("reason"), str):
                reason = parsed["reason"]
        return Answer(status, reason, headers.get("idempotent-replayed") == "true", bytes(body), close)


class _Thread:
    """One sending thread: its own mix (random choices, ids) and connection."""

    def __init__(self, mix: Mix, port: int, weights: dict[str, float], deadline: float,
                 check_ledger: bool, first: Sequence[str] = ()) -> None:
        self.mix = mix
        self.first = list(first)
        self.http = Http(port)
        self.port = port
        self.weights = weights
        self.deadline = deadline
        self.check_ledger = check_ledger
        self.outcomes: dict[str, dict[str, int]] = {}
        self.answers: dict[str, dict[str, int]] = {}
        self.examples: list[dict[str, Any]] = []
        self.ledger: list[tuple[str, str, str]] = []
        self.signed_ms: list[float] = []
        self.requests = 0
        self.in_progress = 0

    def run(self) -> None:
        for name in self.first:  # one of each class first, however short the run
            self._do(self.mix.step({name: 1}))
        while time.monotonic() < self.deadline:
            self._do(self.mix.step(self.weights))
        self.http.close()

    def _do(self, step: Step) -> None:
        if step.burst:
            self._burst(step.reqs)
            return
        for req in step.reqs:
            started = time.perf_counter()
            answer = self._exchange(self.http, req)
            self._record(req, answer, time.perf_counter() - started)

    def _exchange(self, http: Http, req: Req) -> Answer:
        try:
            http.send(req)
            answer = http.read()
        except OSError as exc:
            answer = Answer(0, error=f"{type(exc).__name__}: {exc}")
        if answer.status == 0 or answer.close or req.close:
            http.close()
        return answer

    def _burst(self, reqs: list[Req]) -> None:
        conns = [Http(self.port) for _ in reqs]
        started = time.perf_counter()
        sent: list[BaseException | None] = []
        for http, req in zip(conns, reqs):
            try:
                http.send(req)
                sent.append(None)
            except OSError as exc:
                sent.append(exc)
        for http, req, failed in zip(conns, reqs, sent):
            if failed is not None:
                answer = Answer(0, error=f"{type(failed).__name__}: {failed}")
            else:
                try:
                    answer = http.read()
                except OSError as exc:
                    answer = Answer(0, error=f"{type(exc).__name__}: {exc}")
            http.close()
            self._record(req, answer, time.perf_counter() - started)

    def _record(self, req: Req, answer: Answer, seconds: float) -> None:
        self.requests += 1
        outcome = classify(req.expect, answer.status, answer.reason, answer.body)
        counts = self.outcomes.setdefault(req.cls, {})
        counts[outcome] = counts.get(outcome, 0) + 1
        label = f"{answer.status} {answer.reason or ''}".strip() + (" replayed" if answer.replayed else "")
        seen = self.answers.setdefault(req.cls, {})
        seen[label] = seen.get(label, 0) + 1
        if (answer.status, answer.reason) in ((409, "idempotency_in_progress"), (503, "in_progress")):
            self.in_progress += 1
        if outcome != "ok" and sum(
                1 for e in self.examples if e["cls"] == req.cls and e["outcome"] == outcome
        ) < _EXAMPLES_PER_KIND:
            self.examples.append({
                "cls": req.cls, "outcome": outcome, "status": answer.status, "reason": answer.reason,
                "error": answer.error, "expected": req.expect.describe(),
                "body": answer.body[:300].decode("utf-8", "replace"),
                "request": req.data[:400].decode("latin-1"),
            })
        if self.check_ledger:
            for kind, key in req.ledger:
                detail = ledger_detail(kind.split("_")[0], answer.status, answer.reason,
                                       answer.replayed, answer.body)
                self.ledger.append((kind, key, detail))
        if req.signed and outcome == "ok":
            self.signed_ms.append(seconds * 1000)


def run(mixes: list[Mix], port: int, weights: dict[str, float], seconds: float,
        check_ledger: bool = True, sweep: Sequence[str] = ()) -> dict[str, Any]:
    """Send ``weights``' mix from one thread per mix for ``seconds``; the merged counts.

    The classes in ``sweep`` are sent once each first (shared out among the threads).
    """
    deadline = time.monotonic() + seconds
    threads = [_Thread(mix, port, weights, deadline, check_ledger, list(sweep)[i::len(mixes)])
               for i, mix in enumerate(mixes)]
    started = time.perf_counter()
    cpu = time.process_time()
    runners = [threading.Thread(target=t.run, name=f"load-{i}", daemon=True) for i, t in enumerate(threads)]
    for runner in runners:
        runner.start()
    for runner in runners:
        runner.join()
    elapsed = time.perf_counter() - started
    outcomes: dict[str, dict[str, int]] = {}
    answers: dict[str, dict[str, int]] = {}
    for thread in threads:
        for target, source in ((outcomes, thread.outcomes), (answers, thread.answers)):
            for cls, counts in source.items():
                merged = target.setdefault(cls, {})
                for name, n in counts.items():
                    merged[name] = merged.get(name, 0) + n
    return {
        "elapsed": elapsed,
        "client_cpu": time.process_time() - cpu,
        "requests": sum(t.requests for t in threads),
        "in_progress": sum(t.in_progress for t in threads),
        "outcomes": outcomes,
        "answers": answers,
        "examples": [e for t in threads for e in t.examples][:60],
        "ledger": [entry for t in threads for entry in t.ledger],
        "signed_ms": [ms for t in threads for ms in t.signed_ms],
    }


def main() -> None:
    config: dict[str, Any] = {}
    runs = 0
    for line in sys.stdin:
        command = json.loads(line)
        op = command["op"]
        if op == "quit":
            break
        if op == "init":
            config = command
            answer: dict[str, Any] = {"ok": True}
        elif op == "run":
            weights = command.get("weights") or {"full": FULL_WEIGHTS, "signed": SIGNED_WEIGHTS}[command["mix"]]
            host = f"127.0.0.1:{command['port']}"
            runs += 1
            # every thread of every run of every process: its own ids and random stream
            mixes = [
                Mix(config["secret"], config["client_token"], host,
                    index=(config["index"] * 1000 + runs) * 100 + i,
                    seed=(config["seed"] * 1000 + runs) * 100 + i)
                for i in range(command["threads"])
            ]
            answer = run(mixes, command["port"], weights, command["seconds"],
                         command.get("check_ledger", True), command.get("sweep") or [])
        else:
            answer = {"error": f"unknown op {op!r}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
