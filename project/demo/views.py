"""The demo's pages: the room list and a room. Presence itself comes from presence_app's public
pieces only (template tags, presence.js, the JSON API), as in any project using it."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from presence_app import presence

from .rooms import NOTES, ROOMS, get_note, get_room

#: The status picker's emoji, with the message they suggest.
EMOJIS = (
    ("", "No emoji"),
    ("📅", "In a meeting"),
    ("🍔", "Out for lunch"),
    ("🎧", "Focusing"),
    ("🏠", "Working from home"),
    ("🤒", "Out sick"),
    ("🌴", "On holiday"),
)

#: People listed on a room page (here now, and everybody else with their last seen).
MAX_PEOPLE = 50


@login_required
def room_list(request: HttpRequest) -> HttpResponse:
    return render(request, "demo/room_list.html", {"rooms": ROOMS})


@login_required
def room_detail(request: HttpRequest, slug: str) -> HttpResponse:
    room = get_room(slug)
    User = get_user_model()
    people = User._default_manager.filter(is_active=True).order_by(User.USERNAME_FIELD)
    people = list(people[:MAX_PEOPLE])
    return render(
        request,
        "demo/room.html",
        {
            "room": room,
            "rooms": ROOMS,
            "people": people,
            "emojis": EMOJIS,
            "privacy": presence.get_privacy(request.user),
        },
    )


@login_required
def room_htmx(request: HttpRequest, slug: str) -> HttpResponse:
    """A room kept live by htmx's SSE extension from presence_app's HTML stream
    (``presence/sse/html/``): server-rendered fragments, no presence.js."""
    from presence_app import presence
    from presence_app.core.rules import users_in_order

    room = get_room(slug)
    User = get_user_model()
    people = User._default_manager.filter(is_active=True).order_by(User.USERNAME_FIELD)
    here = users_in_order(presence.room_members(room.slug, viewer=request.user))
    context = {"room": room, "people": list(people[:MAX_PEOPLE]), "here": here}
    return render(request, "demo/htmx.html", context)


@login_required
def room_who(request: HttpRequest, slug: str) -> HttpResponse:
    """Who is in a room, from ``{% room_members %}`` alone: the lists presence.js keeps live
    with no code of the page's own (each member's dot and name), one of everyone but you."""
    return render(request, "demo/who.html", {"room": get_room(slug), "rooms": ROOMS})


@login_required
def note_detail(request: HttpRequest, slug: str) -> HttpResponse:
    """A shared note: each member's live cursor and selected line, from presence.js'
    ``setRoomState`` / ``roomstate`` (coalesced by presence_app, redacted per viewer)."""
    note = get_note(slug)
    User = get_user_model()
    people = User._default_manager.filter(is_active=True).order_by(User.USERNAME_FIELD)
    names = {str(p.pk): p.get_username() for p in people[:MAX_PEOPLE]}
    context = {"note": note, "notes": NOTES, "rooms": ROOMS, "names": names}
    return render(request, "demo/note.html", context)
