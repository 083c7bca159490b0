"""What the soak (bench/soak.py, tests/reliability/test_soak.py) found, each shown here on its
own, in process, with the real stack and Redis.

- An SSE stream ends when its browser goes, whatever it was doing at that moment. After the
  soak a few users stayed online for ever: their old stream had gone on running on its process
  after the browser left. Django cancels a streaming response whose client disconnected, and the
  stream's loop waited for its next frame with ``asyncio.wait_for``, which on Python 3.11 loses
  a cancellation that comes while the frame it waited for is arriving (the frame is returned,
  the cancellation forgotten). The loop went on writing keep-alives to nobody and renewing the
  lease.
- A stream cancelled while it applied a call kept its channel subscribed for ever (28 channels
  left after 2,000 stream ends).
- A join whose lease was lost twice in a row (a process stalled past ``LEASE_TTL`` on a loaded
  machine, so the sweep took the lease again right after the join took it back) crashed the
  socket with a traceback instead of answering ``unavailable``.
- An ended connection is freed at once: its session and the consumer or stream it sends
  through held each other, and only the collector's rare full passes freed them (the soak's
  server RSS grew by half in 30 minutes).
"""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Awaitable, Callable
from contextlib import suppress
from types import FrameType

import pytest
from django.test import AsyncClient

from presence_app.core.connection import get_store
from presence_app.realtime import lifecycle
from presence_app.realtime.collector import collector
from presence_app.store.keys import KeySpace
from tests.ws import Socket, application, make_user, presence_settings, shutdown

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(30)]


async def open_stream(user):
    """``user``'s SSE stream, in process (the view a server runs), past its ``hello``: the
    response's body and the stream object behind it."""
    client = AsyncClient()
    await client.aforce_login(user)
    response = await client.get("/presence/sse/")
    body = aiter(response.streaming_content)
    while b'"type": "hello"' not in await asyncio.wait_for(anext(body), 10):
        pass
    (stream,) = [es for es in lifecycle._open_streams if es.session.user_id == str(user.pk)]
    return body, stream


async def test_a_stream_cancelled_as_a_frame_arrives_ends(redis_client, django_user_model):
    """Found as users online for ever: the old stream of a reconnect ran on."""
    user = await django_user_model.objects.acreate(username="leaver")
    body, stream = await open_stream(user)
    waiting = asyncio.ensure_future(anext(body))  # the response waits for the next frame
    await asyncio.sleep(0.1)
    # The browser goes (Django cancels the response) just as a frame comes for it.
    stream.queue.put_nowait({"type": "presence.message", "data": json.dumps("late")})
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting  # not the frame: the stream is over
    assert stream.session.closed  # the lease got its grace: no stream renews it any more


async def test_a_stream_cancelled_while_it_applies_a_call_lets_its_channel_go(
    redis_client, django_user_model, settings
):
    """The stream's channel is the pub/sub layer's subscription, let go when a receive on it is
    cancelled. Its relay was cancelled inside a call it was applying (a join waiting for
    ``CAN_JOIN``), not inside its receive: the process stayed subscribed for ever (the soak
    found 28 such channels left after 2,000 stream ends)."""
    entered = asyncio.Event()

    async def slow_can_join(user, room):
        entered.set()
        await asyncio.sleep(10)
        return True

    settings.PRESENCE = {**settings.PRESENCE, "CAN_JOIN": slow_can_join}
    user = await django_user_model.objects.acreate(username="busy")
    body, stream = await open_stream(user)
    assert stream.channel.encode() in redis_client.pubsub_channels()
    waiting = asyncio.ensure_future(anext(body))
    frame = {"type": "join", "room": "busy-room"}
    await stream.layer.send(stream.channel, {"type": "presence.rest", "frame": frame})
    await asyncio.wait_for(entered.wait(), 10)  # the relay is inside the join
    waiting.cancel()  # the browser goes
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert stream.channel.encode() not in redis_client.pubsub_channels()


async def test_a_heartbeat_in_flight_as_the_socket_closes_does_not_revive_its_lease(redis_client):
    """A socket's heartbeat is written in a batch a moment after it came (the coalescer). A
    close that lands in Redis while that batch is on its way cuts the lease to the grace, and the
    batch then renewed it for a whole ``LEASE_TTL``: the user stayed online that long after the
    tab closed, not ``DISCONNECT_GRACE``. The soak saw a third more leases than connections."""
    import time

    from presence_app.realtime.coalescer import get_coalescer

    grace, lease = 0.5, 30
    with presence_settings(LEASE_TTL=lease, HEARTBEAT_INTERVAL=10, DISCONNECT_GRACE=grace):
        user, cookie = await make_user("closing")
        sock = await Socket.open(cookie)
        try:
            coalescer = get_coalescer()
            await sock.send(type="heartbeat")
            await sock.wait_for("heartbeat.ack", timeout=5)
            batch, coalescer.pending = coalescer.pending, {}  # the batch is on its way
            assert batch
            await sock.comm.disconnect()  # the close lands first
            store = get_store()
            tag = store.keys.tag_for_user(str(user.pk))
            key = KeySpace.until(tag)  # the end of the user's presence
            await coalescer._flush(batch, None)  # then the batch (no tenant)
            (score,) = [s for m, s in redis_client.zrange(key, 0, -1, withscores=True)]
            assert score <= time.time() + grace + 0.5  # the grace, not LEASE_TTL
        finally:
            await shutdown()


async def test_a_stream_cancelled_while_joining_leaves_no_group_behind(
    redis_client, django_user_model, settings
):
    """A join enters the room's group before the store: a stream cancelled right then (its
    browser left) kept its channel in that group, which no close ever discarded (the room was
    not yet among its rooms). The soak left 31 rooms' groups subscribed with nobody in them."""
    from presence_app.core import dispatch

    entered = asyncio.Event()
    release = asyncio.Event()

    async def can_join(user, room):
        entered.set()
        await release.wait()
        return True

    settings.PRESENCE = {**settings.PRESENCE, "CAN_JOIN": can_join}
    user = await django_user_model.objects.acreate(username="joining")
    body, stream = await open_stream(user)
    local = stream.layer._get_layer()  # the pub/sub layer of this loop: its groups
    group = local._get_group_channel_name(dispatch.sockets_group("joining-room"))
    waiting = asyncio.ensure_future(anext(body))
    frame = {"type": "join", "room": "joining-room"}
    await stream.layer.send(stream.channel, {"type": "presence.rest", "frame": frame})
    await asyncio.wait_for(entered.wait(), 10)
    release.set()
    for _ in range(1000):  # until the join is in the group, waiting for Redis to subscribe it
        if stream.channel in local.groups.get(group, ()):
            break
        await asyncio.sleep(0)
    waiting.cancel()  # the browser goes right then
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert stream.channel not in local.groups.get(group, ())


async def unreachable_after(once: Callable[[], Awaitable[None]]) -> list[str]:
    """The presence_app objects that three runs of ``once`` left in reference cycles (freed only
    by a collection): the collector is off meanwhile, and its next pass keeps what it finds
    (``DEBUG_SAVEALL``) to be read.

    Cycles through the frames of caught exceptions are not the app's, and are left out. A
    caught exception's traceback holds the frame that caught it, and redis-py keeps some in
    lists that frame holds (a handshake an older Redis refuses, ``NOSCRIPT``), Django's session
    load catches an ``AttributeError`` on every request; from Python 3.13 a finished frame also
    holds its callers' frames, and so what their variables held (a session, a consumer) until a
    collection. The frames found are cleared and the collector asked again: what is still in a
    cycle is held by one of its own."""
    application()  # project/asgi.py tunes the collector on import: before, not inside
    gc.collect()
    gc.disable()
    share, collector.share = collector.share, None  # no full collection of its own meanwhile
    try:
        for _ in range(3):
            await once()
        await asyncio.sleep(0.2)
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        for frame in [o for o in gc.garbage if type(o) is FrameType]:
            with suppress(RuntimeError):  # a suspended coroutine's frame cannot be cleared
                frame.clear()
        gc.garbage.clear()
        gc.collect()
        return sorted(
            {
                type(o).__qualname__
                for o in gc.garbage
                if getattr(type(o), "__module__", "").startswith("presence_app")
            }
        )
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
        collector.share = share


@pytest.mark.parametrize("path", ["/ws/presence/", "/ws/chat/"])
async def test_an_ended_socket_leaves_no_reference_cycle(redis_client, path):
    """A connection's session sends through the connection (a consumer, a stream), which holds
    the session: a cycle, freed only by a collection of the generation it has reached. A
    connection lives long enough to reach the oldest, which project/asgi.py collects rarely (a
    full pass stalls every socket), so ended connections piled up: the soak's server RSS grew
    by half in 30 minutes. The closed session now lets go of its send."""
    _, cookie = await make_user("cycling")

    async def once() -> None:
        sock = await Socket.open(cookie, path=path)
        await sock.send(type="join", room="cycling")
        await sock.wait_for("presence.state")
        await sock.comm.disconnect()

    try:
        found = await unreachable_after(once)
    finally:
        await shutdown()
    assert found == []


async def test_an_ended_stream_leaves_no_reference_cycle(redis_client, django_user_model):
    """The same for an SSE stream (its ``push`` is the session's send)."""
    user = await django_user_model.objects.acreate(username="cycling-sse")
    client = AsyncClient()
    await client.aforce_login(user)

    async def once() -> None:
        response = await client.get("/presence/sse/")
        body = aiter(response.streaming_content)
        while b'"type": "hello"' not in await asyncio.wait_for(anext(body), 10):
            pass
        reading = asyncio.ensure_future(anext(body))
        await asyncio.sleep(0.05)
        reading.cancel()  # the browser goes: the server cancels the response
        with pytest.raises(asyncio.CancelledError):
            await reading
        del response, body, reading  # the test's own cycle: the future's error holds this frame

    assert await unreachable_after(once) == []
