"""Settings of the ASGI server processes the scale-out tests start (subprocesses of the test run).

The test settings (the run's Redis, through REDIS_URL in the environment) with:

- ``DJANGO_DB``: the SQLite file every process shares (users, sessions, LastSeen), as
  tests/servers.py's ``Database`` sets it;
- ``SCALEOUT_PREFIX``: the test's own KEY_PREFIX (its presence keys and channel-layer groups);
- ``SCALEOUT_LAYER``: ``pubsub`` (project/settings.py's choice) or ``core`` (channels-redis'
  RedisChannelLayer), always on the run's single Redis: channels-redis does not speak Cluster;
- ``SCALEOUT_CLUSTER_URL``: if set, presence lives on that Redis Cluster (SHARDS 4);
- short timers, so that a killed process' users are swept within seconds.
"""

import os

from tests.settings import *  # noqa: F403

#: Seconds. Accepted by presence_app.checks (LEASE_TTL > HEARTBEAT_INTERVAL > 0, grace < lease).
TIMERS = {
    "HEARTBEAT_INTERVAL": 1,
    "LEASE_TTL": 3,
    "DISCONNECT_GRACE": 1,
    "SWEEP_INTERVAL": 0.5,
    "HEARTBEAT_FLUSH_INTERVAL": 0.2,
}
LAYERS = {
    "pubsub": "channels_redis.pubsub.RedisPubSubChannelLayer",
    "core": "channels_redis.core.RedisChannelLayer",
}

DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("DJANGO_DB", ""),
        # Two server processes share the file: wait for the other's write lock.
        "OPTIONS": {"timeout": 20},
    }
}
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": LAYERS[os.environ.get("SCALEOUT_LAYER", "pubsub")],
        "CONFIG": {
            "hosts": [{"address": REDIS_URL, "socket_timeout": None,  # noqa: F405
                       "socket_keepalive": True}],
        },
    }
}
_cluster = os.environ.get("SCALEOUT_CLUSTER_URL")
PRESENCE = {  # noqa: F405
    **PRESENCE,  # noqa: F405
    **TIMERS,
    "KEY_PREFIX": os.environ.get("SCALEOUT_PREFIX", "presence-scaleout"),
    **({"CLUSTER": True, "REDIS_URL": _cluster, "SHARDS": 4} if _cluster else {}),
}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"presence_app": {"handlers": ["console"], "level": "INFO"}},
}
