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


@dataclass(frozen=True)
class Note:
    """A shared note: everybody on its page sees each other's cursor and selected line (live
    room state, ``presence.roomstate``)."""

    slug: str
    title: str
    lines: tuple[str, ...]

    @property
    def room(self) -> str:
        """The presence room of the note's page."""
        return f"note-{self.slug}"


NOTES = (
    Note(
        "release-plan",
        "Release plan",
        (
            "Goal: ship live cursors to every shared note by Friday.",
            "1. Freeze the protocol: the roomstate frame, both ways.",
            "2. Coalesce on both ends: one frame per tick per socket.",
            "3. Store the latest state per connection, for snapshots.",
            "4. Drop a connection's state when it leaves or closes.",
            "5. Never show an invisible user's cursor to anybody.",
            "6. Benchmark 100 members moving at 30 Hz on 2 processes.",
            "Open question: should selections span several lines?",
            "Owner: whoever is hovering this line right now.",
            "Done when the demo shows it in light and in dark.",
        ),
    ),
)


def get_note(slug: str) -> Note:
    for note in NOTES:
        if note.slug == slug:
            return note
    raise Http404("No such note.")
