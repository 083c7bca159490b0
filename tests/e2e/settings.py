"""Settings of the demo server the browser tests start (a subprocess of the test run): the test
settings (the run's Redis, through REDIS_URL), a temporary SQLite file (DJANGO_DB) and timers
short enough to watch idle, the grace and expiry happen within a test."""

import os

from tests.settings import *  # noqa: F403

#: Seconds. Idle after 3 s without input; a closed tab leaves after a 3 s grace (a reload on a
#: loaded machine fits in it); the sweep runs twice a second, so a leave is seen at most ~0.5 s
#: after the grace ends.
TIMERS = {
    "HEARTBEAT_INTERVAL": 1,
    "LEASE_TTL": 4,
    "DISCONNECT_GRACE": 3,
    "IDLE_AFTER": 3,
    "SWEEP_INTERVAL": 0.5,
    "ONLINE_WINDOW": 2,
    "HEARTBEAT_FLUSH_INTERVAL": 0.2,
    "TOUCH_INTERVAL": 1,  # every page load (and any request not skipped) is activity
}

DEBUG = True  # the demo's urls serve the static files (presence.js, CSS) when DEBUG is on
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
DATABASES = {
    "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ.get("DJANGO_DB", "")}
}
# Keys of its own, so a Redis shared with other runs (REDIS_URL) holds no state of theirs.
PRESENCE = {  # noqa: F405
    **PRESENCE,  # noqa: F405
    **TIMERS,
    "KEY_PREFIX": os.environ.get("PRESENCE_E2E_PREFIX", "presence-e2e"),
    "LAST_SEEN_PRIVACY": True,  # as the demo ships
    "COUNT_ONLY_ROOMS": [r"stage-.*"],  # tests/e2e/test_shared_tabs.py: not the demo's
}
# tests/e2e/test_shared_sign_out.py: a CSRF cookie no page can read (presence.js shares nothing).
CSRF_COOKIE_HTTPONLY = os.environ.get("PRESENCE_E2E_CSRF_HTTPONLY") == "1"
