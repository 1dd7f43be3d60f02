"""Coverage-guided fuzzing of the middleware and the gate with atheris (libFuzzer).

Run by :mod:`benchmarks.reliability.fuzz` in a subprocess (libFuzzer ends the
process when it is done)::

    python -m benchmarks.reliability._atheris_wsgi -runs=20000 -artifact_prefix=/tmp/x/

Each input's bytes choose a case of the ``middleware`` target (method, raw
path, query, body, subject, job id, how it is signed, the environ mutations),
so libFuzzer steers the same generator by the package's branch coverage.
The oracle is the target's: a problem is raised as an exception, which
libFuzzer reports as a crash (and writes the input under ``-artifact_prefix``).
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports(include=["bailing_flask"]):
    import bailing_flask  # noqa: F401
    import bailing_flask._pipeline.arguments  # noqa: F401
    import bailing_flask._pipeline.gate  # noqa: F401
    import bailing_flask.wire.signing  # noqa: F401
    import bailing_flask.wire.middleware  # noqa: F401

from tests._fuzz import wsgi  # noqa: E402

_SIGNINGS = ["valid", "valid", "valid", "none", "garbage", "other_key", "stale", "ts_garbage"]
_PATHS = ["/items/1", "/search", "/notes", "/items/2/label", "/items/3", "/plain",
          "/.well-known/bailing/tools.json", "/hub/job", "/secure/x"]
_METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]
_MUTATIONS = ["method", "path_info", "raw_uri", "drop_raw_uri", "query", "body_flip", "body_truncate",
              "content_length", "chunked", "stream_error", "subject", "job", "duplicate", "header",
              "script_name", "absolute_uri"]
_HEADERS = ["HTTP_X_BAILING_SIGNATURE", "HTTP_X_BAILING_TIMESTAMP", "HTTP_X_BAILING_ON_BEHALF_OF",
            "HTTP_X_BAILING_JOB_ID", "HTTP_TRANSFER_ENCODING", "HTTP_X_HTTP_METHOD_OVERRIDE"]


def _latin1(fdp: atheris.FuzzedDataProvider, size: int) -> str:
    return fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, size)).decode("latin-1")


def _case(data: bytes) -> wsgi.WsgiCase:
    fdp = atheris.FuzzedDataProvider(data)
    pick = fdp.PickValueInList
    method = pick(_METHODS)
    path = pick(_PATHS) if fdp.ConsumeBool() else "/" + _latin1(fdp, 24)
    query = _latin1(fdp, 24) if fdp.ConsumeBool() else ""
    body = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 512)) if method not in ("GET", "HEAD") else b""
    subject = _latin1(fdp, 32) if fdp.ConsumeBool() else None
    job = _latin1(fdp, 16) if fdp.ConsumeBool() else None
    signing = pick(_SIGNINGS)
    mutations: list[tuple[str, object]] = []
    for _ in range(fdp.ConsumeIntInRange(0, 3)):
        kind = pick(_MUTATIONS)
        value: object
        if kind == "header":
            value = (pick(_HEADERS), _latin1(fdp, 20))
        elif kind == "duplicate":
            value = pick(_HEADERS[:3])
        elif kind in ("body_flip", "body_truncate", "stream_error"):
            value = fdp.ConsumeIntInRange(0, 1000)
        elif kind == "chunked":
            value = fdp.ConsumeBool()
        elif kind in ("drop_raw_uri",):
            value = None
        elif kind == "absolute_uri":
            value = "http://h"
        elif kind == "script_name":
            value = "/pre"
        elif kind == "method":
            value = pick(_METHODS + ["get", "FOO"])
        elif kind == "path_info" or kind == "raw_uri":
            value = pick(_PATHS)
        else:
            value = _latin1(fdp, 20)
        mutations.append((kind, value))
    return wsgi.WsgiCase(pick(["flask", "flask", "bare"]), method, path, query, body, subject, job,
                         signing, mutations)


def main() -> None:
    with wsgi.target() as check:

        def one_input(data: bytes) -> None:
            case = _case(data)
            outcome = check(case)
            if not outcome.ok:
                raise AssertionError(f"{outcome} <- {case!r}")

        atheris.Setup(sys.argv, one_input)
        atheris.Fuzz()


if __name__ == "__main__":
    main()
