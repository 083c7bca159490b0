"""The presence server of project/asgi.py without its frozen start-up (benchmark 6 shows what
the freeze is for)."""

import gc

from project.asgi import application  # noqa: F401

gc.unfreeze()
gc.set_threshold(700, 10, 10)
