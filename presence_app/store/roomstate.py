"""Plans of per-member room state (cursors, selections): a hash per room and shard, written in
batches (one script call per shard) and read with dead entries pruned (``lua/roomstate.lua``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from . import inputs
from .plans import Plan, Planner
from .types import _str

#: One entry: (user id, public connection id, conn id or "" for server state, JSON or None).
Entry = tuple[Any, str, str, str | None]


def set_states(planner: Planner, room: str, entries: Iterable[Entry], now: float | None) -> Plan:
    """Writes (JSON) or removes (None) entries of ``room``: one script call per shard. Its
    result is the entries that changed (in their order per shard): a state written, or one
    removed; a refused one (its connection not in the room, its user not listed there: an
    invisible user's) is not among them."""
    name = inputs.room(room)
    groups: dict[str, list[Entry]] = {}
    for user_id, public, conn_id, data in entries:
        uid = inputs.user_id(user_id)
        cid = inputs.conn_id(conn_id) if conn_id else ""
        groups.setdefault(planner.keys.tag_for_user(uid), []).append((uid, public, cid, data))
    calls = [
        planner.call(
            "roomstate", tag, now, "set", name, *(f for e in group for f in (*e[:3], e[3] or ""))
        )
        for tag, group in groups.items()
    ]

    def finish(replies: list[Any]) -> list[Entry]:
        return [
            entry
            for group, flags in zip(groups.values(), replies, strict=True)
            for entry, flag in zip(group, _str(flags), strict=True)
            if flag == "1"
        ]

    return Plan(calls, finish)


def get_states(planner: Planner, room: str, now: float | None) -> Plan:
    """[(user id, public id, JSON)] of the live states in ``room`` (every shard)."""
    name = inputs.room(room)
    calls = [planner.call("roomstate", tag, now, "get", name) for tag in planner.keys.all_tags()]

    def finish(replies: list[Any]) -> list[tuple[str, str, str]]:
        return [
            (_str(reply[i]), _str(reply[i + 1]), _str(reply[i + 2]))
            for reply in replies
            for i in range(0, len(reply), 3)
        ]

    return Plan(calls, finish)


def typing(planner: Planner, room: str, conn_id: str, user_id: Any, now: float | None) -> Plan:
    """The state a typing of ``user_id`` on ``conn_id`` shows ``room`` ("online", "dnd"), or
    None: refused (the connection is not in the room, or the room does not list its user: an
    invisible one)."""
    uid, cid = inputs.user_id(user_id), inputs.conn_id(conn_id)
    call = planner.user_call("roomstate", uid, now, "typing", inputs.room(room), uid, cid)
    return Plan([call], lambda replies: _str(replies[0]) or None)


class RoomStates:
    """The room-state methods of :class:`~.base.BaseStore` (a mixin: it gives ``run`` and
    ``plans``)."""

    plans: Planner

    def run(self, plan: Plan) -> Any:  # pragma: no cover - the faces define it
        raise NotImplementedError

    def set_room_states(self, room: str, entries: Iterable[Entry], now: float | None = None):
        """Writes (JSON text) or removes (None) per-member room states, ``entries`` of
        (user_id, public id, conn_id or "" for server state, JSON or None), in one script call
        per shard; returns the entries that changed. Entries of a connection without a live
        lease or out of the room, and of a user the room does not list (an invisible one), are
        refused."""
        return self.run(set_states(self.plans, room, entries, now))

    def typing(self, room: str, conn_id: str, user_id, now: float | None = None):
        """May ``room`` hear that the user is typing on ``conn_id``? Their public state
        ("online", "dnd") if so, else None (the connection is out of the room, or the user is
        invisible: the store refuses what would give them away)."""
        return self.run(typing(self.plans, room, conn_id, user_id, now))

    def room_states(self, room: str, now: float | None = None):
        """[(user_id, public id, JSON)] of the live states in ``room`` (dead ones pruned)."""
        return self.run(get_states(self.plans, room, now))
