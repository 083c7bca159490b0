"""The WebSocket consumer suite (tests/realtime/test_consumer.py) again, with presence on the local
3-master Redis Cluster: PRESENCE = {"CLUSTER": True, "REDIS_URL": <a node>, "SHARDS": 4} and
the FAST timers. Every test of that module runs here unchanged, through the same real ASGI stack
(the fixtures it imports, alice/bob/carol, take the `fast` fixture of this module).

The channel layer stays channels-redis on the run's single Redis: channels-redis does not speak
Redis Cluster (it shards over independent servers itself, see docs/scaling.md), so a deployment
on a cluster keeps its channel layer on plain Redis servers.

One test is replaced: the heartbeat batching test counts script calls with MONITOR on the single
Redis; here they are counted on every cluster node: one script call per shard and flush.
"""

from __future__ import annotations

import asyncio

import pytest
import redis
from channels.layers import channel_layers

from presence_app.core.connection import get_async_store
from presence_app.store import scripts
from presence_app.store.keys import CONN_SEP, KeySpace

from ..timing import limit
from ..ws import Monitor, Socket, presence_settings, shutdown
from . import test_consumer
from .test_consumer import *  # noqa: F403  (the tests, re-collected here)

SHARDS = 4
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.cluster]


@pytest.fixture
async def fast(redis_client, redis_cluster):
    """As test_consumer's `fast`, with presence on the (emptied) cluster."""
    client = redis.RedisCluster.from_url(redis_cluster.url)
    client.flushall(target_nodes=redis.RedisCluster.PRIMARIES)
    client.close()
    channel_layers.backends.clear()
    with presence_settings(CLUSTER=True, REDIS_URL=redis_cluster.url, SHARDS=SHARDS):
        assert get_async_store().cluster
        yield
        await shutdown()
    channel_layers.backends.clear()


def test_every_consumer_test_is_collected_here():
    ours = {name for name in globals() if name.startswith("test_")}
    theirs = {name for name in dir(test_consumer) if name.startswith("test_")}
    assert theirs - ours == set()


class NodeMonitor(Monitor):
    """MONITOR on one cluster node."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.commands = []


async def test_heartbeats_are_written_in_batches(alice, bob, carol, redis_cluster):
    """27 heartbeat frames from 9 sockets: per flush, one heartbeat script call per shard that
    has sockets, on that shard's node; every lease renewed exactly once per frame."""
    with presence_settings(HEARTBEAT_FLUSH_INTERVAL=0.5):
        socks = [await Socket.open(cookie) for _, cookie in (alice, bob, carol) for _ in range(3)]
        script = scripts.load()["heartbeat"]
        sha = script.sha
        for node in redis_cluster.nodes:
            # Loaded on every node first: a node's first EVALSHA would fail with NOSCRIPT and be
            # sent again, and MONITOR would show that flush twice.
            with redis.Redis(host="127.0.0.1", port=node.port) as direct:
                direct.script_load(script.source)
        monitors = [NodeMonitor("127.0.0.1", node.port) for node in redis_cluster.nodes]
        for monitor in monitors:
            await monitor.__aenter__()
        try:
            for _ in range(3):
                for s in socks:
                    await s.send(type="heartbeat")
                await asyncio.sleep(0.6)  # pacing: each round after the last one's flush
            # The last round's flush: waited for (a flush interval, held to the slack).
            loop = asyncio.get_running_loop()
            start = loop.time()
            while sum(CONN_SEP in a for m in monitors for c in m.script_calls(sha) for a in c) < 27:
                assert loop.time() - start < limit(0.5), "the last round was not flushed"
                await asyncio.sleep(0.02)
        finally:
            for monitor in monitors:
                await monitor.__aexit__()
        calls = [c for m in monitors for c in m.script_calls(sha)]
        members = []
        for call in calls:
            # EVALSHA sha numkeys <five keys> tag ... members
            tag, group = call[8], [a for a in call if CONN_SEP in a]
            keys = KeySpace(shards=SHARDS)
            if group:  # (a shard without members gets the process's keepalive)
                assert {keys.tag_for_user(m.split(CONN_SEP)[0]) for m in group} == {tag}
            members += group
        assert len(members) == 27
        assert {m.split(CONN_SEP)[0] for m in members} == {s.user for s in socks}
        # One call per shard and flush (every shard: a flush is also the process's keepalive): 3 rounds, each in one flush or split over two (fewer when a slow loop let
        # two rounds into one flush), never one per frame.
        per_flush = SHARDS
        assert per_flush <= len(calls) <= 6 * per_flush, calls
        for s in socks:
            await s.close()
