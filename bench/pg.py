"""A private, throw-away PostgreSQL cluster (Debian's postgresql package) for the peer benchmark.

initdb + pg_ctl under a temporary directory, listening on a free port of 127.0.0.1 only, trust
authentication for the local superuser ``postgres``, server defaults otherwise (fsync and
synchronous_commit on, as a Django user would run it). PostgreSQL refuses to run as root, so as
root the cluster runs as the ``postgres`` system user (runuser).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from presence_app.testing import free_port


class PostgresUnavailable(RuntimeError):
    pass


def find_bindir() -> Path:
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(candidate, "pg_ctl")):
            return Path(candidate)
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).parent
    raise PostgresUnavailable("no PostgreSQL server binaries (Debian: apt-get install postgresql)")


class PostgresServer:
    def __init__(self) -> None:
        self.bindir = find_bindir()
        self.port = free_port()
        self.dir: Path | None = None
        self.running = False
        self.as_user: str | None = None

    @property
    def data(self) -> Path:
        assert self.dir is not None
        return self.dir / "data"

    def _run(self, *args: str, timeout: float = 120) -> None:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if self.as_user:
            cmd = ["runuser", "-u", self.as_user, "--", *cmd]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if out.returncode != 0:
            raise PostgresUnavailable(
                f"{args[0]} failed: {out.stderr.strip() or out.stdout.strip()}"
            )

    def start(self) -> PostgresServer:
        self.dir = Path(tempfile.mkdtemp(prefix="presence-pg-"))
        if os.geteuid() == 0:
            try:
                pw = pwd.getpwnam("postgres")
            except KeyError:
                raise PostgresUnavailable(
                    "running as root and there is no 'postgres' user"
                ) from None
            self.as_user = "postgres"
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
        )
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.dir}"
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.dir / "log"),
            "-w",
            "start",
        )
        self.running = True
        return self

    @property
    def settings(self) -> dict[str, str]:
        """Django DATABASES entry for the cluster's ``postgres`` database."""
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": "postgres",
            "USER": "postgres",
            "HOST": "127.0.0.1",
            "PORT": str(self.port),
        }

    def version(self) -> str:
        out = subprocess.run(
            [str(self.bindir / "postgres"), "--version"], capture_output=True, text=True
        )
        return out.stdout.strip()

    def stop(self) -> None:
        if self.running:
            try:
                self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop", timeout=60)
            finally:
                self.running = False
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
