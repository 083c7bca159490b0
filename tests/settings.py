"""Test settings: the demo's, on a private Redis started for the run (or REDIS_URL), with short
timers so that expiry, grace and idle can be seen within a test."""

from presence_app.testing import ensure_redis_url

from project.settings import *  # noqa: F403

REDIS_URL = ensure_redis_url()
CACHES = {"default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": REDIS_URL}}
# As in project/settings.py: no socket timeout under channels-redis' blocking BZPOPMIN.
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            "hosts": [{"address": REDIS_URL, "socket_timeout": None, "socket_keepalive": True}],
        },
    }
}
PRESENCE = {"REDIS_URL": REDIS_URL}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
