"""presence_app.realtime.htmx's pieces: the stream's URL tag, its event encoding, its door (the live
stream itself runs in the browser test tests/e2e/test_htmx.py)."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from django.template import Context, Template

from presence_app.realtime.htmx import presence_of, sse_event

from ..servers import AsgiServer
from ..users import create_user

pytestmark = pytest.mark.django_db


def test_the_url_tag_names_rooms_and_users(django_user_model):
    ann = create_user("ann")
    html = Template(
        '{% load presence %}{% presence_sse_html_url rooms="lobby,design" users=people %}|'
        "{% presence_sse_html_url %}"
    ).render(Context({"people": [ann, 42]}))
    # Escaped for the attribute it goes in (the browser reads &amp; as &).
    assert (
        html == f"/presence/sse/html/?rooms=lobby,design&amp;users={ann.pk},42|/presence/sse/html/"
    )


def test_an_event_is_named_and_every_line_is_data():
    assert sse_event("presence-dot-7", "<b>\n</b>", "x") == (
        "id: x\nevent: presence-dot-7\ndata: <b>\ndata: </b>\n\n"
    )
    assert sse_event("a\nb", "") == "event: a b\ndata: \n\n"


def test_a_frame_reads_as_a_presence():
    p = presence_of({"user": "7", "state": "dnd", "at": 5.0, "message": "m", "emoji": None})
    assert (p.user_id, p.state, p.last_seen, p.message, p.emoji) == ("7", "dnd", 5.0, "m", "")


def test_signed_out_gets_401(client):
    assert client.get("/presence/sse/html/?rooms=lobby").status_code == 401


# -- the stream itself, from a real server ------------------------------------------------------
class HtmlStream:
    """``presence/sse/html/`` read as the browser's EventSource reads it: (event, data) pairs,
    collected by a thread, waited on with a deadline."""

    def __init__(self, server, user, query: str) -> None:
        import http.client
        import threading

        self.events: list[tuple[str, str]] = []
        self.changed = threading.Condition()
        self.conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        self.conn.request("GET", f"/presence/sse/html/?{query}", headers={"Cookie": user.cookie})
        self.reply = self.conn.getresponse()
        assert self.reply.status == 200
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        import http.client

        name, data = "", []
        try:
            while line := self.reply.readline():
                line = line.decode().rstrip("\r\n")
                if line.startswith("event: "):
                    name = line[len("event: ") :]
                elif line.startswith("data: "):
                    data.append(line[len("data: ") :])
                elif not line and name:
                    with self.changed:
                        self.events.append((name, "\n".join(data)))
                        self.changed.notify_all()
                    name, data = "", []
        except (OSError, ValueError, AttributeError, http.client.HTTPException):
            pass  # closed by close(): http.client ends a half-read chunk in any of these

    def wait_for(self, test, timeout: float = 30, start: int = 0) -> int:
        """The index of the first event from ``start`` on that ``test(name, data)`` accepts."""

        def first() -> int | None:
            return next((i for i, e in enumerate(self.events) if i >= start and test(*e)), None)

        with self.changed:
            found = self.changed.wait_for(lambda: first() is not None, timeout)
            assert found, f"not within {timeout} s; events: {self.events}"
            return first()

    def close(self) -> None:
        self.conn.sock.shutdown(2) if self.conn.sock else None
        self.conn.close()


def alice_and_bob(tmp_path, settings):
    """A migrated SQLite file with Alice and Bob, for a server on the test's Redis under a key
    prefix of its own."""
    import uuid

    from ..servers import Database

    db = Database(
        tmp_path / "db.sqlite3",
        env={
            "REDIS_URL": settings.REDIS_URL,
            "PRESENCE_KEY_PREFIX": f"htmx-{uuid.uuid4().hex[:8]}",
        },
    ).migrate()
    return db, db.users(["alice", "bob"])


def page_forms(server, user):
    """``post(frame, form, csrf=True)``: the form posts ``user``'s htmx page makes to its
    stream's REST calls (``hx-post``), with the page's CSRF cookie and header; (status, body)."""
    import secrets

    from ..servers import User
    from ..sse_client import request

    token = secrets.token_hex(16)  # the page's CSRF cookie, sent back as X-CSRFToken
    as_page = User(user.id, user.username, f"{user.session}; csrftoken={token}")

    def post(frame: str, form: str, csrf: bool = True) -> tuple[int, dict]:
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "Origin": server.origin,
            **({"X-CSRFToken": token} if csrf else {}),
        }
        return asyncio.run(
            request(
                server, "POST", f"/presence/api/stream/{frame}/", as_page,
                body=form.encode(), headers=headers,
            )
        )  # fmt: skip

    return post


def test_the_stream_sends_each_event_once_as_it_opens(tmp_path, settings):
    """The hello, the room's snapshot and the stream's own join each spoke of its user (and the
    snapshot and the join of the room): the page got the same swap 2-3 times as it opened."""
    db, users = alice_and_bob(tmp_path, settings)
    alice, bob = users["alice"].id, users["bob"].id
    with AsgiServer(db, name="htmx") as server:
        stream = HtmlStream(server, users["alice"], f"rooms=lobby&users={bob},{alice}")
        others = []
        try:
            # The opening is over once the watch list's answer came (Bob, offline, is last).
            stream.wait_for(lambda name, data: name == f"presence-dot-{bob}")
            # Then Bob comes into the room: the first event of his marks the opening's end.
            others.append(HtmlStream(server, users["bob"], "rooms=lobby"))
            end = stream.wait_for(
                lambda name, data: name == f"presence-dot-{bob}" and "presence-online" in data
            )
            opening = [name for name, _ in stream.events[:end]]
            assert sorted(opening) == sorted(
                [
                    f"presence-dot-{alice}",
                    f"presence-seen-{alice}",
                    "presence-stream",
                    "presence-room-lobby",
                    "presence-count-lobby",
                    "presence-roomstate-lobby",
                    f"presence-dot-{bob}",
                ]
            ), stream.events[:end]
            # Bob's arrival: the room's list and count change, each sent once more.
            stream.wait_for(lambda name, data: name == "presence-count-lobby" and data == "2")
            after = [name for name, _ in stream.events[end:]]
            assert after.count("presence-count-lobby") == 1, stream.events[end:]
        finally:
            for s in (stream, *others):
                s.close()


async def test_a_user_gone_with_a_hidden_last_seen_reads_offline_not_online_now():
    """A socket's offline event for a user whose last seen this viewer may not see comes
    without its time: the page's "online now" becomes "offline", beside the grey dot (it stayed
    "online now"), and not "not seen yet"."""
    from presence_app.realtime.htmx import HtmlEventStream

    stream = object.__new__(HtmlEventStream)  # render() alone: no request, no channel
    from presence_app.realtime.htmx import LiveParts

    stream.members, stream.names, stream.live = {}, {}, LiveParts()
    gone = {"type": "presence.update", "user": "7", "state": "offline", "at": None}
    events = dict(await stream.render(gone))
    assert "presence-offline" in events["presence-dot-7"]
    assert events["presence-seen-7"] == "offline"
    seen = {**gone, "at": 1_800_000_000.0}  # a last seen it may see: its time, as before
    assert (await stream.render(seen))[1][1].startswith("last seen ")


def test_typing_and_room_states_reach_an_htmx_page_and_go_out_by_its_forms(tmp_path, settings):
    """No presence.js on either side: Bob's page (an htmx stream) says he is typing and sets a
    room state by the form posts its hx-post makes, naming its stream by the presence-stream
    event's hidden field; Alice's stream draws "bob is typing…" until its time runs out, his
    state as the room_states template shows it, and neither once he left the room."""
    db, users = alice_and_bob(tmp_path, settings)
    with AsgiServer(db, name="htmx") as server:
        alice = HtmlStream(server, users["alice"], "rooms=lobby")
        bob = HtmlStream(server, users["bob"], "rooms=lobby")
        post = page_forms(server, users["bob"])

        try:
            i = bob.wait_for(lambda name, data: name == "presence-stream")
            field = bob.events[i][1]
            assert 'type="hidden"' in field and 'name="presence_stream"' in field
            stream = re.search(r'value="([^"]+)"', field).group(1)
            alice.wait_for(lambda name, data: name == "presence-count-lobby" and data == "2")

            # Refused as a socket's frame would be, or before: no stream named, no CSRF token.
            assert post("typing", "room=lobby")[0] == 403
            assert post("typing", f"room=lobby&presence_stream={stream}", csrf=False)[0] == 403
            status, body = post("typing", f"room=elsewhere&presence_stream={stream}")
            assert (status, body.get("code")) == (409, "not_joined")

            assert post("typing", f"room=lobby&presence_stream={stream}") == (200, {"ok": True})
            typing = alice.wait_for(
                # bob's name: "bob", or his email where that is the login (nox uuid_users)
                lambda name, data: (
                    name == "presence-typing-lobby"
                    and data.startswith('<span class="presence-typing">bob')
                    and "is typing" in data
                )
            )
            # Its time runs out with no more typing: the indicator empties by itself.
            alice.wait_for(
                lambda name, data: name == "presence-typing-lobby" and not data.strip(),
                start=typing,
            )

            form = f"room=lobby&doing=drafting+a+reply&presence_stream={stream}"
            assert post("roomstate", form) == (200, {"ok": True})
            shown = alice.events[
                alice.wait_for(
                    lambda name, data: name == "presence-roomstate-lobby" and "drafting" in data
                )
            ][1]
            assert 'class="presence-roster-name">bob' in shown
            assert "{&quot;doing&quot;: &quot;drafting a reply&quot;}" in shown  # escaped JSON
            assert not any(n == "presence-roomstate-lobby" and "drafting" in d
                           for n, d in bob.events)  # fmt: skip

            # He leaves: his state ends with his leave (and a typing, if still shown).
            start = len(alice.events)
            assert post("leave", f"room=lobby&presence_stream={stream}")[0] == 200
            gone = alice.wait_for(
                lambda name, data: name == "presence-roomstate-lobby" and "drafting" not in data,
                start=start,
            )
            assert ("presence-count-lobby", "1") in alice.events[start:gone]
            typed = [d for n, d in alice.events if n == "presence-typing-lobby"]
            assert not typed[-1].strip()
        finally:
            for s in (alice, bob):
                s.close()


def test_a_typist_who_leaves_the_room_is_no_longer_shown_typing(tmp_path, settings):
    """A leave ends its user's typing on the htmx pages at once, as presence.js ends it, not
    when the typing's time runs out: a TYPING_THROTTLE of a minute keeps "is typing" shown for
    1.75 minutes but for the leave."""
    db, users = alice_and_bob(tmp_path, settings)
    env = {"PRESENCE_OVERRIDES": json.dumps({"TYPING_THROTTLE": 60})}
    with AsgiServer(db, name="htmx", env=env) as server:
        alice = HtmlStream(server, users["alice"], "rooms=lobby")
        bob = HtmlStream(server, users["bob"], "rooms=lobby")
        post = page_forms(server, users["bob"])
        try:
            i = bob.wait_for(lambda name, data: name == "presence-stream")
            stream = re.search(r'value="([^"]+)"', bob.events[i][1]).group(1)
            alice.wait_for(lambda name, data: name == "presence-count-lobby" and data == "2")
            assert post("typing", f"room=lobby&presence_stream={stream}") == (200, {"ok": True})
            typing = alice.wait_for(
                lambda name, data: name == "presence-typing-lobby" and "is typing" in data
            )
            assert post("leave", f"room=lobby&presence_stream={stream}")[0] == 200
            alice.wait_for(
                lambda name, data: name == "presence-typing-lobby" and not data.strip(),
                timeout=45,  # far inside the 105 s the typing would be shown without the leave
                start=typing,
            )
        finally:
            for s in (alice, bob):
                s.close()


def test_the_typing_and_room_state_templates_escape_what_users_wrote():
    """A name and a state are the users' own text: the fragments swapped into the page escape
    them (the typing template's translated sentence included)."""
    from django.template.loader import render_to_string

    evil = "<img src=x onerror=alert(1)>"
    typing = render_to_string(
        "presence_app/htmx/typing.html", {"room": "r", "typists": [{"user": "7", "name": evil}]}
    )
    assert "&lt;img" in typing and "<img" not in typing and "is typing" in typing
    states = render_to_string(
        "presence_app/htmx/room_states.html",
        {"room": "r", "states": [{"user": "7", "name": evil, "conn": "c", "json": f'"{evil}"'}]},
    )
    assert "<img" not in states and states.count("&lt;img") == 2
