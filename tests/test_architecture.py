"""The layers hold (docs/architecture.md): checked on the import graph (grimp, the graph
library behind import-linter) and the source, so a shortcut shows up as a failing test."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import grimp
import pytest

APP = Path(__file__).resolve().parent.parent / "presence_app"
#: The only modules that reach the Redis connection: the front door, and the jobs that work on
#: the store itself rather than on presence (the sweep's locks and samples, the command's clear,
#: the checks' ping, the test plugin's clear).
CONNECTION_USERS = {
    "presence_app.presence",
    "presence_app.checks",
    "presence_app.jobs.sweeper",
    "presence_app.management.commands.presence",
    "presence_app.testing.pytest_plugin",
}
MAX_CLASS_LINES = 200


def build_graph(*packages: str) -> grimp.ImportGraph:
    """The import graph as the files read now. grimp's on-disk cache (.grimp_cache) is not used:
    it keeps one file of modification times per package for graphs of several package sets, so
    the graph of presence_app alone, built first, marked a changed store module fresh, and the
    graph with Django and Channels then read the module's old imports from its own cache (a
    store module that imported django passed the store's rule)."""
    return grimp.build_graph(*packages, cache_dir=None)


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return build_graph("presence_app")


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


#: The store's modules others may name: its input rules (one definition each, which the front
#: door's rules build on). The rest is reached through ``presence_app.store``'s own names.
STORE_PUBLIC = {"presence_app.store.inputs"}


def test_no_store_internals_outside_the_store(graph):
    reaching_in = {
        (user, inner)
        for inner in app_modules(graph)
        if inner.startswith("presence_app.store.") and inner not in STORE_PUBLIC
        for user in graph.find_modules_that_directly_import(inner)
        if not user.startswith("presence_app.store")
    }
    assert reaching_in == set()


def test_the_store_knows_nothing_of_django_channels_or_the_app(graph):
    graph = build_graph("presence_app", "django", "channels")
    for module in app_modules(graph):
        if module == "presence_app.store" or module.startswith("presence_app.store."):
            outside = {
                m
                for m in graph.find_modules_directly_imported_by(module)
                if m.split(".")[0] in ("django", "channels")
                or (m.startswith("presence_app") and not m.startswith("presence_app.store"))
            }
            assert outside == set(), module


#: Each folder is a family (docs/architecture.md); what it may not import, by module prefix.
#: The front door's parts (core/) and who-may-see-what (access/) sit under the front door and
#: every entry point; realtime/ carries connections and renders no page; web/ holds no
#: connection; jobs/ run beside both; testing/ is for a host project's tests only.
ENTRY_POINTS = (
    "presence_app.presence",
    "presence_app.rooms",
    "presence_app.consumers",
    "presence_app.middleware",
    "presence_app.routing",
    "presence_app.urls",
    "presence_app.admin",
    "presence_app.apps",
    "presence_app.checks",
    "presence_app.templatetags",
    "presence_app.management",
    "presence_app.contrib",
)
FAMILIES = ("realtime", "web", "jobs", "testing")
MAY_NOT_IMPORT = {
    "presence_app.core": (
        *ENTRY_POINTS,
        *(f"presence_app.{family}" for family in FAMILIES),
    ),
    "presence_app.access": (
        *ENTRY_POINTS,
        *(f"presence_app.{family}" for family in FAMILIES),
    ),
    "presence_app.realtime": (
        "presence_app.web",
        "presence_app.testing",
        "presence_app.admin",
        "presence_app.urls",
        "presence_app.routing",
        "presence_app.consumers",
        "presence_app.management",
    ),
    "presence_app.web": ("presence_app.realtime", "presence_app.testing", "presence_app.consumers"),
    "presence_app.jobs": (
        "presence_app.realtime",
        "presence_app.web",
        "presence_app.testing",
        "presence_app.consumers",
        "presence_app.admin",
    ),
}


def within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_each_folder_imports_only_what_sits_below_it(graph):
    climbing = sorted(
        (module, imported)
        for module in app_modules(graph)
        for family, forbidden in MAY_NOT_IMPORT.items()
        if within(module, family)
        for imported in graph.find_modules_directly_imported_by(module)
        if any(within(imported, f) for f in forbidden)
    )
    assert climbing == []


def test_no_runtime_module_imports_the_test_helpers(graph):
    # The fixtures' old path (the pytest11 entry point of installs made before the move) is
    # the one module outside testing/ that may name them.
    users = {
        user
        for inner in app_modules(graph)
        if within(inner, "presence_app.testing")
        for user in graph.find_modules_that_directly_import(inner)
        if not within(user, "presence_app.testing")
    }
    assert users <= {"presence_app.pytest_plugin"}


def test_the_top_level_stays_small():
    # A newcomer reads the top level in one go: the public paths (presence, consumers, routing,
    # urls, middleware, tenants, signals, conf, models, admin, apps, checks, failopen, rooms)
    # and the fixtures' old path; every other module lives in its family's folder.
    top = sorted(p.stem for p in APP.glob("*.py") if p.stem != "__init__")
    assert len(top) <= 16, top


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


def test_every_module_is_in_the_architecture_table():
    """docs/architecture.md's table names each module (by its path under presence_app/; the
    store and the migrations as folders), so the page is redrawn when the code moves."""
    table = (APP.parent / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"`([\w/]+(?:\.py|/))`", table))
    missing = []
    for path in sorted(APP.rglob("*.py")):
        relative = path.relative_to(APP).as_posix()
        folder = relative.split("/")[0] + "/"
        if folder == "migrations/" or relative == "__init__.py":
            continue  # generated; the package's own __init__ holds the version only
        if folder == "store/" and folder in named:
            continue  # the store is one row: a layer of its own, described as one
        empty = path.name == "__init__.py" and not ast.parse(path.read_text()).body[1:]
        if not empty and relative not in named:
            missing.append(relative)
    assert missing == []


# -- one way down: what the front door shields, and the entry points nobody imports ---------------
def test_only_the_front_door_reaches_access(graph):
    """Who may see what is decided in one place: every entry point asks the front door
    (``presence.viewer``, its reads, ``presence.with_last_seen``, ``presence.aredact_event``)."""
    reaching = {
        (importer, module)
        for module in app_modules(graph)
        if within(module, "presence_app.access")
        for importer in graph.find_modules_that_directly_import(module)
        if not within(importer, "presence_app.access") and importer != "presence_app.presence"
    }
    assert reaching == set()


#: Entry points no module of the app imports: what they hold that others need lives below them.
NOT_IMPORTED = (
    "presence_app.templatetags",
    "presence_app.middleware",
    "presence_app.admin",
    "presence_app.consumers",
    "presence_app.management",
    "presence_app.urls",
)


def test_no_entry_point_is_imported(graph):
    importing = {
        (importer, module)
        for module in app_modules(graph)
        for entry in NOT_IMPORTED
        if within(module, entry)
        for importer in graph.find_modules_that_directly_import(module)
        if not within(importer, entry) and importer != "presence_app.routing"
    }
    # routing.py is the consumers' URL list: the path a project's asgi.py names
    assert importing == set()


def test_core_is_one_floor(graph):
    """core/ imports only itself and what sits under the whole app: the store, the settings and
    the signals a project connects to."""
    below = ("presence_app.core", "presence_app.store", "presence_app.conf", "presence_app.signals")
    climbing = {
        (module, imported)
        for module in app_modules(graph)
        if within(module, "presence_app.core")
        for imported in graph.find_modules_directly_imported_by(module)
        if imported.startswith("presence_app") and not any(within(imported, b) for b in below)
    }
    assert climbing == set()


# -- twins: "a" means a coroutine -------------------------------------------------------------------
#: Where a function's name says which world it runs in (the front door and what it is built
#: from): a Django view, a frame handler or a consumer's method keeps the name its framework gives.
TWIN_MODULES = ("presence_app.presence", "presence_app.rooms", "presence_app.core")
TWIN_MODULES += ("presence_app.access", "presence_app.jobs", "presence_app.tenants")


def _public_functions(module: str) -> dict[str, object]:
    import importlib
    import inspect

    mod = importlib.import_module(module)
    return {
        name: fn
        for name, fn in vars(mod).items()
        if not name.startswith("_")
        and inspect.isfunction(fn)
        and getattr(fn, "__module__", None) == module
    }


def test_every_public_coroutine_is_a_prefixed_and_every_a_twin_is_one(graph):
    import inspect

    wrong = []
    for module in app_modules(graph):
        if not any(within(module, m) for m in TWIN_MODULES):
            continue
        functions = _public_functions(module)
        for name, fn in functions.items():
            coroutine = inspect.iscoroutinefunction(fn)
            if coroutine and not name.startswith("a"):
                wrong.append(f"{module}.{name}: a coroutine without the a prefix")
            if name.endswith(("_sync", "_async")):
                wrong.append(f"{module}.{name}: the world is said by the a prefix, not a suffix")
            twin = functions.get(name[1:]) if name.startswith("a") else None
            if twin is not None and not coroutine:
                wrong.append(f"{module}.{name}: the a twin of {name[1:]} is not a coroutine")
            if twin is not None and inspect.iscoroutinefunction(twin):
                wrong.append(f"{module}.{name[1:]}: the sync twin of {name} is a coroutine")
    assert wrong == []
