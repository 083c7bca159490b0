"""The layers hold (docs/architecture.md): checked on the import graph (grimp, the graph
library behind import-linter) and the source, so a shortcut shows up as a failing test."""

from __future__ import annotations

import ast
from pathlib import Path

import grimp
import pytest

APP = Path(__file__).resolve().parent.parent / "presence_app"
#: The only modules that reach the Redis connection: the front door, and the jobs that work on
#: the store itself rather than on presence (the sweep's locks and samples, the command's clear
#: and upgrade, the checks' ping, the test plugin's clear).
CONNECTION_USERS = {
    "presence_app.presence",
    "presence_app.checks",
    "presence_app.jobs.sweeper",
    "presence_app.management.commands.presence",
    "presence_app.testing.pytest_plugin",
}
MAX_CLASS_LINES = 200


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("presence_app")


def app_modules(graph: grimp.ImportGraph) -> list[str]:
    return sorted(m for m in graph.modules if m.startswith("presence_app"))


def test_no_import_circle(graph):
    circles = [
        (module, chain)
        for module in app_modules(graph)
        for imported in graph.find_modules_directly_imported_by(module)
        if imported.startswith("presence_app")
        and imported != module
        and (chain := graph.find_shortest_chain(importer=imported, imported=module))
    ]
    assert circles == []


def test_only_the_front_door_reaches_redis(graph):
    assert (
        graph.find_modules_that_directly_import("presence_app.core.connection") <= CONNECTION_USERS
    )


def test_no_store_internals_outside_the_store(graph):
    reaching_in = {
        (user, inner)
        for inner in app_modules(graph)
        if inner.startswith("presence_app.store.")
        for user in graph.find_modules_that_directly_import(inner)
        if not user.startswith("presence_app.store")
    }
    assert reaching_in == set()


def test_the_store_knows_nothing_of_django_channels_or_the_app(graph):
    graph = grimp.build_graph("presence_app", "django", "channels")
    for module in app_modules(graph):
        if module == "presence_app.store" or module.startswith("presence_app.store."):
            outside = {
                m
                for m in graph.find_modules_directly_imported_by(module)
                if m.split(".")[0] in ("django", "channels")
                or (m.startswith("presence_app") and not m.startswith("presence_app.store"))
            }
            assert outside == set(), module


#: Classes allowed past MAX_CLASS_LINES, each with its reason: splitting them would make one
#: class into two halves that borrow each other's state, which costs more than it saves.
LONG_CLASSES = {
    "realtime/session.py:PresenceSession": (
        "one connection's whole life: open, frames, events, access, and its lost lease taken back"
        " (the recovery reads and writes a dozen of the session's attributes)"
    ),
    "store/plans.py:Planner": (
        "every plan of one configuration, reads and writes: each read uses the same call,"
        " user_call, by_shard and keys, so a reads-only half borrowed five names"
    ),
    "store/base.py:BaseStore": (
        "the store's API over its plans; the chart's samples and the tenants in use use the"
        " same run and keys, so a half of their own borrowed both"
    ),
}


def test_no_class_over_200_lines():
    long = []
    for path in APP.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.ClassDef)
                and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES
            ):
                long.append(f"{path.relative_to(APP)}:{node.name}")
    assert [name for name in long if name not in LONG_CLASSES] == []
