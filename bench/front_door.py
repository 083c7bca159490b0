"""2. What a page reads and draws, through the front door, on 1,000,000 users of every kind, and
16. the front door's sync writes that a view, a task or a command makes; each side by side with
raw Redis in the same run.

**The site** (built once per run by :func:`site`): N users, ids 1..N, of three kinds given out in
random order: 60 % connected by a socket (``Store.connect``), 30 % HTTP-only (touched through
``Store.touch_many``, the middleware's path) and 10 % connected with a status (a message, an
emoji and a device drawn from a few of each; a quarter of them expiring), all written through
the store that ships. ``LEASE_TTL`` and ``ONLINE_WINDOW`` are 6 hours, so that everybody stays
present for the whole run at the real clock: every call below reads and writes with Redis' own
clock, as a page does (the tags take no ``now``). Django is configured in this process
(in-memory SQLite, the pub/sub channel layer on the run's Redis).

**2. get_many** (alternating blocks, the p99 the median of five series' p99):

- ``presence.get_many(200 user objects)``, each presence's state, emoji and message read (a
  dot's fields), for 200 socket users, 200 HTTP-only users, 200 users with a status and 200 of
  the site drawn at random (a mixed page: 60/30/10 % on average, in random order), each against
  a raw ``ZMSCORE`` of the same 200 ids on a bare sorted set of all N ids, scored as the store
  scores its indexes (the clock of a sign of life, to the microsecond); status users against
  socket users (p50); the store's part (``Store.get_many``) of both, for information; where
  the time goes: Redis' own time a call of the store's script for each kind, against the raw
  ``ZMSCORE``'s (``INFO commandstats``, alternating blocks), for information;
- pages of a signed-in viewer's request, 200 users of the site drawn at random:
  ``{% presence_prefetch users %}`` + 200 ``{% presence_dot u %}``, and the same with
  ``{% last_seen u %}``, against the same page without the tags; what the tags add is held to
  twice the read under them (``presence.get_many`` of the 200 as the tags read them) plus 1 ms
  (p50s);
- the roster tags: ``{% room_roster "team" %}`` alone (the live roster of a permanent room of
  200 members of the site, each a database row) against the page of the same 200 names, the
  read under it being ``rooms.members`` (one query, one round trip); ``{% room_members "lobby"
  as m %}`` with ``{% presence_prefetch m %}`` and a dot each (a room 200 connected users
  joined) against the page of the same names, the reads under it being
  ``presence.room_members``, the users' query and ``presence.get_many``.

**16. writes**, sync code, each against one raw ``ZADD`` of one member (a round trip) in the
same blocks, p50: ``presence.touch`` of a user never seen (an ``online`` announced), of an
HTTP-only user already online (nothing announced), ``presence.set_status`` of a connected user
(a new message each call: an ``update`` announced, and the user's own sockets told), and
``presence.join`` of a connection to a room (a ``join`` announced). Announcing means the
channel layer's ``group_send`` (a ``PUBLISH`` on the pub/sub layer): the row records the
``PUBLISH`` commands Redis ran per call (``INFO commandstats``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from presence_app.store import Store

from .common import Check, Context, Row, benchmark, latencies
from .dataset import CHUNK, conn_ids

PREFIX = "bsite"
BARE = "bench:raw:site"
RAW_WRITE = "bench:raw:write"
HOURS = 6 * 3600.0
PAGE = 200
SETS = 64

MESSAGES = [
    "In a meeting until 3 pm",
    "Lunch",
    "On holiday until Monday",
    "Commuting",
    "Focus time: no calls please",
    "Out sick",
    "At the dentist",
    "Travelling to Berlin",
]
EMOJI = ["📅", "🍔", "🌴", "🚆", "🎧", "🤒", "🦷", "✈️"]
DEVICES = ["Firefox on Linux", "Safari on iPhone", "Chrome on Windows", "Android app", ""]

DOTS_PAGE = (
    "{% load presence %}{% presence_prefetch users %}<ul>{% for u in users %}"
    "<li>{% presence_dot u %} {{ u.username }}</li>{% endfor %}</ul>"
)
LAST_SEEN_PAGE = (
    "{% load presence %}{% presence_prefetch users %}<ul>{% for u in users %}"
    "<li>{{ u.username }} {% last_seen u %}</li>{% endfor %}</ul>"
)
PLAIN_PAGE = "<ul>{% for u in users %}<li>{{ u.username }}</li>{% endfor %}</ul>"
ROSTER_PAGE = '{% load presence %}{% room_roster "team" %}'
ROOM_PAGE = (
    '{% load presence %}{% room_members "lobby" as members %}{% presence_prefetch members %}'
    "<ul>{% for u in members %}<li>{% presence_dot u %} {{ u.username }}</li>{% endfor %}</ul>"
)


def configure(url: str, buckets: int) -> None:
    """Django in this process, once: the app on the run's Redis and the site's prefix and
    timers, the pub/sub channel layer on the same Redis, the tables in in-memory SQLite."""
    import django
    from django.conf import settings

    if settings.configured:
        return
    settings.configure(
        INSTALLED_APPS=["django.contrib.auth", "django.contrib.contenttypes", "presence_app"],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        TEMPLATES=[{"BACKEND": "django.template.backends.django.DjangoTemplates"}],
        CHANNEL_LAYERS={
            "default": {
                "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
                "CONFIG": {"hosts": [url]},
            }
        },
        PRESENCE={
            "REDIS_URL": url,
            "KEY_PREFIX": PREFIX,
            "LEASE_TTL": HOURS,
            "ONLINE_WINDOW": HOURS,
            "REGISTRY_BUCKETS": buckets,
        },
        USE_TZ=True,
        SECRET_KEY="bench",
        DEFAULT_AUTO_FIELD="django.db.models.AutoField",
    )
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


@dataclass
class Site:
    """The site's users by kind, their connections, and the store that wrote them."""

    n: int
    store: Store
    client: Any
    socket: list[str]
    web: list[str]
    status: list[str]
    conns: dict[str, str]
    sets: dict[str, list[list[str]]] = field(default_factory=dict)


def site(ctx: Context) -> Site:
    """The site of N users (built once per run; see the module's docstring)."""
    if "site" in ctx.cache:
        return ctx.cache["site"]
    n = ctx.size(1_000_000, 100_000)
    configure(ctx.redis.url, max(1, n // 64))
    from presence_app.core.connection import store_config

    client = ctx.redis.client()
    store = Store(client, store_config())
    rng = random.Random(43)
    uids = [str(i) for i in range(1, n + 1)]
    order = uids[:]
    rng.shuffle(order)
    a, b = n * 6 // 10, n * 9 // 10
    socket, web, status = order[:a], order[a:b], order[b:]
    connected = socket + status
    conns = dict(zip(connected, conn_ids(len(connected), seed=43), strict=True))
    plans = store.planned
    ctx.log(
        f"the site: {n:,} users, {len(socket):,} socket, {len(web):,} HTTP-only, "
        f"{len(status):,} with a status, written through the store"
    )
    for i in range(0, len(connected), CHUNK):
        store.gather(*(plans.connect(conns[u], u) for u in connected[i : i + CHUNK]))
    for i in range(0, len(web), CHUNK):
        store.touch_many([(u, True) for u in web[i : i + CHUNK]])
    for i in range(0, len(status), CHUNK):
        store.gather(
            *(
                plans.set_status(
                    u,
                    message=rng.choice(MESSAGES),
                    emoji=rng.choice(EMOJI),
                    device=rng.choice(DEVICES),
                    expires_in=HOURS if rng.random() < 0.25 else None,
                )
                for u in status[i : i + CHUNK]
            )
        )
    # the raw side's sorted set of every id, scored as the store scores its indexes (the clock
    # of each one's last sign of life, to the microsecond): a reply of real scores
    at = store.server_time()
    for i in range(0, n, 10_000):
        client.zadd(BARE, {u: at + (i + j) * 1e-6 for j, u in enumerate(uids[i : i + 10_000])})
    out = Site(n, store, client, socket, web, status, conns)
    out.sets = {
        "socket": [rng.sample(socket, PAGE) for _ in range(SETS)],
        "web": [rng.sample(web, PAGE) for _ in range(SETS)],
        "status": [rng.sample(status, PAGE) for _ in range(SETS)],
        "mixed": [rng.sample(uids, PAGE) for _ in range(SETS)],
    }
    ctx.cache["site"] = out
    return out


class Cycle:
    """The next item of a list at each call, round and round."""

    def __init__(self, items: list[Any]) -> None:
        self.items, self.i = items, -1

    def __call__(self) -> Any:
        self.i = (self.i + 1) % len(self.items)
        return self.items[self.i]


def read(found: dict) -> dict:
    """What a dot reads of each presence (markup.dot_html): state, emoji, message."""
    for p in found.values():
        p.state, p.emoji, p.message  # noqa: B018
    return found


def objects(ids: list[str]) -> list[Any]:
    from django.contrib.auth.models import User

    return [User(pk=int(uid), username=f"user{uid}") for uid in ids]


@benchmark("get_many", "2. presence.get_many(200) and the page tags on 1 M users of every kind")
def run_reads(ctx: Context) -> list[Row]:
    s = site(ctx)
    from presence_app import presence

    client, store = s.client, s.store
    samples = ctx.size(10_000, 1000)
    kinds = ("socket", "web", "status", "mixed")
    labels = {
        "socket": "socket users",
        "web": "HTTP-only users",
        "status": "users with a status",
        "mixed": "a mixed page (60 % socket, 30 % HTTP-only, 10 % status, random order)",
    }
    fns: dict[str, Any] = {}
    for kind in kinds:
        ids, users = Cycle(s.sets[kind]), Cycle([objects(i) for i in s.sets[kind]])
        fns[f"raw {kind}"] = lambda ids=ids: client.zmscore(BARE, ids())
        fns[kind] = lambda users=users: read(presence.get_many(users()))
    for kind in ("socket", "status"):
        ids = Cycle(s.sets[kind])
        fns[f"store {kind}"] = lambda ids=ids: read(store.get_many(ids()))

    now = store.server_time()
    for kind in kinds:  # everybody is present, and the front door reads what the store does
        users, ids = objects(s.sets[kind][0]), s.sets[kind][0]
        found = presence.get_many(users, now=now)
        if not all(p.is_online for p in found.values()):
            raise RuntimeError(f"the site's {kind} users are not all online")
        if found != store.get_many(ids, now=now):
            raise RuntimeError("the front door does not read what the store does")
    if not all(p.message for p in store.get_many(s.sets["status"][0]).values()):
        raise RuntimeError("the status users have no status")
    ctx.log(f"get_many(200) of each kind vs ZMSCORE(200): {samples} calls each")
    lat = latencies(fns, samples)

    rows: list[Row] = []
    for kind in kinds:
        r, w = lat[kind], lat[f"raw {kind}"]
        rows.append(
            Row(
                bench="2 get_many",
                metric=f"presence.get_many(200 user objects) p99, a dot's fields read, "
                f"{labels[kind]}, {s.n:,} users",
                ours=r["p99_ms"],
                unit="ms",
                baseline=w["p99_ms"],
                baseline_label="ZMSCORE",
                checks=[Check("<= 2x raw", r["p99_ms"] / w["p99_ms"], "<=", 2.0)],
                details={"ours": r, "raw": w, "ratio_p50": r["p50_ms"] / w["p50_ms"]},
            )
        )
    for name, plain, metric, target in (
        ("status", "socket", "presence.get_many(200) p50, users with a status", True),
        (
            "store status",
            "store socket",
            "Store.get_many(200) p50 (the store's part), users with a status",
            False,
        ),
    ):
        r, o = lat[name], lat[plain]
        rows.append(
            Row(
                bench="2 get_many",
                metric=metric,
                ours=r["p50_ms"],
                unit="ms",
                baseline=o["p50_ms"],
                baseline_label="200 socket users",
                checks=[Check("<= 1.2x plain", r["p50_ms"] / o["p50_ms"], "<=", 1.2)]
                if target
                else [],
                details={"ours": r, "plain": o, "ratio_p99": r["p99_ms"] / o["p99_ms"]},
            )
        )
    rows += redis_times(ctx, s, kinds, labels)
    rows += pages(ctx, s)
    return rows


def commandstat(client: Any, command: str) -> tuple[int, int]:
    """(calls, microseconds) Redis has spent in ``command`` so far (INFO commandstats)."""
    stat = client.info("commandstats").get(f"cmdstat_{command}", {})
    return int(stat.get("calls", 0)), int(stat.get("usec", 0))


def own_times(
    client: Any,
    sets: dict[str, list[list[str]]],
    kinds: tuple[str, ...],
    sides: dict[str, tuple[str, Any]],
    rounds: int,
    block: int,
) -> dict[tuple[str, str], list[float]]:
    """Redis' own time a call (INFO commandstats), in microseconds, of each side (name ->
    (its command, a call of a page's ids)) on each kind's pages: ``block`` calls a side in
    turn, ``rounds`` times, so that a noisy moment hits every side; (kind, side) -> a figure a
    round."""
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(rounds):
        for kind in kinds:
            pages = Cycle(sets[kind])
            for side, (command, fn) in sides.items():
                calls0, usec0 = commandstat(client, command)
                for _ in range(block):
                    fn(pages())
                calls1, usec1 = commandstat(client, command)
                times.setdefault((kind, side), []).append((usec1 - usec0) / (calls1 - calls0))
    return times


def redis_times(ctx: Context, s: Site, kinds: tuple[str, ...], labels: dict[str, str]) -> list[Row]:
    """Where a read's time goes: Redis' own time a call (INFO commandstats) of the store's
    script for each kind of page, against the raw ZMSCORE of the same ids, in alternating
    blocks (the median of the rounds); the rest of a call is the client's and the wire's."""
    client, store = s.client, s.store
    block, rounds = ctx.size(200, 50), 7
    ctx.log(f"Redis' own time of each kind's read: {rounds} rounds of {block} calls")
    sides = {
        "ours": ("evalsha", store.get_many),
        "raw": ("zmscore", lambda ids: client.zmscore(BARE, ids)),
    }
    times = own_times(client, s.sets, kinds, sides, rounds, block)
    rows = []
    for kind in kinds:
        ours, raw = sorted(times[(kind, "ours")]), sorted(times[(kind, "raw")])
        rows.append(
            Row(
                bench="2 get_many",
                metric=f"Redis' own time of the store's script a call (INFO commandstats), "
                f"{labels[kind]}",
                ours=ours[rounds // 2],
                unit="us",
                baseline=raw[rounds // 2],
                baseline_label="ZMSCORE",
                details={"ours_us": ours, "raw_us": raw},
            )
        )
    return rows


def pages(ctx: Context, s: Site) -> list[Row]:
    """The pages' rows: tags against the same page without them, and the reads under them."""
    from django.contrib.auth.models import User
    from django.http import HttpRequest
    from django.template import Context as TemplateContext
    from django.template import engines

    from presence_app import presence, rooms
    from presence_app.core.rules import users_in_order
    from presence_app.models import RoomMembership

    rng = random.Random(44)
    viewer = User(pk=s.n + 1, username="viewer")
    team = rng.sample(s.socket + s.web + s.status, PAGE)
    lobby = rng.sample(s.socket + s.status, PAGE)
    have = set(User.objects.values_list("pk", flat=True))
    new = [int(u) for u in dict.fromkeys(team + lobby) if int(u) not in have]
    User.objects.bulk_create([User(pk=pk, username=f"user{pk}") for pk in new])
    if not RoomMembership.objects.filter(room="team").exists():
        RoomMembership.objects.bulk_create(
            [RoomMembership(user_id=int(u), room="team") for u in team]
        )
        s.store.gather(*(s.store.planned.join("lobby", s.conns[u], u) for u in lobby))
    team_users = users_in_order(team)
    lobby_users = users_in_order(presence.room_members("lobby", viewer=viewer))
    mixed = Cycle([objects(ids) for ids in s.sets["mixed"]])
    engine = engines["django"]
    templates = {
        name: engine.from_string(source).template
        for name, source in (
            ("dots", DOTS_PAGE),
            ("last_seen", LAST_SEEN_PAGE),
            ("plain", PLAIN_PAGE),
            ("roster", ROSTER_PAGE),
            ("room", ROOM_PAGE),
        )
    }

    def render(name: str, users: list[Any]) -> str:
        request = HttpRequest()  # a request of its own: the tags' batch lives on it
        request.user = viewer
        return templates[name].render(TemplateContext({"request": request, "users": users}))

    def lobby_read() -> Any:
        ids = presence.room_members("lobby", viewer=viewer)
        members = users_in_order(ids)
        return presence.get_many(members, viewer=viewer)

    fns = {
        "dots read": lambda: read(presence.get_many(mixed(), viewer=viewer)),
        "dots": lambda: render("dots", mixed()),
        "last_seen": lambda: render("last_seen", mixed()),
        "plain": lambda: render("plain", mixed()),
        "roster read": lambda: rooms.members("team", viewer=viewer),
        "roster": lambda: render("roster", []),
        "roster plain": lambda: render("plain", team_users),
        "room read": lobby_read,
        "room": lambda: render("room", []),
        "room plain": lambda: render("plain", lobby_users),
    }
    html = render("dots", objects(s.sets["mixed"][0]))
    if html.count('class="presence-dot') != PAGE or "presence-offline" in html:
        raise RuntimeError("the page does not draw 200 present users' dots")
    if render("roster", []).count("presence-roster-member") != PAGE:
        raise RuntimeError("the roster does not list its 200 members")
    if render("room", []).count('class="presence-dot') != PAGE:
        raise RuntimeError("the room's page does not draw its 200 members")
    samples = ctx.size(3000, 500)
    ctx.log(f"pages of 200 dots, last seens and rosters: {samples} renders each")
    lat = latencies(fns, samples)
    rows = []
    for name, plain, under, metric in (
        ("dots", "plain", "dots read", "200 {% presence_dot %} with {% presence_prefetch %}"),
        ("last_seen", "plain", "dots read", "200 {% last_seen %} with {% presence_prefetch %}"),
        ("roster", "roster plain", "roster read", '{% room_roster "team" %}, 200 members'),
        (
            "room",
            "room plain",
            "room read",
            '{% room_members "lobby" as m %} + {% presence_prefetch m %} + 200 dots',
        ),
    ):
        page, base, r = lat[name], lat[plain], lat[under]
        added = page["p50_ms"] - base["p50_ms"]
        budget = 2 * r["p50_ms"] + 1.0
        rows.append(
            Row(
                bench="2 get_many",
                metric=f"{metric}: what they add to the page, p50 (against twice the read under "
                "them + 1 ms)",
                ours=added,
                unit="ms",
                baseline=r["p50_ms"],
                baseline_label="the read under them",
                checks=[Check("<= 2x the read + 1 ms", added, "<=", budget)],
                details={
                    "page": page,
                    "without": base,
                    "read": r,
                    "budget_ms": budget,
                    "tags_alone_p50_ms": added - r["p50_ms"],
                    "added_p99_ms": page["p99_ms"] - base["p99_ms"],
                },
            )
        )
    return rows


@benchmark("writes", "16. the front door's sync writes that announce, vs one raw round trip")
def run_writes(ctx: Context) -> list[Row]:
    s = site(ctx)
    from presence_app import presence

    client = s.client
    samples = ctx.size(3000, 300)
    busy = {u for sets in s.sets.values() for ids in sets for u in ids}
    pool = [u for u in s.socket if u not in busy]
    joiners = Cycle(pool[: samples * 2])
    statusers = Cycle(pool[samples * 2 : samples * 2 + 500])
    online = Cycle(s.web[:5000])
    counter = iter(range(10**9))
    # a new message at each call of a user (500 users, 3 messages: each visit changes it)
    messages = Cycle(["Back in 5", "In a call", "Lunch"])

    def touch_new() -> None:
        presence.touch(f"new{next(counter)}")

    def join() -> None:
        uid = joiners()
        presence.join("wroom", s.conns[uid], uid)

    def raw() -> None:
        client.zadd(RAW_WRITE, {"r": next(counter)})

    fns = {
        "raw": raw,
        "touch new": touch_new,
        "touch online": lambda: presence.touch(online()),
        "set_status": lambda: presence.set_status(statusers(), message=messages()),
        "join": join,
    }
    if presence.touch(online()):
        raise RuntimeError("a touch of a user already online announced something")
    if [t.kind for t in presence.touch(f"check{next(counter)}")] != ["online"]:
        raise RuntimeError("a touch of a new user announced no online")

    def publishes() -> int:
        stats = client.info("commandstats")
        return int(stats.get("cmdstat_publish", {}).get("calls", 0))

    before = publishes()
    ctx.log(f"sync writes vs a raw ZADD round trip: {samples} calls each")
    lat = latencies(fns, samples, warmup=20)
    published = publishes() - before
    # one group_send (a PUBLISH) a touch and a join, two a set_status (the watchers, the user's
    # own sockets): every announcing call reached the channel layer
    expected = 4 * (samples + 20)
    w = lat["raw"]
    rows = []
    for name, limit, metric in (
        ("touch new", 10, "presence.touch() of a user never seen (an online announced)"),
        ("set_status", 10, "presence.set_status() of a connected user (an update announced)"),
        ("join", 10, "presence.join() of a connection (a join announced)"),
        ("touch online", 4, "presence.touch() of a user already online (nothing announced)"),
    ):
        r = lat[name]
        rows.append(
            Row(
                bench="16 writes",
                metric=f"{metric}, sync code, p50",
                ours=r["p50_ms"],
                unit="ms",
                baseline=w["p50_ms"],
                baseline_label="a raw ZADD round trip",
                checks=[Check(f"<= {limit}x raw", r["p50_ms"] / w["p50_ms"], "<=", limit)],
                details={"ours": r, "raw": w, "ratio_p99": r["p99_ms"] / w["p99_ms"]},
            )
        )
    for row in rows:
        row.details["publishes"] = {"made": published, "expected": expected}
    if published < expected:
        raise RuntimeError(f"{published} PUBLISH for {expected} announcements")
    client.unlink(RAW_WRITE)
    return rows
