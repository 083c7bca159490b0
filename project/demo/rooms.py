"""The demo's rooms: a fixed few, enough to show occupancy, membership and last seen."""

from __future__ import annotations

from dataclasses import dataclass

from django.http import Http404


@dataclass(frozen=True)
class Room:
    slug: str  # the room's name on the presence socket and in the JSON API
    name: str
    topic: str


ROOMS = (
    Room("lobby", "Lobby", "Everyone lands here first. Say hello."),
    Room("design", "Design", "Mock-ups, colours and the eternal dot-size debate."),
    Room("engineering", "Engineering", "Heartbeats, leases and Lua scripts."),
    Room("random", "Random", "Everything else."),
)


def get_room(slug: str) -> Room:
    for room in ROOMS:
        if room.slug == slug:
            return room
    raise Http404("No such room.")
