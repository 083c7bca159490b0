"""2. ``get_many(200)`` on 1 M users against a raw ``ZMSCORE`` of 200 members (store layout 2;
layout 3's is bench 14), and
3. ``online(limit=100)``, ``online_count()``, ``room_members()`` at 10 k and 1 M users against the
raw command each one would at least need, with the growth from 10 k to 1 M users (store layout
3, the default: users connected through ``Store.connect``).

Latencies are client-side round trips (``time.perf_counter_ns`` around the call: planning,
redis-py, loopback, Redis, parsing), ours and raw measured in alternating blocks.

The same read through the front door, the figure a view gets: ``presence.get_many`` of 200 user
objects (ids from the objects, the checks of the front door, the AUDIENCE hook's place), and a
page of 200 dots (that call, then a template of 200 ``{% presence_dot %}``) against the same
template without the dots. Django is configured in this process for it (the other in-process
benchmarks use no Django; the ones that do run in spawned processes of their own).

The front door's read is also timed with each presence's state, emoji and message read (what
a dot reads: the derivation included, whatever a presence leaves for later) and, for the
derivation cut, both ways again with layout 2's eager derivation swapped in
(``bench/derive_eager.py``), in the same blocks: before and after in one run.

Beside get_many, for information, the layout's floor: one EVALSHA of ZMSCORE on the seen index
and MGET of the same 200 users' records (keys built by the client), no derivation, and the same
two commands pipelined without a script. Whatever a get_many of layout 2 does, it reads at least
these two: a missed target is shown against that floor, measured in the same blocks.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

from presence_app.store.keys import KeySpace

from .common import Check, Context, Row, benchmark, latencies
from .dataset import T0, Population, population, population3
from .derive_eager import eager

ROOM = "lobby"
ROOM_SIZE = 100
# The two reads get_many must make in layout 2, and nothing else. KEYS: the seen index, then the
# users' record keys; ARGV: their ids. Returns both replies as they come.
FLOOR_LUA = """
return {redis.call('ZMSCORE', KEYS[1], unpack(ARGV)), redis.call('MGET', unpack(KEYS, 2))}
"""


# A page of dots, and the same page without them (the baseline of its row).
DOTS_PAGE = (
    "{% load presence %}<ul>{% for u, p in rows %}<li>{% presence_dot p %} {{ u.username }}</li>"
    "{% endfor %}</ul>"
)
PLAIN_PAGE = "<ul>{% for u in users %}<li>{{ u.username }}</li>{% endfor %}</ul>"


def front_door(url: str, prefix: str) -> Any:
    """The app's public API, configured in this process on the run's Redis and the population's
    prefix and layout (2: dataset.py writes layout 2's keys; bench 14 overrides it with 3):
    ``presence`` (get_many), user objects and templates."""
    import django
    from django.conf import settings

    if not settings.configured:
        settings.configure(
            INSTALLED_APPS=["django.contrib.auth", "django.contrib.contenttypes", "presence_app"],
            DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
            TEMPLATES=[{"BACKEND": "django.template.backends.django.DjangoTemplates"}],
            PRESENCE={"REDIS_URL": url, "KEY_PREFIX": prefix, "STORE_LAYOUT": 2},
            USE_TZ=True,
        )
        django.setup()
    from presence_app import presence

    return presence


def raw_keys(pop: Population) -> tuple[str, str]:
    tag = pop.store.keys.tag(0)
    return KeySpace.seen(tag), KeySpace.room(tag, ROOM)


def span(pop: Population) -> float:
    """How long a sign of life keeps a user present: the online index' band is [now - span, +inf)."""
    return max(pop.store.config.lease_ttl, pop.store.config.online_window)


@benchmark("get_many", "2. get_many(200) on 1 M users vs raw ZMSCORE, store layout 2")
def run_get_many(ctx: Context) -> list[Row]:
    n = ctx.size(1_000_000, 100_000)
    pop = population(ctx, n, "b1m")
    store, client = pop.store, pop.client
    online_key, _ = raw_keys(pop)
    rng = random.Random(2)
    # plain users, and users who set a status message, an emoji and a device (12,800 drawn from
    # the whole population, as the plain ones are: keys as cold on both sides)
    custom = rng.sample(pop.uids, 64 * 200)
    chosen = set(custom)
    plain = [uid for uid in pop.uids if uid not in chosen]
    sets = [rng.sample(plain, 200) for _ in range(64)]
    status_sets = [custom[i * 200 : (i + 1) * 200] for i in range(64)]
    now = T0 + 1
    it = dict.fromkeys(
        (
            "ours",
            "raw",
            "status",
            "floor",
            "pipelined",
            "public",
            "page",
            "plain",
            "public_read",
            "status_read",
            "eager",
            "eager_read",
        ),
        0,
    )
    # Record keys made once, as the raw side's ids are: the floor has no key work on either side.
    tag = store.keys.tag(0)
    key_sets = [[KeySpace.user(tag, uid) for uid in ids] for ids in sets]
    floor_sha = client.script_load(FLOOR_LUA)
    presence = front_door(ctx.redis.url, pop.store.keys.prefix)
    from django.contrib.auth.models import User
    from django.template import Context as TemplateContext
    from django.template import engines

    user_sets = [[User(pk=int(uid), username=f"user{uid}") for uid in ids] for ids in sets]
    status_user_sets = [
        [User(pk=int(uid), username=f"user{uid}") for uid in ids] for ids in status_sets
    ]
    dots_page = engines["django"].from_string(DOTS_PAGE).template
    plain_page = engines["django"].from_string(PLAIN_PAGE).template

    def ours() -> None:
        i = it["ours"] = (it["ours"] + 1) % len(sets)
        got = store.get_many(sets[i], now=now)
        if len(got) != 200:
            raise RuntimeError("get_many returned the wrong number of users")

    def status() -> None:
        i = it["status"] = (it["status"] + 1) % len(status_sets)
        store.get_many(status_sets[i], now=now)

    def raw() -> None:
        i = it["raw"] = (it["raw"] + 1) % len(sets)
        client.zmscore(online_key, sets[i])

    def public() -> None:
        i = it["public"] = (it["public"] + 1) % len(sets)
        presence.get_many(user_sets[i], now=now)

    def read(found: dict) -> None:
        """What a dot reads of each presence (templatetags' dot_html): state, emoji, message."""
        for p in found.values():
            p.state, p.emoji, p.message  # noqa: B018

    def public_read() -> None:  # the front door, and every presence's dot fields read
        i = it["public_read"] = (it["public_read"] + 1) % len(sets)
        read(presence.get_many(user_sets[i], now=now))

    def status_read() -> None:
        i = it["status_read"] = (it["status_read"] + 1) % len(status_sets)
        read(presence.get_many(status_user_sets[i], now=now))

    def eager_public() -> None:  # the front door with layout 2's eager derivation
        i = it["eager"] = (it["eager"] + 1) % len(sets)
        with eager():
            presence.get_many(user_sets[i], now=now)

    def eager_read() -> None:
        i = it["eager_read"] = (it["eager_read"] + 1) % len(sets)
        with eager():
            read(presence.get_many(user_sets[i], now=now))

    def page() -> None:  # a view reads its users' presence, its template draws their dots
        i = it["page"] = (it["page"] + 1) % len(sets)
        users = user_sets[i]
        found = presence.get_many(users, now=now)
        dots_page.render(TemplateContext({"rows": zip(users, found.values(), strict=True)}))

    def plain() -> None:
        i = it["plain"] = (it["plain"] + 1) % len(sets)
        plain_page.render(TemplateContext({"users": user_sets[i]}))

    def floor() -> None:
        i = it["floor"] = (it["floor"] + 1) % len(sets)
        client.evalsha(floor_sha, 201, online_key, *key_sets[i], *sets[i])

    def pipelined() -> None:
        i = it["pipelined"] = (it["pipelined"] + 1) % len(sets)
        pipe = client.pipeline(transaction=False)
        pipe.zmscore(online_key, sets[i])
        pipe.mget(key_sets[i])
        pipe.execute()

    def set_statuses(message: str, emoji: str, device: str) -> None:
        for i in range(0, len(custom), 500):
            store.gather(
                *(
                    store.planned.set_status(
                        uid, message=message, emoji=emoji, device=device, now=T0
                    )
                    for uid in custom[i : i + 500]
                )
            )

    set_statuses("In a meeting until 3 pm", "📅", "Firefox on Linux")
    ours()
    if not all(p.state == "online" for p in store.get_many(sets[0], now=now).values()):
        raise RuntimeError("the population is not online at the benchmark's clock")
    if not all(p.message and p.device for p in store.get_many(status_sets[0], now=now).values()):
        raise RuntimeError("the status users have no status")
    if presence.get_many(user_sets[0], now=now) != store.get_many(sets[0], now=now):
        raise RuntimeError("the front door does not read what the store does")
    with eager():
        before = presence.get_many(status_user_sets[0], now=now)
    if before != presence.get_many(status_user_sets[0], now=now):
        raise RuntimeError("the eager derivation does not read what the store does")
    found = presence.get_many(user_sets[0], now=now).values()
    drawn = dots_page.render(TemplateContext({"rows": zip(user_sets[0], found, strict=True)}))
    if drawn.count("presence-dot presence-online") != 200:
        raise RuntimeError("the page does not draw 200 online dots")
    if not all(client.evalsha(floor_sha, 201, online_key, *key_sets[0], *sets[0])[1]):
        raise RuntimeError("the floor's record keys are not the store's")
    samples = ctx.size(10_000, 1000)
    ctx.log(f"get_many(200) vs ZMSCORE(200), and of users with a status: {samples} calls each")
    try:
        lat = latencies(
            {
                "ours": ours,
                "raw": raw,
                "status": status,
                "floor": floor,
                "pipelined": pipelined,
                "public": public,
                "page": page,
                "plain": plain,
                "public_read": public_read,
                "status_read": status_read,
                "eager": eager_public,
                "eager_read": eager_read,
            },
            samples,
        )
    finally:
        set_statuses("", "", "")  # the population is plain again for the other benchmarks
    o, r, st = lat["ours"], lat["raw"], lat["status"]
    fl, pl = lat["floor"], lat["pipelined"]
    pub, pg, pp = lat["public"], lat["page"], lat["plain"]
    pr, sr, eg, er = lat["public_read"], lat["status_read"], lat["eager"], lat["eager_read"]

    def against_raw(metric: str, ours: dict, **details: Any) -> Row:
        """A get_many figure and the issue's targets for it, against raw ZMSCORE."""
        return Row(
            bench="2 get_many",
            metric=metric,
            ours=ours["p99_ms"],
            unit="ms",
            baseline=r["p99_ms"],
            baseline_label="ZMSCORE",
            checks=[
                Check("p99 <= 1 ms", ours["p99_ms"], "<=", 1.0),
                Check("<= 2x raw", ours["p99_ms"] / r["p99_ms"], "<=", 2.0),
            ],
            details={"ours": ours, "raw": r, "ratio_p50": ours["p50_ms"] / r["p50_ms"], **details},
        )

    return [
        against_raw(f"get_many(200) p99, {n:,} users", o, population=n),
        against_raw(
            f"presence.get_many(200 user objects) p99, {n:,} users: the front door",
            pub,
            over_store_p99=pub["p99_ms"] / o["p99_ms"],
        ),
        against_raw(
            f"presence.get_many(200 user objects) p99, {n:,} users, each presence's state,"
            " emoji and message read (a dot's fields): the front door, derivation included",
            pr,
            over_store_p99=pr["p99_ms"] / o["p99_ms"],
        ),
        Row(
            bench="2 get_many",
            metric="the derivation cut: presence.get_many(200) p99, presences derived when read"
            " (this store), against layout 2's eager derivation, nothing read",
            ours=pub["p99_ms"],
            unit="ms",
            baseline=eg["p99_ms"],
            baseline_label="eager derivation",
            details={"lazy": pub, "eager": eg, "ratio_p50": pub["p50_ms"] / eg["p50_ms"]},
        ),
        Row(
            bench="2 get_many",
            metric="the derivation cut: the same, each presence's state, emoji and message read",
            ours=pr["p99_ms"],
            unit="ms",
            baseline=er["p99_ms"],
            baseline_label="eager derivation",
            details={"lazy": pr, "eager": er, "ratio_p50": pr["p50_ms"] / er["p50_ms"]},
        ),
        Row(
            bench="2 get_many",
            metric="a page of 200 dots (presence.get_many + 200 {% presence_dot %}) p99",
            ours=pg["p99_ms"],
            unit="ms",
            baseline=pp["p99_ms"],
            baseline_label="the page without dots",
            details={"page": pg, "plain": pp, "added_p50_ms": pg["p50_ms"] - pp["p50_ms"]},
        ),
        Row(
            bench="2 get_many",
            metric="get_many(200) p50, every user with a status message, emoji and device",
            ours=st["p50_ms"],
            unit="ms",
            baseline=o["p50_ms"],
            baseline_label="200 plain users",
            checks=[Check("<= 1.2x plain", st["p50_ms"] / o["p50_ms"], "<=", 1.2)],
            details={"ours": st, "plain": o, "ratio_p99": st["p99_ms"] / o["p99_ms"]},
        ),
        Row(
            bench="2 get_many",
            metric="presence.get_many(200) p50, every user with a status message, emoji and"
            " device, each presence's state, emoji and message read",
            ours=sr["p50_ms"],
            unit="ms",
            baseline=pr["p50_ms"],
            baseline_label="200 plain users, read alike",
            checks=[Check("<= 1.2x plain", sr["p50_ms"] / pr["p50_ms"], "<=", 1.2)],
            details={"ours": sr, "plain": pr, "ratio_p99": sr["p99_ms"] / pr["p99_ms"]},
        ),
        Row(
            bench="2 get_many",
            metric="the layout's floor: ZMSCORE + MGET of the same 200 in one script,"
            " no derivation",
            ours=fl["p99_ms"],
            unit="ms",
            baseline=r["p99_ms"],
            baseline_label="ZMSCORE",
            details={
                "floor": fl,
                "raw": r,
                "ratio_p50": fl["p50_ms"] / r["p50_ms"],
                "ours_over_floor_p99": o["p99_ms"] / fl["p99_ms"],
            },
        ),
        Row(
            bench="2 get_many",
            metric="ZMSCORE + MGET pipelined, no script",
            ours=pl["p99_ms"],
            unit="ms",
            baseline=r["p99_ms"],
            baseline_label="ZMSCORE",
            details={
                "pipelined": pl,
                "raw": r,
                "ratio_p50": pl["p50_ms"] / r["p50_ms"],
                "ours_over_pipelined_p99": o["p99_ms"] / pl["p99_ms"],
            },
        ),
    ]


@benchmark("listings", "3. online(limit=100), online_count(), room_members() at 10 k and 1 M users")
def run_listings(ctx: Context) -> list[Row]:
    sizes = [10_000, ctx.size(1_000_000, 100_000)]
    samples = ctx.size(5000, 800)
    now = T0 + 1
    fns: dict[str, Callable[[], Any]] = {}
    for n in sizes:
        pop = population3(ctx, n, "l10k" if n == 10_000 else "l1m")  # the default layout
        store, client = pop.store, pop.client
        online_key, room_key = raw_keys(pop)
        if client.zcard(room_key) < ROOM_SIZE:
            members = random.Random(3).sample(range(n), ROOM_SIZE)
            for i in members:
                store.join(ROOM, pop.cids[i], pop.uids[i], now=T0)
        if (
            len(store.room_members(ROOM, now=now)) != ROOM_SIZE
            or len(store.online(limit=100, now=now)) != 100
        ):
            raise RuntimeError("unexpected listing sizes")
        fns.update(
            {
                f"online {n}": lambda s=store: s.online(limit=100, now=now),
                f"online raw {n}": lambda c=client, k=online_key, f=now - span(pop): (  # noqa: B008
                    c.zrevrangebyscore(k, "+inf", f, start=0, num=100, withscores=True)
                ),
                f"online_count {n}": lambda s=store: s.online_count(now=now),
                f"online_count raw {n}": lambda c=client, k=online_key, f=now - span(pop): c.zcount(  # noqa: B008
                    k, f, "+inf"
                ),
                f"room_members {n}": lambda s=store: s.room_members(ROOM, now=now),
                f"room_members raw {n}": lambda c=client, k=room_key: c.zrange(
                    k, 0, -1, withscores=True
                ),
            }
        )
    # Both sizes side by side, so that the growth compares like with like.
    ctx.log(f"listings at {sizes[0]:,} and {sizes[1]:,} users: {samples} calls each")
    lat = latencies(fns, samples)
    per_size = {
        n: {name.rsplit(" ", 1)[0]: v for name, v in lat.items() if name.endswith(f" {n}")}
        for n in sizes
    }

    small, big = sizes
    bound = math.log(big) / math.log(small)  # O(log N): how much a log N step may grow
    rows: list[Row] = []
    labels = {
        "online": ("online(limit=100)", "ZREVRANGEBYSCORE"),
        "online_count": ("online_count()", "ZCOUNT"),
        "room_members": (f"room_members() ({ROOM_SIZE} members)", "ZRANGE"),
    }
    for op, (metric, raw_label) in labels.items():
        for n in sizes:
            o, r = per_size[n][op], per_size[n][f"{op} raw"]
            checks = [Check("p99 <= 1 ms", o["p99_ms"], "<=", 1.0)]
            details = {"population": n, "ours": o, "raw": r}
            if n == big:
                growth = o["p50_ms"] / per_size[small][op]["p50_ms"]
                checks.append(
                    Check(
                        f"p50 growth {small // 1000}k->{big // 1000}k <= {bound:.2f}x (log N)",
                        growth,
                        "<=",
                        bound,
                    )
                )
                details["growth_p50"] = growth
                details["growth_p99"] = o["p99_ms"] / per_size[small][op]["p99_ms"]
                details["raw_growth_p50"] = r["p50_ms"] / per_size[small][f"{op} raw"]["p50_ms"]
            rows.append(
                Row(
                    bench="3 listings",
                    metric=f"{metric} p99, {n:,} users",
                    ours=o["p99_ms"],
                    unit="ms",
                    baseline=r["p99_ms"],
                    baseline_label=raw_label,
                    checks=checks,
                    details=details,
                )
            )
    return rows
