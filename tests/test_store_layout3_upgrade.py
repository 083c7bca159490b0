"""A rolling upgrade from layout 2 to layout 3 (README "Upgrading"): the keys are written by the
real layout-2 store (``Store(client, config, layout=2)``) on the same Redis as layout-3
processes (``Store(client, config)``, the default); then ``upgrade_from_v2`` once the old processes
are gone. No ghosts, the users' profiles kept, no last seen lost."""

import pytest

from presence_app.store import PresenceError, Store, StoreConfig, upgrade_from_v2
from presence_app.store.upgrade import live_v2_connections

from .conftest import all_keys

T = 1_800_000_000.0
LEASE, GRACE = 90.0, 20.0
USERS = ["1", "2", "3", "4", "ü ser"]


@pytest.fixture
def old_and_new(backend):
    """An old process (layout 2) that has served a while, and a new one (layout 3), one Redis."""
    client, shards = backend
    config = StoreConfig(shards=shards)
    old, new = Store(client, config, layout=2), Store(client, config, layout=3)
    old.connect("c1", 1, device="laptop", now=T)  # connected, on the old process
    old.set_status(2, "dnd", message="In a meeting", emoji="📅", now=T)
    old.touch(2, now=T)  # over HTTP, with a status
    old.connect("c3", 3, now=T - 50)
    old.set_status(3, "invisible", now=T - 40)  # invisible: their public last seen is frozen
    old.connect("c4", 4, now=T - 300)
    old.disconnect("c4", 4, now=T - 250)
    old.sweep(now=T - 250 + GRACE + 1)  # offline, last seen kept
    old.connect("c5", "ü ser", now=T - 10)
    old.join("lobby", "c1", 1, now=T)
    return old, new


def test_old_and_new_processes_side_by_side(old_and_new):
    old, new = old_and_new
    before = old.get_many(USERS, now=T + 1)
    # A new process sees nobody of the old one's online: no ghost (nobody it cannot see go).
    assert {p.state for p in new.get_many(USERS, now=T + 1).values()} == {"offline"}
    assert new.online(now=T + 1) == [] and new.online_count(now=T + 1) == 0
    assert new.online(window=3600, now=T + 1) == []
    assert new.room_members("lobby", now=T + 1) == []
    assert new.sweep(now=T + 1) == []  # it sweeps its own layout only
    # The invisible user's socket moves to a new process: still invisible, nothing announced.
    assert new.connect("c3b", 3, now=T + 2) == []
    assert new.get(3, now=T + 3).state == "offline"
    assert new.get(3, viewer=3, now=T + 3).state == "invisible"
    assert new.get(3, now=T + 3).last_seen == T - 40  # the frozen public last seen
    assert new.room_members("lobby", now=T + 3) == []
    # The dnd user comes back over HTTP: dnd, with the status they set.
    assert [t.state for t in new.touch(2, now=T + 2)] == ["dnd"]
    p = new.get(2, now=T + 3)
    assert (p.state, p.message, p.emoji) == ("dnd", "In a meeting", "📅")
    # Back to the default on the new process: their next write does not adopt the old status.
    new.set_status(2, "auto", message="", emoji="", now=T + 4)
    new.touch(2, now=T + 5)
    p = new.get(2, now=T + 6)
    assert (p.state, p.message, p.emoji) == ("online", "", "")
    # The connected user's socket moves: online on the new process, their device adopted.
    assert [t.kind for t in new.connect("c1b", 1, now=T + 2)] == ["online"]
    assert new.get(1, now=T + 3).device == "laptop"
    # The old process still sees what it saw, and its sweep leaves layout 3 alone.
    after = old.get_many(USERS, now=T + 1)
    assert {u: p.state for u, p in after.items()} == {u: p.state for u, p in before.items()}
    old.sweep(now=T + 6)
    assert new.get(1, now=T + 6).state == "online"
    assert new.get(3, viewer=3, now=T + 6).state == "invisible"


def test_the_upgrade_keeps_every_last_seen_before_dropping_layout_2(old_and_new):
    old, new = old_and_new
    new.connect("c3b", 3, now=T + 2)  # came back on a new process before the upgrade
    expected = {u: p.last_seen for u, p in old.get_many(USERS, now=T + 1000).items()}
    assert live_v2_connections(new, now=T + 1) == 3  # c1, c3, c5: old sockets
    with pytest.raises(PresenceError):
        upgrade_from_v2(new, now=T + 1)
    with pytest.raises(PresenceError):
        upgrade_from_v2(old, now=T + 1000)  # a layout-2 store cannot be the target

    saved = {}

    def save(rows):
        # the layout-2 keys are all still there when the last seens are handed over
        assert any(":2:" in key for key in all_keys(new.client))
        saved.update({uid: (seen, device) for uid, seen, device in rows})

    assert upgrade_from_v2(new, save, batch=2, now=T + 1000) == 5
    assert {u: seen for u, (seen, _) in saved.items()} == expected
    assert saved["1"] == (expected["1"], "laptop")
    assert expected["4"] == T - 250 and expected["3"] == T - 40  # invisible: the frozen one
    # Layout 2 is gone; layout 3 has what it knew and the rest.
    assert [k for k in all_keys(new.client) if "}:2:" in k or k.startswith("presence:2:")] == []
    got = new.get_many(USERS, now=T + 1000)
    for uid in ("1", "2", "4", "ü ser"):  # offline in layout 3: the old last seen
        assert (got[uid].state, got[uid].last_seen) == ("offline", expected[uid]), uid
    assert (got["2"].message, got["2"].emoji) == ("In a meeting", "📅")  # status kept
    assert new.get(3, viewer=3, now=T + 3).state == "invisible"
    assert upgrade_from_v2(new, save, now=T + 1000) == 0  # idempotent


@pytest.mark.django_db
def test_the_upgrade_command_carries_layout_2_on_layout_3(
    django_user_model, redis_client, settings
):
    """``manage.py presence upgrade`` on a front door running layout 3 (``STORE_LAYOUT = 3``)
    carries layout 2: the last seens into ``LastSeen`` and layout 3, and layout 2 is gone."""
    from datetime import UTC, datetime
    from io import StringIO

    from django.core.management import call_command

    from presence_app.core.connection import get_store, reset_stores
    from presence_app.models import LastSeen

    settings.PRESENCE = {**settings.PRESENCE, "STORE_LAYOUT": 3, "ONLINE_WINDOW": LEASE}
    reset_stores()
    try:
        new = get_store()
        assert new.keys.layout == 3
        old = Store(new.client, new.config, layout=2)  # a layout-2 process on the same Redis
        for pk in (4, 5):
            django_user_model.objects.create_user(f"user{pk}", id=pk)
        old.connect("c4", 4, now=T - 300)
        old.disconnect("c4", 4, now=T - 250)
        old.touch(5, now=T - 100)
        old.sweep(now=T)
        out = StringIO()  # --force: the old leases' clock is 2027's
        call_command("presence", "upgrade", "--force", stdout=out)
        assert "2 users" in out.getvalue()
        rows = {row.user_id: row.last_seen_at for row in LastSeen.objects.all()}
        at = lambda t: datetime.fromtimestamp(t, tz=UTC)  # noqa: E731
        assert rows == {4: at(T - 250), 5: at(T - 100)}
        assert new.get(4, now=T + 1).last_seen == T - 250
        assert not any(k.startswith(f"{old.keys.tag(0)}:") for k in all_keys(new.client))
    finally:
        reset_stores()
