"""The presence server of project/asgi.py with the larger collector thresholds it had before the
soak (50,000/20/100: full collections rare); benchmark 6 measures what they buy in stalls,
benchmark 15 what they cost in memory."""

import gc

from project.asgi import application  # noqa: F401

gc.set_threshold(50_000, 20, 100)
