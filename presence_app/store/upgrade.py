"""Upgrading a running site from the store's layout 1 to layout 2, and from 2 to 3.

Layout 2 keeps its keys under ``{prefix:shard}:2``, layout 1 under ``{prefix:shard}`` (never
with a ``:2:`` segment), so processes of the old and the new version run side by side on one
Redis during a rolling deploy, each on its own keys, and never read a key of the other's shape:
no errors, no ghosts. Meanwhile a user shows online to the processes of the version their socket
is on; a socket moves when its old process stops (presence.js reconnects, and the new process'
connect lists the user in layout 2). A user's first write in layout 2 adopts their layout-1
profile (lib.lua's ``load_user``), so an invisible user stays invisible and a status is kept.

Once no old process is left, :func:`upgrade_from_v1` (``manage.py presence upgrade``) carries
every remaining layout-1 user's last seen and profile into layout 2, hands the last seens to
``save`` (the database) before it deletes anything, and then drops layout 1.

From layout 2 to layout 3 (the default) it goes the same way: layout 3's
keys are under ``{prefix:shard}:3``; a user's first write in layout 3 adopts their layout-2
profile (lua3/lib.lua's ``load_user``); :func:`upgrade_from_v2` carries the last seens and drops
layout 2 once no layout-2 lease is live.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .keys import unesc
from .plans import Plan
from .sync import Store
from .types import PresenceError

#: A user's last seen as layout 1 had it: (user id, unix seconds, device).
Row = tuple[str, float, str]

V1_INDEXES = ("online", "hidden", "leases", "active", "rooms")
V1_JOBS = ("sweep", "flush")
V2_JOBS = ("sweep", "flush")


def v1_tag(tag: str) -> str:
    """The layout-1 base of a layout-2 shard base: ``{prefix:shard}:2`` -> ``{prefix:shard}``."""
    return tag.rsplit(":", 1)[0]


def _glob(text: str) -> str:
    """``text`` with SCAN's pattern characters escaped."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def _node(store: Store, key: str) -> Any:
    """The client that holds ``key`` (on a cluster, its primary's)."""
    if not store.cluster:
        return store.client
    return store.client.get_redis_connection(store.client.get_node_from_key(key))


def _live_leases(store: Store, old_tag: Callable[[str], str], now: float | None) -> int:
    if now is None:
        now = store.server_time()
    return sum(
        int(_node(store, old_tag(tag)).zcount(f"{old_tag(tag)}:leases", now, "+inf"))
        for tag in store.keys.all_tags()
    )


def _refuse_while_live(store: Store, layout: int, live: int) -> None:
    if live:
        raise PresenceError(
            f"{live} layout-{layout} connections are live: stop every process of the old "
            "version first (their leases run out LEASE_TTL after their last heartbeat), or force"
        )


def _carry_users(
    store: Store,
    tag: str,
    old: str,
    script: str,
    save: Callable[[list[Row]], Any] | None,
    batch: int,
) -> int:
    """Carries the old layout's user records of one shard, a batch at a time: ``save`` gets the
    batch's last seens before its records are deleted. Returns how many were carried."""
    node = _node(store, old)
    users = f"{old}:u:"
    keys = [k.decode() for k in node.scan_iter(match=f"{_glob(users)}*", count=1000)]
    for i in range(0, len(keys), batch):
        chunk = keys[i : i + batch]
        rows = _carry(store, tag, [unesc(k[len(users) :]) for k in chunk], script)
        if save is not None and rows:
            save(rows)
        node.unlink(*chunk)  # one slot: the keys of a shard share its hash tag
    return len(keys)


def _unlink_matching(store: Store, old: str, pattern: str, batch: int) -> None:
    node = _node(store, old)
    found = [k.decode() for k in node.scan_iter(match=pattern, count=1000)]
    for i in range(0, len(found), batch):
        node.unlink(*found[i : i + batch])


def live_v1_connections(store: Store, now: float | None = None) -> int:
    """How many layout-1 leases have not run out: sockets on processes of the old version."""
    return _live_leases(store, v1_tag, now)


def upgrade_from_v1(
    store: Store,
    save: Callable[[list[Row]], Any] | None = None,
    *,
    batch: int = 500,
    force: bool = False,
    now: float | None = None,
) -> int:
    """Carries layout-1 users into layout 2 and deletes layout 1; returns the users carried.

    For each batch of layout-1 users: their profile and last seen go into layout 2, ``save``
    gets their public last seens (an invisible user's frozen one), and only then are their
    layout-1 keys deleted, so a failing ``save`` loses nothing (run it again). Refuses while
    layout-1 leases are live (an old process is still serving sockets) unless ``force``;
    ``now`` replaces the Redis clock for that check.
    """
    if not force:
        _refuse_while_live(store, 1, live_v1_connections(store, now))
    carried = 0
    for tag in store.keys.all_tags():
        old = v1_tag(tag)
        carried += _carry_users(store, tag, old, "upgrade_v1", save, batch)
        _unlink_matching(store, old, f"{_glob(old)}:r:*", batch)
        _node(store, old).unlink(*(f"{old}:{name}" for name in V1_INDEXES))
    for job in V1_JOBS:
        store.client.unlink(f"{store.config.prefix}:lock:{job}")
    return carried


def _carry(store: Store, tag: str, uids: Iterable[str], script: str) -> list[Row]:
    call = store.plans.call(script, tag, None, *uids)

    def finish(replies: list[Any]) -> list[Row]:
        flat = [r.decode() if isinstance(r, bytes) else r for r in replies[0]]
        return [
            (flat[i], float(flat[i + 1]), flat[i + 2])
            for i in range(0, len(flat), 3)
            if flat[i + 1]
        ]

    return store.run(Plan([call], finish))


def v2_tag(tag: str) -> str:
    """The layout-2 base of a layout-3 shard base: ``{prefix:shard}:3`` -> ``{prefix:shard}:2``."""
    return tag.rsplit(":", 1)[0] + ":2"


def live_v2_connections(store: Store, now: float | None = None) -> int:
    """How many layout-2 connection leases have not run out: sockets on old processes."""
    return _live_leases(store, v2_tag, now)


def upgrade_from_v2(
    store: Store,
    save: Callable[[list[Row]], Any] | None = None,
    *,
    batch: int = 500,
    force: bool = False,
    now: float | None = None,
) -> int:
    """Carries layout-2 users into layout 3 and deletes layout 2; returns the users carried.

    ``store`` is a layout-3 store. For each batch of layout-2 records: the profile goes into
    layout 3 (unless the user wrote there since), the last seen of a user layout 3 does not list
    goes into its ``last`` index, ``save`` gets the public last seens (an invisible user's frozen
    one), and only then are the records deleted; then the rest of layout 2 (indexes, rooms). A
    failing ``save`` loses nothing: run it again. Refuses while layout-2 leases are live (an old
    process still serves sockets) unless ``force``; ``now`` replaces the Redis clock for that
    check.
    """
    if store.keys.layout != 3:
        raise PresenceError("upgrade_from_v2 carries layout 2 into a layout-3 store")
    if not force:
        _refuse_while_live(store, 2, live_v2_connections(store, now))
    carried = 0
    for tag in store.keys.all_tags():
        old = v2_tag(tag)
        carried += _carry_users(store, tag, old, "upgrade_v2", save, batch)
        _unlink_matching(store, old, f"{_glob(old)}:*", batch)  # every other key of layout 2
    for job in V2_JOBS:
        store.client.unlink(f"{store.config.prefix}:2:lock:{job}")
    return carried


__all__ = [
    "Row",
    "live_v1_connections",
    "live_v2_connections",
    "upgrade_from_v1",
    "upgrade_from_v2",
    "v1_tag",
    "v2_tag",
]
