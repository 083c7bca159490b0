"""Where a write's Redis time goes (issue 43, seventh session): the script's prelude against
its body, for the writes that missed 89165fe (join, set_status, touch of a connected user).

``python -m bench.write43_parts [--rounds N] [--block N] [--users N]``: one private Redis,
``--users`` users connected (``c<i>``/``u<i>``, as bench.writes_vs), then each write's own call
(its plan's keys and arguments, a user after the other) sent to variants of its script, each
under EVALSHA, in alternating blocks: ``return 0`` alone; ``head.lua`` then ``return 0``;
head + the whole ``lib.lua`` then ``return 0``; head + the library's part the script takes
(scripts.pick) then ``return 0``; the whole script with the whole library (the composition
before this session); the whole script as scripts.py composes it. Reported: Redis' own time a
call (INFO commandstats' EVALSHA time over a block / its calls, the median of the rounds).
A cut script changes nothing; the whole ones run the write (a join that is already in its room
after the first round, as in bench.writes_vs).

``--cut SCRIPT=L1,L2,...`` (join, set_status or touch) measures instead that script's body cut
short before each line given (``do return 0 end`` put there; the lines of ``lua/SCRIPT.lua``)
and whole, on users who each hold a room and a status: a part's cost is the cut after it less
the cut before it.
"""

from __future__ import annotations

import argparse
import itertools
import re
from collections.abc import Callable
from typing import Any

from presence_app.store import Store, StoreConfig, scripts

from .common import RedisFixture, median


def variants(name: str) -> dict[str, str]:
    """The script ``name``'s variants (above), by label."""
    head, lib, read = (scripts._read(n) for n in ("head", "lib", "read"))
    own = [read, scripts._read(name)] if name in scripts.READERS else [scripts._read(name)]
    picked = scripts.pick(scripts.lib_parts(lib), "\n".join(own))
    return {
        "return 0": "return 0",
        "head": f"{head}\nreturn 0",
        "head + lib": f"{head}\n{lib}\nreturn 0",
        "head + picked lib": f"{head}\n{picked}\nreturn 0",
        "whole, whole lib": "\n".join([head, lib, *own]),
        "whole, picked lib": scripts.load()[name].source,
    }


_STMT = re.compile(r"^(local\s+function\s|local\s+([\w\s,]+?)\s*=|\w+\s*=\s*function\b)")


def hoisted_library(names: list[str], tag: str) -> tuple[str, dict[str, str]]:
    """A prototype, not the store's: head.lua + the whole lib.lua as one Redis function library
    whose functions are defined once (at FUNCTION LOAD); the per-call statements (head's
    arguments and clock, the library's state: its caches, OUT, the keys built from TAG) run again
    at each call (``begin``), on library-level locals, so that every call starts from the same
    state as a script call. Returns (the library's source, script name -> function name)."""
    head, lib = scripts._read("head"), scripts._read("lib")
    declared: list[str] = []
    once: list[str] = []
    per_call: list[str] = []
    for text in (head, lib):
        stmt: list[str] = []
        kind = None

        def close(kind: str | None, stmt: list[str]) -> None:
            if kind == "once":
                once.extend(stmt)
            elif kind == "call":
                per_call.extend(stmt)

        for line in text.splitlines():
            m = _STMT.match(line)
            if m or (
                line and not line[0].isspace() and not line.startswith(("--", "end", "}", ")"))
            ):
                close(kind, stmt)
                stmt = [line]
                if m and m.group(2):
                    declared.extend(x.strip() for x in m.group(2).split(","))
                    kind, stmt = "call", [line[len("local ") :]]
                elif m:
                    kind = "once"
                else:
                    kind = "call"
            elif kind is not None:
                stmt.append(line)
        close(kind, stmt)
    # a local given a function later (on_dropped_room) is set once, not emptied at each call
    set_once = {m.group(1) for line in once if (m := re.match(r"^(\w+)\s*=\s*function", line))}
    per_call = [x for x in per_call if not re.match(rf"^({'|'.join(set_once)})\s*=", x)]
    out = [f"#!lua name={tag}", "local KEYS, ARGV", "local " + ", ".join(declared), *once]
    out += ["local function begin()", *per_call, "end"]
    fns = {"": f"{tag}_begin"}
    out += [
        f"redis.register_function('{tag}_begin', function(k, a)",
        "KEYS, ARGV = k, a",
        "begin()",
        "return 0",
        "end)",
    ]
    for name in names:
        body = scripts._read(name)
        if name in scripts.READERS:
            body = scripts._read("read") + "\n" + body
        fns[name] = f"{tag}_{name}"
        out += [
            f"redis.register_function('{fns[name]}', function(k, a)",
            "KEYS, ARGV = k, a",
            "begin()",
            body,
            "end)",
        ]
    return "\n".join(out), fns


def cut_sources(name: str, lines: list[int]) -> dict[str, str]:
    """The script ``name`` cut short before each of ``lines`` of its body, and whole."""
    head, lib, read = (scripts._read(n) for n in ("head", "lib", "read"))
    body = scripts._read(name).splitlines()
    pre = [read] if name in scripts.READERS else []
    picked = scripts.pick(scripts.lib_parts(lib), "\n".join([*pre, *body]))
    out = {}
    for line in lines:
        cut = [*body[: line - 1], "do return 0 end", *body[line - 1 :]]
        out[f"before line {line}"] = "\n".join([head, picked, *pre, *cut])
    out["whole"] = scripts.load()[name].source
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.write43_parts")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--block", type=int, default=500)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--cut", help="SCRIPT=L1,L2,...: that script cut before each line")
    args = parser.parse_args()
    fixture = RedisFixture()
    try:
        client = fixture.client()
        store = Store(client, StoreConfig(prefix="w43", lease_ttl=21600, online_window=21600))
        n = args.users
        for i in range(0, n, 500):
            for j in range(i, min(i + 500, n)):
                store.connect(f"c{j}", f"u{j}")
        pick = itertools.count()
        fresh = itertools.count()

        def p() -> int:
            return next(pick) % n

        plans = store.plans
        for j in range(n):  # every connection in its room: the joins "already there"
            store.join(f"r{j % 50}", f"c{j}", f"u{j}")
        writes: dict[str, tuple[str, Callable[[], Any]]] = {
            "join, a new room": (
                "join",
                lambda: plans.join(f"n{next(fresh)}", f"c{(i := p())}", f"u{i}", None),
            ),
            "join, already there": (
                "join",
                lambda: plans.join(f"r{(i := p()) % 50}", f"c{i}", f"u{i}", None),
            ),
            "set_status": (
                "set_status",
                lambda: plans.set_status(
                    f"u{p()}", None, f"m{next(fresh) % 7}", None, None, None, None, None
                ),
            ),
            "touch, connected": ("touch", lambda: plans.touch(f"u{p()}", True, None)),
        }
        shas: dict[tuple[str, str], str] = {}
        if args.cut:
            script, lines = args.cut.split("=")
            for j in range(n):
                store.set_status(f"u{j}", message="x")
            write = next(w for w, (s, _) in writes.items() if s == script)
            writes = {write: writes[write]}
            cuts = cut_sources(script, [int(x) for x in lines.split(",")])
            for label, text in cuts.items():
                shas[(write, label)] = client.script_load(text)
        else:
            for write, (script, _) in writes.items():
                for label, text in variants(script).items():
                    shas[(write, label)] = client.script_load(text)
        library, fns = hoisted_library(sorted({s for s, _ in writes.values()}), "w43proto")
        client.function_load(library, replace=True)
        for write, (script, _) in writes.items() if not args.cut else ():
            shas[(write, "fcall: begin")] = "fcall:" + fns[""]
            shas[(write, "fcall: whole")] = "fcall:" + fns[script]

        def usec() -> tuple[int, int]:
            stats = client.info("commandstats")
            got = [stats.get(k, {}) for k in ("cmdstat_evalsha", "cmdstat_fcall")]
            return sum(int(s.get("calls", 0)) for s in got), sum(int(s.get("usec", 0)) for s in got)

        own: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):
            for write, (_, plan) in writes.items():
                for key in [k for k in shas if k[0] == write]:
                    calls = [plan().calls[0] for _ in range(args.block)]
                    c0, u0 = usec()
                    for c in calls:
                        sha = shas[key]
                        if sha.startswith("fcall:"):
                            client.fcall(sha[6:], len(c.keys), *c.keys, *c.args)
                        else:
                            client.evalsha(sha, len(c.keys), *c.keys, *c.args)
                    c1, u1 = usec()
                    own.setdefault(key, []).append((u1 - u0) / (c1 - c0))
        print(f"Redis' own time a call, us (median of {args.rounds} rounds of {args.block} calls)")
        labels = [*variants("join"), "fcall: begin", "fcall: whole"]
        if args.cut:
            labels = list(cuts)
        print("| write | " + " | ".join(labels) + " |")
        print("| --- |" + " --- |" * len(labels))
        for write in writes:
            cells = [f"{median(own[(write, label)]):.1f}" for label in labels]
            print(f"| {write} | " + " | ".join(cells) + " |")
    finally:
        fixture.stop()


if __name__ == "__main__":
    main()
