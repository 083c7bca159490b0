"""Gaps the reliability tests found in the store's own API (presence_app/store, the lead's).
The xfail ones are closed at the entry points this package owns (the WebSocket protocol refuses
the input first, presence.js never sends it), so these tests hold the store itself to it: they
are expected to fail until the store is fixed (strict: once they pass, the marks must go). The
last one was small and local enough to fix here (set_status.lua)."""

from __future__ import annotations

import pytest
import redis

from presence_app.store import InvalidInput

pytestmark = pytest.mark.timeout(30)


@pytest.mark.xfail(strict=True, raises=(UnicodeEncodeError, AssertionError), reason=(
    "room_of() takes a str with a lone surrogate (JSON '\\ud800' decodes to one): redis-py "
    "then fails to encode the argument with UnicodeEncodeError instead of InvalidInput. Fix: "
    "room_of (and _text) refuse text that value.encode() cannot encode."))
@pytest.mark.parametrize("call", ["join", "room_members"])
def test_a_room_name_that_is_not_unicode_text_is_invalid_input(store, call):
    store.connect("c1", "u1")
    with pytest.raises(InvalidInput):
        if call == "join":
            store.join("lobby\ud800", "c1", "u1")
        else:
            store.room_members("\udfff")


@pytest.mark.xfail(strict=True, raises=redis.ResponseError, reason=(
    "_text() takes a lone surrogate in a message or emoji: set_status JSON-escapes it, Lua's "
    "cjson refuses the escape and the script fails with a ResponseError, which every entry "
    "point reads as 'Redis unavailable' (an `unavailable` error frame, a 503) instead of "
    "InvalidInput."))
@pytest.mark.parametrize("field", ["message", "emoji"])
def test_a_status_that_is_not_unicode_text_is_invalid_input(store, field):
    with pytest.raises(InvalidInput):
        store.set_status("u1", **{field: "a\ud800"})


@pytest.mark.xfail(strict=True, reason=(
    "set_status(expires_in=inf) is taken (float('inf') > 0): the message never expires, "
    "which is no expiry dressed as one. Fix: expires_in must be finite (math.isfinite)."))
def test_an_infinite_expiry_is_invalid_input(store):
    with pytest.raises(InvalidInput):
        store.set_status("u1", message="m", expires_in=float("inf"))


@pytest.mark.xfail(strict=True, reason=(
    "get_many.lua masks an invisible user's last seen, last active and device for others, but "
    "not their status message and emoji: a message changed while invisible shows at once in "
    "the JSON API (and any get_many), telling the watcher the 'offline' user is there. Fix: "
    "freeze them as 'lv' freezes last seen (or show none) for viewers who may not see."))
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
