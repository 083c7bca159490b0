"""Model check: Hypothesis drives random sequences of store operations with injected time against
a small pure-Python model of the semantics; both must agree on every query."""

import os
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from presence_app.store import UnknownConnection

T0 = 1_800_000_000.0
TTL, GRACE, WINDOW, IDLE = 90.0, 20.0, 60.0, 300.0
USERS = ["1", "2", "3"]
ROOMS = ["lobby", "doc:7"]
WINDOWS = (10, 60, 100)  # online(window=N) on both sides of the steps below


@dataclass
class Conn:
    user: str
    exp: float
    rooms: set = field(default_factory=set)


@dataclass
class User:
    w: float | None = None  # HTTP window end
    la: float | None = None  # last activity
    st: str = "auto"
    listed: str | None = None  # which index lists the user: "online", "hidden" or None
    seen: float | None = None  # last sign of life while listed: connect, heartbeat, activity, touch


class Model:
    """The semantics, as plainly as they can be written."""

    def __init__(self, window: float = WINDOW) -> None:
        self.window = window  # ONLINE_WINDOW
        self.now = T0
        self.conns: dict[str, Conn] = {}
        self.users = {u: User() for u in USERS}

    def until(self, uid: str) -> float:
        exps = [c.exp for c in self.conns.values() if c.user == uid]
        w = self.users[uid].w
        return max(exps + ([w] if w is not None else []), default=float("-inf"))

    def live(self, uid: str) -> bool:
        return self.users[uid].listed is not None and self.until(uid) >= self.now

    def index(self, uid: str) -> str:
        return "hidden" if self.users[uid].st == "invisible" else "online"

    def state(self, uid: str, viewer: str | None = None) -> str:
        u = self.users[uid]
        if not self.live(uid):
            return "offline"
        if u.st == "invisible":
            return "invisible" if viewer == uid else "offline"
        if u.st == "dnd":
            return "dnd"
        if u.la is not None and self.now - u.la >= IDLE:
            return "idle"
        return "online"

    def online(self) -> set[str]:
        return {u for u in USERS if self.live(u) and self.users[u].listed == "online"}

    def seen_within(self, window: float) -> set[str]:
        """online(window=N): the (visible) listed users whose last sign of life is that recent."""
        return {
            u
            for u in USERS
            if self.users[u].listed == "online" and self.users[u].seen >= self.now - window
        }

    def room(self, room: str) -> set[str]:
        return {
            c.user
            for c in self.conns.values()
            if room in c.rooms and self.users[c.user].listed == "online" and self.live(c.user)
        }

    # -- operations --
    def connect(self, cid: str, uid: str) -> None:
        self.conns[cid] = Conn(uid, self.now + TTL)
        u = self.users[uid]
        u.la = self.now
        u.listed = u.listed or self.index(uid)
        u.seen = self.now

    def heartbeat(self, cid: str) -> bool:
        if cid not in self.conns:
            return False
        self.conns[cid].exp = self.now + TTL
        self.users[self.conns[cid].user].seen = self.now
        return True

    def disconnect(self, cid: str) -> None:
        if cid in self.conns:
            self.conns[cid].exp = min(self.conns[cid].exp, self.now + GRACE)

    def touch(self, uid: str, activity: bool) -> None:
        u = self.users[uid]
        if activity or (u.listed is None and u.la is None):
            u.la = self.now
        u.w = self.now + self.window
        u.listed = u.listed or self.index(uid)
        u.seen = self.now

    def activity(self, uid: str) -> None:
        u = self.users[uid]
        if u.listed:
            if self.live(uid):  # a sign of life only while present: it holds no presence
                u.seen = self.now
            u.la = self.now

    def set_state(self, uid: str, state: str) -> None:
        u = self.users[uid]
        was_hidden = u.st == "invisible"
        u.st = state
        if u.listed is None or was_hidden == (state == "invisible"):
            return
        if was_hidden and self.until(uid) < self.now:
            self.evict_user(uid)  # expired while hidden: dropped on the spot
        else:
            u.listed = self.index(uid)

    def evict_user(self, uid: str) -> None:
        for cid in [c for c, conn in self.conns.items() if conn.user == uid]:
            del self.conns[cid]
        self.users[uid].listed = None
        self.users[uid].w = None
        self.users[uid].seen = None

    def sweep(self) -> None:
        for cid in [c for c, conn in self.conns.items() if conn.exp < self.now]:
            del self.conns[cid]
        for uid in USERS:
            if self.users[uid].listed and self.until(uid) < self.now:
                self.evict_user(uid)


class StoreVersusModel(RuleBasedStateMachine):
    online_window = WINDOW

    def __init__(self) -> None:
        super().__init__()
        self.model = Model(self.online_window)
        self.next_conn = 0

    @initialize()
    def empty(self) -> None:
        self.store.clear()

    @property
    def now(self) -> float:
        return self.model.now

    # Steps that land on both sides of every threshold (grace 20, window 60, lease 90, idle 300).
    @rule(dt=st.sampled_from([0.5, 4, 11, 19, 21, 45, 59, 61, 89, 91, 119, 121, 299, 301]))
    def advance(self, dt):
        self.model.now += dt

    @rule(uid=st.sampled_from(USERS))
    def connect(self, uid):
        cid = f"c{self.next_conn}"
        self.next_conn += 1
        self.store.connect(cid, uid, now=self.now)
        self.model.connect(cid, uid)

    @precondition(lambda self: self.next_conn > 0)
    @rule(data=st.data())
    def heartbeat(self, data):
        cid = f"c{data.draw(st.integers(0, self.next_conn - 1))}"
        uid = self.model.conns[cid].user if cid in self.model.conns else USERS[0]
        assert self.store.heartbeat(cid, uid, now=self.now) == self.model.heartbeat(cid)

    @precondition(lambda self: self.model.conns)
    @rule(data=st.data())
    def disconnect(self, data):
        cid = data.draw(st.sampled_from(sorted(self.model.conns)))
        self.store.disconnect(cid, self.model.conns[cid].user, now=self.now)
        self.model.disconnect(cid)

    @precondition(lambda self: self.next_conn > 0)
    @rule(data=st.data(), room=st.sampled_from(ROOMS), join=st.booleans())
    def join_or_leave(self, data, room, join):
        cid = f"c{data.draw(st.integers(0, self.next_conn - 1))}"
        conn = self.model.conns.get(cid)
        uid = conn.user if conn else USERS[0]
        if not join:
            self.store.leave(room, cid, uid, now=self.now)
            if conn:
                conn.rooms.discard(room)
        elif conn is None:
            with pytest.raises(UnknownConnection):
                self.store.join(room, cid, uid, now=self.now)
        else:
            self.store.join(room, cid, uid, now=self.now)
            conn.rooms.add(room)

    @rule(uid=st.sampled_from(USERS), activity=st.booleans())
    def touch(self, uid, activity):
        self.store.touch(uid, activity=activity, now=self.now)
        self.model.touch(uid, activity)

    @rule(uid=st.sampled_from(USERS))
    def activity(self, uid):
        self.store.activity(uid, now=self.now)
        self.model.activity(uid)

    @rule(uid=st.sampled_from(USERS), state=st.sampled_from(["auto", "dnd", "invisible"]))
    def set_status(self, uid, state):
        self.store.set_status(uid, state, now=self.now)
        self.model.set_state(uid, state)

    @rule()
    def sweep(self):
        self.store.sweep(now=self.now)
        self.model.sweep()

    @invariant()
    def queries_agree(self):
        now, m = self.now, self.model
        seen = self.store.get_many(USERS, now=now)
        for uid in USERS:
            assert seen[uid].state == m.state(uid), uid
            assert self.store.get(uid, viewer=uid, now=now).state == m.state(uid, viewer=uid), uid
        assert set(self.store.online(now=now)) == m.online()
        assert self.store.online_count(now=now) == len(m.online())
        for window in WINDOWS:
            assert set(self.store.online(window=window, now=now)) == m.seen_within(window), window
            assert self.store.online_count(window=window, now=now) == len(m.seen_within(window))
        for room in ROOMS:
            assert set(self.store.room_members(room, now=now)) == m.room(room), room
            assert self.store.room_count(room, now=now) == len(m.room(room))


class StoreVersusModelLongWindow(StoreVersusModel):
    """ONLINE_WINDOW > LEASE_TTL: an HTTP request holds a user longer than a heartbeat does."""

    online_window = 120.0


def check(machine: type[StoreVersusModel], store) -> None:
    machine.store = store
    runs = int(os.environ.get("PRESENCE_MODEL_EXAMPLES", "300"))
    machine.TestCase.settings = settings(
        max_examples=runs,
        stateful_step_count=40,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    machine.TestCase().runTest()


# Bounded by the number of examples, not by time: a busy machine only makes them slower.
@pytest.mark.timeout(900)
@pytest.mark.parametrize("backend", ["single"], indirect=True)
def test_store_agrees_with_the_model(store):
    check(StoreVersusModel, store)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("backend", ["single"], indirect=True)
def test_store_agrees_with_the_model_when_the_http_window_outlasts_the_lease(make_store):
    check(
        StoreVersusModelLongWindow,
        make_store(online_window=StoreVersusModelLongWindow.online_window),
    )
