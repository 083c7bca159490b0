"""Redis Cluster with a replica per master: a master is killed (SIGKILL) under load. Its replica
takes over its slots; the servers' async stores (heartbeats, sweeps) and sync stores (pages, the
JSON API) follow the new topology, with the same promises as a Sentinel failover: pages serve,
no socket dropped, every lease renewed within a heartbeat interval of the promotion, no
flicker, no ghost, no last seen lost."""

from __future__ import annotations

import dataclasses

import pytest
import redis

from .failover import OVERRIDES, run_failover

pytestmark = pytest.mark.timeout(180)

USERS = 40
SHARDS = 6  # tests/ha/settings.py's, on a cluster


async def test_master_killed_under_load_heals_on_its_replica(
    replicated_cluster, cluster_db, servers_on, prefix
):
    from tests.reliability.conftest import servers_store, store_config

    masters = replicated_cluster.nodes[: replicated_cluster.masters]
    victim = masters[0]
    heir = replicated_cluster.nodes[replicated_cluster.masters]  # victim's replica
    client = redis.RedisCluster.from_url(
        replicated_cluster.url, socket_timeout=2, socket_connect_timeout=1
    )
    config = dataclasses.replace(store_config(prefix, **OVERRIDES), shards=SHARDS)
    # The victim holds some of presence's shards (else the test would kill nothing of use).
    assert any(
        client.keyslot(tag) < 16384 // replicated_cluster.masters
        for tag in servers_store(client, config).keys.all_tags()
    )

    def promoted() -> bool:
        with heir.client(socket_timeout=1) as node:
            return node.info("replication")["role"] == "master"

    def replicated() -> None:
        for node in masters:
            with node.client() as master:
                assert master.execute_command("WAIT", 1, 5000) == 1

    outcome = await run_failover(
        servers_on(cluster_db),
        cluster_db,
        USERS,
        reader=lambda: servers_store(client, config),
        kill=victim.kill,
        promoted=promoted,
        replicated=replicated,
    )
    client.close()
    outcome.check("cluster")


def test_a_connection_closed_under_a_call_is_redis_unreachable(redis_cluster):
    """The race the failover above runs into now and then: a call relearning the topology
    closes a node's connections while another call is about to write on one of them. Under
    uvloop (uvicorn's loop) that write fails with a RuntimeError ("the handler is closed"); the
    store must report it as Redis unreachable, which every caller retries, and not as a bug
    that kills the heartbeat task."""
    import uvloop

    from presence_app.core.connection import aclose_async_store, get_async_store
    from presence_app.store import UNAVAILABLE
    from tests.ws import presence_settings

    async def scenario() -> BaseException | None:
        store = get_async_store()
        # Connections to every shard's node. A call that meets a topology refresh disconnecting
        # its connection mid-handshake is reported as unavailable, which callers retry, as here
        # (the store has a new client learn the topology before its first calls go out).
        for attempt in range(3):
            try:
                await store.heartbeat_many([("c1", "u1")])
                break
            except UNAVAILABLE:
                if attempt == 2:
                    raise
        for node in store.client.get_nodes():
            for connection in node._free:  # closed, but still looking connected
                if connection._writer is not None:  # (one never connected has none)
                    connection._writer.transport.close()
        try:
            await store.heartbeat_many([("c1", "u1")])
        except BaseException as exc:  # noqa: BLE001  (what the caller would see)
            return exc
        finally:
            await aclose_async_store()
        return None

    with presence_settings(CLUSTER=True, REDIS_URL=redis_cluster.url, SHARDS=SHARDS):
        error = uvloop.run(scenario())
    assert isinstance(error, UNAVAILABLE), repr(error)
    assert "closed" in str(error)
