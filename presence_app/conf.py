"""Settings: ``PRESENCE = {...}`` in the project's settings, merged over ``DEFAULTS``.

Read through :func:`get_settings` (cached; cleared when ``override_settings`` changes
``PRESENCE``), never at import time. The defaults are documented in docs/settings.md.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

DEFAULTS: dict[str, Any] = {
    # Where presence lives. None: django-redis' connection REDIS_ALIAS (get_redis_connection),
    # else redis://127.0.0.1:6379/0. "redis://", "rediss://" and "unix://" URLs are accepted.
    "REDIS_URL": None,
    "REDIS_ALIAS": "default",
    # Passed to redis-py's from_url: fail fast when Redis is away, so pages fail open quickly.
    "REDIS_OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 2, "retry_on_timeout": False},
    # True: REDIS_URL names a node of a Redis Cluster, or is a list of node URLs (startup
    # nodes); the store then runs on redis-py's RedisCluster, sync and async. Raise SHARDS with it.
    "CLUSTER": False,
    # Redis Sentinel: [(host, port), ...] of the sentinels; REDIS_URL's host is then the name
    # of the service they monitor ("redis://mymaster/0"), as django-redis' SentinelClient takes
    # it. SENTINEL_OPTIONS: keyword arguments for the connections to the sentinels (password,
    # timeouts). None: the SENTINELS option of the django-redis cache REDIS_ALIAS, if any.
    "SENTINELS": None,
    "SENTINEL_OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
    "KEY_PREFIX": "presence",
    # How many slots the global sets are spread over (raise it on Redis Cluster: a few per master;
    # changing it moves users between shards, so set it before going live or clear the keys).
    "SHARDS": 1,
    # The store leases processes, not connections (docs/store-layout.md); REGISTRY_BUCKETS is
    # the number of small hashes per shard holding plain users' connections (keep ~100 users a
    # bucket: 16,384 for 1 M a shard).
    "REGISTRY_BUCKETS": 4096,
    # Semantics (seconds); see docs/settings.md and docs/guarantees.md.
    "HEARTBEAT_INTERVAL": 30,
    "LEASE_TTL": 90,
    "ONLINE_WINDOW": 60,
    "IDLE_AFTER": 300,
    "DISCONNECT_GRACE": 20,
    "METADATA_TTL": 7 * 24 * 3600,
    "MAX_METADATA_BYTES": 2048,
    "MAX_MESSAGE_LENGTH": 140,
    # The sweep: how often each process tries to take the lock and sweep, how much per call.
    "SWEEP_INTERVAL": 5,
    "SWEEP_BATCH": 1000,
    # Coalesced heartbeats: how often a process writes its batch (at most).
    "HEARTBEAT_FLUSH_INTERVAL": 1.0,
    # HTTP activity: one Redis write per user per process per TOUCH_INTERVAL.
    "TOUCH_INTERVAL": 15,
    "SKIP_PATHS": [],
    # Durable last seen: how often online users' last_seen is flushed to the database.
    "FLUSH_INTERVAL": 300,
    # WebSocket limits.
    "MAX_ROOMS_PER_CONNECTION": 50,
    "MAX_WATCHED_USERS": 500,
    # Connections (sockets, SSE streams) one user may hold at once; past it a socket is closed
    # with 4429. 0 or None: no limit.
    "MAX_CONNECTIONS_PER_USER": 32,
    # The origins a presence socket accepts: None, those of ALLOWED_HOSTS (as Channels'
    # AllowedHostsOriginValidator); else OriginValidator's patterns (["*"]: any).
    "WEBSOCKET_ORIGINS": None,
    "MAX_FRAMES_PER_SECOND": 20,
    # Seconds between two checks of a socket's sign-in (its session read afresh: a password
    # change or a deleted session closes it, 4402); 0: only at the connect, as Channels does.
    "SESSION_CHECK_INTERVAL": 300,
    "MAX_FRAME_BYTES": 4096,
    "ROOM_NAME_PATTERN": r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,99}$",
    "MAX_ROOM_NAME_LENGTH": 100,
    "TYPING_THROTTLE": 2.0,
    # Live per-member room state (cursors, selections): the largest state a connection may
    # publish per room (bytes of JSON), and how many times a second changes go out (coalesced,
    # latest wins: per connection on the sending side, one frame per room on the receiving).
    "ROOM_STATE_MAX_BYTES": 1024,
    "ROOM_STATE_RATE": 20,
    # Room-state frames a second one process sends for one room, in all, at most (0: no bound):
    # a room with more of the process' sockets than this / ROOM_STATE_RATE (1,250 as shipped)
    # gets its frames every k-th tick (k: sockets x ROOM_STATE_RATE / this, rounded up), latest
    # wins, a k-th of them each tick. 25,000 frames a second cost a process about half a core
    # (~20 us a frame without permessage-deflate: docs/benchmarks.md section 17).
    "ROOM_STATE_FRAMES": 25000,
    # Membership changes (joins, leaves, updates as presence.diff; a count-only room's count):
    # frames a second to a socket at most, per room. The first change of a quiet tick goes at once.
    "MEMBERSHIP_RATE": 5,
    # Diff frames a second one process sends for one room, in all, at most (0: no bound): a
    # room with more of the process' diff-accepting sockets than this / MEMBERSHIP_RATE gets
    # its presence.diff every k-th tick (k: sockets x MEMBERSHIP_RATE / this, rounded up).
    "MEMBERSHIP_FRAMES": 2500,
    # JSON API abuse limits (presence_app/web/ratelimit.py), per process: requests a second and
    # burst per signed-in user and per client IP (429 with Retry-After past them), and the
    # longest query string (400; MAX_WATCHED_USERS bounds the number of ids).
    "API_USER_RATE": 10,
    "API_USER_BURST": 50,
    "API_IP_RATE": 50,
    "API_IP_BURST": 200,
    "API_MAX_QUERY_BYTES": 32768,
    # Permanent rooms (presence_app/rooms.py): True makes each connection join its user's
    # permanent rooms on opening (one indexed query a connection, so off unless used).
    "PERMANENT_ROOMS": False,
    # Room authorization hook: a callable or dotted path to can_join(user, room) -> bool.
    "CAN_JOIN": None,
    # Whom a user's presence is shown to: a callable or dotted path to
    # audience(viewer_id, user_ids) -> the ids viewer may see (sync or async; None: everyone).
    "AUDIENCE": None,
    # How long a connection remembers the AUDIENCE answers it got (its events then cost no call).
    "AUDIENCE_CACHE_SECONDS": 60,
    # Under an AUDIENCE policy, one list or count reads at most this many online ids (one policy
    # call a thousand): deeper pages go on from a cursor, and counts past it are lower bounds.
    "AUDIENCE_SCAN_LIMIT": 10_000,
    # Each user's choice of who sees their last seen (everyone, audience, nobody) and whether
    # exactly (presence_app/access/privacy.py): one indexed query per list read while on.
    "LAST_SEEN_PRIVACY": False,
    # With LAST_SEEN_PRIVACY: a user who shows their last seen to nobody sees nobody's.
    "LAST_SEEN_RECIPROCAL": False,
    # How many permanent rooms one user may be a member of (each is a database row).
    "MAX_PERMANENT_ROOMS": 500,
    # A room's snapshot goes out in frames of at most this many members, and of about this many
    # bytes of JSON (a member and their room states are never split); the JSON API's room pages too.
    "ROOM_SNAPSHOT_PAGE": 200,
    "ROOM_SNAPSHOT_BYTES": 65536,
    # Count-only rooms: rooms whose names fully match one of these patterns show their members
    # the live count (a presence.count frame a tick) and never the list; COUNT_SAMPLE > 0 adds
    # that many members' presences (the first who came, as a signed-out visitor sees them).
    "COUNT_ONLY_ROOMS": [],
    "COUNT_SAMPLE": 0,
    # Workspaces: a callable or dotted path to tenant(request_or_scope) -> a key or None; each
    # key is a key space of its own (presence_app.tenants). None: one space for the whole site.
    "TENANT": None,
}


@cache
def get_settings() -> dict[str, Any]:
    user = getattr(settings, "PRESENCE", {}) or {}
    return {**DEFAULTS, **user}


def get(name: str) -> Any:
    return get_settings()[name]


@receiver(setting_changed)
def _reset(*, setting: str, **kwargs: Any) -> None:
    if setting == "PRESENCE":
        get_settings.cache_clear()  # the stores follow (connection.py's receiver)
