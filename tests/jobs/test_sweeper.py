"""The sweeper from sync code (the ``presence sweep`` command's API), dispatch's group names and
the channel-layer check. The in-process sweeper is exercised by tests/realtime/test_consumer.py."""

from __future__ import annotations

import asyncio
import re
from datetime import datetime

import pytest
from channels.layers import BaseChannelLayer, channel_layers, get_channel_layer
from django.core.checks import run_checks
from django.test import override_settings

from presence_app.core import dispatch
from presence_app.core.connection import get_store
from presence_app.jobs import sweeper
from presence_app.signals import user_offline
from presence_app.store import Transition

from ..ws import presence_settings

pytestmark = pytest.mark.django_db(transaction=True)

T0 = 1_700_000_000.0


@pytest.fixture
def fast(redis_client):
    channel_layers.backends.clear()
    with presence_settings():
        yield
    channel_layers.backends.clear()


async def _sweep_while_listening(group: str, now: float) -> tuple[list[Transition], dict]:
    """sweep_once (on its own event loop, in a thread, as the command runs it) while a channel
    of this loop listens to ``group``. The pub/sub layer delivers a group's events only to the
    channels subscribed at the time, in the process (and loop) that subscribed them: so the
    listener is a channel of its own (new_channel), and an event of our own that comes back
    proves the subscription is live before the sweep publishes."""
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(group, channel)
    await layer.group_send(group, {"type": "test.ready"})
    assert (await asyncio.wait_for(layer.receive(channel), 5))["type"] == "test.ready"
    transitions = await asyncio.to_thread(sweeper.sweep_once, now=now)
    return transitions, await asyncio.wait_for(layer.receive(channel), 5)


# The sweep's lock lasts SWEEP_INTERVAL of real time: long enough here that the second sweep
# surely comes within it (FAST's 0.2 s could pass between the two on a busy machine).
@presence_settings(SWEEP_INTERVAL=60)
def test_sweep_once_evicts_publishes_signals_and_samples(fast):
    store = get_store()
    store.connect("c1", "42", now=T0)
    store.join("lobby", "c1", "42", now=T0)
    offline = []
    user_offline.connect(
        lambda sender, **kw: offline.append(kw), weak=False, dispatch_uid="t-sweep"
    )
    try:
        transitions, event = asyncio.run(
            _sweep_while_listening(dispatch.room_group("lobby"), T0 + 10)
        )
    finally:
        user_offline.disconnect(dispatch_uid="t-sweep")
    assert [(t.kind, t.user_id, t.room) for t in transitions] == [
        ("leave", "42", "lobby"),
        ("offline", "42", None),
    ]
    assert (event["type"], event["user"], event["room"]) == ("presence.leave", "42", "lobby")
    assert [(o["user_id"], o["state"]) for o in offline] == [("42", "offline")]
    assert isinstance(offline[0]["at"], datetime)
    assert store.history(since=0) == [(int((T0 + 10) // 60) * 60, 0)]
    # Another sweep within the interval is skipped (the lock), unless forced.
    assert sweeper.sweep_once(now=T0 + 11) is None
    assert sweeper.sweep_once(now=T0 + 11, force=True) == []


def test_run_sweeper_once_reports_to_on_sweep(fast):
    get_store().connect("c1", "7", now=T0)
    seen: list[list[Transition]] = []
    result = sweeper.run_sweeper(loop=False, on_sweep=seen.append)
    assert [t.kind for t in result] == ["offline"] and seen == [result]


def test_run_sweeper_loop_keeps_going_until_cancelled(fast):
    rounds: list[int] = []

    async def main():
        task = asyncio.ensure_future(
            sweeper.arun_sweeper(loop=True, on_sweep=lambda t: rounds.append(len(t)))
        )
        # SWEEP_INTERVAL is 0.2 s: the lock frees up between rounds, so a second one comes.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while len(rounds) < 2 and loop.time() < deadline:
            await asyncio.sleep(0.05)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        from presence_app.core.connection import aclose_async_store

        await aclose_async_store()

    asyncio.run(main())
    assert len(rounds) >= 2


def test_group_names_are_valid_distinct_and_hide_user_text(fast):
    # Channels' own naming rules (ASCII alnum, "-_.", < 100 characters), which RedisChannelLayer
    # and the in-memory layer enforce; the pub/sub layer checks nothing, so ask the base class.
    layer = BaseChannelLayer()
    rooms = ["lobby", "Lobby", "a" * 100, "doc:42@team", "ünïcode room / with spaces"]
    names = [dispatch.room_group(r) for r in rooms]
    names += [dispatch.watchers_group("42"), dispatch.self_group("42"), dispatch.watchers_group(42)]
    for name in names:
        assert layer.require_valid_group_name(name) and len(name) < 100
        assert re.fullmatch(r"presence\.(room|watch|self)\.[0-9a-f]{32}", name)
    assert len(set(names)) == len(names) - 1  # watchers_group("42") == watchers_group(42)
    with presence_settings(KEY_PREFIX="other"):
        assert dispatch.room_group("lobby") != names[0]


def test_targets_of_each_transition_kind(fast):
    def t(kind, room=None, rooms=()):
        return Transition(kind=kind, user_id="7", state="online", at=T0, room=room, rooms=rooms)

    assert dispatch.targets(t("join", room="r")) == [dispatch.room_group("r")]
    assert dispatch.targets(t("update", rooms=("a", "b"))) == [
        dispatch.watchers_group("7"),
        dispatch.room_group("a"),
        dispatch.room_group("b"),
    ]
    assert dispatch.targets(t("offline")) == [dispatch.watchers_group("7")]


def test_channel_layer_without_socket_timeout_is_warned_about(settings):
    bare = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": ["redis://127.0.0.1:6379/0"]},
        }
    }
    with override_settings(CHANNEL_LAYERS=bare):
        assert "presence_app.W003" in [m.id for m in run_checks()]
    assert "presence_app.W003" not in [m.id for m in run_checks()]  # the test settings are fine


@pytest.mark.django_db(transaction=True)
def test_the_sweeper_flushes_last_seen_once_per_flush_interval(redis_client, settings):
    from django.contrib.auth import get_user_model

    from presence_app import presence
    from presence_app.jobs.sweeper import sweep_once
    from presence_app.models import LastSeen

    settings.PRESENCE = {**settings.PRESENCE, "FLUSH_INTERVAL": 3600}
    ann = get_user_model().objects.create_user("ann")
    presence.touch(ann.pk)
    sweep_once(force=True)
    assert LastSeen.objects.filter(user=ann).exists()  # the first sweep flushed
    LastSeen.objects.all().delete()
    sweep_once(force=True)
    assert not LastSeen.objects.exists()  # not again within the interval
