"""Settings of the servers the reliability tests start (subprocesses, see tests/servers.py).

The settings every test server shares (tests/server_settings.py: the test settings on the Redis
in REDIS_URL and the SQLite file in DJANGO_DB, timers short enough to watch leases expire,
graces end and sweeps run within a test). ``PRESENCE_KEY_PREFIX`` and ``PRESENCE_OVERRIDES``
(JSON, merged into PRESENCE) let a test tune one server. The values below pass the system checks
(conftest.py runs `manage.py check` on these settings before any server starts).
"""

import json
import os

from tests.server_settings import *  # noqa: F403

#: Seconds: the shared timers (so a restarted Redis is refilled within one heartbeat interval),
#: and HTTP presence: one touch per user a second, a request keeps its user online 2 s.
TIMERS = {**TIMERS, "TOUCH_INTERVAL": 1, "ONLINE_WINDOW": 2}  # noqa: F405
#: For the tests that drive hundreds of sockets and measure nothing of the lease nor of an
#: outage (a test's ``timers`` fixture, tests/reliability/conftest.py), what a loaded machine
#: must not break:
#: - the lease: a server handles a socket's frames in order, so a heartbeat waits behind the
#:   joins sent before it; a busy server on a loaded machine falls seconds behind, and a socket
#:   whose heartbeat it has not handled within LEASE_TTL is closed as silent (4408, store layout
#:   3) though its client beat on time. 30 s against heartbeats every second leaves 29 s of such
#:   lag (the shared 3 s left 2 s; seen: 3.2 s);
#: - Redis' answers: redis-py times a call (and a new connection) out on the server's event
#:   loop, which a loaded server runs seconds late, so a call Redis answered at once fails as a
#:   timeout after 2 s (1 s to connect: REDIS_OPTIONS' defaults) and is taken for an outage: a
#:   join answered ``unavailable``, a close whose lease is not cut until its retry a second
#:   later (realtime.coalescer.Retries; seen, under 600 closes at once, before closes were
#:   retried: users online until the lease ran out, registry fields until the process ended).
#:   30 s here; ``retry_on_timeout`` stays the default (presence_app/conf.py).
#: The grace, the sweep and the heartbeat interval stay the shared ones.
LOADED = {
    "LEASE_TTL": 30,
    "REDIS_OPTIONS": {
        "socket_connect_timeout": 30,
        "socket_timeout": 30,
        "retry_on_timeout": False,
    },
}

DEBUG = True  # project/urls.py serves the static files (presence.js) when DEBUG is on
PRESENCE = {  # noqa: F405
    **PRESENCE,  # noqa: F405
    **TIMERS,
    "SKIP_PATHS": ["/presence/api/"],
    "CAN_JOIN": "tests.reliability.hooks.can_join",
    "KEY_PREFIX": os.environ.get("PRESENCE_KEY_PREFIX", "presence"),
    **json.loads(os.environ.get("PRESENCE_OVERRIDES") or "{}"),
}
# The channel layer, by RELIABILITY_LAYER:
# - "pubsub" (the default): channels-redis' RedisPubSubChannelLayer, project/settings.py's choice;
# - "core": its RedisChannelLayer, sized for bursts. With its defaults it loses them (the
#   "core-defaults" runs of test_channel_layer.py show both): redis-py 8 caps its
#   redis.asyncio ConnectionPool at 100 connections and raises MaxConnectionsError beyond (it
#   does not wait), so 200 sockets joining at once get errors; and `capacity` (100) bounds the
#   messages waiting for one process (group_send writes one per event and process), so the
#   sweep of a crashed process' 200 users, 200 leaves at once, loses those past the first 100;
# - "core-defaults": RedisChannelLayer with channels-redis' defaults (the project's hosts only).
# Keys apart per test either way (prefix).
LAYER = os.environ.get("RELIABILITY_LAYER", "pubsub")
_sized = {}
if LAYER == "core":
    _sized = {
        "hosts": [{**h, "max_connections": 10_000} for h in LAYER_HOSTS],  # noqa: F405
        "capacity": 10_000,
    }
CHANNEL_LAYERS = channel_layers(  # noqa: F405
    {"pubsub": "pubsub", "core": "core", "core-defaults": "core"}[LAYER],
    prefix="asgi-" + PRESENCE["KEY_PREFIX"],
    **_sized,
)
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # One line per record, with the level spelled out: the tests count WARNING and ERROR lines.
    "formatters": {
        "plain": {"format": "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"}
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    # channels-redis' pub/sub layer logs a traceback a second while Redis is away.
    "filters": {"redis_outage": {"()": "presence_app.failopen.ChannelLayerOutageFilter"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {
        "presence_app": {"level": "INFO"},
        "channels_redis.pubsub": {"filters": ["redis_outage"]},
    },
}
