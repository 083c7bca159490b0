"""Is presence's key space whole? Written against the store's own description of its keys
(``store.keys``, presence_app/store/keys.py, and ``store.housekeeping_keys()``), not against
today's key names, so that it follows a change of layout.

Relies on: ``KeySpace.all_tags()``; the per-shard ``seen``/``until``/``hidden``/``procs``/``last``/``rooms``/
``record_expiry``/``graces``/``copies`` (sorted sets), ``records`` (a hash), ``cleaner`` (a
string), ``registry(tag, bucket)`` and ``room_states(tag, room)`` (hashes) and
``process_users(tag, process)`` (sets), as prefixes where they name a family; ``room(tag, name)``;
and ``BaseStore.housekeeping_keys()`` (the SCAN pattern of every key, and the keys outside it).
"""

from __future__ import annotations

from typing import Any

import redis

from presence_app.store import Store


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _nodes(client: Any) -> list[Any]:
    if isinstance(client, redis.RedisCluster):
        return [client.get_redis_connection(n) for n in client.get_primaries()]
    return [client]


def layout_problems(store: Store) -> list[str]:
    """What is wrong with the key space: keys no layout rule names, keys of the wrong type,
    and per-shard room counts that disagree with the room's members. [] when whole."""
    keys, client = store.keys, store.client
    indexes: dict[str, str] = {}
    families: list[tuple[str, str]] = []  # (prefix, type) of the per-user and per-room keys
    for tag in keys.all_tags():
        families.append((keys.room(tag, ""), "zset"))
        for name in (keys.seen, keys.until, keys.hidden, keys.procs, keys.last, keys.rooms):
            indexes[name(tag)] = "zset"
        indexes[keys.record_expiry(tag)] = "zset"
        indexes[keys.records(tag)] = "hash"
        indexes.update(
            {
                keys.graces(tag): "zset",
                keys.copies(tag): "zset",
                keys.erased(tag): "zset",
                keys.cleaner(tag): "string",
            }
        )
        families += [
            (keys.registry(tag, 0)[:-1], "hash"),
            (keys.process_users(tag, ""), "set"),
            (keys.room_states(tag, ""), "hash"),
        ]
    found: set[str] = set()
    extras: set[str] = set()
    for pattern, extra in store.housekeeping_keys():
        extras.update(extra)
        for node in _nodes(client):
            found.update(_text(k) for k in node.scan_iter(match=pattern, count=1000))
    problems = []
    for key in sorted(found - extras):
        want = indexes.get(key) or next((t for p, t in families if key.startswith(p)), None)
        if want is None:
            problems.append(f"{key}: no layout rule names it")
        elif (kind := _text(client.type(key))) != want:
            problems.append(f"{key}: a {kind}, not a {want}")
    for tag in keys.all_tags():
        counts = {
            _text(room): int(n)
            for room, n in client.zrange(keys.rooms(tag), 0, -1, withscores=True)
        }
        prefix = keys.room(tag, "")
        rooms = {k for k in found if k.startswith(prefix)}
        members = {k: client.zcard(k) for k in rooms}
        for room, count in counts.items():
            size = members.pop(keys.room(tag, room), 0)
            if size != count:
                problems.append(f"{tag} room {room!r}: counted {count}, {size} members")
        for key, size in members.items():
            if size:
                problems.append(f"{key}: {size} members, not counted")
    return problems
