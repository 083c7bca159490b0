"""1. Heartbeat ingestion through the coalescer's path, ``Store.heartbeat_many(pairs)``, against
raw Redis doing the least it could: one ``ZADD`` of the same batch of lease members.

Both sides renew leases of the same million-member population (ours: the store's leases of 1 M
connected users; raw: a bare sorted set of the same "user|conn" members), batch after batch, with
a clock that moves as it would if the whole population heartbeat every 30 s (one batch every
30 s x batch / N): each renewal moves its member 30 s further, as in production. The raw side
formats its score once per batch (as the script does) and sends prepared members: the least a
client could do.

For batch 1,000, two more sides in the same rounds measure the layout's floor: one EVALSHA of a
script that does only the two writes a batch must do in layout 2 (ZADD XX CH of the leases, ZADD
XX GT of the users' seen scores), with the user ids split by the client; once on the store's own
two sets (what any heartbeat script of this layout costs, logic aside: a missed target is then
shown against the layout's own floor, measured, not argued), and once on compact copies of them,
built as the raw side's set is: the difference is where the sets' nodes lie in memory (the
store's, written user by user among their records, are scattered; a bulk-built copy is not).
"""

from __future__ import annotations

from itertools import chain, repeat

from presence_app.store.keys import KeySpace

from .common import Check, Context, Row, benchmark, median, rates
from .dataset import T0, population

RAW_KEY = "bench:raw:leases"
# Compact copies of the store's lease set and seen index (one hash tag: one slot, as the store's).
COPY_LEASES, COPY_SEEN = "{bench:floor}:leases", "{bench:floor}:seen"
# The two ZADDs a heartbeat batch makes in layout 2 and nothing else: no EXISTS, no member split,
# no branch. ARGV: the lease expiry, now, the batch size, the members, then their user ids.
FLOOR_LUA = """
local exp, now, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
local leases, users = {}, {}
for i = 1, n do
  leases[2 * i - 1] = exp; leases[2 * i] = ARGV[3 + i]
  users[2 * i - 1] = now; users[2 * i] = ARGV[3 + n + i]
end
redis.call('ZADD', KEYS[1], 'XX', 'CH', unpack(leases))
return redis.call('ZADD', KEYS[2], 'XX', 'GT', unpack(users))
"""


def commandstats_probe(client, commands: dict[str, str]):
    """A ``rates`` probe: Redis' own microseconds per call of the command each side sends
    (INFO commandstats, reset before each run), measured on the very calls that were timed."""

    def probe(name: str, done: bool):
        if not done:
            client.config_resetstat()
            return None
        stats = client.info("commandstats").get(f"cmdstat_{commands[name]}", {})
        return {"server_usec_per_call": float(stats.get("usec_per_call", 0.0))}

    return probe


def drop_users(store, uids: list[str]) -> None:
    """Removes users the benchmark added (the store would keep them until a sweep)."""
    tag = store.keys.tag(0)
    client = store.client
    for index in (KeySpace.seen(tag), KeySpace.until(tag), KeySpace.active(tag)):
        client.zrem(index, *uids)
    client.delete(*(KeySpace.user(tag, uid) for uid in uids))


def floor_side(client, sha, keys, clock, step, member_batches, uid_batches):  # type: ignore[no-untyped-def]
    """A ``rates`` side that runs the floor script on ``keys``, batch after batch, moving the
    shared clock as the other sides do. On the store's own sets it renews what ours renews, with
    the same clock: it changes nothing a heartbeat would not."""
    state = [0]

    def side() -> int:
        i = state[0] = (state[0] + 1) % len(member_batches)
        clock[0] += step
        batch = member_batches[i]
        client.evalsha(
            sha, 2, *keys, repr(clock[0] + 90), repr(clock[0]), len(batch), *batch, *uid_batches[i]
        )
        return len(batch)

    return side


@benchmark("heartbeat", "1. heartbeat ingestion (heartbeat_many vs raw ZADD), store layout 2")
def run(ctx: Context) -> list[Row]:
    n = ctx.size(1_000_000, 100_000)
    pop = population(ctx, n, "b1m")
    store, client = pop.store, pop.client
    members = pop.lease_members()
    pairs = pop.pairs
    ctx.log(f"raw baseline: a bare sorted set of the same {n:,} lease members")
    client.delete(RAW_KEY)
    for i in range(0, n, 10_000):
        chunk = members[i : i + 10_000]
        client.zadd(RAW_KEY, dict(zip(chunk, repeat(T0 + 90))))
    ctx.on_close(lambda: client.unlink(RAW_KEY))
    # The copies are built as the raw set is, 10 k members at a time in the fill's order (not by
    # ZUNIONSTORE, whose hash-order insertion scatters the skiplist's nodes in memory).
    tag = store.keys.tag(0)
    own_keys = (KeySpace.leases(tag), KeySpace.seen(tag))
    client.delete(COPY_LEASES, COPY_SEEN)
    for copy, key, names in (
        (COPY_LEASES, own_keys[0], members),
        (COPY_SEEN, own_keys[1], pop.uids),
    ):
        for i in range(0, n, 10_000):
            chunk = names[i : i + 10_000]
            scores = zip(chunk, client.zmscore(key, chunk), strict=True)
            client.zadd(copy, {m: s for m, s in scores if s is not None})
    ctx.on_close(lambda: client.unlink(COPY_LEASES, COPY_SEEN))
    floor_sha = client.script_load(FLOOR_LUA)

    rows: list[Row] = []
    # (batch, with HTTP-only users listed): a site also has users online by HTTP requests alone;
    # their presence ends sooner than SPAN after their last request, so K_UNTIL holds them, and
    # each heartbeat batch then also settles its users' ends there (one more ZREM).
    sizes = [(1000, False), (1000, True)]
    if not ctx.quick:
        sizes[1:1] = [(100, False), (10_000, False)]
    http_users = [f"http-{i}" for i in range(1000)]
    rounds, seconds = (1, 0.6) if ctx.quick else (5, 1.5)
    clock = [T0 + 1.0]
    interval = 30.0  # HEARTBEAT_INTERVAL: every member renewed once per 30 s of the clock

    for batch, with_http in sizes:
        if with_http:
            store.touch_many([(uid, False) for uid in http_users], now=clock[0])
        nb = n // batch
        pair_batches = [pairs[i * batch : (i + 1) * batch] for i in range(nb)]
        member_batches = [members[i * batch : (i + 1) * batch] for i in range(nb)]
        uid_batches = [pop.uids[i * batch : (i + 1) * batch] for i in range(nb)]
        state = {"ours": 0, "raw": 0}
        step = interval * batch / n

        def ours(batch=batch, pair_batches=pair_batches, nb=nb, state=state, step=step) -> int:
            i = state["ours"] = (state["ours"] + 1) % nb
            clock[0] += step
            missing = store.heartbeat_many(pair_batches[i], now=clock[0])
            if missing:
                raise RuntimeError(f"{len(missing)} leases missing during the heartbeat benchmark")
            return batch

        def raw(batch=batch, member_batches=member_batches, nb=nb, state=state, step=step) -> int:
            i = state["raw"] = (state["raw"] + 1) % nb
            clock[0] += step
            exp = repr(clock[0] + 90)
            client.execute_command(
                "ZADD", RAW_KEY, *chain.from_iterable(zip(repeat(exp), member_batches[i]))
            )
            return batch

        sides = {"ours": ours, "raw": raw}
        with_floor = batch == 1000 and not with_http
        if with_floor:
            for side, keys in (("floor", own_keys), ("copy", (COPY_LEASES, COPY_SEEN))):
                sides[side] = floor_side(
                    client, floor_sha, keys, clock, step, member_batches, uid_batches
                )
        ctx.log(f"heartbeat batch {batch}: {rounds} rounds x {seconds}s per side")
        probe = commandstats_probe(
            client, {"ours": "evalsha", "raw": "zadd", "floor": "evalsha", "copy": "evalsha"}
        )
        result = rates(sides, rounds, seconds, probe=probe)
        o, r = result["ours"]["median"], result["raw"]["median"]

        def per_call(side: str, key: str, result=result) -> float:
            return median(p[key] for p in result[side]["probes"])

        if with_http:
            drop_users(store, http_users)
        checks = []
        if batch == 1000 and not with_http:
            checks = [
                Check(">= 0.5x raw", o / r, ">=", 0.5),
                Check(">= 250k hb/s", o, ">=", 250_000),
            ]
        rows.append(
            Row(
                bench="1 heartbeat",
                metric=f"heartbeat_many, batch {batch:,}"
                + (f", {len(http_users):,} HTTP-only users listed" if with_http else ""),
                ours=o,
                unit="/s",
                baseline=r,
                baseline_label="ZADD",
                checks=checks,
                details={
                    "population": n,
                    "batch": batch,
                    "http_only_users": len(http_users) if with_http else 0,
                    "clock_step_s": step,
                    "ours_rounds": result["ours"]["rounds"],
                    "raw_rounds": result["raw"]["rounds"],
                    # Medians over the rounds, from the timed calls themselves: wall time per
                    # call, and Redis' own share of it (the rest: client, network, waiting).
                    "wall_usec_per_call_ours": per_call("ours", "wall_usec_per_call"),
                    "wall_usec_per_call_raw": per_call("raw", "wall_usec_per_call"),
                    "server_usec_per_call_ours": per_call("ours", "server_usec_per_call"),
                    "server_usec_per_call_raw": per_call("raw", "server_usec_per_call"),
                },
            )
        )
        if with_floor:
            rows[-1].details["floor_over_raw"] = result["floor"]["median"] / r
            for side, where in (
                ("floor", "the store's own sets"),
                ("copy", "compact copies of them"),
            ):
                f = result[side]["median"]
                rows.append(
                    Row(
                        bench="1 heartbeat",
                        metric="the layout's floor: the two ZADDs of a batch of 1,000 in one"
                        f" script, no logic, on {where}",
                        ours=f,
                        unit="/s",
                        baseline=r,
                        baseline_label="ZADD",
                        details={
                            "population": n,
                            "batch": batch,
                            "floor_over_raw": f / r,
                            "ours_over_floor": o / f,
                            "floor_rounds": result[side]["rounds"],
                            "wall_usec_per_call_floor": per_call(side, "wall_usec_per_call"),
                            "server_usec_per_call_floor": per_call(side, "server_usec_per_call"),
                        },
                    )
                )
    return rows
