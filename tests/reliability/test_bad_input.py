"""Bad input: Hypothesis-generated hostile frames (tests/reliability/frames.py), each checked
against a model of the protocol: it gets the error frame the model expects (or its answer, when
it happens to be valid), the socket stays open, the store holds exactly the rooms and status the
model says, and no user-controlled text reaches a Redis key unescaped.

The volume (well over 1,000 frames) runs in-process: the real ASGI stack (origin check, session
auth, the consumer) through Channels' WebsocketCommunicator, on the real channels-redis layer
and Redis, twice: with the default room-name pattern, and with one that admits anything, so
that hostile names get as far as the store's keys. A smaller batch goes to a real uvicorn.
"""

from __future__ import annotations

import asyncio
import json

import pytest
import redis
from channels.layers import channel_layers
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from presence_app.core.connection import get_async_store
from tests.ws import Socket, make_user, presence_settings, shutdown

from .clients import Client
from .frames import ANY_ROOM, DEFAULT_ROOM_PATTERN, Conversation, Model, frames, key_layout

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

HYPOTHESIS = hypothesis_settings(
    deadline=None,
    derandomize=False,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)
#: Each in-process run: this many batches of at least this many frames. Hypothesis draws short
#: lists most often, so the volume comes from the lower bound, not from luck.
EXAMPLES, MIN_FRAMES = 45, 14
#: The same for the run against a real server (slower a frame, so fewer).
SERVER_EXAMPLES, SERVER_MIN_FRAMES = 12, 13


class InProcess:
    """tests/ws.py's Socket with the interface Conversation drives."""

    def __init__(self, sock: Socket) -> None:
        self.sock = sock

    async def send_raw(self, data: str | bytes) -> None:
        key = "bytes" if isinstance(data, bytes) else "text"
        await self.sock.comm.send_input({"type": "websocket.receive", key: data})

    async def next(self, timeout: float) -> dict:
        return await self.sock.next(timeout)


def assert_keys_escaped(
    client: redis.Redis, prefix: str = "presence", layer_prefix: str = "asgi"
) -> int:
    layout = key_layout(prefix, layer_prefix)
    keys = [k.decode() for k in client.scan_iter(count=1000)]
    raw = [k for k in keys if not layout.fullmatch(k)]
    assert raw == [], f"keys outside the escaped layout: {raw[:10]}"
    return len(keys)


async def store_matches(model: Model, user: str) -> None:
    store = get_async_store()
    assert set(await store.user_rooms(user)) == model.rooms
    me = await store.get(user, viewer=user)
    assert (me.state, me.message, me.emoji) in model.statuses()
    visible = model.state != "invisible"
    for room in sorted(model.rooms)[:5]:
        assert (user in await store.room_members(room)) == visible


@pytest.fixture(params=[DEFAULT_ROOM_PATTERN, ANY_ROOM], ids=["default-rooms", "any-room"])
async def hostile(request, redis_client):
    """One signed-in socket for a whole Hypothesis run, with the frame rate limit out of the
    way (it has a test of its own) and the room pattern of the parameter. Its lease outlasts
    the pauses between examples, in which the event loop stands still and the socket's
    heartbeats with it: on a loaded machine a pause of seconds closed it as silent (4408) in the
    middle of a run."""
    channel_layers.backends.clear()
    pattern = request.param
    with presence_settings(MAX_FRAMES_PER_SECOND=100_000, ROOM_NAME_PATTERN=pattern, LEASE_TTL=60):
        _, cookie = await make_user("mallory")
        sock = await Socket.open(cookie, name="mallory")
        sock.beat(0.5)
        conversation = Conversation(InProcess(sock), Model(room_pattern=pattern))
        yield conversation
        await sock.close()
        await shutdown()
    channel_layers.backends.clear()
    # Fewer means Hypothesis ran fewer batches than asked.
    assert conversation.sent >= EXAMPLES * MIN_FRAMES, f"only {conversation.sent} frames sent"
    print(f"{conversation.sent} frames ({pattern}): errors {conversation.codes}")


@hypothesis_settings(HYPOTHESIS, max_examples=EXAMPLES)
@given(batch=st.lists(frames(), min_size=MIN_FRAMES, max_size=30))
async def test_generated_frames_in_process(hostile, redis_client, batch):
    await hostile.reset()
    for data in batch:
        await hostile.send(data)
    user = hostile.sock.sock.user
    await store_matches(hostile.model, user)
    assert_keys_escaped(redis_client)


# -- the same against a real server ---------------------------------------------------------------
@pytest.fixture
async def real_hostile(db, servers, store):
    overrides = {"MAX_FRAMES_PER_SECOND": 100_000, "ROOM_NAME_PATTERN": ANY_ROOM}
    server = await servers.astart(env={"PRESENCE_OVERRIDES": json.dumps(overrides)})
    user = db.users(["mallory"])["mallory"]
    client = await Client(server, user).connect()
    client.beat(0.5)
    conversation = Conversation(client, Model(room_pattern=ANY_ROOM))
    conversation.server = server
    conversation.store = store
    yield conversation
    await client.close()
    assert await asyncio.to_thread(server.answers, 30)
    assert server.tracebacks() == 0, server.log()
    assert conversation.sent >= SERVER_EXAMPLES * SERVER_MIN_FRAMES, conversation.sent


@hypothesis_settings(HYPOTHESIS, max_examples=SERVER_EXAMPLES)
@given(batch=st.lists(frames(), min_size=SERVER_MIN_FRAMES, max_size=20))
async def test_generated_frames_against_a_real_server(real_hostile, batch):
    await real_hostile.reset()
    for data in batch:
        await real_hostile.send(data)
    store, uid = real_hostile.store, real_hostile.sock.id
    model = real_hostile.model
    assert set(store.user_rooms(uid)) == model.rooms
    me = store.get(uid, viewer=uid)
    # (a status that expires within moments may be gone by now: its texts with it)
    assert (me.state, me.message, me.emoji) in model.statuses()
    assert_keys_escaped(store.client, store.config.prefix, f"asgi-{store.config.prefix}")
