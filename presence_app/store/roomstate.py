"""Plans of per-member room state (cursors, selections): a hash per room and shard, written in
batches (one script call per shard) and read with dead entries pruned (``lua/roomstate.lua``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .plans import Plan, Planner, conn_id_of, room_of, user_id_of
from .types import _str

#: One entry: (user id, public connection id, conn id or "" for server state, JSON or None).
Entry = tuple[Any, str, str, str | None]


def set_states(planner: Planner, room: str, entries: Iterable[Entry], now: float | None) -> Plan:
    """Writes (JSON) or removes (None) entries of ``room``: one script call per shard."""
    name = room_of(room)
    groups: dict[str, list[str]] = {}
    for user_id, public, conn_id, data in entries:
        uid = user_id_of(user_id)
        cid = conn_id_of(conn_id) if conn_id else ""
        groups.setdefault(planner.keys.tag_for_user(uid), []).extend((uid, public, cid, data or ""))
    calls = [
        planner.call("roomstate", tag, now, "set", name, *args) for tag, args in groups.items()
    ]
    return Plan(calls, lambda replies: sum(int(r) for r in replies))


def get_states(planner: Planner, room: str, now: float | None) -> Plan:
    """[(user id, public id, JSON)] of the live states in ``room`` (every shard)."""
    name = room_of(room)
    calls = [planner.call("roomstate", tag, now, "get", name) for tag in planner.keys.all_tags()]

    def finish(replies: list[Any]) -> list[tuple[str, str, str]]:
        return [
            (_str(reply[i]), _str(reply[i + 1]), _str(reply[i + 2]))
            for reply in replies
            for i in range(0, len(reply), 3)
        ]

    return Plan(calls, finish)


class RoomStates:
    """The room-state methods of :class:`~.base.BaseStore` (a mixin: it gives ``run`` and
    ``plans``)."""

    plans: Planner

    def run(self, plan: Plan) -> Any:  # pragma: no cover - the faces define it
        raise NotImplementedError

    def set_room_states(self, room: str, entries: Iterable[Entry], now: float | None = None):
        """Writes (JSON text) or removes (None) per-member room states, ``entries`` of
        (user_id, public id, conn_id or "" for server state, JSON or None), in one script call
        per shard; entries of a connection without a live lease are not written."""
        return self.run(set_states(self.plans, room, entries, now))

    def room_states(self, room: str, now: float | None = None):
        """[(user_id, public id, JSON)] of the live states in ``room`` (dead ones pruned)."""
        return self.run(get_states(self.plans, room, now))
