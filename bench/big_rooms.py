"""17. Big rooms (issue 44): one room of thousands of real sockets over 2 uvicorn processes on the
pub/sub layer, the project as shipped against today's path (the package of an earlier commit,
:data:`BASE`: every socket in the room's group, each decoding every event), in the same run.

Per side, 2 uvicorn servers (``project.asgi``, settings ``bench.big_rooms_settings``: the demo's,
with a count-only room) share a SQLite file of users and sessions and the run's Redis; the load
is several ``bench.big_rooms_client`` processes (its docstring says what each measures), each
holding a share of the sockets, spread over both servers, every one accepting ``presence.diff``
and heartbeating as presence.js does. Three phases on the same sockets:

1. **the storm**: :data:`MEMBERS` sockets join one room, asked within :data:`SPREAD` seconds:
   membership frames per socket per second from the first join to the storm's end (the last
   snapshot served; mean and the busiest socket), how long after the storm's end every roster
   (snapshot, then each diff) holds the whole room and equals it, the servers' CPU seconds and
   the Redis commands (``INFO commandstats``) from the first join until every roster was whole;
2. **room states**: :data:`SENDERS` of them send a room state at :data:`HZ`, all the others
   watching, :data:`STATE_SECONDS`: delivery latency p50 / p99 (send to receipt, one clock),
   frames delivered, and the servers' CPU per delivered frame;
3. **a count-only room**: :data:`COUNTED` sockets (the storm's and more) in a ``COUNT_ONLY_ROOMS``
   room, :data:`CHURNERS` of them leaving and joining again :data:`CHURN` times a second in all
   for :data:`CHURN_SECONDS`: the frames and bytes the others receive per join or leave, the
   bytes a member receives per minute, the servers' CPU per join or leave.

Run: ``python -m bench --only big_rooms [--quick]``; sizes: ``BENCH_BIG_ROOMS_MEMBERS`` (full
5,000; quick 300), ``BENCH_BIG_ROOMS_COUNTED`` (10,000; 600), ``BENCH_BIG_ROOMS_CLIENTS`` (load
processes: 4; 2), ``BENCH_BIG_ROOMS_BASE`` (the commit of today's path), ``BENCH_BIG_ROOMS_SIDES``
(``ours,today``), ``BENCH_BIG_ROOMS_PHASES`` (``storm,states,count``), ``BENCH_BIG_ROOMS_SETTLE``
(seconds rosters may take after the storm's last join: 900), ``BENCH_BIG_ROOMS_CLIENT`` (the load
client: ``node``, ``bench/big_rooms_client.js`` on Node's ``ws``, the default when ``node`` and
``npm`` are on PATH, its ``ws`` installed by ``npm ci --prefix bench`` into the git-ignored
``bench/node_modules`` when missing; ``python``, ``bench/big_rooms_client.py``: Python's client
spends a core parsing the rosters of a storm of thousands; ``c``, ``bench/big_rooms_client.c``,
compiled at run time by ``cc -O2 ... -lz`` into the run's temporary folder: one epoll loop a
process, a fraction of Node's CPU per delivered frame, so that the servers' CPU is what is
measured; ``BENCH_BIG_ROOMS_C_ROUND_MS``: its read rounds, 2 ms by default, as its header says);
``BENCH_BIG_ROOMS_STALLS`` (a folder: where the servers, and the machine, stood still in the
room-state phase, bench/stalls.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path
from typing import Any

from tests.servers import ROOT, AsgiServer, Database

from .common import Check, Context, Row, benchmark, cpu_seconds, percentile

#: Today's path: the package before the room feeds (each socket in the room's group).
BASE = os.environ.get("BENCH_BIG_ROOMS_BASE", "90dba0b")
ROOM, STADIUM = "hall", "stadium"
SPREAD = 10.0  # the storm's joins are asked within this
SETTLE = float(os.environ.get("BENCH_BIG_ROOMS_SETTLE") or 900)  # rosters may take this long
HZ = 20
SENDERS = 50
STATE_SECONDS = 15.0
CHURN = 50  # joins and leaves a second, in all
CHURNERS = 500
CHURN_SECONDS = 30.0
TICK_RATE = 5  # MEMBERSHIP_RATE as shipped


def sizes(ctx: Context) -> tuple[int, int, int]:
    members = int(os.environ.get("BENCH_BIG_ROOMS_MEMBERS") or ctx.size(5000, 300))
    counted = int(os.environ.get("BENCH_BIG_ROOMS_COUNTED") or ctx.size(10_000, 600))
    clients = int(os.environ.get("BENCH_BIG_ROOMS_CLIENTS") or ctx.size(4, 2))
    return members, max(counted, members), clients


def today_package(folder: Path) -> Path:
    """The package of :data:`BASE`, exported beside the run (``git archive``): its servers
    import it first."""
    out = folder / "today"
    if out.exists():  # a side before this one exported it
        return out
    out.mkdir()
    blob = subprocess.run(
        ["git", "archive", BASE, "presence_app"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(blob)) as tar:
        tar.extractall(out, filter="data")
    return out


BENCH = Path(__file__).resolve().parent


def client_kind(asked: str | None = None) -> str:
    """The load client: ``asked``, else ``BENCH_BIG_ROOMS_CLIENT`` (``node``, ``python`` or
    ``c``), else ``node`` when ``node`` runs and its ``ws`` is installed or ``npm`` can install
    it, else ``python``."""
    kind = (asked or os.environ.get("BENCH_BIG_ROOMS_CLIENT", "")).strip().lower()
    if kind not in ("", "node", "python", "c"):
        raise ValueError(f"BENCH_BIG_ROOMS_CLIENT={kind!r}: node, python or c")
    if kind in ("python", "c"):
        return kind
    if not shutil.which("node") or not (
        (BENCH / "node_modules" / "ws").is_dir() or shutil.which("npm")
    ):
        if kind == "node":
            raise RuntimeError("BENCH_BIG_ROOMS_CLIENT=node: needs node (18+) and npm on PATH")
        return "python"
    if not (BENCH / "node_modules" / "ws").is_dir():  # the pinned ws (bench/package-lock.json)
        subprocess.run(["npm", "ci", "--prefix", str(BENCH), "--ignore-scripts", "--no-audit",
                        "--no-fund"], check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    return "node"


def c_client(folder: Path) -> Path:
    """``bench/big_rooms_client.c`` compiled into ``folder`` (the run's temporary folder), once:
    ``cc -O2`` (``$CC`` if set) against zlib (Debian: ``zlib1g-dev``)."""
    binary = folder / "big_rooms_client"
    if not binary.exists():
        cc = os.environ.get("CC") or "cc"
        subprocess.run([cc, "-O2", "-o", str(binary), str(BENCH / "big_rooms_client.c"), "-lz",
                        "-lm"], check=True)  # fmt: skip
    return binary


def client_command(kind: str, config: Path) -> list[str]:
    if kind == "node":
        # BENCH_BIG_ROOMS_NODE_ARGS: node's own flags (``--cpu-prof --cpu-prof-dir=DIR``)
        extra = os.environ.get("BENCH_BIG_ROOMS_NODE_ARGS", "").split()
        return ["node", *extra, str(BENCH / "big_rooms_client.js"), str(config)]
    if kind == "c":  # compiled beside the clients' configs, in the run's temporary folder
        return [str(c_client(config.parent)), str(config)]
    return [sys.executable, "-m", "bench.big_rooms_client", str(config)]


def rosters(part: dict[str, Any]) -> list[set[str]]:
    """Each socket's final roster: the Python client lists it a socket; the Node client lists
    each distinct roster once (``rosters``) and a socket names its own by index."""
    shared = [set(r) for r in part.get("rosters", ())]
    return [shared[s[6]] if isinstance(s[6], int) else set(s[6]) for s in part["sockets"]]


#: A side is ``ours`` or ``today``, then ``+variant``s: a uvicorn WebSocket implementation
#: (``sansio``: ``--ws websockets-sansio``; ``wsproto``), or presence settings
#: (:data:`VARIANTS`, or ``+NAME=JSON``: ``+ROOM_STATE_FRAMES=2000``, through
#: ``PRESENCE_OVERRIDES``).
WS = {"sansio": "websockets-sansio", "wsproto": "wsproto", "websockets": "websockets"}
#: ``+nodeflate``: uvicorn without permessage-deflate (``--ws-per-message-deflate false``):
#: every socket's frames are then the same bytes, not each compressed in its own context.
#: ``+noping``: uvicorn without its keepalive pings (``--ws-ping-interval 0``): it pauses a
#: socket's reading while the application handles its last frame, so a join that takes longer
#: than its ping timeout (20 s) leaves the pong unread and the socket closed with 1011.
VARIANTS: dict[str, dict[str, Any]] = {}
#: Sockets held by the probe process (``BENCH_BIG_ROOMS_PROBE``: how many; 0: none).
PROBE = int(os.environ.get("BENCH_BIG_ROOMS_PROBE", "10"))


class Server(AsgiServer):
    """A uvicorn server of the benchmark, with the WebSocket implementation a side names."""

    def __init__(
        self,
        *args: Any,
        ws: str | None = None,
        deflate: bool = True,
        ping: bool = True,
        app_dir: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.ws = ws
        self.deflate = deflate
        self.ping = ping
        self.app_dir = app_dir

    def command(self) -> list[str]:
        extra = ["--ws", self.ws] if self.ws else []
        if self.app_dir:  # first on sys.path (uvicorn puts its --app-dir there, "" the checkout)
            extra += ["--app-dir", self.app_dir]
        if not self.deflate:
            extra += ["--ws-per-message-deflate", "false"]
        if not self.ping:
            extra += ["--ws-ping-interval", "0"]
        return [*super().command(), *extra]


def profile(folder: str, name: str, pids: dict[str, int], seconds: float) -> list[Any]:
    """py-spy samples of ``pids`` for ``seconds`` (``BENCH_BIG_ROOMS_PYSPY``: a folder)."""
    procs = []
    for who, pid in pids.items():
        out = Path(folder) / f"{name}-{who}.txt"
        procs.append(
            subprocess.Popen(
                [
                    str(Path(sys.executable).parent / "py-spy"),
                    *"record --nonblocking -r 50 -f raw -d".split(),
                    str(int(seconds)),
                ]
                + ["-p", str(pid), "-o", str(out)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    return procs


def commandstats(client: Any) -> int:
    stats = client.info("commandstats")
    return sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")


def command_calls(client: Any) -> dict[str, int]:
    """Redis' calls by command (a script's own calls counted apart, as Redis counts them)."""
    stats = client.info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}


class Load:
    """The client processes of one side, driven phase by phase; with ``probe`` global indices,
    one more process holding those sockets alone (its loop idles: the latency it reads is the
    servers' and the layer's, not a busy client's)."""

    def __init__(
        self,
        folder: Path,
        servers: list[AsgiServer],
        cookies: list[str],
        k: int,
        probe: list[int] | None = None,
        kind: str = "python",
    ):
        self.procs: list[subprocess.Popen[str]] = []
        probe = sorted(set(probe or ()))
        rest = [g for g in range(len(cookies)) if g not in set(probe)]
        shares = [(rest[c::k], False) for c in range(k)]
        if probe:
            shares.append((probe, True))
        for c, (mine, probing) in enumerate(shares):
            config = {
                "servers": [s.ws_url for s in servers],
                "origin": [s.origin for s in servers],
                "cookies": [cookies[g] for g in mine],
                "globals": mine,
                "probe": probing,
            }
            path = folder / f"client-{c}.json"
            path.write_text(json.dumps(config))
            self.procs.append(
                subprocess.Popen(
                    client_command(kind, path),
                    cwd=ROOT,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
            )
        self.probing = bool(probe)
        for proc in self.procs:
            line = proc.stdout.readline()  # type: ignore[union-attr]
            if line.strip() != "ready":
                raise RuntimeError(f"a load client did not start: {line!r}")

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def send(self, **cmd: Any) -> None:
        for proc in self.procs:
            proc.stdin.write(json.dumps(cmd) + "\n")  # type: ignore[union-attr]
            proc.stdin.flush()  # type: ignore[union-attr]

    def results(self) -> list[dict[str, Any]]:
        return [json.loads(proc.stdout.readline()) for proc in self.procs]  # type: ignore[union-attr]

    def close(self) -> None:
        for proc in self.procs:
            try:
                proc.stdin.write('{"phase": "quit"}\n')  # type: ignore[union-attr]
                proc.stdin.flush()  # type: ignore[union-attr]
                proc.wait(30)
            except Exception:  # noqa: BLE001
                proc.kill()


def side(ctx: Context, name: str, db: Database, cookies: list[str], folder: Path) -> dict:
    members, counted, clients = sizes(ctx)
    base, *variants = name.split("+")
    env = {"PRESENCE_KEY_PREFIX": f"b17-{base}"}
    app_dir = None
    if base == "today":
        env["PYTHONPATH"] = f"{today_package(folder)}{os.pathsep}{ROOT}"
        # uvicorn puts its --app-dir (default: the working directory, this checkout) first on
        # sys.path, ahead of PYTHONPATH: today's side ran this checkout's package, not the
        # export, in every run before 2026-11-28 (fourth session). The export goes there.
        app_dir = str(today_package(folder))
    ws = next((WS[v] for v in variants if v in WS), None)
    overrides: dict[str, Any] = {}
    for v in variants:
        overrides.update(VARIANTS.get(v, {}))
        if "=" in v:  # a presence setting: +ROOM_STATE_FRAMES=2000
            key, _, value = v.partition("=")
            overrides[key] = json.loads(value)
    if overrides:
        env["PRESENCE_OVERRIDES"] = json.dumps(overrides)
    stalls = os.environ.get("BENCH_BIG_ROOMS_STALLS")  # a folder: bench/stalls.py
    if stalls:
        env["BENCH_BIG_ROOMS_STALLS"] = stalls
    servers = [
        Server(
            db,
            name=f"{base}-{i}",
            env={**env, "BIG_ROOMS_SIDE": name},
            ws=ws,
            deflate="nodeflate" not in variants,
            ping="noping" not in variants,
            app_dir=app_dir,
        )
        for i in range(2)
    ]
    if stalls:
        machine = subprocess.Popen([sys.executable, "-m", "bench.stalls", stalls, "machine"])
        ctx.on_close(machine.kill)
    for server in servers:
        ctx.on_close(server.stop)
        server.start(timeout=120)
    redis = ctx.redis.client()
    pids = [s.pid for s in servers]

    def cpu() -> float:
        return sum(cpu_seconds(p) for p in pids)  # type: ignore[arg-type]

    out: dict[str, Any] = {"load_start": os.getloadavg()}
    spy = os.environ.get("BENCH_BIG_ROOMS_PYSPY")
    try:
        kind = client_kind()
        out["client"] = kind
        ctx.log(f"big_rooms {name}: {counted} sockets, {clients} {kind} load processes, load "
                f"{os.getloadavg()}")  # fmt: skip
        step = max(1, members // max(PROBE, 1))
        probe = list(range(step // 2, members, step))[:PROBE] if PROBE else []
        probe = [g for g in probe if g >= min(SENDERS, members // 2)]  # watchers only
        load = Load(folder, servers, cookies, clients, probe, kind=kind)

        def clients_cpu() -> float:
            return sum(cpu_seconds(p) for p in load.pids)

        def who() -> dict[str, int]:
            named = {f"server{i}": s.pid for i, s in enumerate(servers)}
            return {**named, **{f"client{i}": p for i, p in enumerate(load.pids)}}

        # 1. the storm
        time.sleep(2)
        start_at = time.time() + 2
        cpu0, cmd0, ccpu0 = cpu(), commandstats(redis), clients_cpu()
        calls0 = command_calls(redis)
        ctx.log(f"big_rooms {name}: storm of {members} joins within {SPREAD:g} s")
        if spy and "storm" in os.environ.get("BENCH_BIG_ROOMS_PYSPY_PHASES", "states"):
            profile(spy, f"{name}-storm", who(), SPREAD + 20)
        load.send(phase="storm", room=ROOM, n=members, start_at=start_at, spread=SPREAD,
                  settle=SETTLE)  # fmt: skip
        parts = load.results()
        cpu1, cmd1, ccpu1 = cpu(), commandstats(redis), clients_cpu()
        calls1 = command_calls(redis)
        by_command = {k: v - calls0.get(k, 0) for k, v in calls1.items()}
        socks = [s for p in parts for s in p["sockets"]]
        truth = {u for p in parts for u in p["users"]}  # every member's join was served
        ends = [s[2] for s in socks if s[2] is not None]
        storm_end = max(ends) if len(ends) == members else float("inf")
        fulls = [s[3] for s in socks]
        whole = None if None in fulls else max(fulls)
        storm_s = storm_end - start_at
        # a storm never served has no rate over it (not 0 frames a second)
        per_socket = [s[0] / storm_s for s in socks] if 0 < storm_s < float("inf") else [None]
        final = [r for p in parts for r in rosters(p)]
        out["storm"] = {
            "storm_s": storm_s,
            "frames_per_socket_s": None if None in per_socket else sum(per_socket) / len(socks),
            "max_frames_per_socket_s": None if None in per_socket else max(per_socket),
            "bytes_per_socket": sum(s[1] for s in socks) / len(socks),
            "converged_after_storm_s": None if whole is None else max(0.0, whole - storm_end),
            "rosters_equal": sum(r == truth for r in final),
            "closed_sockets": sum(p["closed"] for p in parts),
            "close_codes": [p.get("close_codes") for p in parts],
            # (how many a roster lacks, how many it has too many, a few it lacks): none
            "wrong_rosters": [
                (len(truth - r), len(r - truth), sorted(truth - r)[:3], s[2] is None)
                for r, s in zip(final, socks, strict=True)
                if r != truth
            ][:10],
            "members": len(truth),
            "cpu_s": cpu1 - cpu0,
            "redis_commands": cmd1 - cmd0,
            "clients_cpu_s": ccpu1 - ccpu0,
            "clients": [p["client"] for p in parts],
            "redis_by_command": dict(sorted(by_command.items(), key=lambda kv: -kv[1])[:10]),
        }
        ctx.log(f"big_rooms {name}: storm {json.dumps(out['storm'])}")
        phases = os.environ.get("BENCH_BIG_ROOMS_PHASES", "storm,states,count").split(",")
        if "states" in phases:
            # 2. room states
            time.sleep(2)
            start_at = time.time() + 1
            seconds = ctx.size(STATE_SECONDS, 5)
            load.send(phase="states", room=ROOM, n=members, start_at=start_at,
                      seconds=seconds, senders=min(SENDERS, members // 2), hz=HZ)  # fmt: skip
            time.sleep(max(0.0, start_at - time.time()))
            if spy:
                profile(spy, f"{name}-states", who(), seconds)
            cpu0, ccpu0 = cpu(), clients_cpu()
            time.sleep(max(0.0, start_at + seconds - time.time()))
            cpu1, ccpu1 = cpu(), clients_cpu()  # the senders' seconds (not the drain after)
            parts = load.results()
            frames = sum(p["frames"] for p in parts)
            loaded = parts[:-1] if load.probing else parts
            latencies = sorted(x * 1000 for p in loaded for x in p["latencies"])
            probed = sorted(x * 1000 for x in parts[-1]["latencies"]) if load.probing else []
            out["states"] = {
                "p50_ms": percentile(latencies, 50) if latencies else None,
                "p99_ms": percentile(latencies, 99) if latencies else None,
                "frames": frames,
                "frames_per_socket_s": frames / members / seconds,
                "bytes_per_socket_s": sum(p["bytes"] for p in parts) / members / seconds,
                "cpu_s": cpu1 - cpu0,
                "cpu_us_per_frame": (cpu1 - cpu0) / frames * 1e6 if frames else None,
                "probe_p50_ms": percentile(probed, 50) if probed else None,
                "probe_p99_ms": percentile(probed, 99) if probed else None,
                "probe_n": len(probed),
                "clients_cpu_s": ccpu1 - ccpu0,
                "clients_cpu_us_per_frame": (ccpu1 - ccpu0) / frames * 1e6 if frames else None,
                "clients": [p["client"] for p in parts],
            }
            if stalls:  # where the processes stood still in the phase (and its drain)
                from .stalls import summary

                out["states"]["stalls"] = summary(stalls, start_at, time.time())
            ctx.log(f"big_rooms {name}: states {json.dumps(out['states'])}")
        if "count" in phases:
            # 3. the count-only room
            join_spread = max(10.0, counted / 500)
            start_at = time.time() + join_spread + 15
            seconds, churners = ctx.size(CHURN_SECONDS, 10), min(CHURNERS, counted // 10)
            load.send(phase="count", room=STADIUM, n=counted, start_at=start_at,
                      spread=join_spread, seconds=seconds, churners=churners, rate=CHURN)  # fmt: skip
            time.sleep(max(0.0, start_at - time.time()))
            cpu0 = cpu()
            time.sleep(max(0.0, start_at + seconds - time.time()))
            cpu1 = cpu()
            parts = load.results()
            changes = sum(p["changes"] for p in parts)
            others = sum(p["others"] for p in parts)
            out["count"] = {
                "joined": all(p["joined"] for p in parts),
                # sockets whose first count had not come when the churn began (Node's client)
                "uncounted": sum(p.get("uncounted", 0) for p in parts),
                "changes": changes,
                "changes_per_s": changes / seconds,
                "frames_per_change": sum(p["frames"] for p in parts) / max(changes, 1),
                "bytes_per_change": sum(p["bytes"] for p in parts) / max(changes, 1),
                "bytes_per_member_minute": sum(p["bytes"] for p in parts)
                / max(others, 1)
                / seconds
                * 60,
                "frames_per_member_s": sum(p["frames"] for p in parts) / max(others, 1) / seconds,
                "cpu_s": cpu1 - cpu0,
                "cpu_ms_per_change": (cpu1 - cpu0) / max(changes, 1) * 1000,
            }
            ctx.log(f"big_rooms {name}: count {json.dumps(out['count'])}")
        load.close()
        out["load_end"] = os.getloadavg()
        ctx.log(f"big_rooms {name}: load {out['load_start']} -> {out['load_end']}")
    finally:
        for server in servers:
            tracebacks = server.tracebacks()
            if tracebacks:
                ctx.log(f"big_rooms {name}: {server.name} printed tracebacks:\n{server.log()}")
            server.stop()
    return out


def measure(ctx: Context) -> dict[str, dict[str, Any]]:
    members, counted, _ = sizes(ctx)
    folder = Path(tempfile.mkdtemp(prefix="bench-big-rooms-"))
    ctx.on_close(lambda: shutil.rmtree(folder, ignore_errors=True))
    db = Database(
        folder / "db.sqlite3",
        settings="bench.big_rooms_settings",
        env={"REDIS_URL": ctx.redis.url},
    ).migrate()
    ctx.log(f"big_rooms: {counted} users and sessions")
    users = db.users([f"m{i}" for i in range(counted)])
    cookies = [users[f"m{i}"].cookie for i in range(counted)]
    out = {}
    for name in os.environ.get("BENCH_BIG_ROOMS_SIDES", "ours,today").split(","):
        ctx.redis.client().flushall()
        out[name] = side(ctx, name, db, cookies, folder)
    return out


@benchmark("big_rooms", "17. big rooms: a storm, room states and a count-only room, vs today's")
def run(ctx: Context) -> list[Row]:
    members, counted, clients = sizes(ctx)
    got = measure(ctx)
    # ours and today's path as named, else the first side of each (``ours+noping``, ...)
    first = {base: n for n in reversed(list(got)) for base in [n.split("+")[0]]}
    ours_name = "ours" if "ours" in got else first.get("ours", next(iter(got)))
    today_name = "today" if "today" in got else first.get("today")
    ours, today = got[ours_name], got.get(today_name) if today_name else None
    label = f"{today_name or 'today'}: today's path ({BASE}: each socket decodes)"
    details = {**got, "load": os.getloadavg(), "members": members, "counted": counted,
               "clients": clients, "base": BASE, "client": client_kind()}  # fmt: skip
    never = float("inf")

    def both(part: str, key: str) -> tuple[float, float]:
        a = ours.get(part, {}).get(key)
        b = today.get(part, {}).get(key) if today else None
        return (never if a is None else a), (never if b is None else b)

    size = f"{members:,} sockets, 2 uvicorn processes, joins asked within {SPREAD:g} s"
    rows = []
    a, b = both("storm", "max_frames_per_socket_s")
    rows.append(
        Row(
            "17 big_rooms",
            f"storm: the busiest socket's membership frames/s, {size}",
            a,
            "",
            b,
            label,
            details=details,
            checks=[Check(f"<= the tick rate ({TICK_RATE}/s)", a, "<=", TICK_RATE)],
        )
    )
    for key, metric, unit in (
        ("frames_per_socket_s", "storm: membership frames per socket per second (mean)", ""),
        ("storm_s", "storm: first join to the last snapshot served", "s"),
        ("bytes_per_socket", "storm: membership bytes per socket", "B"),
        ("cpu_s", "storm: servers' CPU seconds", "s"),
        ("redis_commands", "storm: Redis commands", ""),
    ):
        a, b = both("storm", key)
        rows.append(Row("17 big_rooms", metric, a, unit, b, label))
    a, b = both("storm", "converged_after_storm_s")
    rows.append(
        Row(
            "17 big_rooms",
            "storm: every roster whole, after the storm's end",
            a,
            "s",
            b,
            label,
            checks=[Check("<= 2 s", a, "<=", 2)],
        )
    )
    a, b = both("storm", "rosters_equal")
    rows.append(
        Row(
            "17 big_rooms",
            "storm: rosters equal to the membership",
            a,
            "",
            b,
            label,
            checks=[Check("every one", members - a, "<=", 0)],
        )
    )
    states = f"{SENDERS} senders at {HZ} Hz, {members - SENDERS:,} watching"
    a, b = both("states", "p99_ms")
    rows.append(
        Row(
            "17 big_rooms",
            f"room states: delivery p99, {states}",
            a,
            "ms",
            b,
            label,
            checks=[Check("<= 150 ms", a, "<=", 150)],
        )
    )
    for key, metric, unit in (
        ("p50_ms", "room states: delivery p50", "ms"),
        ("cpu_us_per_frame", "room states: servers' CPU per delivered frame", "us"),
        ("frames_per_socket_s", "room states: frames per socket per second", ""),
    ):
        a, b = both("states", key)
        rows.append(Row("17 big_rooms", metric, a, unit, b, label))
    for key, metric, unit in (
        ("probe_p99_ms", "room states: delivery p99 at the probe's idle sockets", "ms"),
        ("clients_cpu_us_per_frame", "room states: load clients' CPU per delivered frame", "us"),
    ):
        a, b = both("states", key)
        rows.append(Row("17 big_rooms", metric, a, unit, b, label))
    # each variant side (``ours+nodeflate``, ...) beside the side it varies, or beside the
    # first of its kind when that side did not run (``ours+nodeflate,ours+nodeflate+X=1``)
    firsts = {"ours": ours_name, "today": today_name}
    for name, got_side in got.items():
        base = name.split("+")[0]
        against = base if base in got else firsts.get(base)
        if against is None or name == against:
            continue
        for part, key, metric, unit in (
            ("storm", "cpu_s", "storm: servers' CPU seconds", "s"),
            ("states", "p99_ms", "room states: delivery p99", "ms"),
            ("states", "probe_p99_ms", "room states: delivery p99 at the probe", "ms"),
            ("states", "p50_ms", "room states: delivery p50", "ms"),
            ("states", "cpu_us_per_frame", "room states: servers' CPU per delivered frame", "us"),
            ("states", "clients_cpu_us_per_frame", "room states: clients' CPU per frame", "us"),
            ("states", "frames_per_socket_s", "room states: frames per socket per second", ""),
            ("count", "cpu_ms_per_change", "count-only room: servers' CPU per change", "ms"),
        ):
            a = got_side.get(part, {}).get(key)
            b = got[against].get(part, {}).get(key)
            rows.append(
                Row(
                    "17 big_rooms",
                    f"[{name}] {metric}",
                    never if a is None else a,
                    unit,
                    never if b is None else b,
                    against,
                )
            )
    churn = f"{counted:,} sockets, {CHURN} joins+leaves/s"
    for key, metric, unit in (
        ("bytes_per_member_minute", f"count-only room: bytes a member gets a minute, {churn}", "B"),
        ("frames_per_change", "count-only room: frames to the others per join or leave", ""),
        ("bytes_per_change", "count-only room: bytes to the others per join or leave", "B"),
        ("cpu_ms_per_change", "count-only room: servers' CPU per join or leave", "ms"),
        ("changes_per_s", "count-only room: joins and leaves made a second", ""),
    ):
        a, b = both("count", key)
        rows.append(Row("17 big_rooms", metric, a, unit, b, label))
    return rows


if __name__ == "__main__":  # a quick look without the harness
    from .common import table

    context = Context(quick=True)
    try:
        print(table(run(context)))
    finally:
        context.close()
