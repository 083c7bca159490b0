"""Settings of the servers benchmark 6 starts (bench/sockets.py): the demo project's, as
shipped (its middleware, the pub/sub channel layer, presence defaults), on the run's Redis
(REDIS_URL) and a SQLite file (DJANGO_DB), without debug.

One change, for the acknowledgement benchmark only: the per-socket frame limit is raised, so a
socket may heartbeat as fast as its acks come back (the measure is the process' capacity, which
20 frames a second per socket would hide at 1,000 sockets).
"""

import os

from project.settings import *  # noqa: F403

DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ["DJANGO_DB"],
        # Thousands of sockets authenticate at once: wait for SQLite's lock rather than fail.
        "OPTIONS": {"timeout": 30},
    }
}
PRESENCE = {  # noqa: F405
    **PRESENCE,  # noqa: F405
    "KEY_PREFIX": os.environ.get("PRESENCE_KEY_PREFIX", "bws"),
    "MAX_FRAMES_PER_SECOND": 1000,
}
_layer = CHANNEL_LAYERS["default"]  # noqa: F405
CHANNEL_LAYERS = {"default": {**_layer, "CONFIG": {**_layer["CONFIG"], "prefix": "asgi-bws"}}}
