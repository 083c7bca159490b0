"""presence_app.realtime.htmx's pieces: the stream's URL tag, its event encoding, its door (the live
stream itself runs in the browser test tests/e2e/test_htmx.py)."""

from __future__ import annotations

import pytest
from django.template import Context, Template

from presence_app.realtime.htmx import presence_of, sse_event

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

    def wait_for(self, test, timeout: float = 30) -> int:
        """The index of the first event ``test(name, data)`` accepts."""
        with self.changed:
            found = self.changed.wait_for(
                lambda: next((i for i, e in enumerate(self.events) if test(*e)), None) is not None,
                timeout,
            )
            assert found, f"not within {timeout} s; events: {self.events}"
            return next(i for i, e in enumerate(self.events) if test(*e))

    def close(self) -> None:
        self.conn.sock.shutdown(2) if self.conn.sock else None
        self.conn.close()


def test_the_stream_sends_each_event_once_as_it_opens(tmp_path, settings):
    """The hello, the room's snapshot and the stream's own join each spoke of its user (and the
    snapshot and the join of the room): the page got the same swap 2-3 times as it opened."""
    import uuid

    from ..servers import AsgiServer, Database

    db = Database(
        tmp_path / "db.sqlite3",
        env={
            "REDIS_URL": settings.REDIS_URL,
            "PRESENCE_KEY_PREFIX": f"htmx-{uuid.uuid4().hex[:8]}",
        },
    ).migrate()
    users = db.users(["alice", "bob"])
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
                    "presence-room-lobby",
                    "presence-count-lobby",
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
    stream.members, stream.names = {}, {}
    gone = {"type": "presence.update", "user": "7", "state": "offline", "at": None}
    events = dict(await stream.render(gone))
    assert "presence-offline" in events["presence-dot-7"]
    assert events["presence-seen-7"] == "offline"
    seen = {**gone, "at": 1_800_000_000.0}  # a last seen it may see: its time, as before
    assert (await stream.render(seen))[1][1].startswith("last seen ")
