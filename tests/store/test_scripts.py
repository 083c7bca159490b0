"""The scripts' composition (scripts.py): each takes of lib.lua only the definitions it uses,
and still defines every name it uses."""

import re

import pytest
import redis

from presence_app.store import scripts

T = 1_800_000_000.0

#: What Redis' Lua gives every script (5.1's base library, as Redis keeps it) and Lua's keywords.
GLOBALS = set(
    "redis cjson cmsgpack bit struct string table math tonumber tostring type pairs ipairs next "
    "unpack select error pcall assert rawget rawset setmetatable getmetatable KEYS ARGV".split()
)
KEYWORDS = set(
    "and break do else elseif end false for function if in local nil not or repeat return then "
    "true until while".split()
)
#: Every way a name is declared in the scripts: a local, a function's parameters, a loop's names.
DECLARED = [
    re.compile(r"\blocal\s+function\s+(\w+)"),
    re.compile(r"\blocal\s+(?!function\b)(\w+(?:\s*,\s*\w+)*)"),
    re.compile(r"\bfunction\s*\w*\s*\(([\w\s,]*)\)"),
    re.compile(r"\bfor\s+(\w+(?:\s*,\s*\w+)*)\s+in\b"),
    re.compile(r"\bfor\s+(\w+)\s*="),
]


def declared(source: str) -> set[str]:
    out = set()
    for pattern in DECLARED:
        for m in pattern.finditer(source):
            out.update(x.strip() for x in m.group(1).split(",") if x.strip())
    return out


@pytest.mark.parametrize("name", scripts.NAMES)
def test_each_script_declares_every_name_it_uses(name):
    source = scripts.load()[name].source
    undeclared = scripts.names_in(source) - declared(source) - GLOBALS - KEYWORDS
    assert not undeclared, f"{name} uses names it does not define: {sorted(undeclared)}"


def test_the_library_is_cut_into_every_one_of_its_lines():
    lib = scripts._read("lib")
    parts = scripts.lib_parts(lib)
    kept = "\n".join(p.text for p in parts).splitlines()
    code = [line for line in lib.splitlines() if line.strip() and not line.startswith("--")]
    assert [line for line in kept if line.strip() and not line.startswith("--")] == code
    # a text naming every definition takes all of them, in order
    names = " ".join(n for p in parts for n in p.defines)
    assert scripts.pick(parts, names) == "\n".join(p.text for p in parts)


def test_a_script_takes_what_it_uses_transitively_and_nothing_else():
    lib = "\n".join(
        [
            "local function a() return 1 end",
            "-- b's comment",
            "local function b()",
            "  return a() + 1  -- c in a comment, 'c' in a string: not uses",
            "end",
            "local X, Y = {}, 'c'",
            "local function c() return X.b end  -- a field named b is not b",
            "local h = nil",
            "local function d() if h then h() end end",
            "h = function() return b() end",
        ]
    )
    parts = scripts.lib_parts(lib)
    assert scripts.pick(parts, "return b()").splitlines() == lib.splitlines()[:5]
    assert "local function a" not in scripts.pick(parts, "return c()")
    # a local given a value later takes that statement, and what it uses, with it
    got = scripts.pick(parts, "d()")
    assert "h = function" in got and "local function b" in got and "local function c" not in got
    assert scripts.pick(parts, "return 0") == ""


@pytest.mark.parametrize(
    "lib",
    ["local function a() end\nredis.call('DEL', 'x')", "x = 1", "local a = 1\nlocal a = 2"],
)
def test_the_library_holds_definitions_only(lib):
    with pytest.raises(ValueError):
        scripts.lib_parts(lib)


def test_get_many_takes_nothing_of_the_library():
    source = scripts.load()["get_many"].source
    assert source == "\n".join(scripts._read(n) for n in ("head", "read", "get_many"))


def test_a_join_already_in_its_room_writes_nothing(store, redis_client):
    store.connect("c1", 7, now=T)
    store.join("r", "c1", 7, now=T + 1)
    before = redis_client.info("commandstats")
    assert store.join("r", "c1", 7, now=T + 2) == []
    after = redis_client.info("commandstats")
    writes = {k for k in after if after[k]["calls"] != before.get(k, {}).get("calls")}
    # the reads: nothing else (the process's lease is its keepalive's: no ZADD)
    assert writes <= {"cmdstat_evalsha", "cmdstat_hget", "cmdstat_zscore", "cmdstat_info"}
    assert store.room_members("r", now=T + 3) == ["7"]


def calls(client) -> dict[str, int]:
    """The commands the server (every primary of a cluster) has run so far, by name."""
    if isinstance(client, redis.RedisCluster):
        stats = client.info("commandstats", target_nodes=redis.RedisCluster.PRIMARIES).values()
    else:
        stats = [client.info("commandstats")]
    total: dict[str, int] = {}
    for one in stats:
        for k, v in one.items():
            total[k.removeprefix("cmdstat_")] = (
                total.get(k.removeprefix("cmdstat_"), 0) + v["calls"]
            )
    return total


def commands(client, write) -> dict[str, int]:
    """The commands ``write()`` ran (but its script calls and INFO), by name."""
    before = calls(client)
    write()
    ran = {k: n - before.get(k, 0) for k, n in calls(client).items()}
    # (and SCRIPT LOAD: a cluster node loads a script on its first call)
    skip = ("evalsha", "eval", "info", "script")
    return {k: n for k, n in ran.items() if n and not k.startswith(skip)}


def test_the_writes_read_what_they_need(store):
    """Issue 43: no write but the heartbeat, connect, disconnect and the sweep renews the
    process's lease (its keepalive does); a user whose record holds connections has no registry
    field, which is not read then (keep_conns keeps connections in one place); set_status reads
    no registry field (its connection holds no room); a record unchanged but for its copy is not
    written again."""
    store.connect("c1", "u1", now=T)
    store.join("r", "c1", "u1", now=T)  # u1: their connection (and room) in their record
    store.connect("c2", "u2", now=T)
    store.set_status("u2", message="hi", now=T)  # u2: a record, their connection in the field
    # the record, its user's score, no field, no lease
    assert commands(store.client, lambda: store.join("r", "c1", "u1", now=T + 1)) == {
        "hget": 1,
        "zscore": 1,
    }
    # the erasure check, the record, the score and the end, the record's save
    for uid in ("u1", "u2"):
        ran = commands(store.client, lambda u=uid: store.set_status(u, message="m", now=T + 2))
        assert ran == {"exists": 1, "hget": 1, "zscore": 2, "hset": 1}, uid
    # u2's touch: their field written (their window), the record as it stands
    ran = commands(store.client, lambda: store.touch("u2", now=T + 3))
    assert ran.get("hset") == 1 and "zadd" in ran, ran
    assert store.get("u2", now=T + 4).message == "m"
