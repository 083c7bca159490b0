"""Settings of the servers the high-availability tests start: the reliability servers'
(tests/reliability/settings.py), with presence and the channel layer on the topology the test
names in the environment.

- ``HA_SENTINELS`` (JSON [[host, port], ...]) and ``HA_SERVICE``: presence, the channel layer and
  the cache all find the primary through Sentinel, as docs/scaling.md's Sentinel section configures
  them (PRESENCE["SENTINELS"], channels-redis' ``master_name``/``sentinels`` hosts, django-redis'
  SentinelClient);
- ``HA_CLUSTER`` (JSON [url, ...]): presence on that Redis Cluster; the channel layer stays on
  REDIS_URL (channels-redis does not speak Cluster).
"""

import json
import os

from tests.reliability.settings import *  # noqa: F403

_sentinels = json.loads(os.environ.get("HA_SENTINELS") or "null")
_cluster = json.loads(os.environ.get("HA_CLUSTER") or "null")

if _sentinels:
    _sentinels = [tuple(s) for s in _sentinels]
    _url = f"redis://{os.environ.get('HA_SERVICE', 'presence')}/0"
    PRESENCE = {**PRESENCE, "REDIS_URL": _url, "SENTINELS": _sentinels}  # noqa: F405
    CACHES = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": _url,
            "OPTIONS": {
                "CLIENT_CLASS": "django_redis.client.SentinelClient",
                "SENTINELS": _sentinels,
            },
        }
    }
    DJANGO_REDIS_CONNECTION_FACTORY = "django_redis.pool.SentinelConnectionFactory"
    CHANNEL_LAYERS["default"]["CONFIG"]["hosts"] = [  # noqa: F405
        {
            "master_name": os.environ.get("HA_SERVICE", "presence"),
            "sentinels": _sentinels,
            "socket_timeout": None,
            "socket_keepalive": True,
        }
    ]
elif _cluster:
    PRESENCE = {**PRESENCE, "CLUSTER": True, "REDIS_URL": _cluster, "SHARDS": 6}  # noqa: F405

PRESENCE.update(json.loads(os.environ.get("PRESENCE_OVERRIDES") or "{}"))  # noqa: F405
