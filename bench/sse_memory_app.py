"""The project's ASGI application for ``python -m bench.sse_memory --trace``: with
``SSE_MEMORY_SNAPSHOT`` set, tracemalloc runs from start-up and SIGUSR1 writes a snapshot
(after a full collection) to ``$SSE_MEMORY_SNAPSHOT.<n>``, then ``.<n>.done``."""

import gc
import os
import signal
import tracemalloc
from pathlib import Path

_base = os.environ.get("SSE_MEMORY_SNAPSHOT")
if _base:
    tracemalloc.start(int(os.environ.get("SSE_MEMORY_FRAMES", "12")))
    _count = [0]

    def _dump(signum: int, frame: object) -> None:
        gc.collect()
        path = Path(f"{_base}.{_count[0]}")
        _count[0] += 1
        tracemalloc.take_snapshot().dump(str(path))
        path.with_name(path.name + ".done").touch()

    signal.signal(signal.SIGUSR1, _dump)

from project.asgi import application  # noqa: E402, F401
