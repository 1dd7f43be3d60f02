"""Does the Redis server keep what the store tells it? Its persistence and eviction settings.

At-most-once needs completed records to survive a restart and never be
evicted: :class:`~bailing_flask.stores.RedisStore` reads the settings on
first use and logs what :func:`settings_warnings` finds.
"""

from __future__ import annotations

from typing import Any


def read_settings(client: Any, redis_errors: tuple[type[BaseException], ...]
                  ) -> dict[str, str] | None:
    """The server settings that decide whether records survive, as strings.

    From ``CONFIG GET``, or where ``CONFIG`` is disabled (managed Redis) from
    ``INFO``; ``None`` if neither answers. A connection failure is raised.
    """
    try:
        found: dict[str, str] = {}
        for pattern in ("appendonly", "save", "maxmemory", "maxmemory-policy"):
            found.update({str(k): str(v) for k, v in client.config_get(pattern).items()})
        return found
    except redis_errors as exc:
        if _unreachable(exc):
            raise
    try:
        persistence = client.info("persistence")
        memory = client.info("memory")
    except redis_errors as exc:
        if _unreachable(exc):
            raise
        return None
    found = {"appendonly": "yes" if str(persistence.get("aof_enabled")) == "1" else "no"}
    if "maxmemory" in memory:
        found["maxmemory"] = str(memory["maxmemory"])
    if "maxmemory_policy" in memory:
        found["maxmemory-policy"] = str(memory["maxmemory_policy"])
    return found


def settings_warnings(settings: dict[str, str] | None, where: str) -> list[str]:
    """Why completed records could disappear with these settings; ``[]`` if nothing.

    ``where`` names the store; each message names the setting to change.
    """
    if settings is None:
        return [f"{where} could not read the server's persistence settings (CONFIG and INFO "
                "refused). Make sure the server runs with appendonly yes and "
                "maxmemory-policy noeviction, or completed side effects may be forgotten and "
                "replayed calls run again."]
    problems: list[str] = []
    aof, save = settings.get("appendonly"), settings.get("save")
    if aof == "no" and save == "":
        problems.append(
            f"{where} keeps nothing across a restart (appendonly no, save \"\"): when Redis "
            "restarts, every completed side effect is forgotten and a replayed call runs "
            "again. Set appendonly yes (appendfsync everysec or always) in redis.conf, or "
            "CONFIG SET appendonly yes followed by CONFIG REWRITE.")
    elif aof == "no":
        snapshots = f"save {save!r}" if save is not None else "RDB snapshots at best"
        problems.append(
            f"{where} persists only by snapshots (appendonly no, {snapshots}): records "
            "written since the last snapshot are lost when Redis stops without saving "
            "(crash, kill, out of memory, power loss), and those calls could run again. Set "
            "appendonly yes (appendfsync everysec or always).")
    policy, maxmemory = settings.get("maxmemory-policy"), settings.get("maxmemory")
    if policy not in (None, "noeviction") and maxmemory not in (None, "0"):
        problems.append(
            f"{where} may evict keys under memory pressure (maxmemory-policy {policy}); every "
            "record has a TTL, so volatile-* policies evict them too, and an evicted record "
            "lets a replayed call run again. Set maxmemory-policy noeviction (or give this "
            "store a Redis of its own).")
    return problems


def _unreachable(exc: BaseException) -> bool:
    """A connection or timeout problem (as opposed to a refused command)."""
    import redis

    return isinstance(exc, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError))
