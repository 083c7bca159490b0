"""What the sessions do that Redis does not do for a connection (presence_app.realtime.liveness:
a process holds one lease for all its connections and closes a silent one itself), on real
sockets, a real channel layer and Redis."""

from __future__ import annotations

import pytest
from channels.layers import channel_layers

from presence_app import presence
from presence_app.consumers import CLOSE_SILENT
from presence_app.core.connection import get_async_store, process_id

from ..frame_waits import CLOSED
from ..timing import limit
from ..ws import FAST, Socket, make_user, presence_settings, shutdown

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
async def liveness(redis_client):
    channel_layers.backends.clear()
    with presence_settings(IDLE_AFTER=2, ONLINE_WINDOW=2):
        try:
            yield
        finally:
            await shutdown()


async def test_the_front_door_runs_with_one_process_lease(liveness, redis_client):
    _, cookie = await make_user("ann")
    sock = await Socket.open(cookie)
    store = get_async_store()
    assert store.keys.tag_for_user(sock.user).endswith(":3")
    assert store.plans.process == process_id()
    procs = [k for k in redis_client.keys("*") if k.endswith(b":3:procs")]
    assert [m.decode() for m in redis_client.zrange(procs[0], 0, -1)] == [process_id()]
    assert (await presence.aget(sock.user)).state == "online"
    await sock.close()


async def test_a_process_keeps_its_lease_while_its_connections_are_silent(liveness, redis_client):
    """The coalescer is the process's keepalive (realtime/coalescer.py): while a connection of
    the process is open, its lease (K_PROCS) runs on with no beat of any socket, and no other
    write of the process renews it (join, set_status, touch do not, since issue 43's eighth
    session); once its last connection closes, the coalescer lets it run out and ends."""
    import asyncio

    from presence_app.realtime.coalescer import HeartbeatCoalescer
    from presence_app.store.keys import KeySpace

    class Owner:
        conn_id, user_id, tenant, closed = "k1", "ku", None, False

    # A lease of 4 s, not FAST's 2: a keepalive every LEASE_TTL / 3 leaves more than a third of
    # it at each look by over a second, which a loaded machine's delays stay within.
    lease = 4.0
    with presence_settings(LEASE_TTL=lease, IDLE_AFTER=2, ONLINE_WINDOW=2):
        store = get_async_store()
        assert store.config.lease_ttl == lease
        await store.connect("k1", "ku")
        await store.join("lobby", "k1", "ku")
        procs = KeySpace.procs(store.keys.tag_for_user("ku"))

        def left() -> float:  # seconds of the lease left, in Redis' clock
            secs, usecs = redis_client.time()
            return redis_client.zscore(procs, process_id()) - (secs + usecs / 1e6)

        beats, owner = HeartbeatCoalescer(), Owner()
        beats.idle = 2  # quiet rounds: the task must run on through them while a connection is open
        beats.hold(owner)
        for _ in range(4):
            await asyncio.sleep(lease * 0.6)
            await store.set_status("ku", message="here")  # a write: not a renewal
            assert left() > lease / 3  # renewed every LEASE_TTL / 3, no beat sent
        assert beats.flushes >= 3
        assert not beats.task.done()
        beats.forget(owner)
        await asyncio.sleep(lease * 1.1)
        assert beats.task.done()
        assert left() < 0  # nothing open: the lease runs out


async def test_a_socket_silent_for_the_lease_is_closed(liveness):
    _, cookie = await make_user("ann")
    quiet = await Socket.open(cookie, name="quiet")  # no heartbeat at all
    beating = await Socket.open(cookie, name="beating")
    beating.beat(0.3)
    # LEASE_TTL is 2 s (tests/ws.FAST): closed then, held to tests/timing.py's multiple of it.
    frame = await quiet.wait_for(CLOSED, timeout=limit(FAST["LEASE_TTL"]))
    assert frame["code"] == CLOSE_SILENT
    assert beating.closed_with is None  # and the user stays (idle by now: IDLE_AFTER is 2 s)
    assert (await presence.aget(beating.user)).state in ("online", "idle")
    await beating.close()


@pytest.mark.long
async def test_idle_waits_for_every_device_and_ends_with_activity(liveness):
    (_, ann), (_, bob) = await make_user("ann"), await make_user("bob")
    phone, laptop = await Socket.open(ann, name="phone"), await Socket.open(ann, name="laptop")
    watcher = await Socket.open(bob, name="bob")
    for sock in (phone, laptop, watcher):
        sock.beat(0.3)  # heartbeats are not activity
    await watcher.send(type="watch", users=[phone.user])
    await watcher.wait_for("presence.state", watch=True)
    # The laptop stays active past the phone's IDLE_AFTER (2 s; an activity written at most
    # once a second, so the latest is never 2 s old): the phone's session asks, and is refused.
    for _ in range(8):
        await laptop.send(type="activity")
        assert [f for f in await watcher.collect(0.3) if f.get("state") == "idle"] == []
    # Then it stops too: the phone's session asks again, or the laptop's does.
    await watcher.wait_for("presence.update", timeout=limit(2 * 2), user=phone.user, state="idle")
    await phone.send(type="activity")
    await watcher.wait_for("presence.update", user=phone.user, state="online")
    await watcher.wait_for("presence.update", timeout=limit(2), user=phone.user, state="idle")
    for sock in (phone, laptop, watcher):
        await sock.close()


async def test_the_reads_that_show_a_last_activity_read_it(liveness):
    """A plain connected user's last activity lives in their registry field : get,
    the room's presence.state frame and the reads with ``activity=True`` read it; a plain
    get_many (a page of dots) does without."""
    (_, ann), (_, bob) = await make_user("ann"), await make_user("bob")
    a = await Socket.open(ann, name="ann")
    uid, trusted = a.user, presence.TRUSTED
    assert (await presence.aget(uid, viewer=trusted)).last_active is not None
    assert (await presence.aget_many([uid], viewer=trusted))[uid].last_active is None
    read = await presence.aget_many([uid], viewer=trusted, activity=True)
    assert read[uid].last_active == (await presence.aget(uid, viewer=trusted)).last_active
    await a.send(type="join", room="lobby")
    await a.wait_for("presence.state")
    b = await Socket.open(bob, name="bob")
    await b.send(type="join", room="lobby")
    frame = await b.wait_for("presence.state")
    members = {m["user"]: m for m in frame["members"]}
    assert members[uid]["last_active"] == read[uid].last_active
    await a.close()
    await b.close()
