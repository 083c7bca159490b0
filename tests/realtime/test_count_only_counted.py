"""A count-only room's count after a join says whether its member counts in it.

The count is the room's visible members as a signed-out visitor counts them. A page that shows
the others (``data-presence-others``) takes its own user off, which is one too many when the
site's ``AUDIENCE`` hides that user from signed-out visitors: the count never had them.
"""

from __future__ import annotations

import pytest
from channels.layers import channel_layers

from ..timing import limit
from ..ws import Socket, make_user, presence_settings, shutdown

pytestmark = pytest.mark.django_db(transaction=True)

#: Users the policy hides from signed-out visitors (everybody else sees them).
HIDDEN_FROM_VISITORS: set[str] = set()


def audience(viewer, user_ids):
    return [u for u in user_ids if viewer is not None or u not in HIDDEN_FROM_VISITORS]


async def join_counted(sock: Socket, room: str) -> dict:
    """The join's own count (the room's count on the tick, a frame for all, may come first)."""
    await sock.send(type="join", room=room)
    while "counted" not in (frame := await sock.wait_for("presence.count", timeout=limit(5))):
        pass
    return frame


async def test_the_count_after_a_join_says_whether_you_count_in_it(redis_client):
    channel_layers.backends.clear()
    (_, ca), (bob, cb) = await make_user("alice"), await make_user("bob")
    HIDDEN_FROM_VISITORS.add(str(bob.pk))
    policy = f"{__name__}.audience"
    try:
        with presence_settings(COUNT_ONLY_ROOMS=[r"stadium"], AUDIENCE=policy):
            a, b = await Socket.open(ca, name="alice"), await Socket.open(cb, name="bob")
            for s in (a, b):
                s.beat()
            mine = await join_counted(a, "stadium")
            assert (mine["count"], mine["counted"]) == (1, True)
            # Bob is in the room, but not in its count: his page's "others" is the whole count.
            mine = await join_counted(b, "stadium")
            assert (mine["count"], mine["counted"]) == (1, False)
            await shutdown()
    finally:
        HIDDEN_FROM_VISITORS.clear()
        channel_layers.backends.clear()
