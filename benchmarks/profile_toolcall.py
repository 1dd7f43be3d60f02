"""Where a signed tool call's time goes: cProfile over many in-process calls.

    python -m benchmarks.profile_toolcall                 # the POST tool, 20000 calls
    python -m benchmarks.profile_toolcall --method GET
    python -m benchmarks.profile_toolcall --store memory  # the de-duplicated POST tool
    python -m benchmarks.profile_toolcall --top 40 --dump toolcall.prof

Drives the same app and the same hub-signed request as the ``toolcall``
group (``benchmarks/_apps.py``) through the WSGI callable, under cProfile,
and prints

* the functions *inside bailing_flask* by their own time (tottime) and by
  cumulative time, with each one's share of the whole call;
* the overall top functions (Flask, Werkzeug and pydantic included), for
  context.

cProfile adds a constant cost per function call, so shares are indicative
(code that calls many small functions looks heavier than it is); the
``toolcall`` group's ratios are the measurement.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
from typing import Any

from bailing_flask.testing import HubSimulator

from . import _apps
from ._wsgi import FreshCalls, HubSigner, SameRequest, environ_for

PACKAGE_DIR = os.path.dirname(os.path.abspath(sys.modules["bailing_flask"].__file__ or ""))


def _case(method: str, store: str | None) -> Any:
    app = _apps.tool_app(store=f"{store}://" if store == "memory" else "memory://")
    hub = HubSimulator(app, _apps.SECRET, client="bench")
    if store:
        template = hub.build_call(_apps.IDEM_TOOL, _apps.POST_ARGS, subject=_apps.SUBJECT)
        return FreshCalls(app, HubSigner(_apps.SECRET, template, _apps.IDEM_TOOL, _apps.POST_ARGS,
                                         _apps.SUBJECT))
    name, args = ((_apps.POST_TOOL, _apps.POST_ARGS) if method == "POST"
                  else (_apps.GET_TOOL, _apps.GET_ARGS))
    request = hub.build_call(name, args, subject=_apps.SUBJECT)
    return SameRequest(app, lambda: environ_for(hub.build_call(name, args, subject=_apps.SUBJECT)),
                       request.body)


def _rows(stats: pstats.Stats, total: float, inside: bool, key: int, top: int) -> list[str]:
    entries: list[tuple[float, float, int, str]] = []
    for (filename, line, func), (_cc, nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        in_package = os.path.abspath(filename).startswith(PACKAGE_DIR)
        if inside and not in_package:
            continue
        where = (os.path.relpath(filename, os.path.dirname(PACKAGE_DIR)) if in_package
                 else os.path.basename(filename))
        entries.append((tt, ct, nc, f"{where}:{line}({func})"))
    entries.sort(key=lambda e: -(e[0] if key == 0 else e[1]))
    out = [f"{'own %':>6} {'cum %':>6} {'calls/req':>9}  function"]
    for tt, ct, nc, name in entries[:top]:
        out.append(f"{100 * tt / total:6.1f} {100 * ct / total:6.1f} {nc / _CALLS[0]:9.2f}  {name}")
    return out


_CALLS = [1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.profile_toolcall", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--method", choices=("POST", "GET"), default="POST")
    parser.add_argument("--store", choices=("memory",), default=None,
                        help="profile the de-duplicated POST tool over this store instead")
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--dump", metavar="FILE", help="also write the raw profile (pstats format)")
    args = parser.parse_args(argv)
    case = _case(args.method, args.store)
    for _ in range(3):  # warm-up, unprofiled
        case.prepare(200)
        for _ in range(200):
            case()
    case.prepare(args.calls)
    _CALLS[0] = args.calls
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(args.calls):
        case()
    profiler.disable()
    if args.dump:
        profiler.dump_stats(args.dump)
    stats = pstats.Stats(profiler, stream=io.StringIO())
    total = stats.total_tt  # type: ignore[attr-defined]
    what = f"{'POST /api/orders/idem (memory store)' if args.store else args.method + ' tool'}"
    own = sum(tt for (filename, _l, _f), (_cc, _nc, tt, _ct, _c) in stats.stats.items()  # type: ignore[attr-defined]
              if os.path.abspath(filename).startswith(PACKAGE_DIR))
    print(f"{args.calls} signed calls of the {what}: {1e6 * total / args.calls:.1f} µs per call "
          f"under cProfile; {100 * own / total:.1f} % of it in bailing_flask's own frames "
          "(the rest: Flask, Werkzeug, pydantic, blinker, the stdlib - much of it called from "
          "the package)\n")
    print("inside bailing_flask, by own time:")
    print("\n".join(_rows(stats, total, True, 0, args.top)))
    print("\ninside bailing_flask, by cumulative time:")
    print("\n".join(_rows(stats, total, True, 1, args.top)))
    print("\neverything, by own time:")
    print("\n".join(_rows(stats, total, False, 0, args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
