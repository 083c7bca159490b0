"""The soak's servers (bench/soak.py): the demo's application (project.asgi), with two knobs that
tell a leak from the allocator and the collector.

- ``SOAK_GC=700,10,10``: these thresholds alone instead of the demo's collector
  (project/asgi.py: large thresholds and a full collection after churn,
  presence_app.realtime.collector), so that servers in one run differ in that alone.
- ``SOAK_STATS=path``: every ``SOAK_STATS_EVERY`` seconds (30) a JSON line: the RSS, the blocks
  Python's allocator holds live (``sys.getallocatedblocks``), the objects the collector tracks
  and its counts, its passes since the last line (how many, the longest, the total time, by
  generation: each one stalls every connection); every fifth line also the 40 most numerous
  types. RSS that grows while the live blocks stay flat is the allocator keeping freed memory;
  growing live blocks are objects kept, and the types say which.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from presence_app.realtime import collector
from project.asgi import application

__all__ = ["application"]

if os.environ.get("SOAK_GC"):
    collector.tune(tuple(int(n) for n in os.environ["SOAK_GC"].split(",")), share=None)


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _types() -> dict[str, int]:
    counts = Counter(type(o).__qualname__ for o in gc.get_objects())
    return dict(counts.most_common(40))


class _Pauses:
    """The collector's passes since the last line, by generation: how many, and the longest
    and the total time they took (each pass stalls every connection of the process)."""

    def __init__(self) -> None:
        self.began = 0.0
        self.reset()
        gc.callbacks.append(self)

    def reset(self) -> None:
        self.passes, self.longest, self.total = [0, 0, 0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self.began = time.perf_counter()
            return
        took, g = (time.perf_counter() - self.began) * 1000, info["generation"]
        self.passes[g] += 1
        self.longest[g] = max(self.longest[g], took)
        self.total[g] += took

    def line(self) -> dict:
        out = {
            "passes": self.passes,
            "longest_ms": [round(x, 2) for x in self.longest],
            "total_ms": [round(x, 1) for x in self.total],
        }
        self.reset()
        return out


def _record(path: Path, every: float) -> None:
    pauses = _Pauses()
    n = 0
    while True:
        line = {
            "at": round(time.time(), 1),
            "rss": _rss(),
            "blocks": sys.getallocatedblocks(),
            "tracked": len(gc.get_objects()),
            "gc_count": gc.get_count(),
            "collections": [s["collections"] for s in gc.get_stats()],
            **pauses.line(),
        }
        if n % 5 == 0:
            line["types"] = _types()
        with path.open("a") as f:
            f.write(json.dumps(line) + "\n")
        n += 1
        time.sleep(every)


if os.environ.get("SOAK_STATS"):
    threading.Thread(
        target=_record,
        args=(Path(os.environ["SOAK_STATS"]), float(os.environ.get("SOAK_STATS_EVERY", "30"))),
        name="soak-stats",
        daemon=True,
    ).start()
