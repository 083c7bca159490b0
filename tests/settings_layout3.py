"""The test settings on store layout 3 (``STORE_LAYOUT = 3``, docs/store-layout-3.md):
``pytest --ds=tests.settings_layout3``, nox's ``layout3`` session.

The choice travels in the environment (``PRESENCE_TEST_LAYOUT``), so the servers the tests start
as subprocesses (their settings build on tests/settings.py) use the same layout.
"""

import os

os.environ["PRESENCE_TEST_LAYOUT"] = "3"

from tests.settings import *  # noqa: E402, F403
