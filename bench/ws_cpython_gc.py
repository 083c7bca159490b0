"""The presence server of project/asgi.py with CPython's collector thresholds and no full
collection after churn (start-up still frozen): what the demo shipped between the soak's first
fix and the churn collector. Benchmark 6 measures its stalls, benchmark 15 its memory."""

from presence_app.realtime import collector
from project.asgi import application  # noqa: F401

collector.tune((700, 10, 10), share=None)
