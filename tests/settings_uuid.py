"""The test settings with a user model unlike Django's: ``accounts.User`` (tests/accounts/), a
UUID primary key and the email address as the login. ``pytest --ds=tests.settings_uuid``.

The choice travels in the environment (``PRESENCE_TEST_USERS``), so the servers the tests start
as subprocesses (their settings build on tests/settings.py) use the same model.
"""

import os

os.environ["PRESENCE_TEST_USERS"] = "uuid"

from tests.settings import *  # noqa: E402, F403
