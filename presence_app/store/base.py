"""The public API, written once for both faces.

Every method builds a :class:`~.plans.Plan` and hands it to ``self.run``: the sync store returns
the result, the async store returns an awaitable of it. So ``store.get(7)`` and
``await astore.get(7)`` are the same code.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property
from typing import Any

from . import inputs, roomstate
from .keys import KeySpace
from .plans import _UNSET, Call, Plan, Planner
from .types import (
    InvalidInput,
    PresenceError,
    StoreConfig,
    TooManyConnections,
    UnknownConnection,
)


def translate_error(exc: Exception) -> Exception:
    text = str(exc)
    if "PRESENCE unknown connection" in text:
        return UnknownConnection("the connection holds no lease; connect it first")
    if "PRESENCE too many connections" in text:
        return TooManyConnections("the user holds as many connections as they may")
    if "PRESENCE " in text:
        return PresenceError(text.split("PRESENCE ", 1)[1])
    return exc


class BaseStore(roomstate.RoomStates):
    """The semantics: docs/guarantees.md and docs/store-layout.md. ``now`` (unix seconds) replaces the
    Redis clock."""

    def __init__(self, config: StoreConfig | None = None, process: str | None = None) -> None:
        self.config = config or StoreConfig()
        # ``process`` names the calling process's lease (random when None)
        self.plans: Planner = Planner(self.config, process)
        self.keys: KeySpace = self.plans.keys

    def run(self, plan: Plan) -> Any:  # pragma: no cover - the faces define it
        raise NotImplementedError

    # -- state changes: each returns the list of Transitions it made ------------------------
    def touch(self, user_id, activity: bool = True, now: float | None = None):
        """An HTTP request (activity) or another sign of life: online for ONLINE_WINDOW."""
        return self.run(self.plans.touch(user_id, activity, now))

    def touch_many(self, items: Iterable[tuple[Any, bool]], now: float | None = None):
        """Touches many (user_id, activity) pairs in one script call per shard (the
        middleware's batches); returns their transitions, each shard's in the order given."""
        return self.run(self.plans.touch_many(items, now))

    def forget(self, user_id, now: float | None = None):
        """Erasure: ends the user's presence (leaves and offline announced, as the sweep does)
        and deletes every key of theirs. Returns the transitions."""
        return self.run(self.plans.forget(user_id, now))

    def activity(self, user_id, now: float | None = None):
        """The person did something on a live connection: resets idle, and only that (the
        lease keeps them online; an HTTP window would outlive their last tab)."""
        return self.run(self.plans.activity(user_id, now))

    def idle(self, user_id, now: float | None = None):
        """A process saw no activity on its connection of the user for
        IDLE_AFTER; the user goes idle when no other device of theirs was active since."""
        return self.run(self.plans.idle(user_id, now))

    def connect(
        self,
        conn_id: str,
        user_id,
        now: float | None = None,
        device: str | None = None,
        max_connections: int = 0,
    ):
        """A WebSocket opened: the connection is held while its process lives. With
        ``max_connections``, raises TooManyConnections (writing nothing) while the user holds
        that many open connections already."""
        return self.run(self.plans.connect(conn_id, user_id, device, now, max_connections))

    def heartbeat(self, conn_id: str, user_id, now: float | None = None):
        """Renews one lease; returns False when the connection holds none, or its user is
        listed nowhere (keys evicted): connect again."""
        plan = self.plans.heartbeat_many([(conn_id, user_id)], now)
        return self.run(Plan(plan.calls, lambda replies: not plan.finish(replies)))

    def heartbeat_many(self, pairs: Iterable[tuple[str, Any]], now: float | None = None):
        """Renews many (conn_id, user_id) leases in one script call per shard; returns the
        pairs that hold no lease, or whose user is listed nowhere (keys evicted)."""
        return self.run(self.plans.heartbeat_many(pairs, now))

    def disconnect(self, conn_id: str, user_id, now: float | None = None):
        """A clean close: the lease is cut to DISCONNECT_GRACE; the sweep announces the rest."""
        return self.run(self.plans.disconnect(conn_id, user_id, now))

    def join(self, room: str, conn_id: str, user_id, now: float | None = None):
        """The connection enters ``room``; raises UnknownConnection without a lease."""
        return self.run(self.plans.join(room, conn_id, user_id, now))

    def leave(self, room: str, conn_id: str, user_id, now: float | None = None):
        return self.run(self.plans.leave(room, conn_id, user_id, now))

    def set_status(
        self,
        user_id,
        state: str | None = None,
        message: str | None = _UNSET,
        emoji: str | None = _UNSET,
        *,
        device: str | None = _UNSET,
        expires_in: float | None = None,
        now: float | None = None,
        **meta: Any,
    ):
        """Sets the user's override (``auto``, ``dnd``, ``invisible``; None keeps it), status
        message and emoji ('' clears; None or omitted keeps), optionally expiring after
        ``expires_in`` seconds, and free metadata fields (replacing the earlier ones)."""
        return self.run(
            self.plans.set_status(user_id, state, message, emoji, device, expires_in, meta, now)
        )

    def set_status_and_get(
        self,
        user_id,
        state: str | None = None,
        message: str | None = _UNSET,
        emoji: str | None = _UNSET,
        *,
        device: str | None = _UNSET,
        expires_in: float | None = None,
        now: float | None = None,
        **meta: Any,
    ):
        """:meth:`set_status`, and the user's presence after it as they see it themselves
        (their last activity included): ``(transitions, presence)``, from one script call."""
        plan = self.plans.set_status(
            user_id, state, message, emoji, device, expires_in, meta, now, read_back=True
        )
        return self.run(plan)

    def sweep_round(self, now: float | None = None):
        """One round of the sweep (at most SWEEP_BATCH of each kind of end a shard): ``(more,
        transitions)``, ``more`` while a shard has more to evict. The faces' ``sweep`` (and the
        front door's) run rounds until none is left."""
        return self.run(self.plans.sweep(now))

    def sweep(self, now: float | None = None):  # pragma: no cover - the faces loop differently
        raise NotImplementedError

    # -- reads ------------------------------------------------------------------------------
    def get(self, user_id, *, viewer=None, reveal_all: bool = False, now: float | None = None):
        """One user's Presence as ``viewer`` may see it (invisible shows only to themself),
        their last activity included."""
        uid = inputs.user_id(user_id)
        plan = self.plans.get_many([uid], viewer, reveal_all, now, activity=True)
        return self.run(Plan(plan.calls, lambda replies: plan.finish(replies)[uid]))

    def get_many(
        self,
        user_ids,
        *,
        viewer=None,
        reveal_all: bool = False,
        now: float | None = None,
        activity: bool = False,
    ):
        """{user_id: Presence} for any number of ids, in one round trip. A
        connected user with no record shows a ``last_active`` only with ``activity`` (a
        further read a user: a page of dots does without it)."""
        return self.run(self.plans.get_many(user_ids, viewer, reveal_all, now, activity))

    def online(
        self,
        window: float | None = None,
        offset: int = 0,
        limit: int | None = None,
        now: float | None = None,
        *,
        include_invisible: bool = False,
        after: tuple[float, str] | None = None,
        scores: bool = False,
    ):
        """Ids of online users, most recently seen first (score, then id, descending). With
        ``window``: the users whose last sign of life (heartbeat, activity, touch) is within the
        last ``window`` seconds, present now or gone and not swept yet. ``after``: a listed
        entry's ``(score, id)``, to go on after it (a key, not an offset: a page costs its own
        size, and users coming or going above it do not move it); ``scores``: ``(id, score)``
        pairs, the last of which is the next page's ``after``."""
        return self.run(
            self.plans.online(window, offset, limit, include_invisible, now, after, scores)
        )

    def online_count(self, window: float | None = None, now: float | None = None):
        """How many users are online (visible), counted in Redis without fetching ids; with
        ``window``, how many were seen within that many seconds (as :meth:`online`)."""
        return self.run(self.plans.online_count(window, now))

    def room_members(self, room: str, now: float | None = None, among=None):
        """Ids of the visible users in ``room``, in the order they came; with ``among`` (ids),
        only those of them (a lookup each, not the whole room)."""
        return self.run(self.plans.room_members(room, now, among))

    def room_count(self, room: str, now: float | None = None):
        plan = self.plans.room_members(room, now)
        return self.run(Plan(plan.calls, lambda replies: len(plan.finish(replies))))

    def rooms(self, limit: int = 100):
        """[(room, members)] of the busiest rooms, most members first (counts kept by the
        store's transitions, so they lag expiries by at most the sweep interval)."""
        tags = self.keys.all_tags()
        calls = [
            Call("", (), ("ZREVRANGE", KeySpace.rooms(t), 0, limit - 1, "WITHSCORES")) for t in tags
        ]

        def finish(replies: list[Any]) -> list[tuple[str, int]]:
            totals: dict[str, int] = {}
            for reply in replies:  # redis-py parses WITHSCORES into (member, score) pairs
                for room, score in reply:
                    name = room.decode() if isinstance(room, bytes) else room
                    totals[name] = totals.get(name, 0) + int(score)
            return sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]

        return self.run(Plan(calls, finish))

    def export(self, user_id):
        """Everything the store keeps of one user, as plain data (``presence export``): their
        record's fields, their scores in the indexes and their connections."""
        return self.run(self.plans.export(user_id))

    def user_rooms(self, user_id):
        """The rooms ``user_id`` is in through any of their connections (visible or not)."""
        uid = inputs.user_id(user_id)
        plan = self.plans.user_rooms([uid])
        return self.run(Plan(plan.calls, lambda replies: plan.finish(replies)[uid]))

    def user_rooms_many(self, user_ids):
        """{user_id: rooms} for any number of ids, in one round trip (visible or not: callers
        show it only where the user's presence is shown)."""
        return self.run(self.plans.user_rooms(user_ids))

    def state_counts(self, limit: int = 10_000, now: float | None = None):
        """A StateCounts of the online users: totals exact, states read for the ``limit`` most
        recent users of each shard (bounded work per call, for dashboards)."""
        return self.run(self.plans.state_counts(limit, now))

    def server_time(self):
        """The Redis server's clock (unix seconds): the one clock every process shares."""

        def finish(replies: list[Any]) -> float:
            seconds, micros = replies[0]
            return int(seconds) + int(micros) / 1_000_000

        return self.run(Plan([Call("", (), ("TIME",))], finish))

    # -- several reads in one round trip ------------------------------------------------------
    @cached_property
    def planned(self) -> BaseStore:
        """This store's API returning plans instead of results, for :meth:`gather`."""
        return _Planned(self)

    def gather(self, *plans: Plan):
        """Runs independent reads in one round trip and returns their results in order::

        presences, rooms = store.gather(store.planned.get_many(ids), store.planned.rooms(10))
        """
        calls = [call for plan in plans for call in plan.calls]

        def finish(replies: list[Any]) -> list[Any]:
            out, start = [], 0
            for plan in plans:
                out.append(plan.finish(replies[start : start + len(plan.calls)]))
                start += len(plan.calls)
            return out

        return self.run(Plan(calls, finish))

    def housekeeping_keys(self) -> list[tuple[str, list[str]]]:
        return [
            (self.keys.match_all(), [*map(self.keys.lock, self.keys.JOBS), self.keys.history()])
        ]

    # -- beside presence: the dashboard's chart (one sample a minute, trimmed to a day) ---------
    def record_sample(self, count: int, now: float):
        """Keeps ``count`` as the sample of the minute ``now`` falls in (once per minute)."""
        minute = int(now // 60) * 60
        key = self.keys.history()
        calls = [
            Call("", (), ("ZREMRANGEBYSCORE", key, minute, minute)),
            Call("", (), ("ZADD", key, minute, f"{minute}:{int(count)}")),
            Call("", (), ("ZREMRANGEBYSCORE", key, "-inf", f"({minute - 24 * 3600}")),
        ]
        return self.run(Plan(calls, lambda replies: None))

    def history(self, since: float):
        """[(minute, count)] samples since ``since``, oldest first."""
        key = self.keys.history()

        def finish(replies: list[Any]) -> list[tuple[int, int]]:
            out = []
            for member in replies[0]:
                text = member.decode() if isinstance(member, bytes) else member
                minute, count = text.split(":")
                out.append((int(minute), int(count)))
            return out

        return self.run(Plan([Call("", (), ("ZRANGEBYSCORE", key, since, "+inf"))], finish))

    # -- tenants in use (presence_app.tenants), on the store of the base prefix ----------------
    def record_tenant(self, tenant: str, now: float):
        """Notes that a process served ``tenant`` at ``now`` (the sweeper visits recent ones)."""
        call = Call("", (), ("ZADD", self.keys.tenants(), now, tenant))
        return self.run(Plan([call], lambda replies: None))

    def active_tenants(self, since: float):
        """The tenants served since ``since``; older entries are dropped."""
        key = self.keys.tenants()
        calls = [
            Call("", (), ("ZREMRANGEBYSCORE", key, "-inf", f"({since}")),
            Call("", (), ("ZRANGE", key, 0, -1)),
        ]
        return self.run(
            Plan(
                calls,
                lambda replies: [
                    k.decode() if isinstance(k, bytes) else str(k) for k in replies[1]
                ],
            )
        )


class _Planned(BaseStore):
    """A store face that runs nothing: each method returns its Plan (see BaseStore.gather)."""

    def __init__(self, store: BaseStore) -> None:  # the same plans and process as the store
        self.config, self.plans, self.keys = store.config, store.plans, store.keys

    def run(self, plan: Plan) -> Plan:
        return plan


__all__ = ["BaseStore", "InvalidInput", "translate_error"]
