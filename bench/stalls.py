"""Where a process stood still: a diagnosis of benchmark 17's tails (``BENCH_BIG_ROOMS_STALLS``).

A thread wakes every 5 ms and writes down each wake-up that came more than 20 ms late: the
process was not run (a full machine) or another thread held the GIL that long (a long C call,
a pass of the garbage collector). Each pass of the collector over 10 ms is written down too,
with its generation. In a process with a running event loop (a server) each wake-up also hands the
loop a callback, and a callback run
more than 20 ms after it was handed is written down: the loop was behind (busy, not stopped).
Each line of ``FOLDER/stalls-NAME-PID.jsonl`` is one of them: ``{"at": wall clock, "late": s}``,
``{"at": ..., "loop": s}`` or ``{"at": ..., "gc": generation, "took": s}``; ``{"at": ...,
"found": "loop"}`` says from when the loop was watched.

In a server (bench/big_rooms_settings.py) it tells the server's own stalls; run alone
(``python -m bench.stalls FOLDER machine``, as benchmark 17 does beside its servers) it tells the
machine's: a wake-up late there too was a process not run, whatever it ran.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

PERIOD, LATE, LONG_GC = 0.005, 0.020, 0.010


def watch(folder: str, name: str) -> None:
    """Starts writing this process' stalls to ``folder`` (a daemon thread; gc callbacks)."""
    out = (Path(folder) / f"stalls-{name}-{os.getpid()}.jsonl").open("a", buffering=1)
    lock = threading.Lock()

    def write(entry: dict[str, Any]) -> None:
        with lock:
            out.write(json.dumps(entry) + "\n")

    started: dict[int, float] = {}
    loop: list[asyncio.AbstractEventLoop] = []  # the process' running loop, once found

    def ran(handed: float) -> None:
        behind = time.perf_counter() - handed
        if behind > LATE:
            write({"at": time.time(), "loop": round(behind, 4)})

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[info["generation"]] = time.perf_counter()
        elif (t0 := started.pop(info["generation"], None)) is not None:
            took = time.perf_counter() - t0
            if took > LONG_GC:
                write({"at": time.time(), "gc": info["generation"], "took": round(took, 4)})

    def find_loop() -> None:
        # (a server imports its settings before its loop runs, and its collector freezes
        # objects out of gc's sight: the loop is looked for on the main thread's stack)
        main = threading.main_thread().ident
        for _ in range(60):
            time.sleep(1)
            frame = sys._current_frames().get(main)  # noqa: SLF001
            while frame is not None:
                for value in frame.f_locals.values():
                    for o in (value, getattr(value, "_loop", None)):
                        if isinstance(o, asyncio.AbstractEventLoop) and o.is_running():
                            loop.append(o)
                            write({"at": time.time(), "found": "loop"})
                            return
                frame = frame.f_back

    def run() -> None:
        find_loop()
        due = time.perf_counter() + PERIOD
        while True:
            time.sleep(max(0.0, due - time.perf_counter()))
            late = time.perf_counter() - due
            if late > LATE:
                write({"at": time.time(), "late": round(late, 4)})
            if loop:
                try:
                    loop[0].call_soon_threadsafe(ran, time.perf_counter())
                except RuntimeError:  # closed
                    return
            due = max(due + PERIOD, time.perf_counter())

    gc.callbacks.append(on_gc)
    threading.Thread(target=run, name="stalls", daemon=True).start()


def summary(folder: str, since: float = 0.0, until: float = float("inf")) -> dict[str, Any]:
    """Per file: the late wake-ups (how many, the longest, the sum) and the long collections."""
    out: dict[str, Any] = {}
    for path in sorted(Path(folder).glob("stalls-*.jsonl")):
        late, gcs, behind, watched = [], [], [], False
        for line in path.read_text().splitlines():
            e = json.loads(line)
            if "found" in e:
                watched = e["at"] <= until
            elif since <= e["at"] <= until:
                kind = late if "late" in e else gcs if "gc" in e else behind
                kind.append(e)
        out[path.stem] = {
            # (None: no running loop found by then, not a loop never behind)
            "loop_behind": len(behind) if watched else None,
            "loop_max_ms": round(1000 * max((e["loop"] for e in behind), default=0.0), 1),
            "late": len(late),
            "late_max_ms": round(1000 * max((e["late"] for e in late), default=0.0), 1),
            "late_sum_ms": round(1000 * sum(e["late"] for e in late), 1),
            "gc": len(gcs),
            "gc_max_ms": round(1000 * max((e["took"] for e in gcs), default=0.0), 1),
        }
    return out


if __name__ == "__main__":
    if sys.argv[1] == "summary":
        print(json.dumps(summary(sys.argv[2], *map(float, sys.argv[3:5])), indent=1))
    else:
        watch(sys.argv[1], sys.argv[2])
        while True:
            time.sleep(3600)
