"""An SSE stream ends when its browser goes, whatever it was doing at that moment.

Found by the soak (bench/soak.py, tests/reliability/test_soak.py): after 30 minutes of
reconnecting streams a few users stayed online for ever. Their old stream had gone on running on
its process after the browser left: Django cancels a streaming response whose client
disconnected, and the stream's loop waited for its next frame with ``asyncio.wait_for``, which on
Python 3.11 loses a cancellation that comes while the frame it waited for is arriving (the
frame is returned, the cancellation forgotten). The loop then went on writing keep-alives to
nobody and renewing the lease, and the process kept the stream's channel subscribed.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from django.test import AsyncClient

from presence_app import lifecycle

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(30)]


async def test_a_stream_cancelled_as_a_frame_arrives_ends(redis_client, django_user_model):
    user = await django_user_model.objects.acreate(username="leaver")
    client = AsyncClient()
    await client.aforce_login(user)
    response = await client.get("/presence/sse/")
    body = aiter(response.streaming_content)
    while b'"type": "hello"' not in await asyncio.wait_for(anext(body), 10):
        pass
    (stream,) = [es for es in lifecycle._open_streams if es.session.user_id == str(user.pk)]
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
    client = AsyncClient()
    await client.aforce_login(user)
    response = await client.get("/presence/sse/")
    body = aiter(response.streaming_content)
    while b'"type": "hello"' not in await asyncio.wait_for(anext(body), 10):
        pass
    (stream,) = [es for es in lifecycle._open_streams if es.session.user_id == str(user.pk)]
    assert stream.channel.encode() in redis_client.pubsub_channels()
    waiting = asyncio.ensure_future(anext(body))
    frame = {"type": "join", "room": "busy-room"}
    await stream.layer.send(stream.channel, {"type": "presence.rest", "frame": frame})
    await asyncio.wait_for(entered.wait(), 10)  # the relay is inside the join
    waiting.cancel()  # the browser goes
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert stream.channel.encode() not in redis_client.pubsub_channels()
