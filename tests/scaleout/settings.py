"""Settings of the ASGI server processes the scale-out tests start (subprocesses of the test run).

The settings every test server shares (tests/server_settings.py: the run's Redis, the SQLite
file in ``DJANGO_DB`` that every process shares, short timers, so that a killed process' users
are swept within seconds) with:

- ``SCALEOUT_PREFIX``: the test's own KEY_PREFIX (its presence keys and channel-layer groups);
- ``SCALEOUT_LAYER``: ``pubsub`` (project/settings.py's choice) or ``core`` (channels-redis'
  RedisChannelLayer), always on the run's single Redis: channels-redis does not speak Cluster;
- ``SCALEOUT_CLUSTER_URL``: if set, presence lives on that Redis Cluster (SHARDS 4).
"""

import os

from tests.server_settings import *  # noqa: F403

DEBUG = False
CHANNEL_LAYERS = channel_layers(os.environ.get("SCALEOUT_LAYER", "pubsub"))  # noqa: F405
_cluster = os.environ.get("SCALEOUT_CLUSTER_URL")
PRESENCE = {  # noqa: F405
    **PRESENCE,  # noqa: F405
    **TIMERS,  # noqa: F405
    "KEY_PREFIX": os.environ.get("SCALEOUT_PREFIX", "presence-scaleout"),
    **({"CLUSTER": True, "REDIS_URL": _cluster, "SHARDS": 4} if _cluster else {}),
}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"presence_app": {"handlers": ["console"], "level": "INFO"}},
}
