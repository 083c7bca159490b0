"""Bounds by shape for the online list (issue 41): a cursor is a position (a listed entry's score
and id), not an offset, and the API's is an opaque token; a page costs its own size however deep
it is; a policy scan goes on from where its last chunk ended; a signed-out visitor's count under a
policy is shared, not scanned again for every page view.

Costs are counted as the entries the store's online script hands back (every call of it, through
the real store: ``Reads``), and the policy's calls as the ids it was asked about. Real Redis,
real requests, real templates.
"""

from __future__ import annotations

import base64
import time

import pytest
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.template import Context, Template
from django.test import RequestFactory, override_settings

from presence_app import presence
from presence_app.access import audience
from presence_app.core import tenants
from presence_app.store import InvalidInput, Store

T = 1_800_000_000.0

#: Who sees whom: {viewer id (None: signed out): predicate on the user id}.
RELATION: dict[str | None, object] = {}
#: The ids the policy was asked about, one list a call.
CALLS: list[list[str]] = []


def policy(viewer, user_ids):
    CALLS.append(list(user_ids))
    sees = RELATION.get(viewer, lambda uid: False)
    return [u for u in user_ids if sees(u)]


def with_policy(**more):
    spec = {**settings.PRESENCE, "AUDIENCE": "tests.web.test_online_cursors.policy", **more}
    return override_settings(PRESENCE=spec)


@pytest.fixture(autouse=True)
def _fresh():
    RELATION.clear()
    CALLS.clear()
    audience.shared.clear()
    yield
    RELATION.clear()
    audience.shared.clear()


class Reads:
    """Counts what the store's online script hands back: ``entries`` (ids with their scores)
    over ``calls`` script calls, wherever the read came from (a view, a tag, the front door)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entries = self.calls = 0
        send = Store._send
        reads = self

        def counted(store, calls):
            replies = send(store, calls)
            for call, reply in zip(calls, replies, strict=True):
                if call.script == "online" and isinstance(reply, list):
                    reads.calls += 1
                    reads.entries += len(reply) // 2
            return replies

        monkeypatch.setattr(Store, "_send", counted)

    def reset(self) -> None:
        self.entries = self.calls = 0


@pytest.fixture
def reads(monkeypatch):
    return Reads(monkeypatch)


def walk(store, limit, now, **kwargs):
    """The whole list, a page at a time, each page going on after the last one's last entry."""
    out, after, pages = [], None, 0
    while True:
        page = store.online(limit=limit, now=now, after=after, scores=True, **kwargs)
        pages += 1
        assert len(page) <= limit
        out += page
        if len(page) < limit:
            return out, pages
        uid, score = page[-1]
        after = (score, uid)


# -- the store: positions, not offsets ------------------------------------------------------------
IDS = ["1", "10", "2", "9", "a", "ab", "b", "Z", "z", "é", "ü", "日本", "a b", "x|y"]


def test_positions_walk_the_list_in_one_order_across_ties_shards_and_indexes(store):
    """Equal scores (a heartbeat batch, a touch batch) are the rule, not the exception: the
    order is score, then id (as Redis orders bytes), both descending, in every index and shard
    alike, so a page goes on exactly where the last ended, whatever page size."""
    for n, uid in enumerate(IDS):
        if n % 2:
            store.connect(f"c{n}", uid, now=T)  # the connected: K_SEEN, scored T
        else:
            store.touch(uid, now=T)  # the HTTP-only: K_WEB, scored T too
    for n in range(6):
        store.touch(f"late{n}", now=T + 1 + n % 3)  # three more scores, ties among them
    store.set_status("9", "invisible", now=T)
    now = T + 10
    expected = sorted(
        [(uid, T) for uid in IDS if uid != "9"] + [(f"late{n}", T + 1 + n % 3) for n in range(6)],
        key=lambda e: (e[1], e[0].encode()),
        reverse=True,
    )
    assert store.online(now=now, scores=True) == expected
    assert store.online(now=now) == [uid for uid, _ in expected]
    for limit in (1, 2, 3, 7, 50):
        listed, pages = walk(store, limit, now)
        assert listed == expected, limit
        assert pages == len(expected) // limit + 1
    hidden_too, _ = walk(store, 3, now, include_invisible=True)
    assert [u for u, _ in hidden_too] == [
        u for u, _ in sorted([*expected, ("9", T)], key=lambda e: (e[1], e[0].encode()))[::-1]
    ]
    # A window reads on from a position too (the seen scores, not the leases).
    within, _ = walk(store, 4, now, window=9.5)
    assert within == [e for e in expected if e[1] >= now - 9.5]


def test_a_position_stays_where_it_is_as_users_come_and_go(store):
    for n in range(20):
        store.touch(f"u{n:02}", now=T + n)  # u19 the most recent
    first = store.online(limit=5, now=T + 30, scores=True)
    assert [u for u, _ in first] == ["u19", "u18", "u17", "u16", "u15"]
    uid, score = first[-1]
    after = (score, uid)
    # Newcomers above it, one beside it (its score, an id either side of its own), and the
    # entry itself gone: the page after it is the same users, wherever the list moved.
    for newcomer in ("new1", "new2"):
        store.touch(newcomer, now=T + 25)
    store.touch("u15a", now=T + 15)  # the same score, an id above u15's: before the position
    store.touch("u14z", now=T + 14)  # beside u14, below the position
    store.forget("u17")
    store.forget("u15")
    page = store.online(limit=5, now=T + 30, after=after)
    assert page == ["u14z", "u14", "u13", "u12", "u11"]
    assert store.online(limit=5, now=T + 30, after=(T + 15, "u15b")) == ["u15a", *page[:4]]


def test_a_deep_page_costs_its_own_size(store, reads):
    store.touch_many([(f"p{n:05}", False) for n in range(5000)], now=T)
    everyone = store.online(now=T + 1, scores=True)
    assert len(everyone) == 5000
    uid, score = everyone[4900]
    reads.reset()
    page = store.online(limit=51, now=T + 1, after=(score, uid))
    assert page == [u for u, _ in everyone[4901:4952]]
    assert reads.entries <= 51 * reads.calls  # a page a call (index and shard), never the list
    reads.reset()
    store.online(limit=51, offset=4901, now=T + 1)
    assert reads.entries >= 4952  # what an offset costs: everything above it


def test_a_position_is_checked(store):
    for bad in ((float("inf"), "u1"), (float("nan"), "u1"), ("x", "u1"), (1.0, ""), (1.0,), 7):
        with pytest.raises(InvalidInput):
            store.online(limit=5, after=bad)


# -- the JSON API: opaque cursors -----------------------------------------------------------------
@pytest.fixture
def crowd(client, django_user_model, redis_client):
    """5,000 users online (HTTP-only, one touch batch: equal scores), and ann signed in."""
    ann = django_user_model.objects.create_user("ann")
    presence.touch_many([(f"p{n:05}", False) for n in range(5000)])
    client.force_login(ann)
    return ann


def test_a_cursor_is_not_an_offset_and_a_page_reads_a_page(client, crowd, reads):
    """Regression: ``?cursor=1000000000`` was an offset, and read every online entry (30,000 on
    the site the review tried) to answer an empty page."""
    reads.reset()
    answer = client.get("/presence/api/online/", {"cursor": 10**9, "per_page": 50})
    assert reads.entries <= 51 * 2  # at most a page a source (was: all 5,000)
    assert answer.status_code == 400  # no cursor the list gave: refused, nothing read
    assert answer.json()["detail"].endswith(".") and "cursor" in answer.json()["detail"]
    # The cursors the list gives: each page reads its own size, however deep.
    cursor, seen, deepest = None, [], 0
    for _ in range(4):
        query = {"per_page": 50, **({"cursor": cursor} if cursor else {})}
        reads.reset()
        body = client.get("/presence/api/online/", query).json()
        deepest = max(deepest, reads.entries)
        seen += [r["user"] for r in body["results"]]
        cursor = body["next"]
        assert isinstance(cursor, str) and not cursor.isdigit()
    assert len(seen) == len(set(seen)) == 200 and deepest <= 51 * 2


def test_forged_cursors_answer_400_with_a_sentence(client, crowd, django_user_model, settings):
    first = client.get("/presence/api/online/", {"per_page": 2}).json()
    token = first["next"]
    second = client.get("/presence/api/online/", {"per_page": 2, "cursor": token})
    assert second.status_code == 200 and len(second.json()["results"]) == 2
    flipped = token[:10] + ("A" if token[10] != "A" else "B") + token[11:]
    forged = ["", "0", "-1", "1e9", "x" * 5000, "é" * 20, flipped, token[:-3], token + "A", "%00"]
    for bad in forged:
        answer = client.get("/presence/api/online/", {"per_page": 2, "cursor": bad})
        assert answer.status_code == 400, bad
        detail = answer.json()["detail"]
        assert detail.endswith(".") and "cursor" in detail, bad
    # Another viewer's cursor, and one of another workspace, are no cursor of theirs.
    client.force_login(django_user_model.objects.create_user("bob"))
    assert client.get("/presence/api/online/", {"cursor": token}).status_code == 400
    client.force_login(crowd)
    hook = "tests.core.test_tenants.tenant_of"
    with override_settings(PRESENCE={**settings.PRESENCE, "TENANT": hook}):
        assert client.get("/presence/api/online/", {"cursor": token}).status_code == 200
        answer = client.get("/presence/api/online/", {"cursor": token, "ws": "acme"})
        assert answer.status_code == 400


def test_a_cursor_tells_nothing_of_the_entry_it_stands_at(client, crowd):
    body = client.get("/presence/api/online/", {"per_page": 3}).json()
    last = body["results"][-1]["user"]
    token = body["next"]
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    assert last.encode() not in raw and b"p0" not in raw  # the id of the entry it stands at
    assert str(int(time.time()))[:6].encode() not in raw  # and its score (a time)


def test_next_stays_put_when_a_hidden_user_comes_online(client, django_user_model, redis_client):
    """Regression: under a policy ``next`` was a global position, so a user the viewer may not
    see coming online moved it, and the next page repeated a user."""
    ann = django_user_model.objects.create_user("ann")
    client.force_login(ann)
    now = time.time()
    presence.touch_many([(f"v{n:02}", False) for n in range(12)], now=now - 5)
    presence.touch_many([(f"h{n:02}", False) for n in range(12)], now=now - 6)
    RELATION[str(ann.pk)] = lambda uid: uid.startswith("v")
    with with_policy():
        ids, cursor = presence.online_page(4, viewer=ann)
        api = client.get("/presence/api/online/", {"per_page": 4}).json()
        presence.touch("h-newcomer", now=now)  # hidden from ann, the most recent of all
        assert presence.online_page(4, viewer=ann) == (ids, cursor)  # was: the cursor moved
        again = client.get("/presence/api/online/", {"per_page": 4}).json()
        assert [r["user"] for r in again["results"]] == [r["user"] for r in api["results"]]
        assert again["next"] == api["next"]
        following = client.get("/presence/api/online/", {"per_page": 4, "cursor": api["next"]})
        users = [r["user"] for r in following.json()["results"]]
        assert users == ["v07", "v06", "v05", "v04"]  # on from v08: nothing repeated
        assert presence.online_page(4, cursor, viewer=ann)[0] == users


def test_a_policy_scan_reads_on_from_its_last_chunk(redis_client, monkeypatch, reads):
    """Regression: each chunk of a policy scan read the list again from the top (chunk k read
    k chunks), so a scan of N entries read ~N^2 / (2 x chunk) of them: 110,000-225,000 a request
    on the review's site. Now every page of a walk reads what it scans, and a chunk more."""
    monkeypatch.setattr(audience, "SCAN_CHUNK", 100)
    now = time.time()
    presence.touch_many([(f"u{n:04}", False) for n in range(3000)], now=now)
    RELATION["me"] = lambda uid: uid.endswith("0")  # one in ten
    with with_policy():
        reads.reset()
        ids, cursor = presence.online_page(50, viewer="me")
        first = reads.entries
        assert len(ids) == 50 and cursor is not None
        assert first <= 500 + 2 * 100  # the 500 it scanned (and the rest of a chunk a source)
        walked, pages = list(ids), 1
        while cursor is not None:
            ids, cursor = presence.online_page(50, cursor, viewer="me")
            walked += ids
            pages += 1
        assert walked == [f"u{n:04}" for n in range(2990, -1, -10)]
        assert reads.entries <= 3000 + pages * 2 * 100  # linear: each entry about once
        assert sum(len(c) for c in CALLS) <= 3000 + pages * 100  # and asked about once


def test_a_page_under_a_policy_stops_at_the_scan_limit_with_a_next(redis_client, reads):
    now = time.time()
    presence.touch_many([(f"u{n:04}", False) for n in range(3000)], now=now)
    RELATION["me"] = lambda uid: uid == "u0000"  # the least recently seen of all
    with with_policy(AUDIENCE_SCAN_LIMIT=1000):
        reads.reset()
        ids, cursor = presence.online_page(10, viewer="me")
        assert ids == [] and cursor is not None and reads.entries <= 1000 + 2 * 1000
        ids, cursor = presence.online_page(10, cursor, viewer="me")
        assert ids == [] and cursor is not None
        ids, cursor = presence.online_page(10, cursor, viewer="me")
        assert ids == ["u0000"] and cursor is not None  # a full scan: more may follow
        assert presence.online_page(10, cursor, viewer="me") == ([], None)


# -- a signed-out visitor's count under a policy ---------------------------------------------------
COUNT = Template("{% load presence %}{% online_count %}")


def render_anonymous() -> str:
    request = RequestFactory().get("/")
    request.user = AnonymousUser()
    return COUNT.render(Context({"request": request}))


def test_an_anonymous_count_under_a_policy_is_shared(redis_client, monkeypatch, reads):
    """Regression: every signed-out page view with ``{% online_count %}`` scanned the online list
    under a policy (55,000 entries a view on the review's site, its chunks read from the top);
    the policy answers every signed-out visitor alike, so one scan serves the views of the next
    ``SHARED_SECONDS``."""
    monkeypatch.setattr(audience, "SHARED_SECONDS", 3600)  # no view of this test outlives it
    now = time.time()
    presence.touch_many([(f"u{n:04}", False) for n in range(3000)], now=now)
    RELATION[None] = lambda uid: uid.endswith("00")  # 30 of them
    with with_policy():
        reads.reset()
        assert render_anonymous() == "30"  # the tag lists no user objects: none exist
        once, asked = reads.entries, sum(len(c) for c in CALLS)
        assert once <= 3000 + 2 * 1000 and asked <= 3000
        for _ in range(10):
            assert render_anonymous() == "30"
        assert (reads.entries, sum(len(c) for c in CALLS)) == (once, asked)
        # {% online_users %}' list too (its ids: these users have no rows to show).
        assert presence.online(limit=3) == ["u2900", "u2800", "u2700"]
        assert presence.online(limit=3) == ["u2900", "u2800", "u2700"]
        assert reads.entries <= once + 3000 + 2 * 1000
        # Each workspace its own answer; a signed-in viewer reads their own.
        with tenants.activate("acme"):
            assert presence.online_count() == 0
        RELATION["me"] = lambda uid: uid.endswith("000")
        assert presence.online_count(viewer="me") == 3
        # It ends: SHARED_SECONDS later (here: at once) the next view reads again.
        monkeypatch.setattr(audience, "SHARED_SECONDS", 0)
        presence.touch("u9900", now=now)
        time.sleep(0.01)
        assert render_anonymous() == "31"
    # Without a policy the count is Redis' own, exact, and not kept.
    reads.reset()
    assert presence.online_count() == 3001 and reads.entries == 0


def test_the_shared_answers_are_bounded():
    for n in range(audience.SHARED_ENTRIES + 50):
        audience.shared.put(("ws", n), n)
    assert len(audience.shared.entries) == audience.SHARED_ENTRIES
    assert audience.shared.get(("ws", 0)) is None
    assert audience.shared.get(("ws", audience.SHARED_ENTRIES + 49)) == audience.SHARED_ENTRIES + 49
