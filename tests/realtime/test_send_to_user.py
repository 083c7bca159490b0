"""presence.send_to_user / asend_to_user in one process, on the real channels-redis layer:
every socket of the user gets the payload (sync and async callers), nobody else does, and a
payload that is not JSON or too large is refused with one wording. Across processes and with an
SSE stream: tests/reliability/test_send_to_user.py."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.layers import channel_layers

from presence_app import presence
from presence_app.store import InvalidInput

from ..ws import Socket, make_user, presence_settings, shutdown


@pytest.mark.django_db(transaction=True)
async def test_every_socket_of_the_user_and_nobody_else(redis_client):
    channel_layers.backends.clear()
    with presence_settings():
        alice, alice_cookie = await make_user("alice")
        _, bob_cookie = await make_user("bob")
        tabs = [await Socket.open(alice_cookie, name=f"alice-{i}") for i in range(2)]
        bob = await Socket.open(bob_cookie, name="bob")
        for s in (*tabs, bob):  # bob shares a room with alice: rooms do not carry it
            await s.send(type="join", room="lobby")
            await s.wait_for("presence.state", room="lobby")

        await sync_to_async(presence.send_to_user)(alice, {"text": "from a view"})
        await presence.asend_to_user(alice.pk, ["from", "async", 1])
        for tab in tabs:
            first = await tab.wait_for("presence.message")
            second = await tab.wait_for("presence.message")
            assert (first["payload"], second["payload"]) == (
                {"text": "from a view"},
                ["from", "async", 1],
            )
        assert [f for f in await bob.collect(1.0) if f["type"] == "presence.message"] == []
        for s in (*tabs, bob):
            await s.close()
        await shutdown()
    channel_layers.backends.clear()


@pytest.mark.parametrize(
    "payload, words",
    [
        ({"when": object()}, "The payload must be JSON"),
        (float("nan"), "The payload must be JSON"),
        ("x" * 70_000, "The payload may be at most 65536 bytes of JSON."),
    ],
)
def test_a_payload_that_cannot_travel_is_refused(payload, words):
    with pytest.raises(InvalidInput, match=words):
        presence.send_to_user("1", payload)
