"""Test settings: the demo's, on a private Redis started for the run (or REDIS_URL), with an
in-memory database and a fast password hasher.

Everything that names Redis (the cache, the channel layer, PRESENCE) is project/settings.py's
own, so the tests run on the channel layer the project ships (channels-redis' pub/sub layer) and
cannot drift from it: ensure_redis_url() puts the run's Redis into the environment, where the
demo's settings read REDIS_URL, before they are imported.
"""

import os

from presence_app.testing import ensure_redis_url

ensure_redis_url()

from project.settings import *  # noqa: E402, F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
# The suite runs on the app's defaults; the demo turns LAST_SEEN_PRIVACY on, and the tests of
# privacy (tests/access/test_privacy.py, tests/access/test_visibility_model.py, the demo's e2e) turn it on too.
PRESENCE = {**PRESENCE, "LAST_SEEN_PRIVACY": False}  # noqa: F405

# tests/settings_uuid.py (and every server a run under it starts): the UUID-and-email user model.
if os.environ.get("PRESENCE_TEST_USERS") == "uuid":
    INSTALLED_APPS = [*INSTALLED_APPS, "tests.accounts"]  # noqa: F405
    AUTH_USER_MODEL = "accounts.User"
