"""The scripts' composition (scripts.py): each takes of lib.lua only the definitions it uses,
and still defines every name it uses."""

import re

import pytest

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
    # the process' lease renewed (ZADD), the reads: nothing else
    assert writes <= {"cmdstat_evalsha", "cmdstat_zadd", "cmdstat_hget", "cmdstat_zscore",
                      "cmdstat_info"}  # fmt: skip
    assert store.room_members("r", now=T + 3) == ["7"]
