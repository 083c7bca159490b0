"""The heartbeat coalescer's bounds, on the real test Redis: one entry per socket however often
it beats, at most MAX_BATCH leases per script call, and a failed batch kept (not doubled) for
the next flush."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from presence_app.core.connection import aclose_async_store, get_async_store
from presence_app.realtime import coalescer
from presence_app.testing import RedisServer

pytestmark = pytest.mark.timeout(60)


@dataclass(eq=False)
class Owner:
    conn_id: str
    user_id: str
    lost: int = 0
    unavailable: int = 0

    def lease_lost(self) -> None:
        self.lost += 1

    def lease_unavailable(self) -> None:
        self.unavailable += 1


async def test_batches_are_capped_and_pending_is_one_per_socket(redis_client, monkeypatch):
    monkeypatch.setattr(coalescer, "MAX_BATCH", 10)
    store = get_async_store()
    owners = [Owner(f"c{i}", f"u{i}") for i in range(25)]
    for owner in owners[:20]:
        await store.connect(owner.conn_id, owner.user_id)
    beats = coalescer.HeartbeatCoalescer()
    for _ in range(5):  # a socket beating five times before a flush is one entry
        for owner in owners:
            beats.beat(owner)
    assert len(beats.pending) == 25
    beats.task.cancel()  # flushed by hand here, not by the loop's task
    await beats.flush()
    assert beats.flushes == 3  # 25 leases, 10 a call
    assert [o.lost for o in owners] == [0] * 20 + [1] * 5  # the five never connected
    assert beats.pending == {}
    await aclose_async_store()


async def test_a_failed_batch_waits_for_the_next_flush_once(monkeypatch, settings):
    monkeypatch.setattr(coalescer, "MAX_BATCH", 10)
    server = RedisServer().start()
    settings.PRESENCE = {**settings.PRESENCE, "REDIS_URL": server.url}
    owners = [Owner(f"c{i}", f"u{i}") for i in range(25)]
    beats = coalescer.HeartbeatCoalescer()
    server.stop()
    for owner in owners:
        beats.beat(owner)
    beats.task.cancel()
    await beats.flush()
    await beats.flush()
    assert len(beats.pending) == 25 and beats.flushes == 2  # one failed call each, kept once
    assert {o.unavailable for o in owners} == {2}
    await aclose_async_store()
