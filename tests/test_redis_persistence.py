"""A Redis that forgets says so: real redis-server processes with and without AOF.

At-most-once rests on the store remembering every completed call. A Redis
without persistence that restarts empty forgets them all, and each replay of
a signed call then runs its side effect again; these tests show that it
does, that it does not with ``appendonly yes``, and that the store warns at
first use, naming the setting to change.
"""

from __future__ import annotations

import logging

import pytest

from bailing_flask.stores import EntryMeta, RedisStore, StoredResponse
from bailing_flask.testing import HubSimulator

from .helpers import STRONG_SECRET
from .apps.idem_app import create_app, side_effects

ARGS = {"order_id": 7, "amount": 12.5}


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "bailing_flask" and r.levelno == logging.WARNING]


def first_use(url: str, **options: object) -> RedisStore:
    store = RedisStore(url, **options)  # type: ignore[arg-type]
    store.reserve("k", token="t", lease_seconds=5, retention_seconds=5, meta=EntryMeta())
    store.reserve("k", token="t", lease_seconds=5, retention_seconds=5, meta=EntryMeta())
    return store


def test_redis_without_persistence_warns_once_on_first_use(redis_server_factory, caplog):
    server = redis_server_factory()  # --save "" --appendonly no
    with caplog.at_level(logging.WARNING, logger="bailing_flask"):
        store = first_use(server.url)
        store.get("k")
    (warning,) = warnings_of(caplog)
    assert "keeps nothing across a restart" in warning
    assert "appendonly yes" in warning
    assert store.persistence_warnings() == [warning.removeprefix("bailing: ")]
    store.close()


def test_redis_with_aof_does_not_warn(redis_server_factory, caplog):
    server = redis_server_factory("--appendonly", "yes")
    with caplog.at_level(logging.WARNING, logger="bailing_flask"):
        first_use(server.url).close()
    assert warnings_of(caplog) == []


def test_redis_with_snapshots_only_warns_about_what_a_crash_loses(redis_server_factory, caplog):
    server = redis_server_factory("--save", "3600 1")
    with caplog.at_level(logging.WARNING, logger="bailing_flask"):
        first_use(server.url).close()
    (warning,) = warnings_of(caplog)
    assert "only by snapshots" in warning and "save '3600 1'" in warning
    assert "appendonly yes" in warning


def test_redis_that_may_evict_records_warns(redis_server_factory, caplog):
    server = redis_server_factory("--appendonly", "yes", "--maxmemory", "64mb",
                                  "--maxmemory-policy", "volatile-lru")
    with caplog.at_level(logging.WARNING, logger="bailing_flask"):
        first_use(server.url).close()
    (warning,) = warnings_of(caplog)
    assert "maxmemory-policy volatile-lru" in warning and "noeviction" in warning


def test_redis_with_config_disabled_is_read_through_info(redis_server_factory, caplog):
    """Managed Redis often disables CONFIG; INFO still tells whether AOF is on."""
    server = redis_server_factory("--rename-command", "CONFIG", "")
    with caplog.at_level(logging.WARNING, logger="bailing_flask"):
        first_use(server.url).close()
    (warning,) = warnings_of(caplog)
    assert "appendonly no" in warning and "appendonly yes" in warning


def test_the_check_can_be_turned_off_for_a_disposable_redis(redis_server_factory, caplog):
    server = redis_server_factory()
    with caplog.at_level(logging.WARNING, logger="bailing_flask"):
        first_use(server.url, check_persistence=False).close()
    assert warnings_of(caplog) == []


@pytest.mark.parametrize("persistence, runs", [((), 2), (("--appendonly", "yes"), 1)])
def test_completed_side_effects_survive_a_restart_only_with_aof(
    redis_server_factory, tmp_path, caplog, persistence, runs
):
    server = redis_server_factory(*persistence)
    app = create_app(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE=server.url,
                     IDEM_DATABASE=str(tmp_path / "business.sqlite3"))
    hub = HubSimulator(app, STRONG_SECRET)
    request = hub.build_call("refund_create", ARGS, subject="t1:u1")
    with caplog.at_level(logging.WARNING, logger="bailing_flask"):
        assert hub.replay(request).status == 201
    warned = any("keeps nothing across a restart" in w for w in warnings_of(caplog))
    assert warned == (not persistence)
    server.restart()
    replays = [hub.replay(request) for _ in range(20)]
    assert {r.status for r in replays} == {201}
    # without persistence the first replay after the restart runs the refund again
    assert side_effects(app.config["IDEM_DATABASE"]) == runs
    assert sum("Idempotent-Replayed" not in r.headers for r in replays) == runs - 1


def test_a_resolved_answer_also_survives_a_restart_with_aof(redis_server_factory):
    server = redis_server_factory("--appendonly", "yes")
    store = RedisStore(server.url)
    store.reserve("k", token="t", lease_seconds=0.5, retention_seconds=60, meta=EntryMeta())
    assert store.mark_uncertain("k", token="t", note="the view raised TimeoutError")
    server.restart()
    entry = store.get("k")
    assert entry is not None and entry.note == "the view raised TimeoutError"
    assert store.resolve("k", response=StoredResponse(201, (), b"{}"), note="checked",
                         retention_seconds=60)
    server.restart()
    assert store.get("k").state == "completed"  # type: ignore[union-attr]
    store.close()
