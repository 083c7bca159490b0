"""How the suite runs the tutorial's project (tests/e2e/test_tutorial.py): its settings, on the
test run's Redis (REDIS_URL) with keys of its own, a SQLite file of the test's (DJANGO_DB),
short timers, and the UUID-and-email user model of tests/accounts/ (any user model works)."""

import os

from mysite.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.accounts"]  # noqa: F405
AUTH_USER_MODEL = "accounts.User"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DATABASES = {
    "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ.get("DJANGO_DB", "")}
}
PREFIX = os.environ.get("PRESENCE_KEY_PREFIX", "tutorial")
PRESENCE = {
    **PRESENCE,  # noqa: F405
    "KEY_PREFIX": PREFIX,
    "HEARTBEAT_INTERVAL": 1,
    "LEASE_TTL": 4,
    "DISCONNECT_GRACE": 1,
    "SWEEP_INTERVAL": 0.5,
    "ONLINE_WINDOW": 2,  # a page view keeps its user online 2 s (not 5 minutes)
    "TOUCH_INTERVAL": 1,
}
CHANNEL_LAYERS["default"]["CONFIG"]["prefix"] = f"asgi-{PREFIX}"  # noqa: F405
STATIC_ROOT = os.environ.get("DJANGO_STATIC_ROOT", STATIC_ROOT)  # noqa: F405
