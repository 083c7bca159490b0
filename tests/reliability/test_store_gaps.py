"""Gaps the reliability tests found in the store's own API (presence_app/store), now closed:
the WebSocket protocol refuses such input first, and these tests hold the store itself to it."""

from __future__ import annotations

import pytest

from presence_app.store import InvalidInput

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("call", ["join", "room_members"])
def test_a_room_name_that_is_not_unicode_text_is_invalid_input(store, call):
    store.connect("c1", "u1")
    with pytest.raises(InvalidInput):
        if call == "join":
            store.join("lobby\ud800", "c1", "u1")
        else:
            store.room_members("\udfff")


@pytest.mark.parametrize("field", ["message", "emoji"])
def test_a_status_that_is_not_unicode_text_is_invalid_input(store, field):
    with pytest.raises(InvalidInput):
        store.set_status("u1", **{field: "a\ud800"})


def test_an_infinite_expiry_is_invalid_input(store):
    with pytest.raises(InvalidInput):
        store.set_status("u1", message="m", expires_in=float("inf"))


def test_a_message_set_while_invisible_does_not_show(store):
    store.connect("c1", "ghost")
    store.set_status("ghost", message="before")
    store.set_status("ghost", "invisible")
    store.set_status("ghost", message="planning something")
    seen = store.get("ghost", viewer="watcher")
    assert seen.state == "offline"
    assert seen.message != "planning something"


def test_going_invisible_unseen_freezes_no_last_seen_of_zero(store):
    """A socket that takes its lease again after a Redis restart sets an invisible user's
    status before it connects (so that nothing is announced): Redis knows nothing of the user,
    and the frozen public last seen was 0, "last seen 56 years ago". Now there is none, and the
    pages fall back to the LastSeen row. (Fixed in set_status.lua: one line.)"""
    store.set_status("ghost", "invisible")
    store.connect("c1", "ghost")
    seen = store.get("ghost", viewer="someone else")
    assert (seen.state, seen.last_seen) == ("offline", None)
    store.set_status("ghost", "auto")
    store.set_status("ghost", "invisible")  # while online: frozen at the moment it went
    assert store.get("ghost", viewer="someone else").last_seen > 0
