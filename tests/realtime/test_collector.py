"""The collector of a server process (presence_app.realtime.collector, tuned by project/asgi.py):
a full collection follows the connections that ended, never the steady ones."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from collections.abc import Iterator

import pytest

from presence_app.realtime import collector as collector_module
from presence_app.realtime.collector import collector

from ..ws import Socket, application, make_user, presence_settings, shutdown

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def full_passes() -> Iterator[list[float]]:
    """The passes of the oldest generation the garbage collector makes, whoever started them:
    the time.monotonic() each began. CPython's own (automatic) passes are off meanwhile, so
    that each one seen is an explicit gc.collect(): the churn collector's, or the test's. The
    process' collector settings are restored afterwards."""
    passes: list[float] = []

    def seen(phase: str, info: dict) -> None:
        if phase == "start" and info["generation"] == 2:
            passes.append(time.monotonic())

    thresholds = gc.get_threshold()
    tuned = collector.share, collector.min_ended
    enabled = gc.isenabled()
    # as in a new process (tests before may have left sessions unclosed, or passes just made)
    collector.open, collector.next_allowed, collector.pending = 0, 0.0, None
    gc.callbacks.append(seen)
    gc.disable()
    try:
        yield passes
    finally:
        if enabled:
            gc.enable()
        gc.callbacks.remove(seen)
        gc.set_threshold(*thresholds)
        collector.share, collector.min_ended = tuned


async def test_a_full_collection_once_a_share_of_the_open_connections_ended(full_passes):
    with presence_settings():
        try:
            application()  # project/asgi.py, which tunes it its own way, first
            collector_module.tune(share=0.5, min_ended=2)
            assert gc.get_threshold() == collector_module.THRESHOLDS
            _, cookie = await make_user("ann")
            sockets = [await Socket.open(cookie) for _ in range(3)]
            ours = collector.passes
            # 1 ended, 2 open: the share is reached (1 >= 0.5 * 2), min_ended is not
            await sockets.pop().close()
            await asyncio.sleep(0)
            assert collector.passes == ours
            before = len(full_passes)
            await sockets.pop().close()  # 2 ended >= max(2, 0.5 * 1 open): a full pass
            await asyncio.sleep(0)  # it runs after the close that called it
            assert collector.passes == ours + 1 and len(full_passes) > before
            await sockets.pop().close()  # the count starts again: 1 ended, below min_ended
            await asyncio.sleep(0)
            assert collector.passes == ours + 1
        finally:
            await shutdown()


async def test_untuned_it_only_counts(full_passes):
    collector.share = None
    collector.next_freeze = 0.0  # a tuned one would freeze at the next open
    opened = collector.open
    frozen, thresholds = gc.get_freeze_count(), gc.get_threshold()
    collector.opened()
    collector.closed()
    passes = collector.passes
    for _ in range(500):
        collector.opened()
        collector.closed()
    await asyncio.sleep(0.01)  # a window for a pass it would have asked for: none may come
    assert collector.passes == passes and collector.open == opened
    # What the process sees: no full pass made, nothing frozen, CPython's thresholds as they were.
    assert full_passes == [] and collector.pending is None
    assert gc.get_freeze_count() == frozen and gc.get_threshold() == thresholds


async def test_a_burst_asks_once_and_passes_keep_to_their_budget(full_passes):
    collector_module.tune(share=0.5, min_ended=2)
    for _ in range(10):
        collector.opened()
    passes, before, made = collector.passes, time.monotonic(), len(full_passes)  # tune()'s
    for _ in range(6):  # the fourth close asks (4 ended >= 0.5 * 6 open); the rest do not
        collector.closed()
    assert collector.pending
    await asyncio.sleep(0.01)
    assert collector.passes == passes + 1 and not collector.pending
    # What the process sees: one full pass of the garbage collector, after the burst.
    assert len(full_passes) == made + 1 and full_passes[-1] >= before
    assert collector.next_allowed >= before  # 19x the pass' time after it began
    allowed = collector.next_allowed = time.monotonic() + 0.3  # as after a pass of 16 ms
    collector.opened()
    collector.closed()  # 1 ended: below min_ended
    collector.closed()  # 2: asks, and waits for the budget
    assert collector.pending and len(full_passes) == made + 1
    for _ in range(3000):  # bounded: 30 s
        if not collector.pending:
            break
        await asyncio.sleep(0.01)
    assert collector.passes == passes + 2 and len(full_passes) == made + 2
    # The second full pass began once the budget allowed it, not before (read from the pass
    # itself, whenever this loop came to look: a loaded machine may look late).
    assert full_passes[-1] >= allowed


async def test_what_open_connections_hold_is_frozen_and_the_churn_pass_frees_it(full_passes):
    collector_module.tune(share=0.5, min_ended=1)

    class Held:
        pass

    held = Held()
    held.me = held  # a cycle, as uvicorn's objects of a connection are
    alive = weakref.ref(held)
    collector.next_freeze = 0.0
    collector.opened()  # freezes it with the rest of what the connection holds
    del held
    gc.collect()
    assert alive() is not None  # out of every pass's sight
    collector.closed()  # the connection ended: 1 >= max(1, 0.5 * 0 open), the churn pass
    await asyncio.sleep(0.01)
    assert alive() is None
