"""Proposed store changes, measured by ``python -m bench.experiments`` against the store's own
scripts and code: copies of presence_app/store/lua/*.lua with the change applied, and Python fast
paths. Nothing here is used by the product; the lead applies what is worth it.

``python -m pytest tests/test_store.py -p bench.variants.swap`` runs the store's own suite with the
variant scripts in place of the store's (BENCH_VARIANTS=heartbeat,get_many,sweep picks them).
"""

from __future__ import annotations

from functools import cache
from importlib import resources

SCRIPTS = ("heartbeat", "get_many", "sweep")


def variant_body(name: str) -> str:
    return resources.files(__package__).joinpath(f"{name}.lua").read_text()


def store_body(name: str) -> str:
    return resources.files("presence_app.store").joinpath("lua", f"{name}.lua").read_text()


@cache
def full_source(name: str, variant: bool) -> str:
    """The script as Redis runs it: lib.lua + the body (the store's, or the variant's)."""
    body = variant_body(name) if variant else store_body(name)
    return f"{store_body('lib')}\n{body}"
