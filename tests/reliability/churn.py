"""A crowd of simulated browsers against real servers, keeping the ground truth of what they did.

Each *actor* is one browser tab of a user (some users have two). For a bounded time it acts at
random, at a human pace: it connects (to any of the servers), joins and leaves rooms, sets its
user's status and message, closes its socket cleanly or drops the connection, and connects
again later. It records only what the server confirmed: a room once its ``presence.state`` came
back, a status once the user's own sockets heard of it. When the crowd stops, every open socket
sends a barrier frame (so the server has handled everything before it) and keeps heartbeating;
``Truth`` then says what the store must hold.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tests.servers import AsgiServer, User
from tests.timing import limit

from .clients import Client

MESSAGES = ("", "lunch", "in a meeting", "🎧 focus", "back at 3", "Ünïcødé ✓", "<b>x</b>")
STATES = ("online", "online", "online", "dnd", "dnd", "invisible")
#: Relative weights of the actions of a connected actor.
ACTIONS = {"join": 5, "leave": 3, "status": 2, "close": 1, "drop": 1}


@dataclass
class Timers:
    grace: float
    sweep: float
    metadata_ttl: float
    heartbeat: float


@dataclass
class UserTruth:
    user: User
    state: str = "online"  # as set: online, dnd, invisible
    message: str = ""
    known: bool = True  # False while the store may or may not have expired the status
    offline_since: float | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class Actor:
    def __init__(self, sim: Simulation, user: UserTruth, rng: random.Random) -> None:
        self.sim = sim
        self.user = user
        self.rng = rng
        self.client: Client | None = None
        self.rooms: set[str] = set()

    @property
    def connected(self) -> bool:
        return self.client is not None and self.client.open

    async def run(self, until: float) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(self.rng.uniform(0, self.sim.mean_gap))
        while loop.time() < until:
            if not self.connected:
                await self.connect()
            else:
                action = self.rng.choices(list(ACTIONS), weights=list(ACTIONS.values()))[0]
                await getattr(self, f"do_{action}")()
                self.sim.counts[action] += 1
            gap = self.rng.expovariate(1 / self.sim.mean_gap)
            await asyncio.sleep(max(0.0, min(gap, until - loop.time())))

    async def connect(self) -> None:
        server = self.rng.choice(self.sim.servers)
        client = Client(server, self.user.user)
        await client.connect()
        self.sim.note_connect(self.user, client.hello.get("me"))
        self.client = client
        self.rooms = set()
        client.beat(self.sim.timers.heartbeat)
        self.sim.counts["connect"] += 1

    async def do_join(self) -> None:
        candidates = [r for r in self.sim.rooms if r not in self.rooms]
        if len(self.rooms) >= self.sim.max_rooms or not candidates:
            return await self.do_leave()
        room = self.rng.choice(candidates)
        assert self.client is not None
        await self.client.send(type="join", room=room)
        while True:
            frame = await self.client.wait_any(15)
            if frame["type"] == "presence.state" and frame.get("room") == room:
                self.rooms.add(room)
                return
            if frame["type"] == "error":
                self.sim.errors.append(frame)
                return

    async def do_leave(self) -> None:
        if not self.rooms:
            return
        room = self.rng.choice(sorted(self.rooms))
        assert self.client is not None
        await self.client.send(type="leave", room=room)
        self.rooms.discard(room)

    async def do_status(self) -> None:
        state, message = self.rng.choice(STATES), self.rng.choice(MESSAGES)
        assert self.client is not None
        async with self.user.lock:  # one status change of a user at a time: the order is known
            await self.client.send(type="status", state=state, message=message)
            shown = "invisible" if state == "invisible" else state
            while True:
                frame = await self.client.wait_any(15)
                if (
                    frame["type"] == "presence.update"
                    and frame.get("self")
                    and frame["user"] == self.user.user.id
                    and frame["state"] == shown
                    and frame["message"] == message
                ):
                    break
                if frame["type"] == "error":
                    self.sim.errors.append(frame)
                    return
            self.user.state, self.user.message, self.user.known = state, message, True

    async def do_close(self) -> None:
        assert self.client is not None
        await self.client.close()
        self.gone()

    async def do_drop(self) -> None:
        assert self.client is not None
        await self.client.abort()
        self.gone()

    def gone(self) -> None:
        self.client = None
        self.rooms = set()
        self.sim.note_disconnect(self.user)


class Simulation:
    def __init__(
        self,
        servers: list[AsgiServer],
        users: list[User],
        *,
        tabs: int,
        rooms: int,
        timers: Timers,
        mean_gap: float,
        max_rooms: int = 4,
        seed: int = 7,
    ) -> None:
        self.servers = servers
        self.timers = timers
        self.mean_gap = mean_gap
        self.max_rooms = max_rooms
        self.rooms = [f"room-{i}" for i in range(rooms)]
        self.users = {u.id: UserTruth(u) for u in users}
        rng = random.Random(seed)
        truths = list(self.users.values())
        self.actors = [Actor(self, t, random.Random(rng.random())) for t in truths]
        self.actors += [Actor(self, t, random.Random(rng.random())) for t in truths[:tabs]]
        self.errors: list[dict[str, Any]] = []
        self.counts: Counter[str] = Counter()

    # -- what the store may have kept of a user's status -----------------------------------------
    def _open_tabs(self, user: UserTruth) -> int:
        return sum(1 for a in self.actors if a.user is user and a.connected)

    def note_disconnect(self, user: UserTruth) -> None:
        if self._open_tabs(user) == 0:
            user.offline_since = asyncio.get_running_loop().time()

    def note_connect(self, user: UserTruth, me: dict[str, Any] | None) -> None:
        """A tab of a user with none open connected; ``me``: the user's own presence its hello
        told. The store keeps a status METADATA_TTL past the end of the user's last connection
        (its grace, seen by a sweep) and forgets it at a sweep after that: by the time a loaded
        machine's sweeps come, which the hello tells. It must tell the status set before, or
        the one forgotten; before the grace could end, the one set; well past the expiry (held
        to tests/timing.py's multiple of it), the one forgotten."""
        if user.offline_since is None or self._open_tabs(user) > 0:
            return
        gap = asyncio.get_running_loop().time() - user.offline_since
        user.offline_since = None
        if me is None:  # Redis did not answer the hello: the store may say either
            user.known = False
            return
        t = self.timers
        told = ("online" if me["state"] in ("online", "idle") else me["state"], me["message"])
        kept, forgotten = (user.state, user.message), ("online", "")
        expected = [kept, forgotten] if user.known else [told]
        if user.known and gap < t.grace:
            expected = [kept]
        elif user.known and gap > limit(t.grace + t.sweep + t.metadata_ttl) + 1.0:
            expected = [forgotten]
        if told not in expected:
            self.errors.append(
                {
                    "user": user.user.id,
                    "offline for": round(gap, 2),
                    "hello": told,
                    "expected": expected,
                }
            )
        user.state, user.message, user.known = told[0], told[1], True

    # -- running ------------------------------------------------------------------------------
    async def run(self, seconds: float) -> None:
        until = asyncio.get_running_loop().time() + seconds
        await asyncio.gather(*(actor.run(until) for actor in self.actors))
        # Every open socket's frames are handled before the truth is read.
        await asyncio.gather(*(a.client.barrier(15) for a in self.actors if a.connected))

    async def close_all(self) -> None:
        await asyncio.gather(
            *(a.client.close() for a in self.actors if a.client is not None), return_exceptions=True
        )
        for actor in self.actors:
            actor.client = None

    # -- the ground truth ----------------------------------------------------------------------
    def connected(self) -> dict[str, set[str]]:
        """{user id: rooms} of every user with an open socket."""
        out: dict[str, set[str]] = {}
        for actor in self.actors:
            if actor.connected:
                out.setdefault(actor.user.user.id, set()).update(actor.rooms)
        return out

    def mismatches(self, store: Any) -> list[str]:
        """How the store differs from the truth (empty: it holds exactly that)."""
        live = self.connected()
        selves = store.get_many(list(live), reveal_all=True)
        # A status the store may have expired is read from it; the listings must agree with it.
        state = {u: self.users[u].state if self.users[u].known else selves[u].state for u in live}
        visible = {u for u in live if state[u] != "invisible"}
        problems = []
        listed = set(store.online(include_invisible=True))
        if listed != set(live):
            problems.append(
                f"online: ghosts {sorted(listed - set(live))[:8]}, "
                f"missing {sorted(set(live) - listed)[:8]}"
            )
        public = set(store.online())
        if public != visible:
            problems.append(f"public online differs: {sorted(public ^ visible)[:8]}")
        for room in self.rooms:
            members = set(store.room_members(room))
            want = {u for u in visible if room in live[u]}
            if members != want:
                problems.append(
                    f"{room}: ghosts {sorted(members - want)[:8]}, "
                    f"missing {sorted(want - members)[:8]}"
                )
        rooms_of = store.user_rooms_many(list(self.users))
        for uid, rooms in rooms_of.items():
            if set(rooms) != live.get(uid, set()):
                problems.append(f"user {uid} rooms {rooms} != {sorted(live.get(uid, ()))}")
        for uid, presence in selves.items():
            truth = self.users[uid]
            if not truth.known:
                continue
            if (presence.state, presence.message) != (truth.state, truth.message):
                problems.append(
                    f"user {uid} status {(presence.state, presence.message)} != "
                    f"{(truth.state, truth.message)}"
                )
        return problems
