"""The garbage collector of a process that holds many connections: passes follow the
connections, not the objects that aged.

Two facts of CPython 3.11's collector meet here. A pass walks every object of the generations
it collects, and a process of 10,000 sockets holds millions: a full pass stalls every socket
for about 2 s, and CPython starts one whenever a quarter more objects have reached the oldest
generation (its thresholds: benchmark 6's join p99 615-1,131 ms at 10,000 sockets, docs/
benchmarks.md). And an ended connection leaves reference cycles in the server's WebSocket
stack (uvicorn's protocol objects, the websockets parser), which only a full pass frees: with
passes made rare by large thresholds, ended connections pile up under churn (benchmark 15).

:func:`tune` answers both:

- **what open connections hold is frozen** (``gc.freeze``: a list splice, at most once a second
  while connections open): out of every pass's sight, so passes walk only what is new;
- **a full pass follows the churn**: once the connections ended since the last reach a quarter
  of those open (at least ``min_ended``), the frozen objects are unfrozen, everything is
  collected (what the ended connections left among it) and frozen again; one pass at a time,
  and at most 5 % of the process' time (``BUDGET``).

Steady sockets never cause a full pass; churn frees what it ended. ``project/asgi.py`` calls
:func:`tune` at the end of its start-up; so may any project's ``asgi.py``. Without it nothing
changes: the sessions' calls here only count.
"""

from __future__ import annotations

import asyncio
import gc
import time

#: Thresholds that keep CPython's own full collections rare (generation 0 every 50,000
#: allocations net, generation 1 every 20 of those, generation 2 every 100 of those).
THRESHOLDS = (50_000, 20, 100)
#: The share of the process' time full collections may take: after a pass of 1 s, the next
#: waits 19 s at least (one pass at 10,000 sockets takes ~2 s).
BUDGET = 0.05
#: Seconds between two freezes of what the open connections hold.
FREEZE_EVERY = 1.0


class ChurnCollector:
    """Counts the process' connections; when tuned, collects once enough have ended."""

    def __init__(self) -> None:
        self.open = 0
        self.ended = 0  # since the last full collection
        self.share: float | None = None  # None: not tuned, only count
        self.min_ended = 0
        self.passes = 0
        self.pending: asyncio.AbstractEventLoop | None = None  # the loop a pass is due on
        self.next_allowed = 0.0  # monotonic: the budget's earliest next full collection
        self.next_freeze = 0.0

    def opened(self) -> None:
        self.open += 1
        if self.share is not None and time.monotonic() >= self.next_freeze:
            # What the open connections hold lives as long as they do: out of every pass's
            # sight from now on (a freeze is a list splice), so that passes walk only what is
            # new. At most once a second, while connections open.
            self.next_freeze = time.monotonic() + FREEZE_EVERY
            gc.freeze()

    def closed(self) -> None:
        self.open = max(self.open - 1, 0)
        self.ended += 1
        if self.share is None or (self.pending is not None and not self.pending.is_closed()):
            return  # one at a time: a burst of closes asks once (a closed loop's never comes)
        if self.ended >= max(self.min_ended, self.share * self.open):
            try:  # after the close that asked, and not before the budget allows
                self.pending = asyncio.get_running_loop()
                self.pending.call_later(max(self.next_allowed - time.monotonic(), 0), self.collect)
            except RuntimeError:  # no event loop (a sync caller): now
                self.collect()

    def collect(self) -> None:
        self.pending, self.ended = None, 0
        self.passes += 1
        began = time.monotonic()
        gc.unfreeze()  # what ended connections held was frozen with them
        gc.collect()
        gc.freeze()
        took = time.monotonic() - began
        # A pass stalls every connection: at most BUDGET of the process' time goes to them.
        self.next_allowed = began + took / BUDGET


collector = ChurnCollector()


def tune(
    thresholds: tuple[int, int, int] = THRESHOLDS,
    *,
    share: float | None = 0.25,
    min_ended: int = 100,
) -> None:
    """For a server process, once start-up has loaded everything: collect what start-up left,
    freeze the rest (the framework, the URL conf, the models), set ``thresholds``, and from
    now on freeze what open connections hold and collect fully once the connections ended
    since the last full pass reach ``share`` of those open (at least ``min_ended``).
    ``share=None`` turns both off (the thresholds alone)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*thresholds)
    collector.share, collector.min_ended, collector.ended = share, min_ended, 0
