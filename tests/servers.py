"""Real servers for tests: the project's ASGI application under uvicorn (or daphne) in a
subprocess, on a free loopback port, with a settings module, a SQLite file and a Redis of the
test's choosing.

    db = Database(tmp_path / "db.sqlite3", settings="tests.reliability.settings",
                  env={"REDIS_URL": redis.url}).migrate()
    users = db.users(["alice", "bob"])             # {name: User(id, session)}, logged in
    with AsgiServer(db, env={"PRESENCE_KEY_PREFIX": "t1"}) as server:
        server.url, server.ws_url                  # http://127.0.0.1:PORT, ws://.../ws/presence/
        server.kill()                              # SIGKILL: no close frames, no clean-up
        server.log()                               # what it printed (stdout and stderr)

Several servers may share one Database (and Redis): that is "many ASGI processes on one
channel layer". Users are logged in by writing their sessions straight into the server's
database (no login form, no password hashing), so hundreds of users cost one subprocess.
Everything binds to 127.0.0.1 and every process started here is stopped by ``stop()``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from presence_app.testing import free_port

ROOT = Path(__file__).resolve().parent.parent
SESSION_COOKIE = "sessionid"


class ServerError(RuntimeError):
    """The server did not start, or a command against its database failed."""


def _env(settings: str, db: Path, extra: dict[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": settings,
            "DJANGO_DB": str(db),
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
        }
    )
    env.update(extra or {})
    return env


@dataclass(frozen=True)
class User:
    id: str
    username: str
    session: str

    @property
    def cookie(self) -> str:
        return f"{SESSION_COOKIE}={self.session}"


# Run in a subprocess with the server's settings: creates the users (no password: a session is
# all a test needs) and one session each, in two bulk queries.
_USERS_SCRIPT = r"""
import json, sys
import django
django.setup()
from datetime import timedelta
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.auth.hashers import make_password
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.utils import timezone

from project.demo.users import login_name

specs = json.load(sys.stdin)
User = get_user_model()  # any model: its USERNAME_FIELD holds the name (or name@example.com)
field = User.USERNAME_FIELD
logins = {s["username"]: login_name(s["username"]) for s in specs}
User._default_manager.bulk_create(
    [User(**{field: logins[s["username"]]}, is_staff=s.get("is_staff", False),
          is_superuser=s.get("is_superuser", False),
          password=make_password(s.get("password"))) for s in specs],
    ignore_conflicts=True,
)
found = User._default_manager.in_bulk(list(logins.values()), field_name=field)
users = {name: found[login] for name, login in logins.items()}
names = list(logins)
perms = [s for spec in specs for s in spec.get("permissions", ())]
if perms:
    from django.contrib.auth.models import Permission
    for spec in specs:
        for label in spec.get("permissions", ()):
            app, codename = label.split(".")
            users[spec["username"]].user_permissions.add(
                Permission.objects.get(content_type__app_label=app, codename=codename))
store = SessionStore()
expire = timezone.now() + timedelta(seconds=settings.SESSION_COOKIE_AGE)
rows, out = [], {}
for name in names:
    user = users[name]
    key = store._get_new_session_key()
    data = {SESSION_KEY: str(user.pk),
            BACKEND_SESSION_KEY: "django.contrib.auth.backends.ModelBackend",
            HASH_SESSION_KEY: user.get_session_auth_hash()}
    rows.append(Session(session_key=key, session_data=store.encode(data), expire_date=expire))
    out[name] = {"id": str(user.pk), "username": name, "session": key}
Session.objects.bulk_create(rows)
json.dump(out, sys.stdout)
"""


class Database:
    """A SQLite file for one or more servers, with its settings module and environment."""

    def __init__(
        self,
        path: Path,
        *,
        settings: str = "tests.reliability.settings",
        env: dict[str, str] | None = None,
    ) -> None:
        self.path = Path(path)
        self.settings = settings
        self.extra_env = dict(env or {})

    @property
    def env(self) -> dict[str, str]:
        return _env(self.settings, self.path, self.extra_env)

    def run(self, args: list[str], *, input: str | None = None, timeout: float = 120) -> str:
        done = subprocess.run(
            [sys.executable, *args],
            cwd=ROOT,
            env=self.env,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode:
            raise ServerError(f"{' '.join(args)[:200]} failed:\n{done.stdout}{done.stderr}")
        return done.stdout

    def manage(self, *args: str) -> str:
        return self.run(["manage.py", *args])

    def migrate(self) -> Database:
        self.manage("migrate", "--noinput", "--verbosity", "0")
        return self

    def copy(self, path: Path) -> Database:
        """A copy of this (migrated) database at ``path``: cheaper than migrating again."""
        shutil.copyfile(self.path, path)
        return Database(path, settings=self.settings, env=self.extra_env)

    def users(self, names: list[str], **flags: Any) -> dict[str, User]:
        """Creates the users (``is_staff``, ``is_superuser``, ``password``, ``permissions``
        (["app.codename"]) apply to all of them) and logs each in once:
        {username: User(id, username, session)}."""
        specs = [{"username": name, **flags} for name in names]
        out = json.loads(self.run(["-c", _USERS_SCRIPT], input=json.dumps(specs)))
        return {name: User(**fields) for name, fields in out.items()}


def listening(pid: int, port: int) -> bool:
    """Does process ``pid`` hold a socket listening on loopback ``port``? (Linux: the
    listening sockets of /proc/net/tcp, then the process' descriptors.)"""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # LISTEN
                inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return False
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in descriptors:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                return True
        except OSError:
            continue  # closed meanwhile
    return False


class Loopback:
    """The addresses of a server on 127.0.0.1's ``port``."""

    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def origin(self) -> str:
        return self.url

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws/presence/"


class AsgiServer(Loopback):
    """``project.asgi:application`` (or ``app``) under uvicorn or daphne, in a subprocess; or a
    project's ``manage.py runserver`` (``server="runserver"``, ``manage``: its path)."""

    def __init__(
        self,
        db: Database,
        *,
        env: dict[str, str] | None = None,
        server: str = "uvicorn",
        app: str = "project.asgi:application",
        name: str = "server",
        ready_path: str = "/accounts/login/",
        access_log: bool = False,
        log_dir: Path | None = None,
        manage: str = "manage.py",
        graceful: int = 5,
        args: list[str] | None = None,
    ) -> None:
        if server not in ("uvicorn", "daphne", "runserver"):
            raise ValueError("server is 'uvicorn', 'daphne' or 'runserver'")
        self.db = db
        self.kind = server
        self.app = app
        self.manage = manage
        self.name = name
        self.ready_path = ready_path
        self.access_log = access_log
        self.graceful = graceful  # uvicorn's --timeout-graceful-shutdown
        self.args = list(args or ())  # the server's own options (uvicorn's --ws-ping-interval)
        self.port = free_port()
        self.env = {**db.env, **(env or {})}
        self.log_path = (log_dir or db.path.parent) / f"{name}-{self.port}.log"
        self.process: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    # -- lifecycle ----------------------------------------------------------------------------
    def command(self) -> list[str]:
        if self.kind == "runserver":
            # daphne's runserver (daphne in INSTALLED_APPS): ASGI_APPLICATION, and with DEBUG
            # the static files, as in development; ``manage``: the project's manage.py.
            return [
                sys.executable,
                self.manage,
                "runserver",
                "--noreload",
                f"127.0.0.1:{self.port}",
            ]
        if self.kind == "daphne":
            args = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port)]
            if not self.access_log:
                args += ["--access-log", os.devnull]
            return [*args, self.app]
        return [
            sys.executable,
            "-m",
            "uvicorn",
            self.app,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--lifespan",
            "off",
            "--timeout-graceful-shutdown",
            str(int(self.graceful)),
            "--log-level",
            "info" if self.access_log else "warning",
            "--access-log" if self.access_log else "--no-access-log",
            *self.args,
        ]

    def start(self, timeout: float = 60) -> AsgiServer:
        """Starts the server and returns once it answers, on a socket of its own: the port
        free_port() chose may be another process's by then (another test run's server, beside
        this one under pytest-xdist), which answered for it while this one, still loading
        Django, was yet to fail to bind (its tests then spoke to a stranger: a session unknown
        there, 4401). A server that finds its port taken starts again on another."""
        for _ in range(5):
            if self._start(timeout):
                return self
            self.port = free_port()
        raise ServerError(f"{self.name} found its port taken five times:\n{self.log()}")

    def _start(self, timeout: float) -> bool:
        """False when the server exited because its port was taken."""
        if self.alive:
            return True
        with open(self.log_path, "ab") as log:  # the child keeps its own descriptor
            self.process = subprocess.Popen(
                self.command(),
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                if "address already in use" in self.log(2000):
                    return False
                raise ServerError(
                    f"{self.name} exited with {self.process.returncode}:\n{self.log()}"
                )
            if listening(self.process.pid, self.port) and self.answers():
                return True
            time.sleep(0.05)
        self.stop()
        raise ServerError(
            f"{self.name} did not answer on {self.url} within {timeout} s:\n{self.log()}"
        )

    def answers(self, timeout: float = 1.0) -> bool:
        """True when an HTTP request gets any answer below 500."""
        try:
            with urllib.request.urlopen(self.url + self.ready_path, timeout=timeout) as reply:
                return reply.status < 500
        except urllib.error.HTTPError as exc:
            return exc.code < 500
        except (urllib.error.URLError, OSError):
            return False

    def stop(self, timeout: float = 10) -> int | None:
        """SIGTERM (a graceful shutdown), SIGKILL after ``timeout``; returns the exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def kill(self) -> int | None:
        """SIGKILL: the process dies at once, as in a crash (no close frames, no clean-up)."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()
        return self.process.returncode

    def __enter__(self) -> AsgiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- its output ---------------------------------------------------------------------------
    def log(self, tail: int | None = 6000) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return text if tail is None else text[-tail:]

    def tracebacks(self) -> int:
        """How many Python tracebacks the server printed."""
        return self.log(None).count("Traceback (most recent call last)")

    # -- plain HTTP with a session ------------------------------------------------------------
    def get(self, path: str, user: User | None = None, timeout: float = 30) -> tuple[int, str]:
        """(status, body) of a GET, following no redirects. It blocks: a test whose clients
        heartbeat in its event loop asks :meth:`aget`."""
        request = urllib.request.Request(self.url + path)
        if user is not None:
            request.add_header("Cookie", user.cookie)

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args: Any, **kwargs: Any) -> None:
                return None

        opener = urllib.request.build_opener(NoRedirect)
        try:
            with opener.open(request, timeout=timeout) as reply:
                return reply.status, reply.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode("utf-8", "replace")

    async def aget(
        self, path: str, user: User | None = None, timeout: float = 30
    ) -> tuple[int, str]:
        """:meth:`get` in a thread: the event loop, and the heartbeats of the clients it
        drives, run on meanwhile (a page a loaded server takes seconds to render, asked from
        the loop, cost them their sockets: silent for LEASE_TTL)."""
        return await asyncio.to_thread(self.get, path, user, timeout)
