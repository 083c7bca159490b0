"""Django settings of benchmark 7 (bench/middleware.py): the demo project's own middleware stack
(``project.settings.MIDDLEWARE``), with or without ``PresenceMiddleware``, database sessions in
a SQLite file, the project's channel layer, presence on the run's Redis with its defaults.

From the environment: ``REDIS_URL``; ``BENCH_MW_DB`` (the SQLite file); ``BENCH_MW_PRESENCE``
("1": the full stack, "0": without PresenceMiddleware); ``BENCH_MW_PREFIX`` (the key prefix, so
each server's writes can be counted apart); ``BENCH_MW_TOUCH_INTERVAL`` (unset: the default).
"""

import os

from project.settings import MIDDLEWARE as PROJECT_MIDDLEWARE

PRESENCE_MIDDLEWARE = "presence_app.middleware.PresenceMiddleware"
if PRESENCE_MIDDLEWARE not in PROJECT_MIDDLEWARE:
    raise RuntimeError("project.settings.MIDDLEWARE no longer holds PresenceMiddleware")
MIDDLEWARE_WITH = list(PROJECT_MIDDLEWARE)
MIDDLEWARE_WITHOUT = [m for m in PROJECT_MIDDLEWARE if m != PRESENCE_MIDDLEWARE]

SECRET_KEY = "bench-middleware-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1"]
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "channels",
    "presence_app",
]
MIDDLEWARE = (
    MIDDLEWARE_WITH if os.environ.get("BENCH_MW_PRESENCE", "1") == "1" else MIDDLEWARE_WITHOUT
)
ROOT_URLCONF = "bench.middleware_worker"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("BENCH_MW_DB", ":memory:"),
        # The project's (Django's default), and what Django advises under ASGI, where each
        # request's sync code runs in a thread of its own: a connection per request.
        "CONN_MAX_AGE": 0,
    }
}
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {
            "hosts": [{"address": REDIS_URL, "socket_timeout": None, "socket_keepalive": True}],
        },
    }
}
PRESENCE = {"REDIS_URL": REDIS_URL, "KEY_PREFIX": os.environ.get("BENCH_MW_PREFIX", "bmw")}
if os.environ.get("BENCH_MW_TOUCH_INTERVAL"):
    PRESENCE["TOUCH_INTERVAL"] = float(os.environ["BENCH_MW_TOUCH_INTERVAL"])
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LOGGING = {"version": 1, "disable_existing_loggers": False}
