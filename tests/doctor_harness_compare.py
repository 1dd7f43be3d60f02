"""Compare the doctor's classifications with the hub's own code (manual dev check).

Runs each scenario of tests/test_doctor.py twice on fresh servers: once
through a hub harness (a folder with the hub's TypeScript,
unchanged) and once through :func:`bailing_flask.doctor.run_doctor`, and
prints both ``spec_access_probe`` results (and the authz probe where the
hub gets that far). Not collected by pytest (needs Node and the harness)::

    .venv/bin/python -m tests.doctor_harness_compare --harness PATH  (or BAILING_HUB_HARNESS=PATH)
"""

from __future__ import annotations

import argparse
import os
import json
import logging
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

from werkzeug.serving import WSGIRequestHandler, make_server

from bailing_flask.doctor import run_doctor

from .helpers import STRONG_SECRET
from .apps.doctor_apps import (
    CachingProxy,
    ForwardingProxy,
    create_shop_app,
    generic_probe,
    login_redirect,
    strip_prefix,
)

WELL_KNOWN = "/.well-known/bailing/tools.json"


def serve(app: Any) -> tuple[str, Callable[[], None]]:
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return f"http://127.0.0.1:{server.server_port}", stop


def healthy() -> tuple[str, list[Callable[[], None]]]:
    base, stop = serve(create_shop_app())
    return base, [stop]


def prefix_proxy() -> tuple[str, list[Callable[[], None]]]:
    upstream, stop1 = serve(create_shop_app())
    proxy, stop2 = serve(ForwardingProxy(upstream, strip_prefix("/api")))
    return proxy + "/api", [stop1, stop2]


def caching_cdn() -> tuple[str, list[Callable[[], None]]]:
    upstream, stop1 = serve(create_shop_app())
    cdn, stop2 = serve(CachingProxy(upstream))
    return cdn, [stop1, stop2]


def login_wall() -> tuple[str, list[Callable[[], None]]]:
    app = create_shop_app()
    app.wsgi_app = login_redirect(app.wsgi_app)  # type: ignore[method-assign]
    base, stop = serve(app)
    return base, [stop]


def probe_ok() -> tuple[str, list[Callable[[], None]]]:
    app = create_shop_app()
    app.wsgi_app = generic_probe(  # type: ignore[method-assign]
        app.wsgi_app, "/.well-known/bailing/authz-probe", {"ok": True})
    base, stop = serve(app)
    return base, [stop]


SCENARIOS: list[tuple[str, Callable[[], tuple[str, list[Callable[[], None]]]], str]] = [
    ("a healthy", healthy, STRONG_SECRET),
    ("b proxy strips /api", prefix_proxy, STRONG_SECRET),
    ("c caching CDN", caching_cdn, STRONG_SECRET),
    ("d login redirect", login_wall, STRONG_SECRET),
    ("e wrong secret", healthy, "wrong-secret-0123456789abcdefghijklmnopq"),
    ("g probe answers ok:true", probe_ok, STRONG_SECRET),
]

FIELDS = ("status", "signed_http", "unsigned_http", "invalid_http")


def hub_view(harness: str, base: str, secret: str) -> dict[str, Any]:
    out = subprocess.run(
        ["node", f"{harness}/run.mjs", "refresh", "--spec-url", base + WELL_KNOWN, "--secret", secret,
         "--base-url", base, "--probe", "--compact"],
        check=False, capture_output=True, text=True, timeout=120,
    )
    if out.returncode not in (0, 1):
        raise SystemExit(f"harness failed ({out.returncode}): {out.stderr[-2000:]}")
    return json.loads(out.stdout)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--harness", default=os.environ.get("BAILING_HUB_HARNESS"),
                        required="BAILING_HUB_HARNESS" not in os.environ)
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)
    WSGIRequestHandler.log_request = lambda *a, **k: None  # type: ignore[method-assign]
    agree = True
    for label, scenario, secret in SCENARIOS:
        base, stops = scenario()
        try:
            hub = hub_view(args.harness, base, secret)
        finally:
            for stop in stops:
                stop()
        base, stops = scenario()
        try:
            report = run_doctor(base, secret)
        finally:
            for stop in stops:
                stop()
        hub_access = {k: hub.get("classification", {}).get(k) for k in FIELDS}
        doc_access = {k: getattr(report.catalog_access, k) for k in FIELDS}
        hub_probe = (hub.get("authz_probe") or {}).get("status")
        doc_probe = report.authz_probe.status if report.authz_probe else None
        same = hub_access == doc_access and (hub_probe is None or hub_probe == doc_probe)
        agree &= same
        print(f"{'AGREE' if same else 'DIFFER'}  {label}")
        print(f"        hub:    {hub_access}  probe={hub_probe}  reason={hub.get('classification', {}).get('reason')}")
        print(f"        doctor: {doc_access}  probe={doc_probe}")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
