"""What every benchmark shares: timing, the Redis fixture, the result rows, the table and JSON.

A benchmark is a function ``run(ctx) -> list[Row]`` registered with :func:`benchmark` in a module
listed in ``bench.registry.MODULES``. It measures our figure and its baseline side by side, in the
same run and against the same servers, and states each target as a :class:`Check`. The harness
prints one table row per :class:`Row` and writes every row (with its details) to JSON.
"""

from __future__ import annotations

import gc
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis

from presence_app.testing import RedisServer

ROOT = Path(__file__).resolve().parent.parent


# -- results ------------------------------------------------------------------------------------
@dataclass
class Check:
    """One target: ``value`` compared with ``limit`` by ``op`` ('>=' or '<=')."""

    label: str
    value: float
    op: str
    limit: float

    @property
    def ok(self) -> bool:
        return self.value >= self.limit if self.op == ">=" else self.value <= self.limit


@dataclass
class Row:
    """One measured figure against its baseline. ``ratio`` is ours / baseline (None without a
    baseline); ``checks`` are the targets (none: shown for information)."""

    bench: str
    metric: str
    ours: float
    unit: str
    baseline: float | None = None
    baseline_label: str = ""
    checks: list[Check] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if self.baseline is None or self.baseline == 0:
            return None
        return self.ours / self.baseline

    @property
    def passed(self) -> bool | None:
        return all(c.ok for c in self.checks) if self.checks else None

    @property
    def target(self) -> str:
        return "; ".join(c.label for c in self.checks)

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["ratio"] = self.ratio
        out["passed"] = self.passed
        out["checks"] = [{**asdict(c), "ok": c.ok} for c in self.checks]
        return out


@dataclass
class Benchmark:
    name: str
    title: str
    run: Callable[[Context], list[Row]]
    quick_ok: bool = True  # also part of --quick


REGISTRY: dict[str, Benchmark] = {}


def benchmark(name: str, title: str, quick_ok: bool = True):
    """Registers ``run(ctx) -> list[Row]`` under ``name`` (the --only key)."""

    def register(fn: Callable[[Context], list[Row]]) -> Callable[[Context], list[Row]]:
        if name in REGISTRY:
            raise ValueError(f"benchmark {name!r} registered twice")
        REGISTRY[name] = Benchmark(name, title, fn, quick_ok)
        return fn

    return register


# -- processes ----------------------------------------------------------------------------------
def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used, its ended threads included."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int:
    """A process' resident memory."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


# -- workers ------------------------------------------------------------------------------------
def run_worker(module: str, args: list[str], env: dict[str, str], timeout: float = 300) -> dict:
    """``python -m module *args`` from the repository root: a benchmark part that needs Django
    settings of its own. Its last stdout line is its JSON result; a failure raises with its
    stderr."""
    return worker_results(module, args, env, timeout)[-1]


def worker_results(
    module: str,
    args: list[str],
    env: dict[str, str] | None = None,
    timeout: float = 300,
    context: Callable[[], str] = str,
) -> list[dict]:
    """:func:`run_worker` for a worker that prints a JSON object per result (a line starting
    with ``{``); a failure raises with its stderr and ``context()`` (a server's log)."""
    out = subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
    )
    if out.returncode != 0:
        raise RuntimeError(
            f"{module} {' '.join(args)[:80]} failed:\n{out.stderr[-4000:]}\n{context()}"
        )
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


# -- timing -------------------------------------------------------------------------------------
def percentile(samples: Sequence[float], p: float) -> float:
    """The nearest-rank percentile (p in 0..100) of samples (sorted or not)."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def summarize_ns(samples_ns: Sequence[int]) -> dict[str, float]:
    """Latency summary in milliseconds."""
    ordered = sorted(samples_ns)
    ms = [s / 1e6 for s in ordered]
    return {
        "n": len(ms),
        "min_ms": ms[0],
        "p50_ms": percentile(ms, 50),
        "p90_ms": percentile(ms, 90),
        "p99_ms": percentile(ms, 99),
        "max_ms": ms[-1],
        "mean_ms": sum(ms) / len(ms),
    }


def latencies(
    fns: dict[str, Callable[[], Any]], n: int, warmup: int = 50, block: int = 50, series: int = 5
) -> dict[str, dict]:
    """Times each call of every function, side by side: blocks of ``block`` calls of each
    function in turn, so that a noisy moment of the machine hits them all alike. The ``n`` calls
    of each are split into ``series`` consecutive series; the summary (ms) pools every sample,
    except ``p99_ms``, which is the median of the series' p99s: a burst of load from another
    process on this shared machine spoils one series, not the figure (``p99_pooled_ms`` keeps the
    pooled one). The garbage collector runs before each series, not during it."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    runs: dict[str, list[list[int]]] = {name: [] for name in fns}
    clock = time.perf_counter_ns
    per_series = max(1, n // series)
    was = gc.isenabled()
    try:
        for _ in range(series):
            gc.collect()
            gc.disable()
            current = {name: [] for name in fns}
            done = 0
            while done < per_series:
                k = min(block, per_series - done)
                for name, fn in fns.items():
                    out = current[name]
                    for _ in range(k):
                        t0 = clock()
                        fn()
                        out.append(clock() - t0)
                done += k
            for name in fns:
                runs[name].append(current[name])
            if was:
                gc.enable()
    finally:
        if was:
            gc.enable()
    out: dict[str, dict] = {}
    for name, chunks in runs.items():
        pooled = [s for chunk in chunks for s in chunk]
        summary = summarize_ns(pooled)
        p99s = [percentile(chunk, 99) / 1e6 for chunk in chunks]
        summary["p99_pooled_ms"] = summary["p99_ms"]
        summary["p99_series_ms"] = p99s
        summary["p99_ms"] = median(p99s)
        out[name] = summary
    return out


def rates(
    fns: dict[str, Callable[[], int]],
    rounds: int,
    seconds: float,
    probe: Callable[[str, bool], Any] | None = None,
) -> dict[str, dict]:
    """Throughput side by side: ``rounds`` rounds, each running every function in turn for about
    ``seconds``. A function does one unit of work and returns how many items it handled.
    Returns, per name, the items/s of each round and their median. ``probe(name, started)``, if
    given, is called before (False) and after (True) each run; what it returns after is kept in
    ``probes`` (e.g. Redis' own time per call from INFO commandstats, for the same calls)."""
    per: dict[str, list[float]] = {name: [] for name in fns}
    probes: dict[str, list[Any]] = {name: [] for name in fns}
    for fn in fns.values():  # warm up: scripts loaded, caches hot
        fn()
    clock = time.perf_counter_ns
    for _ in range(rounds):
        for name, fn in fns.items():
            gc.collect()
            if probe:
                probe(name, False)
            items, calls, t0 = 0, 0, clock()
            deadline = t0 + int(seconds * 1e9)
            while True:
                items += fn()
                calls += 1
                t1 = clock()
                if t1 >= deadline:
                    break
            per[name].append(items / ((t1 - t0) / 1e9))
            if probe:
                probes[name].append(
                    {"wall_usec_per_call": (t1 - t0) / 1e3 / calls, **(probe(name, True) or {})}
                )
    return {
        name: {"rounds": r, "median": median(r), "best": max(r), "probes": probes[name]}
        for name, r in per.items()
    }


def walls_us(walls: dict[str, dict[str, dict]]) -> dict[str, tuple[float, float]]:
    """``{kind: {side: a latencies() summary}}`` as ``{"kind side": (p50, p99)}`` in us (JSON)."""
    return {
        f"{kind} {side}": (w["p50_ms"] * 1000, w["p99_ms"] * 1000)
        for kind, sides in walls.items()
        for side, w in sides.items()
    }


def server_of(client: Any) -> str:
    """The server a client talks to, as "redis 7.0.15" or "valkey 9.1.2"."""
    info = client.info("server")
    if "valkey_version" in info:
        return f"valkey {info['valkey_version']}"
    return f"redis {info['redis_version']}"


def median(values: Iterable[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    if not n:
        raise ValueError("no values")
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds, result) of one call."""
    t0 = time.perf_counter_ns()
    result = fn()
    return (time.perf_counter_ns() - t0) / 1e9, result


# -- the Redis fixture --------------------------------------------------------------------------
class RedisFixture:
    """One private redis-server for the whole run (started on first use, stopped at the end),
    with no persistence, so that snapshots never stall a measurement."""

    def __init__(self, extra: list[str] | None = None) -> None:
        self.extra = extra or []
        self.server: RedisServer | None = None
        self._clients: list[redis.Redis] = []

    def start(self) -> RedisFixture:
        if self.server is None:
            self.server = RedisServer(extra=self.extra).start()
        return self

    @property
    def url(self) -> str:
        return self.start().server.url  # type: ignore[union-attr]

    def client(self, **kwargs: Any) -> redis.Redis:
        # Long timeouts: building and dropping million-member keys takes seconds on a busy machine.
        kwargs.setdefault("socket_timeout", 120)
        c = redis.Redis.from_url(self.url, **kwargs)
        self._clients.append(c)
        return c

    def info(self, section: str) -> dict[str, Any]:
        return self.client().info(section)

    def version(self) -> str:
        return str(self.info("server")["redis_version"])

    def stop(self) -> None:
        for c in self._clients:
            try:
                c.close()
            except Exception:  # noqa: BLE001 - best effort at shutdown
                pass
        self._clients.clear()
        if self.server is not None:
            self.server.stop()
            shutil.rmtree(self.server.dir, ignore_errors=True)
            self.server = None


# -- the run's context --------------------------------------------------------------------------
class Context:
    """Handed to each benchmark: the mode, the shared Redis, shared datasets and a logger."""

    def __init__(self, quick: bool, verbose: bool = True) -> None:
        self.quick = quick
        self.verbose = verbose
        self.redis = RedisFixture()
        self.cache: dict[str, Any] = {}  # datasets shared between benchmarks (bench.dataset)
        self.started = time.monotonic()
        self._cleanups: list[Callable[[], None]] = []

    def size(self, full: int, quick: int) -> int:
        return quick if self.quick else full

    def log(self, message: str) -> None:
        if self.verbose:
            elapsed = time.monotonic() - self.started
            print(f"[{elapsed:7.1f}s] {message}", file=sys.stderr, flush=True)

    def on_close(self, fn: Callable[[], None]) -> None:
        self._cleanups.append(fn)

    def close(self) -> None:
        while self._cleanups:
            try:
                self._cleanups.pop()()
            except Exception as exc:  # noqa: BLE001 - keep cleaning up
                print(f"cleanup failed: {exc!r}", file=sys.stderr)
        self.redis.stop()


# -- output -------------------------------------------------------------------------------------
def fmt_num(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if unit == "ms":
        return f"{value:.3f} ms"
    if unit == "us":
        return f"{value:,.0f} us"
    if unit == "B":
        return f"{value:,.0f} B"
    if unit in ("/s", "hb/s"):
        return f"{value:,.0f}/s"
    if abs(value) >= 1000:
        return f"{value:,.0f}{(' ' + unit) if unit else ''}"
    return f"{value:.3g}{(' ' + unit) if unit else ''}"


def fmt_ratio(ratio: float | None) -> str:
    if ratio is None:
        return "-"
    return f"{ratio:.2f}x" if ratio < 100 else f"{ratio:,.0f}x"


def table(rows: list[Row], markdown: bool = False) -> str:
    head = ["benchmark", "metric", "ours", "baseline", "ratio", "target", "result"]
    body = []
    for r in rows:
        verdict = {True: "PASS", False: "FAIL", None: "info"}[r.passed]
        base = fmt_num(r.baseline, r.unit)
        if r.baseline_label and r.baseline is not None:
            base = f"{base} ({r.baseline_label})"
        body.append(
            [
                r.bench,
                r.metric,
                fmt_num(r.ours, r.unit),
                base,
                fmt_ratio(r.ratio),
                r.target or "-",
                verdict,
            ]
        )
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " for _ in head) + "|"]
        lines += [
            "| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in body
        ]
        return "\n".join(lines)
    widths = [
        max(len(h), *(len(row[i]) for row in body)) if body else len(h) for i, h in enumerate(head)
    ]
    sep = "  "
    lines = [
        sep.join(h.ljust(w) for h, w in zip(head, widths, strict=True)),
        sep.join("-" * w for w in widths),
    ]
    lines += [sep.join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in body]
    return "\n".join(lines)


def machine() -> dict[str, Any]:
    mem_gib = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    os_name = platform.platform()
    try:
        with open("/etc/os-release") as f:
            fields = dict(line.rstrip().split("=", 1) for line in f if "=" in line)
            os_name = fields.get("PRETTY_NAME", os_name).strip('"')
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory_gib": mem_gib,
        "os": os_name,
        "python": platform.python_version(),
        "redis_server": _redis_server_version(),
    }


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _redis_server_version() -> str | None:
    from presence_app.testing import find_redis_server

    try:
        out = subprocess.run(
            [find_redis_server(), "--version"], capture_output=True, text=True, timeout=10
        )
        for part in out.stdout.split():
            if part.startswith("v="):
                return part[2:]
    except Exception:  # noqa: BLE001 - informational only
        return None
    return None


def write_json(path: Path, rows: list[Row], meta: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        **meta,
        "rows": [r.as_json() for r in rows],
    }
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
