"""Settings of the servers of the soak (bench/soak.py): the demo project's as shipped (its
middleware, the pub/sub channel layer, the default timers), on the run's Redis (REDIS_URL) and a
SQLite file (DJANGO_DB), without debug. ``PRESENCE_KEY_PREFIX`` names the store's keys, and the
channel layer's prefix is ``asgi-`` and the same; ``PRESENCE_OVERRIDES`` (JSON) is merged into
PRESENCE: the soak shortens METADATA_TTL so that a departed user's record is gone by the end.
"""

import json
import os

from project.settings import *  # noqa: F403

DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ["DJANGO_DB"],
        "OPTIONS": {"timeout": 30},  # thousands of handshakes: wait for SQLite's lock
    }
}
PRESENCE = {  # noqa: F405
    **PRESENCE,  # noqa: F405
    "KEY_PREFIX": os.environ.get("PRESENCE_KEY_PREFIX", "bsoak"),
    **json.loads(os.environ.get("PRESENCE_OVERRIDES") or "{}"),
}
_layer = CHANNEL_LAYERS["default"]  # noqa: F405
CHANNEL_LAYERS = {
    "default": {
        **_layer,
        "CONFIG": {**_layer["CONFIG"], "prefix": "asgi-" + PRESENCE["KEY_PREFIX"]},
    }
}
