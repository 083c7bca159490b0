"""Writes from sync code announce without an event loop of their own (issue 43): on the pub/sub
layer a PUBLISH of the layer's own making, on RedisChannelLayer one long-lived loop; either way
the events reach the same groups an async write reaches, the signals fire in the calling
thread, a tenant's writes reach its own groups, and the layer being away drops the events (the
user's own announcement raises, as it did)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from asgiref.sync import sync_to_async
from channels.layers import channel_layers, get_channel_layer
from django.test import override_settings

from presence_app import presence, signals, tenants
from presence_app.core import dispatch
from presence_app.store import UNAVAILABLE, Presence, Transition

LAYERS = {
    "pubsub": "channels_redis.pubsub.RedisPubSubChannelLayer",
    "core": "channels_redis.core.RedisChannelLayer",
}


@pytest.fixture(params=sorted(LAYERS))
def layer(request, redis_client, presence_redis_url):
    """The channel layer the test's writes announce on: channels-redis' pub/sub layer (the sync
    path PUBLISHes itself) and its RedisChannelLayer (the sync path's loop)."""
    config = {"hosts": [{"address": presence_redis_url}]}
    channel_layers.backends.clear()
    layers = {"default": {"BACKEND": LAYERS[request.param], "CONFIG": config}}
    with override_settings(CHANNEL_LAYERS=layers):
        yield get_channel_layer()
    channel_layers.backends.clear()


async def listen(layer, *groups):
    channel = await layer.new_channel()
    for group in groups:
        await layer.group_add(group, channel)
    return channel


async def heard(layer, channel, **match):
    """The next event on ``channel`` with the fields ``match``."""
    while True:
        event = await asyncio.wait_for(layer.receive(channel), 5)
        if all(event.get(k) == v for k, v in match.items()):
            return event


@pytest.mark.parametrize("caller", ["plain thread", "sync_to_async"])
async def test_sync_writes_reach_the_groups_and_fire_the_signals_in_their_thread(
    layer, caller, monkeypatch
):
    """A thread with no loop (a WSGI view, a task, a command) and sync code an ASGI process
    runs (sync_to_async) announce alike: touch, set_status and join. From a thread with no
    loop, no write makes one (async_to_sync made one a call: ~5 ms)."""
    made = []
    if caller == "plain thread":
        monkeypatch.setattr(dispatch, "async_to_sync", lambda fn: made.append(fn) or fn)

    def run(fn, *args, **kwargs):
        if caller == "plain thread":
            return asyncio.to_thread(fn, *args, **kwargs)
        return sync_to_async(fn)(*args, **kwargs)

    fired = []

    def receiver(sender, user_id, state, **kwargs):
        fired.append((kwargs["signal"], user_id, state, threading.get_ident()))

    signals.user_online.connect(receiver)
    signals.status_changed.connect(receiver)
    try:
        watch = await listen(layer, dispatch.watchers_group("ann"), dispatch.self_group("ann"))
        room = await listen(layer, dispatch.room_group("lobby"))
        callers = []

        def touch():
            callers.append(threading.get_ident())
            presence.touch("ann")

        await run(touch)
        assert (await heard(layer, watch, type="presence.update"))["state"] == "online"
        assert fired == [(signals.user_online, "ann", "online", callers[0])]

        await run(presence.set_status, "ann", "dnd", message="Deep work")
        update = await heard(layer, watch, type="presence.update", state="dnd")
        assert update["message"] == "Deep work" and "self" not in update
        own = await heard(layer, watch, type="presence.update", self=True)
        assert (own["user"], own["state"], own["message"]) == ("ann", "dnd", "Deep work")
        assert fired[-1][:3] == (signals.status_changed, "ann", "dnd")

        await run(presence.connect, "bob-1", "bob")
        await run(presence.join, "lobby", "bob-1", "bob")
        assert (await heard(layer, room, type="presence.join"))["user"] == "bob"
        assert made == []
    finally:
        signals.user_online.disconnect(receiver)
        signals.status_changed.disconnect(receiver)


async def test_a_tenants_sync_write_reaches_its_own_groups(layer):
    with tenants.activate("acme"):
        theirs = await listen(layer, dispatch.watchers_group("cy"))
    ours = await listen(layer, dispatch.watchers_group("cy"))

    def touch_in_acme():
        with tenants.activate("acme"):
            presence.touch("cy")

    await asyncio.to_thread(touch_in_acme)
    assert (await heard(layer, theirs, type="presence.update"))["user"] == "cy"
    await asyncio.to_thread(presence.touch, "cy")  # the default space's cy: online there now
    assert (await heard(layer, ours, type="presence.update"))["user"] == "cy"
    with pytest.raises(asyncio.TimeoutError):  # and acme heard nothing of it
        await asyncio.wait_for(layer.receive(theirs), 0.3)


def test_a_layer_away_drops_the_events_and_raises_for_the_users_own(redis_client):
    """Best effort, as the async path: the write stands, its events are dropped (logged); the
    user's own announcement raises (it always did)."""
    dead = {"hosts": [{"address": "redis://127.0.0.1:1"}]}
    for backend in LAYERS.values():
        channel_layers.backends.clear()
        with override_settings(CHANNEL_LAYERS={"default": {"BACKEND": backend, "CONFIG": dead}}):
            assert [t.kind for t in presence.touch(f"dee-{backend}")] == ["online"]
            me = presence.get(f"dee-{backend}", viewer=presence.TRUSTED)
            with pytest.raises(UNAVAILABLE):
                dispatch.announce_self(me)
    channel_layers.backends.clear()


async def test_sync_code_on_a_running_loop_is_refused_as_before(layer):
    with pytest.raises(RuntimeError, match="cannot use AsyncToSync"):
        dispatch.publish([Transition("online", "x", "online", 1.0)])
    with pytest.raises(RuntimeError, match="cannot use AsyncToSync"):
        dispatch.announce_self(Presence("x", "online"))
