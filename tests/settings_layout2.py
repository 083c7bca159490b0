"""The test settings on store layout 2 (``STORE_LAYOUT = 2``, the layout before 3, kept for the
sites that upgrade from it): ``pytest --ds=tests.settings_layout2``, nox's ``layout2`` session.

The choice travels in the environment (``PRESENCE_TEST_LAYOUT``), so the servers the tests start
as subprocesses (their settings build on tests/settings.py) use the same layout.
"""

import os

os.environ["PRESENCE_TEST_LAYOUT"] = "2"

from tests.settings import *  # noqa: E402, F403
