"""The deployment guide's code, run: the raw-target probe under a real gunicorn, the mounts, ProxyFix.

The server configurations the page shows (nginx, command lines of a
production server) cannot run here and are marked so; what the page says
its small application prints, it prints.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from werkzeug.test import Client

from bailing_flask import Bailing
from bailing_flask.testing import catalog_headers

from ._servers import gunicorn_serving
from .helpers import STRONG_SECRET

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "deployment.rst"
CATALOG = "/.well-known/bailing/tools.json"


def shown_output_of_the_raw_target_probe() -> list[str]:
    text = PAGE.read_text(encoding="utf-8")
    block = text[text.index("   $ curl -s --path-as-is"):].split("\n\n", 1)[0]
    return [line[3:] for line in block.splitlines()[1:]]


def raw_get(base: str, target: str) -> bytes:
    address = urlsplit(base)
    with socket.create_connection((address.hostname, address.port), timeout=60) as conn:
        # HTTP/1.0: the body comes as it is, not chunked
        conn.sendall(f"GET {target} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".encode())
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer.split(b"\r\n\r\n", 1)[1]


@pytest.mark.slow
def test_the_raw_target_probe_prints_under_gunicorn_what_the_page_shows():
    target = re.search(r"'http://127\.0\.0\.1:8011(\S+)'", PAGE.read_text(encoding="utf-8"))[1]
    with gunicorn_serving("docs.examples.deployment.rawtarget:app") as base:
        printed = raw_get(base, target).decode().splitlines()
    assert printed == shown_output_of_the_raw_target_probe()


@pytest.fixture
def mounting(monkeypatch):
    monkeypatch.setenv("BAILING_SECRET", STRONG_SECRET)
    monkeypatch.syspath_prepend(str(ROOT / "docs" / "examples" / "deployment"))
    import mounting as module

    return module


def test_an_app_mounted_with_dispatcher_middleware_verifies_the_catalog_signed_with_its_prefix(mounting):
    client = Client(mounting.mounted())
    signed = client.get("/openapi" + CATALOG, headers=catalog_headers(STRONG_SECRET, "/openapi" + CATALOG))
    assert signed.status_code == 200, signed.get_data(as_text=True)
    shorter = client.get("/openapi" + CATALOG, headers=catalog_headers(STRONG_SECRET, CATALOG))
    assert shorter.status_code == 401


def test_proxy_fix_applied_after_bailing_gives_the_middleware_the_forwarded_prefix(mounting):
    client = Client(mounting.behind_proxy_fix())
    fetch = client.get(CATALOG, headers={**catalog_headers(STRONG_SECRET, "/openapi" + CATALOG),
                                         "X-Forwarded-Prefix": "/openapi"})
    assert fetch.status_code == 200, fetch.get_data(as_text=True)


def test_the_several_hosts_store_comes_from_the_environment(mounting, monkeypatch):
    monkeypatch.setenv("BAILING_STORE", "redis://:password@redis.internal:6379/2")
    assert Bailing.config(mounting.several_hosts()).store == "redis://:password@redis.internal:6379/2"
