"""The presence server of project/asgi.py with CPython's collector as it comes: nothing frozen,
its thresholds, no full collection after churn (benchmark 6 shows what the tuning is for)."""

import gc

from presence_app.realtime import collector
from project.asgi import application  # noqa: F401

gc.unfreeze()
gc.set_threshold(700, 10, 10)
collector.collector.share = None
