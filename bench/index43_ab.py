"""One index against the read it replaced, on one site, in one run (issue 43, fifth session).

``python -m bench.index43_ab --base DIR [--quick] [--rounds N]`` builds benchmark 2's site through
the store of this tree (bench/front_door.py: 1,000,000 users, 60 % socket, 30 % HTTP-only, 10 %
with a status; one index: the HTTP-only users' web scores in ``seen``, negated), then lays the
same users out beside it as the store under ``DIR`` keeps them (a clean export of the commit
before one index, ``git archive <commit> | tar -x -C DIR``): the connected users' scores in a
sorted set of their own under the shard's tag (``seen`` of that layout, passed to its script as
its first key) and the HTTP-only users' in ``web``, positive; this tree's script reads a copy of
``seen`` made the same way (at once: a set written at once sits better in memory than one
written user by user); records, ``hidden``, ``until`` and ``last`` are the same keys for both. First, every page of the site (64 of each kind) must get
the same reply, part for part, from both scripts: the answer is the same. Then, for each kind of
page and the raw ``ZMSCORE`` of the same ids on the site's bare set: Redis' own time a call
(INFO commandstats, alternating blocks, the median of the rounds) and the wall p50 / p99 of the
script call (redis-py's parsed reply; the derivation in Python is the same code on the same
reply for both, and comes on top).
"""

from __future__ import annotations

import argparse
import hashlib
import pathlib
from typing import Any

from .common import Context
from .front_door import site
from .layout4_ab import report, source


def fresh_copies(client: Any, tags: list[str]) -> dict[str, str]:
    """A copy of each shard's one index made at once, as the layout before's ``seen`` is
    (split_layout): {tag: its key}. A sorted set written at once sits better in memory than
    one written user by user over the site's build; without it the read before would be timed
    on the tidier set."""
    out = {}
    for tag in tags:
        copy = f"{tag}:seen_one_index_copy"
        client.delete(copy)
        client.execute_command("ZRANGESTORE", copy, f"{tag}:seen", "-inf", "+inf", "BYSCORE")
        out[tag] = copy
    return out


def split_layout(client: Any, tags: list[str]) -> dict[str, str]:
    """The layout before one index beside this one: {tag: its seen key}; ``tag:web`` made from
    seen's negative scores, made positive."""
    out = {}
    for tag in tags:
        seen, before = f"{tag}:seen", f"{tag}:seen_before_one_index"
        client.delete(before, f"{tag}:web")
        client.execute_command("ZRANGESTORE", before, seen, "(0", "+inf", "BYSCORE")
        start = 0
        while True:
            rows = client.zrange(seen, "-inf", "(0", byscore=True, withscores=True,
                                 offset=start, num=10_000)  # fmt: skip
            if not rows:
                break
            client.zadd(f"{tag}:web", {m: -s for m, s in rows})
            start += len(rows)
        out[tag] = before
    return out


def _scores(part: Any) -> list[Any]:
    return [float(x) if x not in (None, False, b"", "") else None for x in part]


def normal(reply: list[Any]) -> list[Any]:
    """A get_many reply's parts but the clock, each score a number (derive.py's reading of the
    web scores of the "3"s: each x 2^22 as a whole number, as integers or after a '#', or each
    as text)."""
    codes, records, webs, *rest = reply[1:]
    text = webs.decode() if isinstance(webs, bytes) else webs
    if isinstance(webs, list):  # (since the sixth session: integers, each x 2^22)
        web = [x / 4194304 for x in webs]
    elif text.startswith("#"):
        web = [int(x) / 4194304 for x in text[1:].split()]
    else:
        web = [float(x) for x in text.split()]
    seen, ends, hidden, web2, last, *registry = rest
    return [codes, records, web, *(_scores(p) for p in (seen, ends, hidden, web2, last)), *registry]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.index43_ab")
    parser.add_argument("--base", required=True, help="the tree of the store to compare with")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--one-index", action="store_true", help="DIR's store has one index too (no split)"
    )
    args = parser.parse_args()
    ctx = Context(quick=args.quick)
    try:
        s = site(ctx)
        client, store = s.client, s.store
        before_seen = split_layout(client, store.keys.all_tags())
        ours_seen = fresh_copies(client, store.keys.all_tags())
        here = pathlib.Path(__file__).resolve().parent.parent / "presence_app/store/lua"
        sides_src = {
            "one index": source(here),
            "before": source(pathlib.Path(args.base) / "presence_app/store/lua"),
        }
        shas = {}
        for name, text in sides_src.items():
            shas[name] = client.script_load(text)
            assert shas[name] == hashlib.sha1(text.encode()).hexdigest()

        def script(name: str):
            sha = shas[name]

            def read(ids: list[str]) -> list[Any]:
                out = []
                for c in store.plans.get_many(ids, None, False, None).calls:
                    keys = c.keys
                    if name == "before" and not args.one_index:
                        keys = (before_seen[c.args[0]], *keys[1:])
                    else:  # (a base with one index too reads the same copy)
                        keys = (ours_seen[c.args[0]], *keys[1:])
                    out.append(client.evalsha(sha, len(keys), *keys, *c.args))
                return out

            return read

        ours, before = script("one index"), script("before")
        kinds = ("socket", "web", "status", "mixed")
        for kind in kinds:
            for ids in s.sets[kind]:
                a, b = ours(ids), before(ids)
                # the clock (first part) differs by the time between the calls; the scores are
                # compared as numbers (one index sends the web scores of the "3"s scaled)
                for ra, rb in zip(a, b, strict=True):
                    na, nb = normal(ra), normal(rb)
                    if na != nb:
                        at = next(i for i, (x, y) in enumerate(zip(na, nb, strict=False)) if x != y)
                        raise RuntimeError(
                            f"a {kind} page read differently, part {at + 1}: {str(na[at])[:200]}"
                            f" against {str(nb[at])[:200]}"
                        )
        ctx.log(f"both scripts answer the site's {len(kinds) * len(s.sets['socket'])} pages alike")
        report(ctx, client, s.sets, kinds, {"before": before, "one index": ours}, args.rounds)
    finally:
        ctx.redis.stop()


if __name__ == "__main__":
    main()
