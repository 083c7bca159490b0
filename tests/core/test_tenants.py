"""Tenants: each workspace a key space of its own — its online list, counts, rooms, sweep and
channel-layer groups — so no read or event of one reaches another. Real Redis, real channel
layer, real sockets and requests."""

from __future__ import annotations

import time
from urllib.parse import parse_qs

import pytest
from channels.layers import channel_layers
from django.conf import settings
from django.test import override_settings

from presence_app import presence
from presence_app.core import tenants
from presence_app.jobs import sweeper
from presence_app.jobs.touches import batcher
from presence_app.store import InvalidInput

from ..conftest import all_keys
from ..ws import Socket, make_user, presence_settings, shutdown


def tenant_of(source):
    """The workspace named by ``?ws=``: a request's GET, or a socket scope's query string."""
    if isinstance(source, dict):
        return parse_qs(source.get("query_string", b"").decode()).get("ws", [None])[0]
    return source.GET.get("ws")


@pytest.mark.django_db
def test_workspaces_share_nothing(redis_client):
    now = time.time()
    for ws, users in (("acme", ["1", "2"]), ("globex", ["3"])):
        with tenants.activate(ws):
            for uid in users:
                presence.connect(f"{uid}-c", uid, now=now)
                presence.join("general", f"{uid}-c", uid, now=now)
    with tenants.activate("acme"):
        assert sorted(presence.online(now=now)) == ["1", "2"]
        assert presence.online_count(now=now) == 2
        assert presence.room_members("general", now) == ["1", "2"]
        assert presence.get("3", now=now).state == "offline"  # globex's user: unknown here
        reads = presence.Reads()
        assert presence.batch(reads.online_count(now=now), reads.rooms()) == [2, [("general", 2)]]
    with tenants.activate("globex"):
        assert presence.online(now=now) == ["3"] and presence.room_count("general", now) == 1
    assert presence.online(now=now) == []  # the default space holds neither
    # Every key of a workspace carries its prefix (and the registry the sweeper reads).
    keys = all_keys(redis_client)
    assert keys and all(
        k.startswith(("{presence~acme:", "{presence~globex:", "presence:tenants")) for k in keys
    ), keys
    with pytest.raises(InvalidInput):
        with tenants.activate("a:b"):
            pass


@pytest.mark.django_db
def test_the_sweeper_sweeps_every_workspace(redis_client):
    now = time.time()
    for ws in ("acme", "globex"):
        with tenants.activate(ws):
            presence.connect("c", f"{ws}-user", now=now)
    swept = sweeper.sweep_once(now=now + 1000, force=True)
    assert sorted(t.user_id for t in swept if t.kind == "offline") == ["acme-user", "globex-user"]
    for ws in ("acme", "globex"):
        with tenants.activate(ws):
            assert presence.online() == []


@pytest.mark.django_db
def test_requests_touch_and_read_their_own_workspace(client, django_user_model, redis_client):
    ann = django_user_model.objects.create_user("ann")
    bob = django_user_model.objects.create_user("bob")
    hook = "tests.core.test_tenants.tenant_of"
    with override_settings(PRESENCE={**settings.PRESENCE, "TENANT": hook}):
        client.force_login(ann)
        client.get("/presence/api/online/?ws=acme")
        client.force_login(bob)
        client.get("/presence/api/online/?ws=globex")
        batcher.flush()
        acme = client.get("/presence/api/online/?ws=acme").json()
        globex = client.get("/presence/api/online/?ws=globex").json()
    assert [r["user"] for r in acme["results"]] == [str(ann.pk)] and acme["count"] == 1
    assert [r["user"] for r in globex["results"]] == [str(bob.pk)]
    assert presence.online() == []


@pytest.fixture
async def fast(redis_client):
    channel_layers.backends.clear()
    with presence_settings(TENANT="tests.core.test_tenants.tenant_of"):
        yield
        await shutdown()
    channel_layers.backends.clear()


@pytest.mark.django_db(transaction=True)
async def test_sockets_of_two_workspaces_never_meet(fast):
    (_, ann), (_, bob), (_, cat) = [await make_user(n) for n in ("ann", "bob", "cat")]
    a = await Socket.open(ann, path="/ws/presence/?ws=acme", name="ann")
    c = await Socket.open(cat, path="/ws/presence/?ws=acme", name="cat")
    b = await Socket.open(bob, path="/ws/presence/?ws=globex", name="bob")
    for sock in (a, b, c):
        sock.beat()
        await sock.send(type="join", room="general")
        await sock.wait_for("presence.state", room="general")
    await a.send(type="watch", users=[b.user, c.user])
    state = await a.wait_for("presence.state", watch=True)
    assert {m["user"]: m["state"] for m in state["members"]} == {
        b.user: "offline",
        c.user: "online",
    }
    await b.send(type="status", state="dnd")
    await c.send(type="status", state="dnd")
    await a.wait_for("presence.update", user=c.user, state="dnd")
    frames = await a.collect(1.0)
    assert [f for f in frames if f.get("user") == b.user] == []  # nothing of globex's bob
    assert [f for f in b.drain() if f.get("user") in (a.user, c.user)] == []
    with tenants.activate("acme"):
        assert sorted(await presence.aroom_members("general")) == sorted([a.user, c.user])
    with tenants.activate("globex"):
        assert await presence.aroom_members("general") == [b.user]
    for sock in (a, b, c):
        await sock.close()


@pytest.mark.parametrize(
    "overrides, ids",
    [
        ({"AUDIENCE": "no.such.module.policy"}, ["presence_app.E016"]),
        ({"TENANT": 42}, ["presence_app.E016"]),
        ({"ROOM_SNAPSHOT_PAGE": 0}, ["presence_app.E017"]),
        ({"AUDIENCE_CACHE_SECONDS": -1}, ["presence_app.E017"]),
        ({"AUDIENCE": "tests.access.test_audience.policy", "TENANT": tenant_of}, []),
    ],
)
def test_checks_of_the_new_settings(overrides, ids):
    from presence_app.checks import check_audience_and_tenants

    with override_settings(PRESENCE={**settings.PRESENCE, **overrides}):
        assert [e.id for e in check_audience_and_tenants()] == ids


# -- issue 41: the number of workspaces a process serves is bounded ----------------------------
@pytest.fixture
def warnings_again(monkeypatch):
    """Each test sees the bound's warning again (one per WARN_EVERY and per kind otherwise)."""
    from presence_app.core.limits import Throttle

    monkeypatch.setattr(tenants, "_warned", Throttle(tenants.WARN_EVERY))


@pytest.mark.django_db
def test_the_sweeper_visits_at_most_max_tenants_workspaces(redis_client, caplog, warnings_again):
    """Failed on 47aebdf: every workspace recorded within a day was swept, every round, on
    every process (500 made-up ones: a 3 s round every 5 s)."""
    from presence_app.core.connection import get_store

    now = time.time()
    names = [f"w{i}" for i in range(5)]
    with override_settings(PRESENCE={**settings.PRESENCE, "MAX_TENANTS": 3}):
        for ws in names:
            with tenants.activate(ws):
                presence.connect("c", f"{ws}-user", now=now)
        for i, ws in enumerate(names):  # served in this order: w4 last
            get_store().record_tenant(ws, now - 100 + i)
        with caplog.at_level("WARNING", logger="presence_app"):
            swept = sweeper.sweep_once(now=now + 1000, force=True)
        offline = sorted(t.user_id for t in swept if t.kind == "offline")
        assert offline == ["w2-user", "w3-user", "w4-user"]  # the three most recently served
        assert "more than MAX_TENANTS (3)" in caplog.text and "TENANT maps" in caplog.text
        # The process' marks remember as many workspaces as it serves, no more.
        for ws in names:
            with tenants.activate(ws):
                presence.online()
        assert len(tenants._marks()) <= 3


def test_per_workspace_objects_are_bounded(caplog, warnings_again):
    made = []
    cache = tenants.Bounded("stores")
    with override_settings(PRESENCE={**settings.PRESENCE, "MAX_TENANTS": 3}):
        with caplog.at_level("WARNING", logger="presence_app"):
            for ws in ["a", "b", "c", "a", "d", "e"]:
                cache.get(ws, lambda ws=ws: made.append(ws) or f"store of {ws}")
        assert len(cache) == 3 and "a" in cache and "d" in cache and "e" in cache
        assert made == ["a", "b", "c", "d", "e"]  # "a" was used again: kept, not made again
        assert cache.get("b", lambda: "new store of b") == "new store of b"  # dropped, remade
        assert "stores: " in caplog.text and "MAX_TENANTS (3)" in caplog.text
    assert tenants.limit() == tenants.MAX_TENANTS
