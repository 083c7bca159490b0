"""``python -m bench``: starts its own Redis (and, for the peer, SQLite and PostgreSQL), runs every
benchmark, prints the table and writes JSON. See bench/README.md."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
import traceback
from pathlib import Path

from .common import REGISTRY, ROOT, Context, Row, machine, table, write_json
from .registry import MODULES

DEFAULT_JSON = ROOT / "bench" / "results" / "latest.json"


def load() -> None:
    for name in MODULES:
        importlib.import_module(name)


def profiled(bench, folder: Path) -> list[Row]:
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.0005)
    profiler.start()
    try:
        return bench.run(CONTEXT[0])
    finally:
        profiler.stop()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"profile-{bench.name}.txt"
        path.write_text(profiler.output_text(unicode=True, color=False, show_all=False))
        print(f"profile written to {path}", file=sys.stderr)


CONTEXT: list[Context] = []


def main(argv: list[str] | None = None) -> int:
    load()
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="smaller populations and shorter series (smoke run)"
    )
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        choices=sorted(REGISTRY),
        help="run only this benchmark (repeatable): " + ", ".join(REGISTRY),
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=DEFAULT_JSON,
        help=f"where to write the results (default {DEFAULT_JSON.relative_to(ROOT)})",
    )
    parser.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="run each benchmark under pyinstrument and write bench/results/profile-NAME.txt "
        "(the profiler slows the client side: figures of a profiled run are not results)",
    )
    parser.add_argument(
        "--wait-quiet",
        type=float,
        default=0,
        metavar="SECONDS",
        help="first wait up to SECONDS for the machine's 1-minute load average to drop below 1 "
        "(other processes on a shared machine spoil latencies)",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)

    if args.list:
        for bench in REGISTRY.values():
            print(f"{bench.name:12} {bench.title}")
        return 0

    selected = [b for b in REGISTRY.values() if not args.only or b.name in args.only]
    ctx = Context(quick=args.quick, verbose=not args.quiet)
    CONTEXT[:] = [ctx]
    rows: list[Row] = []
    errors: dict[str, str] = {}
    timings: dict[str, float] = {}
    if args.wait_quiet:
        deadline = time.monotonic() + args.wait_quiet
        while os.getloadavg()[0] >= 1.0 and time.monotonic() < deadline:
            ctx.log(f"waiting for a quieter machine (load average {os.getloadavg()[0]:.2f})")
            time.sleep(15)
    started = time.monotonic()
    load_before = os.getloadavg()
    try:
        for bench in selected:
            ctx.log(f"== {bench.title}")
            t0 = time.monotonic()
            try:
                if args.profile:
                    rows.extend(profiled(bench, args.json.parent))
                else:
                    rows.extend(bench.run(ctx))
            except Exception:  # noqa: BLE001 - report it, go on with the others
                errors[bench.name] = traceback.format_exc()
                ctx.log(f"!! {bench.name} failed:\n{errors[bench.name]}")
            timings[bench.name] = round(time.monotonic() - t0, 1)
        redis_version = ctx.redis.version() if ctx.redis.server else None
    finally:
        ctx.close()
    total = time.monotonic() - started

    print()
    print(table(rows))
    if args.markdown:
        print()
        print(table(rows, markdown=True))
    failed = [r for r in rows if r.passed is False]
    print()
    print(
        f"load average before/after: {load_before[0]:.2f} / {os.getloadavg()[0]:.2f}"
        " (2 cores, shared)"
    )
    print(
        f"{sum(r.passed is True for r in rows)} passed, {len(failed)} missed, "
        f"{sum(r.passed is None for r in rows)} informational; {len(errors)} errors; {total:.0f}s"
    )
    meta = {
        "command": "python -m bench"
        + (" " + " ".join(argv if argv is not None else sys.argv[1:])).rstrip(),
        "quick": args.quick,
        "profiled": args.profile,
        "machine": {**machine(), "redis_server_run": redis_version},
        "seconds": round(total, 1),
        # Other processes' load on this shared machine, before and after (1, 5, 15 min averages).
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "seconds_per_benchmark": timings,
        "errors": errors,
    }
    write_json(args.json, rows, meta)
    print(f"results written to {args.json}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
