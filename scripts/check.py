"""`make check`: every nox session (noxfile.py), several at a time, each one's output in a log.

Run by .venv/bin/python after scripts/bootstrap.sh. With arguments it is plain nox
(`make check ARGS="-s lint"`: one session, its output as it comes). Without, it runs all the
sessions `nox -l` lists, ``CHECK_JOBS`` at a time (default 2: most of a session's time is its
tests waiting on timers and Redis, not the CPU), longest first; each session's output goes to
``.nox/logs/<session>.log``, a line says when each ends, a failed session's log is printed whole,
and the exit status is 1 if any session failed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOX = [sys.executable, "-m", "nox"]
LOGS = ROOT / ".nox" / "logs"

# Started first: the sessions that take longest (the Cluster variants, coverage), so that the
# short ones fill in beside them instead of leaving a long one to run alone at the end.
FIRST = ("py3.13-django6.1", "soak", "servers", "lowest", "package")


def sessions() -> list[str]:
    listed = subprocess.run(
        [*NOX, "-l", "--json"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    names = [s["session"] for s in json.loads(listed)]

    def rank(name: str) -> int:
        return next((i for i, key in enumerate(FIRST) if key in name), len(FIRST))

    return sorted(names, key=rank)  # stable: nox's order within a rank


def log_name(session: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", session).strip("_") + ".log"


def main(args: list[str]) -> int:
    if args:
        return subprocess.call([*NOX, *args], cwd=ROOT)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    jobs = max(1, int(os.environ.get("CHECK_JOBS", "2")))
    todo = sessions()
    LOGS.mkdir(parents=True, exist_ok=True)
    print(f"make check: {len(todo)} nox sessions, {jobs} at a time; logs in {LOGS}", flush=True)
    start = time.monotonic()
    running: dict[str, tuple[subprocess.Popen, float]] = {}
    failed: list[str] = []
    try:
        while todo or running:
            while todo and len(running) < jobs:
                session = todo.pop(0)
                with open(LOGS / log_name(session), "wb") as log:
                    process = subprocess.Popen(
                        [*NOX, "-s", session],
                        cwd=ROOT,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,  # its own group, stopped whole
                    )
                running[session] = (process, time.monotonic())
                print(f"  started  {session}", flush=True)
            time.sleep(0.5)
            for session, (process, began) in list(running.items()):
                if process.poll() is None:
                    continue
                del running[session]
                took = time.monotonic() - began
                if process.returncode:
                    failed.append(session)
                    print(f"FAILED   {session} ({took:.0f} s), its log:", flush=True)
                    sys.stdout.write((LOGS / log_name(session)).read_text(errors="replace"))
                    print(f"-- end of {session}'s log", flush=True)
                else:
                    print(f"  passed   {session} ({took:.0f} s)", flush=True)
    finally:  # stopped (Ctrl-C, SIGTERM): the sessions still running stop too, whole
        for process, _ in running.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process, _ in running.values():
            process.wait()
    total = time.monotonic() - start
    if failed:
        print(f"make check: {len(failed)} failed ({', '.join(failed)}), {total:.0f} s")
        return 1
    print(f"make check: all sessions passed, {total:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
