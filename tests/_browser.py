"""A real headless Chromium for the tests, driven over WebDriver with the standard library only.

Debian's ``chromium`` and ``chromium-driver`` packages bring the browser
and ``chromedriver``; :class:`Browser` starts ``chromedriver`` on a free
loopback port, opens one session with a fresh, empty profile and no
network features (no sync, no component updates, no QUIC), and speaks the
W3C WebDriver protocol (plain JSON over HTTP) to it. Nothing to install
from PyPI.

:func:`page_problems` is what a reader would see as a build error on a
page of the built documentation: docutils' system messages and
"problematic" markers, error admonitions, the text that a theme puts into
a pseudo-element to complain (furo paints ``ERROR: Adding a table of
contents ...`` in a red box over a ``.. contents::`` block, which no
warning of the build reports), and code that the highlighter could not
read (``.highlight .err``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

__all__ = ["Browser", "BrowserMissing", "find_chromium", "page_problems", "CHROMIUM_FLAGS"]

#: how the browser is started: headless, no sandbox (root in CI), nothing that reaches the network
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--window-size=1280,1000"]

_DEADLINE = 60.0


class BrowserMissing(RuntimeError):
    """Chromium or chromedriver is not installed."""


def find_chromium() -> tuple[str, str]:
    """``(chromium, chromedriver)`` paths, or :class:`BrowserMissing` naming the Debian packages."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        raise BrowserMissing("headless Chromium is not installed: apt-get install chromium chromium-driver")
    return browser, driver


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Browser:
    """One chromedriver process and one browser session; use as a context manager."""

    def __init__(self) -> None:
        browser, driver = find_chromium()
        self.profile = tempfile.mkdtemp(prefix="bailing-chromium-")
        self.port = _free_port()
        self.driver = subprocess.Popen([driver, f"--port={self.port}"], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{self.port}"
        self.session = ""
        try:
            self._wait_ready()
            options = {"binary": browser, "args": [*CHROMIUM_FLAGS, f"--user-data-dir={self.profile}"]}
            answer = self._call("POST", "/session", {"capabilities": {"alwaysMatch": {
                "browserName": "chrome", "goog:chromeOptions": options}}})
            self.session = answer["sessionId"]
        except BaseException:
            self.close()
            raise

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + _DEADLINE
        while True:
            try:
                if self._call("GET", "/status").get("ready"):
                    return
            except (OSError, urllib.error.URLError):
                pass
            if self.driver.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("chromedriver did not start")
            time.sleep(0.1)

    def _call(self, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=_DEADLINE) as response:
                return json.loads(response.read())["value"]
        except urllib.error.HTTPError as error:
            raise RuntimeError(f"WebDriver {method} {path}: {error.read()[:500]!r}") from None

    def visit(self, url: str) -> None:
        self._call("POST", f"/session/{self.session}/url", {"url": url})

    def run(self, script: str, *args: Any) -> Any:
        """The value of ``script`` (a function body) in the current page."""
        return self._call("POST", f"/session/{self.session}/execute/sync", {"script": script, "args": list(args)})

    def close(self) -> None:
        if self.session:
            try:
                self._call("DELETE", f"/session/{self.session}")
            except (OSError, RuntimeError, urllib.error.URLError):
                pass
            self.session = ""
        if self.driver.poll() is None:
            self.driver.terminate()
            try:
                self.driver.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.driver.kill()
                self.driver.wait(timeout=10)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: run in the page: every visible sign of a build error, as short descriptions
_PROBLEMS_SCRIPT = r"""
const problems = [];
const where = (el) => {
  const section = el.closest('section[id]');
  return section ? ' (in #' + section.id + ')' : '';
};
const text = (el) => (el.innerText || el.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 160);
for (const el of document.querySelectorAll(
    '.system-message, .problematic, div.admonition.error, aside.system-message')) {
  problems.push('build error ' + el.className + where(el) + ': ' + text(el));
}
for (const el of document.querySelectorAll('.highlight .err')) {
  problems.push('code the highlighter could not read' + where(el) + ': ' + text(el));
}
for (const el of document.querySelectorAll('body *')) {
  for (const pseudo of ['::before', '::after']) {
    const content = getComputedStyle(el, pseudo).content;
    if (content && /ERROR|WARNING/.test(content)) {
      problems.push('the theme paints ' + content.slice(0, 160) + ' on <' + el.tagName.toLowerCase()
                    + ' class="' + el.className + '">' + where(el));
    }
  }
}
return problems;
"""


def page_problems(browser: Browser, page: Path) -> list[str]:
    """What a reader of ``page`` (a built HTML file) would see as a build error."""
    browser.visit(page.resolve().as_uri())
    problems: list[str] = browser.run(_PROBLEMS_SCRIPT)
    return problems


def available() -> str | None:
    """``None`` when Chromium and chromedriver are here, else why not."""
    try:
        find_chromium()
    except BrowserMissing as missing:
        return str(missing)
    return None if os.name == "posix" else "the browser check runs on Linux"
