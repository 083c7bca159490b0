"""Settings of the servers the reliability tests start (subprocesses, see tests/servers.py).

The test settings (tests/settings.py) on the Redis in REDIS_URL and the SQLite file in
DJANGO_DB, with timers short enough to watch leases expire, graces end and sweeps run within a
test. ``PRESENCE_KEY_PREFIX`` and ``PRESENCE_OVERRIDES`` (JSON, merged into PRESENCE) let a test
tune one server. The values below pass the system checks (conftest.py runs `manage.py check`
on these settings before any server starts).
"""

import json
import os

from tests.settings import *  # noqa: F403

#: Seconds. A lease outlives 3 missed heartbeats; a closed last socket keeps its user 1 s; the
#: sweep runs twice a second. So a dead process' users are gone within LEASE_TTL +
#: SWEEP_INTERVAL = 3.5 s, and a restarted Redis is refilled within one heartbeat interval.
TIMERS = {
    "HEARTBEAT_INTERVAL": 1,
    "LEASE_TTL": 3,
    "DISCONNECT_GRACE": 1,
    "SWEEP_INTERVAL": 0.5,
    "HEARTBEAT_FLUSH_INTERVAL": 0.2,
    "TOUCH_INTERVAL": 1,
    "ONLINE_WINDOW": 2,
}

DEBUG = True  # project/urls.py serves the static files (presence.js) when DEBUG is on
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("DJANGO_DB", ""),
        # Hundreds of sockets authenticate at once: wait for SQLite's lock rather than fail.
        "OPTIONS": {"timeout": 20},
    }
}
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
# - "core-defaults": RedisChannelLayer as tests/settings.py configures it.
# Keys apart per test either way (prefix). A new dict throughout: the imported one is
# tests.settings' own.
LAYER = os.environ.get("RELIABILITY_LAYER", "pubsub")
_hosts = [{"address": REDIS_URL, "socket_timeout": None, "socket_keepalive": True}]  # noqa: F405
_config = {"hosts": _hosts, "prefix": "asgi-" + PRESENCE["KEY_PREFIX"]}
if LAYER == "core":
    _config["hosts"] = [{**h, "max_connections": 10_000} for h in _hosts]
    _config["capacity"] = 10_000
BACKEND = {"pubsub": "channels_redis.pubsub.RedisPubSubChannelLayer",
           "core": "channels_redis.core.RedisChannelLayer",
           "core-defaults": "channels_redis.core.RedisChannelLayer"}[LAYER]
CHANNEL_LAYERS = {"default": {"BACKEND": BACKEND, "CONFIG": _config}}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # One line per record, with the level spelled out: the tests count WARNING and ERROR lines.
    "formatters": {"plain": {"format": "%(asctime)s %(process)d %(levelname)s %(name)s: "
                                       "%(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    # channels-redis' pub/sub layer logs a traceback a second while Redis is away.
    "filters": {"redis_outage": {"()": "presence_app.failopen.ChannelLayerOutageFilter"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {"presence_app": {"level": "INFO"},
                "channels_redis.pubsub": {"filters": ["redis_outage"]}},
}
