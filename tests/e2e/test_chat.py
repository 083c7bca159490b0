"""The demo's chat in headless Chromium: the room page's one socket is the demo's own consumer
(ws/chat/, built on PresenceConsumerMixin), carrying presence and chat messages together."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.e2e


def test_a_message_reaches_the_room_on_the_presence_socket(demo):
    a = demo.enter("alice", "random")
    b = demo.enter("bob", "random")
    # Presence rides the chat socket: bob's dot is live on alice's page ...
    expect(a.locator('#here .member[data-name="bob"] .presence-dot')).to_have_count(1)
    # ... and so do the messages, to everybody in the room, the sender included.
    b.fill("#composer-input", "hello from bob")
    b.press("#composer-input", "Enter")
    expect(a.locator("#messages .message")).to_have_text(["bob hello from bob"])
    expect(b.locator("#messages .message.mine")).to_have_text(["bob hello from bob"])
    expect(b.locator("#composer-input")).to_have_value("")
    sockets = a.evaluate("window.presence.url")
    assert sockets.endswith("/ws/chat/")
