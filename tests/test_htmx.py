"""presence_app.realtime.htmx's pieces: the stream's URL tag, its event encoding, its door (the live
stream itself runs in the browser test tests/e2e/test_htmx.py)."""

from __future__ import annotations

import pytest
from django.template import Context, Template

from presence_app.realtime.htmx import presence_of, sse_event

from .users import create_user

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
