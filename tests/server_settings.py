"""What the settings of the servers the tests start as subprocesses share (tests/servers.py starts
them; tests/reliability/settings.py and tests/scaleout/settings.py build on this).

The test settings (tests/settings.py) on the Redis in REDIS_URL and the SQLite file in
DJANGO_DB, with timers short enough to watch leases expire, graces end and sweeps run within a
test, and the channel layers a server may be given.
"""

import os

from tests.settings import *  # noqa: F403

#: Seconds. A lease outlives 3 missed heartbeats; a closed last socket keeps its user 1 s; the
#: sweep runs twice a second. So a dead process' users are gone within LEASE_TTL +
#: SWEEP_INTERVAL = 3.5 s. Accepted by presence_app.checks (LEASE_TTL > HEARTBEAT_INTERVAL > 0,
#: grace < lease).
TIMERS = {
    "HEARTBEAT_INTERVAL": 1,
    "LEASE_TTL": 3,
    "DISCONNECT_GRACE": 1,
    "SWEEP_INTERVAL": 0.5,
    "HEARTBEAT_FLUSH_INTERVAL": 0.2,
}

ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("DJANGO_DB", ""),
        # Several servers share the file and hundreds of sockets authenticate at once: wait for
        # SQLite's write lock rather than fail.
        "OPTIONS": {"timeout": 20},
    }
}

#: The channel layers a server may run on: project/settings.py's choice, and channels-redis'
#: RedisChannelLayer ("core"), always on the project's hosts (the run's single Redis, no socket
#: timeout, keepalive): channels-redis does not speak Cluster.
LAYER_BACKENDS = {
    "pubsub": "channels_redis.pubsub.RedisPubSubChannelLayer",
    "core": "channels_redis.core.RedisChannelLayer",
}
LAYER_HOSTS = CHANNEL_LAYERS["default"]["CONFIG"]["hosts"]  # noqa: F405


def channel_layers(layer: str, **config: object) -> dict:
    """CHANNEL_LAYERS for the layer named ``layer`` (a key of LAYER_BACKENDS), on LAYER_HOSTS
    unless ``config`` names other hosts; ``config`` adds to the layer's CONFIG."""
    hosts = [dict(host) for host in LAYER_HOSTS]
    return {"default": {"BACKEND": LAYER_BACKENDS[layer], "CONFIG": {"hosts": hosts, **config}}}
