"""The presence server of project/asgi.py with CPython's default garbage collector settings
(benchmark 6 shows what project/asgi.py's tuning is for)."""

import gc

from project.asgi import application  # noqa: F401

gc.unfreeze()
gc.set_threshold(700, 10, 10)
