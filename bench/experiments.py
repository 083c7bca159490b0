"""``python -m bench.experiments``: the proposed store changes (bench/variants/) measured side by
side with the store as it is, on the same Redis and the same populations as the benchmarks.

Each variant script is a copy of the store's script with the change applied, loaded with SCRIPT
LOAD and called with EVALSHA exactly as the store calls its own (same keys, same arguments);
each experiment first checks that the variant returns what the store returns.

    python -m bench.experiments [--quick] [--only python|heartbeat|get_many|sweep] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from itertools import chain, repeat
from pathlib import Path
from typing import Any

from presence_app.store.types import InvalidInput, Presence, Transition

from .common import ROOT, Context, Row, latencies, machine, median, rates, table, write_json
from .dataset import T0, bulk_connect, conn_ids, population
from .store_heartbeat import commandstats_probe
from .variants import full_source
from .variants.fastpaths import heartbeat_members, presences
from .variants.fastpaths import transitions as fast_transitions


def load_scripts(client) -> dict[str, dict[str, str]]:
    """{name: {"store": sha, "variant": sha}} for the variant scripts."""
    out = {}
    for name in ("heartbeat", "get_many", "sweep"):
        out[name] = {
            "store": client.script_load(full_source(name, variant=False)),
            "variant": client.script_load(full_source(name, variant=True)),
        }
    return out


# -- 1. heartbeat --------------------------------------------------------------------------------
def heartbeat(ctx: Context) -> list[Row]:
    n = ctx.size(1_000_000, 100_000)
    batch = 1000
    pop = population(ctx, n, "b1m")
    store, client = pop.store, pop.client
    shas = load_scripts(client)["heartbeat"]
    # Upper bound of renewing the user index less often (a semantic change, not a drop-in): the
    # variant with the user-index ZADD left out altogether.
    leases_only = full_source("heartbeat", variant=True).replace(
        "    redis.call('ZADD', K_ONLINE, 'XX', 'GT', unpack(users))\n", ""
    )
    if leases_only == full_source("heartbeat", variant=True):
        raise RuntimeError("could not derive the leases-only heartbeat")
    shas["leases only"] = client.script_load(leases_only)
    members = pop.lease_members()
    raw_key = "bench:raw:leases"
    if client.zcard(raw_key) != n:
        client.delete(raw_key)
        for i in range(0, n, 10_000):
            client.zadd(raw_key, dict(zip(members[i : i + 10_000], repeat(T0 + 90))))
    ctx.on_close(lambda: client.unlink(raw_key))
    pairs = pop.pairs
    nb = n // batch
    pair_batches = [pairs[i * batch : (i + 1) * batch] for i in range(nb)]
    member_batches = [members[i * batch : (i + 1) * batch] for i in range(nb)]
    keys = store.plans.call("heartbeat", store.keys.tag(0), 0).keys
    clock = [T0 + 1000.0]  # after anything the benchmarks did
    step = 30.0 * batch / n
    pos = [0]

    def tick() -> tuple[int, float]:
        pos[0] = (pos[0] + 1) % nb
        clock[0] += step
        return pos[0], clock[0]

    def script(sha: str, fast: bool):
        def run() -> int:
            i, now = tick()
            ms = (
                heartbeat_members(pair_batches[i])
                if fast
                else store.plans.heartbeat_many(pair_batches[i], now).calls[0].args[7:]
            )
            head = store.plans.call("heartbeat", store.keys.tag(0), now).args
            if client.evalsha(sha, len(keys), *keys, *head, *ms):
                raise RuntimeError("missing leases")
            return batch

        return run

    def api() -> int:
        i, now = tick()
        if store.heartbeat_many(pair_batches[i], now=now):
            raise RuntimeError("missing leases")
        return batch

    def raw() -> int:
        i, now = tick()
        client.execute_command(
            "ZADD", raw_key, *chain.from_iterable(zip(repeat(repr(now + 90)), member_batches[i]))
        )
        return batch

    # The variant renews what the store renews.
    i, now = tick()
    probe = pair_batches[i][:3] + [("nosuchconn01", "nosuchuser")]
    head = store.plans.call("heartbeat", store.keys.tag(0), now).args
    got = {
        which: client.evalsha(sha, len(keys), *keys, *head, *heartbeat_members(probe))
        for which, sha in shas.items()
        if which != "leases only"
    }
    if got["store"] != got["variant"]:
        raise RuntimeError(f"variant heartbeat differs: {got}")

    fns = {
        "store: Store.heartbeat_many": api,
        "store script, fast members": script(shas["store"], True),
        "variant script, store members": script(shas["variant"], False),
        "variant script, fast members": script(shas["variant"], True),
        "bound: no user-index renewal, fast members": script(shas["leases only"], True),
        "raw ZADD": raw,
    }
    rounds, seconds = (2, 0.5) if ctx.quick else (5, 1.0)
    ctx.log(f"heartbeat variants, batch {batch}: {rounds} rounds x {seconds}s each")
    commands = {name: ("zadd" if name == "raw ZADD" else "evalsha") for name in fns}
    result = rates(fns, rounds, seconds, probe=commandstats_probe(client, commands))
    raw_rate = result["raw ZADD"]["median"]
    base = result["store: Store.heartbeat_many"]["median"]
    rows = []
    for name, r in result.items():
        if name == "raw ZADD":
            continue
        rows.append(
            Row(
                bench="x1 heartbeat",
                metric=f"{name} (best round {r['best']:,.0f}/s)",
                ours=r["median"],
                unit="/s",
                baseline=raw_rate,
                baseline_label="ZADD",
                details={
                    "server_usec_per_call": median(p["server_usec_per_call"] for p in r["probes"]),
                    "wall_usec_per_call": median(p["wall_usec_per_call"] for p in r["probes"]),
                    "raw_server_usec_per_call": median(
                        p["server_usec_per_call"] for p in result["raw ZADD"]["probes"]
                    ),
                    "raw_wall_usec_per_call": median(
                        p["wall_usec_per_call"] for p in result["raw ZADD"]["probes"]
                    ),
                    "rounds": r["rounds"],
                    "vs_store": r["median"] / base,
                    "population": n,
                    "batch": batch,
                },
            )
        )
    return rows


# -- 2. get_many --------------------------------------------------------------------------------
def get_many(ctx: Context) -> list[Row]:
    n = ctx.size(1_000_000, 100_000)
    pop = population(ctx, n, "b1m")
    store, client = pop.store, pop.client
    shas = load_scripts(client)["get_many"]
    tag = store.keys.tag(0)
    now = T0 + 1
    rng = random.Random(7)
    sets = [rng.sample(pop.uids, 200) for _ in range(64)]
    # A few users in every state, so the equality check covers each branch of the script.
    special = pop.uids[-6:]
    store.set_status(special[0], "dnd", message="busy", emoji=":x:", now=T0)
    store.set_status(special[1], "invisible", now=T0)
    store.set_status(special[2], "auto", message="gone soon", expires_in=0.5, now=T0)
    store.touch(special[3], activity=True, now=T0 - 1000)
    check_ids = special + ["no-such-user"] + sets[0][:50]
    pos = {"k": 0}

    def call(sha: str, ids: list[str], viewer: str = "", reveal: str = "0") -> list[Any]:
        c = store.plans.call("get_many", tag, now, viewer, reveal, *ids)
        return client.evalsha(sha, len(c.keys), *c.keys, *c.args)

    for viewer, reveal in (("", "0"), (special[1], "0"), ("", "1")):
        a, b = (
            call(shas["store"], check_ids, viewer, reveal),
            call(shas["variant"], check_ids, viewer, reveal),
        )
        if a != b:
            raise RuntimeError("variant get_many differs from the store's")
        if presences(check_ids, a) != store.get_many(
            check_ids, viewer=viewer or None, reveal_all=reveal == "1", now=now
        ):
            raise RuntimeError("fast finish differs from the store's")

    def nxt() -> list[str]:
        pos["k"] = (pos["k"] + 1) % len(sets)
        return sets[pos["k"]]

    def api() -> None:
        store.get_many(nxt(), now=now)

    def variant(fast: bool):
        plan_of = store.plans.get_many

        def run() -> None:
            ids = nxt()
            plan = plan_of(ids, None, False, now)
            c = plan.calls[0]
            reply = client.evalsha(shas["variant"], len(c.keys), *c.keys, *c.args)
            if fast:
                presences(ids, reply)
            else:
                plan.finish([reply])

        return run

    def raw() -> None:
        client.zmscore(f"{tag}:online", nxt())

    # Bound of another layout (not a drop-in): each user's presence fields packed in one string
    # key, read with one MGET beside the ZMSCORE, the state derived in Python.
    sep = "\x1f"
    pipe = client.pipeline(transaction=False)
    for ids in sets:
        for uid in ids:
            f = client.hmget(
                f"{tag}:u:{uid}", "st", "la", "ls", "msg", "emoji", "dev", "mx", "meta"
            )
            pipe.set(f"{tag}:p:{uid}", sep.join((v or b"").decode() for v in f))
    pipe.execute()
    ctx.on_close(lambda: client.delete(*[f"{tag}:p:{uid}" for ids in sets for uid in ids]))
    ttl, idle_after = store.config.lease_ttl, store.config.idle_after

    def packed() -> None:
        ids = nxt()
        p = client.pipeline(transaction=False)
        p.zmscore(f"{tag}:online", ids)
        p.mget([f"{tag}:p:{uid}" for uid in ids])
        untils, blobs = p.execute()
        out = {}
        for uid, until_, blob in zip(ids, untils, blobs, strict=True):
            st, la, ls, msg, emoji, dev, mx, meta = blob.decode().split(sep)
            live = until_ is not None and until_ >= now and st != "invisible"
            la_f = float(la) if la else None
            state = (
                "offline"
                if not live
                else "dnd"
                if st == "dnd"
                else ("idle" if la_f is not None and now - la_f >= idle_after else "online")
            )
            seen = (
                now
                if live
                else (max(float(ls or 0), until_ - ttl) if until_ else (float(ls) if ls else None))
            )
            fresh = not mx or float(mx) >= now
            out[uid] = Presence(
                uid,
                state,
                seen,
                la_f,
                msg if fresh else "",
                emoji if fresh else "",
                dev,
                json.loads(meta) if meta else {},
            )
        return out

    def raw_reads() -> None:
        ids = nxt()
        pipe = client.pipeline(transaction=False)
        pipe.zmscore(f"{tag}:online", ids)
        for uid in ids:
            pipe.hmget(
                f"{tag}:u:{uid}", "st", "la", "ls", "lv", "msg", "emoji", "dev", "mx", "meta"
            )
        pipe.execute()

    fns = {
        "store: Store.get_many(200)": api,
        "variant script, store finish": variant(False),
        "variant script, fast finish": variant(True),
        "raw pipeline: ZMSCORE + 200 HMGET": raw_reads,
        "bound: ZMSCORE + MGET of packed values": packed,
        "raw ZMSCORE(200)": raw,
    }
    samples = ctx.size(3000, 600)
    ctx.log(f"get_many variants: {samples} calls each")
    lat = latencies(fns, samples)
    base = lat["raw ZMSCORE(200)"]
    rows = []
    for name, r in lat.items():
        if name == "raw ZMSCORE(200)":
            continue
        rows.append(
            Row(
                bench="x2 get_many",
                metric=f"{name} p99 (p50 {r['p50_ms']:.3f} ms)",
                ours=r["p99_ms"],
                unit="ms",
                baseline=base["p99_ms"],
                baseline_label="ZMSCORE",
                details={"ours": r, "raw": base, "ratio_p50": r["p50_ms"] / base["p50_ms"]},
            )
        )
    # Where the time goes, once each: server time (commandstats) and the client's share.
    client.config_resetstat()
    for _ in range(200):
        api()
    srv = client.info("commandstats").get("cmdstat_evalsha", {}).get("usec_per_call")
    client.config_resetstat()
    for _ in range(200):
        variant(True)()
    srv_v = client.info("commandstats").get("cmdstat_evalsha", {}).get("usec_per_call")
    rows[0].details["server_usec_store_script"] = srv
    rows[2].details["server_usec_variant_script"] = srv_v
    return rows


# -- 4. sweep -----------------------------------------------------------------------------------
def sweep(ctx: Context) -> list[Row]:
    n = ctx.size(1_000_000, 100_000)
    expired = 10_000
    repeats = ctx.size(5, 2)
    pop = population(ctx, n, "b1m")
    store, client = pop.store, pop.client
    shas = load_scripts(client)["sweep"]
    tag = store.keys.tag(0)
    stale = [(cid, f"x{i}") for i, cid in enumerate(conn_ids(expired, seed=99))]
    roomy = [(cid, f"y{i}") for i, cid in enumerate(conn_ids(2000, seed=98))]
    now = T0 + 1

    def run_script(sha: str, fast: bool = False) -> list[Transition]:
        out: list[Transition] = []
        parse = fast_transitions if fast else Transition.parse_many
        more = True
        while more:
            c = store.plans.call("sweep", tag, now, store.config.sweep_batch)
            flag, flat = client.evalsha(sha, len(c.keys), *c.keys, *c.args)
            more = bool(int(flag))
            out.extend(parse(flat))
        return out

    def prepare(with_rooms: bool) -> None:
        bulk_connect(store, stale, T0 - 100)
        if with_rooms:  # a richer case for the equality check: rooms, two sockets, leaves
            bulk_connect(store, roomy, T0 - 100)
            for i, (cid, uid) in enumerate(roomy):
                store.join(f"room{i % 7}", cid, uid, now=T0 - 100)
                if i % 3 == 0:
                    store.connect(cid + "b", uid, now=T0 - 99)
                    store.join(f"room{i % 5}", cid + "b", uid, now=T0 - 99)

    def snapshot(users: list[str]) -> dict[str, Any]:
        pipe = client.pipeline(transaction=False)
        for uid in users:
            pipe.hgetall(f"{tag}:u:{uid}")
            pipe.ttl(f"{tag}:u:{uid}")
            pipe.zscore(f"{tag}:online", uid)
            pipe.zscore(f"{tag}:active", uid)
        got = pipe.execute()
        got = [
            (g > 0) if isinstance(g, int) and i % 4 == 1 else g for i, g in enumerate(got)
        ]  # TTL: set or not
        return {
            "users": got,
            "leases": client.zcard(f"{tag}:leases"),
            "online": client.zcard(f"{tag}:online"),
            "active": client.zcard(f"{tag}:active"),
            "rooms": sorted(client.zrange(f"{tag}:rooms", 0, -1, withscores=True)),
        }

    def key(t: Transition) -> tuple:
        return (t.kind, t.user_id, t.room or "", t.state, round(t.at, 6), t.rooms)

    # Equality: the same transitions and the same end state, on a case with rooms and two sockets.
    watched = [u for _, u in stale[:50]] + [u for _, u in roomy[:300]]
    results = {}
    for which in ("store", "variant"):
        prepare(with_rooms=True)
        ours_users = {u for _, u in stale} | {u for _, u in roomy}
        transitions = [
            t for t in run_script(shas[which], fast=which == "variant") if t.user_id in ours_users
        ]
        results[which] = (sorted(map(key, transitions)), snapshot(watched))
    if results["store"] != results["variant"]:
        a, b = results["store"], results["variant"]
        print("transitions equal:", a[0] == b[0], len(a[0]), len(b[0]), file=sys.stderr)
        print(
            "only store:",
            sorted(set(a[0]) - set(b[0]))[:5],
            "only variant:",
            sorted(set(b[0]) - set(a[0]))[:5],
            file=sys.stderr,
        )
        for k in a[1]:
            if a[1][k] != b[1][k]:
                if k == "users":
                    pairs = enumerate(zip(a[1][k], b[1][k], strict=True))
                    diffs = [(i, x, y) for i, (x, y) in pairs if x != y]
                    print("users differ:", diffs[:6], file=sys.stderr)
                else:
                    print(k, a[1][k], b[1][k], file=sys.stderr)
        raise RuntimeError("the variant sweep's transitions or end state differ from the store's")
    client.delete(*[f"{tag}:u:{u}" for _, u in roomy])
    ctx.log(
        f"sweep variant: same {len(results['store'][0]):,} transitions and end state as the store's"
    )

    # The floor of any script that evicts a user from a hash of their own: read it, delete the
    # connection's field, write the last seen, set the expiry (no logic, no transitions).
    floor_sha = client.script_load(
        "for i = 1, #ARGV do local k = KEYS[1] .. ARGV[i]; redis.call('HGETALL', k);"
        " redis.call('HDEL', k, 'c:x'); redis.call('HSET', k, 'ls', '1');"
        " redis.call('EXPIRE', k, 604800) end"
    )
    times: dict[str, list[float]] = {
        "store: Store.sweep": [],
        "variant script": [],
        "variant script, fast parse": [],
        "floor: HGETALL+HDEL+HSET+EXPIRE per user, no logic": [],
    }
    for rep in range(repeats):
        for name in times:
            prepare(with_rooms=False)
            t0 = time.perf_counter()
            if name.startswith("floor"):
                for i in range(0, expired, 1000):
                    client.evalsha(floor_sha, 1, f"{tag}:u:", *[u for _, u in stale[i : i + 1000]])
                times[name].append((time.perf_counter() - t0) * 1000)
                store.sweep(now=now)  # evict them for real before the next round
                continue
            if name.startswith("store"):
                got = store.sweep(now=now)
            else:
                got = run_script(shas["variant"], fast=name.endswith("fast parse"))
            times[name].append((time.perf_counter() - t0) * 1000)
            if len(got) != expired:
                raise RuntimeError(f"{name}: {len(got)} transitions")
        ctx.log(
            f"sweep {rep + 1}/{repeats}: "
            + ", ".join(f"{k} {v[-1]:.1f} ms" for k, v in times.items())
        )
    client.delete(*[f"{tag}:u:{u}" for _, u in stale])
    base = median(times["store: Store.sweep"])
    return [
        Row(
            bench="x4 sweep",
            metric=f"{name}: {expired:,} expired among {n:,}"
            f" (median of {repeats}; best {min(v):.0f} ms)",
            ours=median(v),
            unit="ms",
            baseline=base,
            baseline_label="store",
            details={"runs_ms": v, "best_ms": min(v)},
        )
        for name, v in times.items()
    ]


# -- the Python fast paths alone (CPU only: best of several timings, less sensitive to load) -----
def python(ctx: Context) -> list[Row]:
    import timeit

    n = ctx.size(1_000_000, 100_000)
    pop = population(ctx, n, "b1m")
    store = pop.store
    pairs = pop.pairs[:1000]
    ids = random.Random(11).sample(pop.uids, 200)
    plan = store.plans.get_many(ids, None, False, T0 + 1)
    replies = store._send(plan.calls)
    flat: list[Any] = []
    for i in range(1000):  # what a sweep returns for plain offline users
        flat += [
            b"offline",
            str(i).encode(),
            b"",
            b"offline",
            b"1794999910.000000",
            b'{"rooms":{}}',
        ]
    if presences(ids, replies[0]) != plan.finish(replies):
        raise RuntimeError("fast finish differs")
    if fast_transitions(flat) != Transition.parse_many(flat):
        raise RuntimeError("fast transitions differ")
    members = store.plans.heartbeat_many(pairs, T0).calls[0].args[7:]
    if list(members) != heartbeat_members(pairs):
        raise RuntimeError("fast members differ")
    # Same members or the same error as the store, on awkward input too.
    awkward = [
        [("a\nb", "1"), ("c", "2")],
        [("abc", 5)],
        [("abc", True)],
        [("", "1")],
        [("a" * 129, "1")],
        [("a" * 128, "x" * 255)],
        [("abc", "x" * 256)],
        [("abc", "a b")],
        [("abc", "a\tb")],
        [("ab|c", "1")],
        [("abc", "u|v")],
        [(1, "1")],
        [],
    ]
    for case in awkward:
        outcome = []
        for fn in (
            lambda p: [m for c in store.plans.heartbeat_many(p, T0).calls for m in c.args[7:]],
            heartbeat_members,
        ):
            try:
                outcome.append(("ok", list(fn(case))))
            except InvalidInput as exc:
                outcome.append(("error", type(exc).__name__))
        if outcome[0] != outcome[1]:
            raise RuntimeError(f"fast members differ on {case!r}: {outcome}")

    def best(fn, number: int = 200) -> float:
        return min(timeit.repeat(fn, number=number, repeat=7)) / number * 1e6

    cases = {
        "heartbeat_many members, 1,000 pairs": (
            lambda: store.plans.heartbeat_many(pairs, T0),
            lambda: heartbeat_members(pairs),
        ),
        "get_many finish, 200 users": (
            lambda: plan.finish(replies),
            lambda: presences(ids, replies[0]),
        ),
        "sweep transitions, 1,000 offline": (
            lambda: Transition.parse_many(flat),
            lambda: fast_transitions(flat),
        ),
    }
    rows = []
    for name, (current, fast) in cases.items():
        ctx.log(f"python: {name}")
        c, f = best(current), best(fast)
        rows.append(
            Row(
                bench="x0 python",
                metric=f"{name}: fast path (store {c:,.0f} us)",
                ours=f,
                unit="us",
                baseline=c,
                baseline_label="store",
                details={"store_us": c, "fast_us": f},
            )
        )
    return rows


EXPERIMENTS = {"python": python, "heartbeat": heartbeat, "get_many": get_many, "sweep": sweep}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.experiments", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", action="append", choices=sorted(EXPERIMENTS))
    parser.add_argument(
        "--json", type=Path, default=ROOT / "bench" / "results" / "experiments.json"
    )
    args = parser.parse_args(argv)
    ctx = Context(quick=args.quick)
    rows: list[Row] = []
    started = time.monotonic()
    load_before = os.getloadavg()
    try:
        for name, fn in EXPERIMENTS.items():
            if args.only and name not in args.only:
                continue
            ctx.log(f"== experiment: {name}")
            rows.extend(fn(ctx))
    finally:
        ctx.close()
    print()
    print(table(rows))
    meta = {
        "command": "python -m bench.experiments " + " ".join(argv or sys.argv[1:]),
        "quick": args.quick,
        "machine": machine(),
        "seconds": round(time.monotonic() - started, 1),
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
    }
    write_json(args.json, rows, meta)
    print(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
