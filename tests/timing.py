"""Timing promises in the tests: a measured time is held to a multiple of the promised bound.

A promise (a killed process' users evicted within ``LEASE_TTL + SWEEP_INTERVAL``, a Redis
restart healed within ``HEARTBEAT_INTERVAL + HEARTBEAT_FLUSH_INTERVAL``, a dropped socket gone
within ``DISCONNECT_GRACE + SWEEP_INTERVAL``) is computed from the settings the code under test
runs with. A test waits for the condition itself, never sleeping in the hope that it happened,
prints the time it took beside the promise, and fails only past :func:`limit`: ``SLACK`` times
the promise. A loaded machine stretches timers and the work behind them by a factor, not by a
fixed amount, so the slack is a factor too. ``SLACK`` (3) holds with a CPU hog on one of two
cores (``scripts/soak_tests.sh``); ``PRESENCE_TIMING_SLACK`` sets another.

A window in which nothing may happen (no leave after a reload within the grace, no event about
an invisible user) stays a sleep: a slow machine can make it miss a stray event, not fail a
correct run.

Where a test tells two outcomes apart by time (a dropped socket gone after the grace, not after
the lease), the settings are chosen so that the limit of one stays below the other
(:func:`apart`), whatever the slack.
"""

from __future__ import annotations

import os

SLACK = float(os.environ.get("PRESENCE_TIMING_SLACK", "3"))


def limit(promise: float) -> float:
    """How long a test lets the promised ``promise`` seconds take before it fails."""
    return SLACK * promise


def said(what: str, took: float, promise: float) -> str:
    """One line for the test's output: the measured time beside its promise and limit. With
    ``PRESENCE_TIMING_LOG`` set (scripts/soak_tests.sh), the line is appended to that file too,
    with the test's name: pytest shows a passing test's output to nobody."""
    line = (
        f"{what} {took:.2f} s (promise {promise:.2f} s, {took / promise:.2f}x; "
        f"limit {limit(promise):.2f} s = {SLACK:g}x)"
    )
    path = os.environ.get("PRESENCE_TIMING_LOG")
    if path:
        test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]
        with open(path, "a") as log:
            log.write(f"{test}: {line}\n")
    return line


def apart(promise: float, other: float) -> None:
    """Fails a test whose settings cannot tell ``promise`` from ``other`` (a longer bound)."""
    assert limit(promise) < other, (
        f"the limit of {promise} s ({limit(promise)} s) reaches {other} s: choose other settings"
    )
