"""The configuration: read once at ``init_app``, every value checked by its type, errors naming the key.

What ``init_app`` reads becomes one frozen object (``Bailing.config(app)``);
nothing in the package reads ``app.config`` afterwards, so a setting changed
later changes nothing, and no request pays for reading it.
"""

from __future__ import annotations

import ast
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.config import Config as FlaskConfig

import bailing_flask
from bailing_flask import Bailing
from bailing_flask.errors import ConfigurationError
from bailing_flask import settings
from bailing_flask.stores import MemoryStore
from bailing_flask.testing import HubSimulator, signed_headers

from .apps.legacy_app import create_app as create_legacy_app
from .apps.settings_app import CLIENT_TOKEN, create_app
from .helpers import STRONG_SECRET

MiB = 1024 * 1024


def refusal(**config: Any) -> str:
    """The message of the ConfigurationError ``init_app`` raises for ``config``."""
    with pytest.raises(ConfigurationError) as caught:
        create_app(**config)
    return str(caught.value)


# -- values as environment-style configuration writes them ------------------------------------


@pytest.mark.parametrize("key, value, read", [
    ("BAILING_WINDOW", "300", 300),
    ("BAILING_WINDOW", " 120 ", 120),
    ("BAILING_MAX_BODY_SIZE", "10MiB", 10 * MiB),
    ("BAILING_MAX_BODY_SIZE", "512 KiB", 512 * 1024),
    ("BAILING_MAX_BODY_SIZE", "1048576", MiB),
    ("BAILING_SPOOL_THRESHOLD", "1MiB", MiB),
    ("BAILING_CALLBACK_MAX_BODY_SIZE", "1.5MiB", 3 * MiB // 2),
    ("BAILING_BODY_TIMEOUT", "10", 10.0),
    ("BAILING_BODY_TIMEOUT", "2.5", 2.5),
    ("BAILING_CSRF_EXEMPT", "false", False),
    ("BAILING_CSRF_EXEMPT", "FALSE", False),
    ("BAILING_CSRF_EXEMPT", "0", False),
    ("BAILING_CSRF_EXEMPT", "off", False),
    ("BAILING_REJECT_REPLAYS", "true", True),
    ("BAILING_REJECT_REPLAYS", "yes", True),
    ("BAILING_REJECT_REPLAYS", 1, True),
    ("BAILING_RESPONSE_MAX_ITEMS", "0", 0),
    ("BAILING_IDEMPOTENCY_RETENTION", "3600", 3600.0),
    ("BAILING_REQUIRE_SIGNATURE", "/admin, /internal", ("/admin", "/internal")),
    ("BAILING_REQUIRE_SIGNATURE", ["/admin"], ("/admin",)),
    ("BAILING_PATH_PREFIX", "/hub/", "/hub"),
])
def test_strings_from_the_environment_are_read_as_what_they_say(key: str, value: Any, read: Any) -> None:
    app, _ = create_app(**{key: value})
    assert getattr(Bailing.config(app), key.removeprefix("BAILING_").lower()) == read


def test_a_window_of_300_written_as_a_string_verifies_calls() -> None:
    app, _ = create_app(BAILING_WINDOW="300")
    assert app.wsgi_app.verifier.window == 300  # type: ignore[attr-defined]
    late = HubSimulator(app, STRONG_SECRET, clock=lambda: time.time() - 290)
    assert late.call("orders", subject="t1:alice").status == 200


def test_a_body_limit_written_as_a_size_refuses_larger_bodies() -> None:
    app, _ = create_app(BAILING_MAX_BODY_SIZE="1KiB")
    hub = HubSimulator(app, STRONG_SECRET)
    assert hub.call("notes_post", {"text": "x" * 500}, subject="t1:alice").status == 201
    refused = hub.call("notes_post", {"text": "x" * 2000}, subject="t1:alice")
    assert refused.status == 413 and refused.json()["reason"] == "body_too_large"


def test_ten_megabytes_is_refused_as_ambiguous_naming_both_readings() -> None:
    message = refusal(BAILING_MAX_BODY_SIZE="10MB")
    assert message.startswith("BAILING_MAX_BODY_SIZE ")
    assert "ambiguous" in message and "10MiB" in message


def test_csrf_exempt_false_as_a_string_turns_the_exemption_off() -> None:
    app = create_legacy_app(csrf_exempt="false")  # type: ignore[arg-type]
    response = HubSimulator(app, STRONG_SECRET).call("api_notes_post", {"text": "x"},
                                                     subject="t1:alice")
    assert response.status == 400 and b"CSRF" in response.body


def test_one_signature_prefix_written_as_a_string_is_one_prefix_not_its_letters() -> None:
    app, _ = create_app(BAILING_REQUIRE_SIGNATURE="/admin")
    client = app.test_client()
    assert client.get("/").status_code == 200
    assert client.get("/admin/panel").status_code == 401


# -- every kind of setting refuses a value of the wrong type, naming the key ------------------

#: one value of the wrong type (or out of range) for every setting
WRONG: dict[str, Any] = {
    "BAILING_SECRETS": 12345,
    "BAILING_WINDOW": "5 minutes",
    "BAILING_MAX_BODY_SIZE": "10MB",
    "BAILING_BODY_TIMEOUT": "10s",
    "BAILING_SPOOL_THRESHOLD": True,
    "BAILING_BASE_URL": 443,
    "BAILING_PUBLIC_PREFIX": "api",
    "BAILING_RAW_TARGET": "raw",
    "BAILING_REQUIRE_SIGNATURE": 5,
    "BAILING_PATH_PREFIX": None,
    "BAILING_CATALOG_TITLE": 7,
    "BAILING_CATALOG_VERSION": 1.0,
    "BAILING_PUBLIC_CATALOG": "sometimes",
    "BAILING_CSRF_EXEMPT": "ture",
    "BAILING_AUDIT_ARGUMENT_VALUES": 2,
    "BAILING_RESPONSE_SIZE_WARNING": "8k",
    "BAILING_RESPONSE_MAX_ITEMS": -1,
    "BAILING_STORE": 6379,
    "BAILING_IDEMPOTENCY_RETENTION": "1 day",
    "BAILING_IDEMPOTENCY_LEASE": 0,
    "BAILING_TRANSACTION": "postgres",
    "BAILING_IDEMPOTENCY_DEFER_COMPLETION": None,
    "BAILING_REJECT_REPLAYS": "nope",
    "BAILING_CLIENT_TOKENS": [CLIENT_TOKEN, 5],
    "BAILING_HUB_URL": "hub.example.com",
    "BAILING_CALLBACK_MAX_BODY_SIZE": "4 MB",
    "BAILING_APPROVAL_RETENTION": float("inf"),
    "BAILING_OTEL": "enabled",
    "BAILING_AUDIT_SINK": 3,
}


def test_every_setting_has_a_wrong_value_below() -> None:
    assert set(WRONG) == {s.key for s in settings.SETTINGS}


@pytest.mark.parametrize("key", sorted(WRONG))
def test_a_value_of_the_wrong_type_stops_init_app_naming_the_key(key: str) -> None:
    message = refusal(**{key: WRONG[key]})
    assert message.startswith(key), message
    assert "\n" not in message  # one problem, one line


def test_every_problem_is_listed_at_once() -> None:
    message = refusal(BAILING_WINDOW="soon", BAILING_OTEL="maybe", BAILING_MAX_BODY_SIZE=-1)
    lines = message.splitlines()
    assert lines[0] == "the configuration has problems:"
    assert [line.split()[0] for line in lines[1:]] == [
        "BAILING_WINDOW", "BAILING_MAX_BODY_SIZE", "BAILING_OTEL"]


def test_the_message_says_what_the_setting_accepts() -> None:
    assert refusal(BAILING_WINDOW=5000) == "BAILING_WINDOW must be whole seconds, 1-3600 (got 5000)"
    assert refusal(BAILING_CSRF_EXEMPT="ture").startswith(
        "BAILING_CSRF_EXEMPT must be True or False (or \"true\"/\"false\"")
    assert refusal(BAILING_WINDOW=True).startswith("BAILING_WINDOW must be whole seconds")


def test_a_bad_option_names_the_keyword_it_came_from() -> None:
    with pytest.raises(ConfigurationError, match=r"^BAILING_WINDOW \(Bailing\(window=\.\.\.\)\) must"):
        create_app(options={"window": "soon"})


def test_options_are_defaults_and_app_config_wins() -> None:
    app, _ = create_app(options={"window": "120", "max_body_size": "2MiB"}, BAILING_WINDOW=60)
    config = Bailing.config(app)
    assert (config.window, config.max_body_size) == (60, 2 * MiB)


# -- secrets never appear -----------------------------------------------------------------------

PASSWORD = "hunter2-do-not-show"


@pytest.mark.parametrize("config", [
    {"BAILING_SECRETS": {"new": STRONG_SECRET, "old": 5}},
    {"BAILING_SECRETS": [STRONG_SECRET, "  "]},
    {"BAILING_SECRETS": None, "BAILING_SECRET": [STRONG_SECRET]},
    {"BAILING_CLIENT_TOKENS": [CLIENT_TOKEN, b"bytes"]},
    {"BAILING_CLIENT_TOKENS": CLIENT_TOKEN.encode()},
    {"BAILING_STORE": f"postgres://admin:{PASSWORD}@db/x"},
    {"BAILING_STORE": f"redis://:{PASSWORD}@cache:6379/0", "BAILING_WINDOW": "soon"},
    {"BAILING_HUB_URL": f"https://bot:{PASSWORD}@hub.example.com"},
    {"BAILING_BASE_URL": f"https://bot:{PASSWORD}@shop.example.com/api"},
    {"BAILING_WINDOW": STRONG_SECRET},  # a secret pasted into the wrong key is not shown
    {"BAILING_CATALOG_TITLE": [STRONG_SECRET]},
])
def test_no_secret_and_no_password_appears_in_any_message(config: dict[str, Any]) -> None:
    message = refusal(**config)
    assert STRONG_SECRET not in message and CLIENT_TOKEN not in message
    assert PASSWORD not in message


def test_the_configurations_repr_shows_no_secret_and_no_password() -> None:
    app, _ = create_app(BAILING_SECRETS={"a": STRONG_SECRET},
                        BAILING_HUB_URL="https://hub.example.com")
    config = dataclasses.replace(Bailing.config(app), store=f"redis://:{PASSWORD}@cache:6379/0")
    shown = repr(config)
    assert "secrets=<1 secret>" in shown and "client_tokens=<1 secret>" in shown
    assert STRONG_SECRET not in shown and CLIENT_TOKEN not in shown and PASSWORD not in shown
    assert "'redis://cache:6379/...'" in shown


# -- unknown, renamed and removed keys ------------------------------------------------------------


@pytest.mark.parametrize("key, nearest", [
    ("BAILING_WINDOWS", "BAILING_WINDOW"),
    ("BAILING_REJECT_REPLAY", "BAILING_REJECT_REPLAYS"),
    ("BAILING_REQUIRE_SIGNATURES", "BAILING_REQUIRE_SIGNATURE"),
    ("BAILING_CLIENT_TOKEN", "BAILING_CLIENT_TOKENS"),
])
def test_a_misspelt_setting_stops_init_app_with_the_nearest_name(key: str, nearest: str) -> None:
    # silently ignored, a misspelt BAILING_REJECT_REPLAYS would leave replays accepted
    assert refusal(**{key: True}) == f"{key} is not a bailing_flask setting; did you mean {nearest}?"


#: the settings 0.1.0's pre-releases had that this configuration replaced
RENAMED = ("BAILING_CATALOG_PATH", "BAILING_PROBE_PATH", "BAILING_CALLBACK_PATH",
           "BAILING_DELIVERY_PATH", "BAILING_APPROVAL_PATH", "BAILING_CALLBACK_WINDOW_MS")


def test_the_renamed_settings_are_among_those_the_package_refuses() -> None:
    assert set(RENAMED) <= set(settings.REMOVED_SETTINGS)


@pytest.mark.parametrize("key", RENAMED)
def test_a_renamed_setting_stops_init_app_naming_its_replacement(key: str) -> None:
    message = refusal(**{key: "/.well-known/bailing/whatever"})
    assert message.startswith(f"{key} is removed: set ")
    assert ("BAILING_PATH_PREFIX" in message) != ("BAILING_WINDOW" in message)


def test_a_renamed_option_is_refused_by_the_constructor() -> None:
    with pytest.raises(ConfigurationError,
                       match=r"^Bailing option 'callback_window_ms' is removed: set BAILING_WINDOW"):
        Bailing(callback_window_ms=300_000)  # type: ignore[call-arg]
    with pytest.raises(ConfigurationError, match=r"did you mean window=\?$"):
        Bailing(windows=300)  # type: ignore[call-arg]


# -- the package's paths under one prefix ---------------------------------------------------------


def test_every_endpoint_of_the_package_moves_with_the_path_prefix() -> None:
    app, _ = create_app(BAILING_PATH_PREFIX="/hub")
    hub = HubSimulator(app, STRONG_SECRET, catalog_url="/hub/tools.json", client_token=CLIENT_TOKEN)
    assert hub.fetch_catalog().status == 200
    assert hub.document()["x-bailing-authz-probe"]["path"] == "/hub/authz-probe"
    assert hub.probe().json() == {"authorized": False}
    assert hub.send_job_finished(job_id="job-7", status="done").status == 200
    assert app.extensions["jobs"] == ["job-7"]
    old = "/.well-known/bailing/tools.json"
    assert app.test_client().get(old, headers=signed_headers(STRONG_SECRET, "GET", old)
                                 ).status_code == 404


# -- one window, in seconds, for both directions --------------------------------------------------


@pytest.mark.parametrize("age, status", [(59, 200), (61, 401)])
def test_the_window_holds_the_hubs_callbacks_too(age: int, status: int) -> None:
    app, _ = create_app(BAILING_WINDOW=60)
    hub = HubSimulator(app, STRONG_SECRET, client_token=CLIENT_TOKEN, clock=lambda: time.time() - age)
    response = hub.send_job_finished(job_id=f"job-{age}", status="done")
    assert response.status == status
    assert app.extensions["jobs"] == ([f"job-{age}"] if status == 200 else [])


# -- a store object -----------------------------------------------------------------------------


def test_a_store_object_as_the_store_setting_keeps_the_calls() -> None:
    store = MemoryStore()
    app, _ = create_app(BAILING_STORE=store)
    hub = HubSimulator(app, STRONG_SECRET)
    first = hub.call("notes_post", {"text": "once"}, subject="t1:alice")
    assert first.request is not None
    again = hub.replay(first.request)
    assert (first.status, again.status) == (201, 201)
    assert app.extensions["runs"] == ["once"]
    assert store.list(limit=10)


# -- read once, frozen -----------------------------------------------------------------------------


def test_the_configuration_is_frozen_and_later_changes_to_app_config_change_nothing() -> None:
    app, _ = create_app()
    app.config["BAILING_PUBLIC_CATALOG"] = True
    assert HubSimulator(app, STRONG_SECRET).fetch_catalog(signature=None).status == 401
    config = Bailing.config(app)
    assert config.public_catalog is False
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.public_catalog = True  # type: ignore[misc]


class WatchedConfig(FlaskConfig):
    """``app.config`` that notes every reading made by a ``bailing_flask`` module while watched."""

    def __init__(self, source: FlaskConfig) -> None:
        super().__init__(source.root_path, dict(source))
        self.watching = False
        self.readings: list[str] = []

    def _note(self, what: object) -> None:
        if self.watching:
            caller = sys._getframe(2)
            module = str(caller.f_globals.get("__name__", ""))
            if module.split(".")[0] == "bailing_flask":
                self.readings.append(f"{module}:{caller.f_lineno} read {what!r}")

    def __getitem__(self, key: Any) -> Any:
        self._note(key)
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        self._note(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self._note(key)
        return super().__contains__(key)

    def __iter__(self) -> Any:
        self._note("every key")
        return super().__iter__()

    def keys(self) -> Any:
        self._note("every key")
        return super().keys()

    def items(self) -> Any:
        self._note("every item")
        return super().items()

    def values(self) -> Any:
        self._note("every value")
        return super().values()

    def setdefault(self, key: Any, default: Any = None) -> Any:
        self._note(key)
        return super().setdefault(key, default)


def test_the_watcher_sees_a_reading_by_the_package() -> None:
    app, _ = create_app()
    watched = app.config = WatchedConfig(app.config)  # type: ignore[method-assign]
    watched.watching = True
    exec("config.get('BAILING_WINDOW')", {"__name__": "bailing_flask.reader", "config": watched})
    assert watched.readings == ["bailing_flask.reader:1 read 'BAILING_WINDOW'"]


def test_no_request_reads_app_config(live_server: Any) -> None:
    """A tool call (read and write), a refused one, the catalog, the probe, a callback, a page."""
    app, _ = create_app()
    watched = app.config = WatchedConfig(app.config)  # type: ignore[method-assign]
    watched.watching = True
    base = live_server(app)
    hub = HubSimulator(base, STRONG_SECRET, client_token=CLIENT_TOKEN)
    assert hub.fetch_catalog().status == 200
    assert hub.call("orders", subject="t1:alice").status == 200
    assert hub.call("notes_post", {"text": "hi"}, subject="t1:alice").status == 201
    assert hub.call("notes_post", {"text": "no"}, subject="t2:mallory").status == 403
    assert hub.probe().json() == {"authorized": False}
    assert hub.send_job_finished(job_id="job-1", status="done").status == 200
    assert HubSimulator(base, "another-secret-0123456789abcdefghijklmn").fetch_catalog().status == 401
    import urllib.request

    with urllib.request.urlopen(base + "/", timeout=60) as page:
        assert page.status == 200
    assert app.extensions["runs"] == ["hi"] and app.extensions["jobs"] == ["job-1"]
    assert watched.readings == []


def _config_readings(package: Path) -> list[str]:
    """Every ``<app>.config`` the package's source mentions, as ``module:line``."""
    found = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "config":
                owner = ast.unparse(node.value)
                if owner.split(".")[-1].lstrip("_") in ("app", "current_app"):
                    found.append(f"{path.relative_to(package.parent).as_posix()}:{node.lineno} {owner}")
    return found


def test_only_init_app_reads_app_config() -> None:
    package = Path(bailing_flask.__file__).parent
    readings = _config_readings(package)
    assert len(readings) == 1 and readings[0].startswith("bailing_flask/extension.py:"), readings
    line = int(readings[0].split(":")[1].split()[0])
    source = (package / "extension.py").read_text(encoding="utf-8").splitlines()
    assert "load_config(app.config, self._options)" in source[line - 1]


def test_config_is_what_init_app_read_for_each_app() -> None:
    one, bailing = create_app(BAILING_WINDOW=60)
    other = Flask("other")
    other.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_WINDOW="90")
    bailing.init_app(other)
    assert (Bailing.config(one).window, Bailing.config(other).window) == (60, 90)
    with one.app_context():
        assert Bailing.config() is Bailing.config(one)
    assert isinstance(Bailing.config(one), settings.Config)
