"""The admin dashboard's data: one page of online users, counts, rooms and the 24-hour chart.

Two Redis round trips whatever the page size: the ids of the page with every independent read
(counts, chart, rooms), then the page's presences and rooms. Superusers see invisible users
(nobody else does); everybody sees themselves as they are. Rooms are listed only where
``CAN_JOIN`` lets the viewer in, like everywhere else.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.http import HttpRequest
from django.utils.translation import gettext_lazy

from . import audience, presence
from .lookup import user_key, users_in_order
from .store import Presence, StateCounts

PER_PAGE = 50
ROOMS = 20
SEARCH_LIMIT = 1000
DAY = 24 * 3600
CHART_WIDTH, CHART_HEIGHT = 1440, 120  # one unit per minute of the day


@dataclass
class Row:
    user_id: str
    user: Any
    presence: Presence
    rooms: list[str] = field(default_factory=list)


def _usernames_matching(query: str) -> list[str]:
    User = get_user_model()
    lookup = {f"{User.USERNAME_FIELD}__icontains": query}
    pks = User._default_manager.filter(**lookup).order_by(User.USERNAME_FIELD)
    return [str(pk) for pk in pks.values_list("pk", flat=True)[:SEARCH_LIMIT]]


def chart(samples: list[tuple[int, int]], now: float) -> dict[str, Any]:
    """An SVG polyline of the per-minute samples of the last 24 hours (``now`` at the right)."""
    start = now - DAY
    peak = max((count for _, count in samples), default=0)
    scale = CHART_HEIGHT / peak if peak else 0
    points = " ".join(
        f"{(minute - start) / 60:.0f},{CHART_HEIGHT - count * scale:.1f}"
        for minute, count in samples
        if minute >= start
    )
    area = f"0,{CHART_HEIGHT} {points} {CHART_WIDTH},{CHART_HEIGHT}" if points else ""
    return {"points": points, "area": area, "peak": peak, "samples": len(samples),
            "width": CHART_WIDTH, "height": CHART_HEIGHT}


def build(request: HttpRequest, page: int = 1, query: str = "") -> dict[str, Any]:
    """The dashboard's context; raises the Redis connection errors (the view shows a banner)."""
    reads = presence.Reads()
    reveal = bool(request.user.is_superuser)
    viewer = user_key(request.user)
    now = time.time()
    offset = (page - 1) * PER_PAGE
    common = (reads.state_counts(), reads.history(now - DAY), reads.rooms(ROOMS))
    if query:
        # The search runs in the database; Redis tells which of the matches are online.
        candidates = _usernames_matching(query)
        found, counts, history, rooms = presence.batch(
            reads.get_many(candidates, viewer=viewer, reveal_all=reveal), *common
        )
        matches = [p for p in found.values() if p.is_online]
        matches.sort(key=lambda p: p.last_active or 0, reverse=True)
        total = len(matches)
        ids = [p.user_id for p in matches[offset : offset + PER_PAGE]]
        presences = {uid: found[uid] for uid in ids}
        user_rooms = presence.user_rooms_many(ids)
    else:
        # Superusers see everybody; anybody else the users their AUDIENCE shows them.
        policy = not reveal and audience.active()
        ids, counts, history, rooms = presence.batch(
            reads.online(offset=offset, limit=PER_PAGE, include_invisible=reveal,
                         viewer=viewer if policy else None), *common
        )
        total = counts.total + (counts.invisible if reveal else 0)
        if policy:
            total = presence.online_count(viewer=viewer)
        presences, user_rooms = presence.batch(
            reads.get_many(ids, viewer=viewer, reveal_all=reveal), reads.user_rooms_many(ids)
        )
    allowed = _rooms_allowed(request.user, [r for r, _ in rooms]
                             + [r for uid in ids for r in user_rooms.get(uid, [])])
    rooms = [(room, n) for room, n in rooms if room in allowed]
    users = {str(u.pk): u for u in users_in_order(ids)}
    rows = [Row(uid, users.get(uid), presences[uid],
                [r for r in user_rooms.get(uid, []) if r in allowed]) for uid in ids]
    pages = max(1, -(-total // PER_PAGE))
    return {
        "rows": rows,
        "counts": counts,
        "by_state": _by_state(counts, reveal),
        "rooms": rooms,
        "chart": chart(history, now),
        "total": total,
        "online_total": counts.total + (counts.invisible if reveal else 0),
        "page": page,
        "pages": pages,
        "previous_page": page - 1 if page > 1 else None,
        "next_page": page + 1 if page < pages else None,
        "query": query,
        "reveal": reveal,
    }


def _rooms_allowed(user: Any, rooms: list[str]) -> set[str]:
    """The rooms ``user`` may see (``CAN_JOIN``), each asked once."""
    return {room for room in set(rooms) if presence.can_join(user, room)}


# Beside the total "online", the state cards read better as "active" than "Online" again.
CARD_LABELS = {
    "online": gettext_lazy("active"),
    "idle": gettext_lazy("away"),
    "dnd": gettext_lazy("do not disturb"),
    "invisible": gettext_lazy("invisible"),
}


def _by_state(counts: StateCounts, reveal: bool) -> list[tuple[str, str, int]]:
    states = ("online", "idle", "dnd", "invisible") if reveal else ("online", "idle", "dnd")
    return [(state, str(CARD_LABELS[state]), getattr(counts, state)) for state in states]
