"""A pytest plugin: the store runs the variant scripts (bench/variants/*.lua) instead of its own.

    BENCH_VARIANTS=heartbeat,get_many,sweep .venv/bin/python -m pytest tests/test_store.py \
        tests/test_store_model.py -p bench.variants.swap
"""

from __future__ import annotations

import os
from functools import cache

from presence_app.store import scripts

from . import SCRIPTS, full_source

CHOSEN = [n for n in os.environ.get("BENCH_VARIANTS", ",".join(SCRIPTS)).split(",") if n]
_original = scripts.load


@cache
def load() -> dict[str, scripts.Script]:
    out = dict(_original())
    for name in CHOSEN:
        out[name] = scripts.Script(name, full_source(name, variant=True))
    return out


scripts.load = load


def pytest_report_header(config):  # noqa: ARG001 - pytest hook signature
    return f"bench.variants.swap: the store runs the variant scripts {', '.join(CHOSEN)}"
