"""The admin dashboard's data: one page of online users, counts, rooms and the 24-hour chart.

Two Redis round trips whatever the page size: the ids of the page with every independent read
(counts, chart, rooms), then the page's presences and rooms. Superusers see invisible users
(nobody else does); everybody sees themselves as they are. Rooms are listed only where
``CAN_JOIN`` lets the viewer in, like everywhere else.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.http import HttpRequest
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.translation import gettext_lazy

from .. import presence
from ..core import rules
from ..store import Presence, StateCounts

PER_PAGE = 50
ROOMS = 20
SEARCH_LIMIT = 1000
DAY = 24 * 3600
CHART_WIDTH, CHART_HEIGHT = 1440, 120  # one unit per minute of the day
#: Seconds: samples (one a minute) further apart than this have a gap between them.
GAP = 150


@dataclass
class Row:
    user_id: str
    user: Any
    presence: Presence
    rooms: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The user's name as people know it: their full name, else what the model prints."""
        return display_name(self.user) if self.user is not None else f"#{self.user_id}"

    @property
    def login(self) -> str:
        """What they log in with (``USERNAME_FIELD``: a name, an email address)."""
        return self.user.get_username() if self.user is not None else ""


def display_name(user: Any) -> str:
    """``get_full_name()`` where the model has one and it is not blank, else ``str(user)``."""
    full = getattr(user, "get_full_name", None)
    name = full() if callable(full) else ""
    return (name or "").strip() or str(user)


#: Fields of the user model the search looks in, where the model has them (text fields).
NAME_FIELDS = ("first_name", "last_name", "full_name", "name", "display_name")


def _search_fields(User: Any) -> list[str]:
    from django.core.exceptions import FieldDoesNotExist
    from django.db import models

    wanted = [User.USERNAME_FIELD, getattr(User, "EMAIL_FIELD", None), *NAME_FIELDS]
    found: list[str] = []
    for name in wanted:
        if not name or name in found:
            continue
        try:
            model_field = User._meta.get_field(name)
        except FieldDoesNotExist:
            continue
        if isinstance(model_field, (models.CharField, models.TextField)):
            found.append(name)
    return found


def _usernames_matching(query: str) -> list[str]:
    """Users whose login, email or name holds every word of ``query`` (each word in any of
    them: "ann lee" finds Ann Lee, "lee@" her address)."""
    from django.db.models import Q

    User = get_user_model()
    fields = _search_fields(User)
    where = Q()
    for word in query.split():
        anywhere = Q()
        for name in fields:
            anywhere |= Q(**{f"{name}__icontains": word})
        where &= anywhere
    pks = User._default_manager.filter(where).order_by(User.USERNAME_FIELD)
    return [str(pk) for pk in pks.values_list("pk", flat=True)[:SEARCH_LIMIT]]


def chart(samples: list[tuple[int, int]], now: float) -> dict[str, Any]:
    """The 24-hour chart of the per-minute samples, ``now`` at the right, drawn as it was seen.

    Samples further apart than ``GAP`` are not joined: the minutes between them (an outage, a
    new install's first day) are a marked gap, not a line. The value axis starts at 0 and ends
    on a round number; time marks fall on every third hour of the site's time zone.
    """
    start = now - DAY
    samples = [(minute, count) for minute, count in samples if minute >= start - 60]
    peak = max((count for _, count in samples), default=0)
    step = _round_step(peak / 4)
    top = step * max(1, -(-peak // step))
    segments: list[list[tuple[int, int]]] = []
    for minute, count in samples:
        if segments and minute - segments[-1][-1][0] <= GAP:
            segments[-1].append((minute, count))
        else:
            segments.append([(minute, count)])

    def x(seconds: float) -> float:
        return round(max(0.0, seconds - start) / 60, 1)

    def y(count: int) -> float:
        return round(CHART_HEIGHT - count * CHART_HEIGHT / top, 1)

    # A lone sample is a zero-length line, which round caps draw as a dot (one point draws none).
    lines = [
        " ".join(f"{x(m)},{y(c)}" for m, c in seg * (2 if len(seg) == 1 else 1)) for seg in segments
    ]
    # Each area closes straight down at its own ends: nothing is drawn where nothing was seen.
    areas = [
        f"{x(seg[0][0])},{CHART_HEIGHT} {line} {x(seg[-1][0])},{CHART_HEIGHT}"
        for seg, line in zip(segments, lines, strict=True)
    ]
    edges = [start, *(t for seg in segments for t in (seg[0][0], seg[-1][0])), now]
    gaps = [
        {
            "x": x(a),
            "width": round(x(b) - x(a), 1),
            "pct": _pct(x(a)),
            "wide_pct": _pct(x(b) - x(a)),
        }
        for a, b in zip(edges[::2], edges[1::2], strict=True)
        if b - a > GAP
    ]
    tz = timezone.get_current_timezone()
    mark = datetime.fromtimestamp(start, tz).replace(minute=0, second=0, microsecond=0)
    x_ticks = []
    for _ in range(25):
        mark += timedelta(hours=1)
        if mark.timestamp() > now:
            break
        local = timezone.localtime(mark, tz)
        if local.hour % 3 == 0:
            x_ticks.append(
                {
                    "x": x(mark.timestamp()),
                    "pct": _pct(x(mark.timestamp())),
                    "label": date_format(local, "H:i"),
                }
            )
    y_ticks = [
        {"value": v, "y": y(v), "pct": round(100 * v / top, 2)} for v in range(0, top + 1, step)
    ]
    first = samples[0][0] if samples else None
    counts: list[int | None] = []
    for minute, count in samples:  # one slot a minute from the first sample: None = not seen
        counts.extend([None] * ((minute - first) // 60 - len(counts)))
        counts.append(count)
    last = samples[-1] if samples else None
    peak_at = max(samples, key=lambda s: s[1])[0] if samples else None
    return {
        "lines": lines,
        "areas": areas,
        "gaps": gaps,
        "x_ticks": x_ticks,
        "y_ticks": y_ticks,
        "peak": peak,
        "peak_at": _local(peak_at),
        "top": top,
        "samples": len(samples),
        "since": _local(first),
        "latest": last[1] if last else None,
        "latest_at": _local(last[0]) if last else None,
        "width": CHART_WIDTH,
        "height": CHART_HEIGHT,
        # For the hover values (dashboard.js): a slot a minute from ``first``, in the site's zone.
        "data": {
            "start": start,
            "end": now,
            "first": first,
            "counts": counts,
            "tz": getattr(tz, "key", None) or str(tz),
        },
    }


def _round_step(raw: float) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50, ... at least ``raw``: the value axis' step."""
    step = 1
    while step < raw:
        for factor in (2, 5 / 2, 2):
            step = int(step * factor)
            if step >= raw:
                break
    return step


def _pct(units: float) -> float:
    return round(100 * units / CHART_WIDTH, 2)


def _local(seconds: float | None) -> datetime | None:
    return None if seconds is None else timezone.localtime(datetime.fromtimestamp(seconds, UTC))


def build(request: HttpRequest, page: int = 1, query: str = "") -> dict[str, Any]:
    """The dashboard's context; raises the Redis connection errors (the view shows a banner)."""
    reads = presence.Reads()
    reveal = bool(request.user.is_superuser)
    # Superusers see the truth; anybody else the users their AUDIENCE shows them, in the lists,
    # the per-state counts and the rooms' counts alike (the chart is the site's own samples).
    viewer = presence.viewer(presence.TRUSTED if reveal else request.user)
    policy = viewer.filtered
    now = time.time()
    offset = (page - 1) * PER_PAGE
    # Counted for the whole site in the page's round trip, or for this viewer on their own.
    site_wide = (
        () if policy else (reads.state_counts(viewer=viewer), reads.rooms(ROOMS, viewer=viewer))
    )
    if query:
        # The search runs in the database; Redis tells which of the matches are online.
        candidates = _usernames_matching(query)
        found, history, *counted = presence.batch(
            reads.get_many(candidates, viewer=viewer, activity=True),
            reads.history(now - DAY),
            *site_wide,
        )
        matches = [p for p in found.values() if p.is_online]
        matches.sort(key=lambda p: p.last_active or 0, reverse=True)
        total = len(matches)
        ids = [p.user_id for p in matches[offset : offset + PER_PAGE]]
        presences = {uid: found[uid] for uid in ids}
        user_rooms = presence.user_rooms_many(ids, viewer=viewer)
    else:
        ids, history, *counted = presence.batch(
            reads.online(offset=offset, limit=PER_PAGE, include_invisible=True, viewer=viewer),
            reads.history(now - DAY),
            *site_wide,
        )
        presences, user_rooms = presence.batch(
            reads.get_many(ids, viewer=viewer, activity=True),
            reads.user_rooms_many(ids, viewer=viewer),
        )
    counts, rooms = counted or (
        presence.state_counts(viewer=viewer),
        presence.rooms(ROOMS, viewer=viewer),
    )
    online_total = counts.total + (counts.invisible if reveal else 0)
    if not query:
        total = online_total
    allowed = _rooms_allowed(
        request.user, [r for r, _ in rooms] + [r for uid in ids for r in user_rooms.get(uid, [])]
    )
    rooms = [(room, n) for room, n in rooms if room in allowed]
    users = {rules.user_id(u): u for u in rules.users_in_order(ids)}
    rows = [
        Row(
            uid,
            users.get(uid),
            presences[uid],
            [r for r in user_rooms.get(uid, []) if r in allowed],
        )
        for uid in ids
    ]
    pages = max(1, -(-total // PER_PAGE))
    return {
        "rows": rows,
        "counts": counts,
        "by_state": _by_state(counts, reveal),
        "rooms": rooms,
        "chart": chart(history, now),
        "total": total,
        "online_total": online_total,
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
