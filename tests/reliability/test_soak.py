"""The soak (bench/soak.py, bench row 15), small: 200 WebSockets and 50 SSE streams through one
address onto two server processes, joining and leaving rooms, changing status and reconnecting
at random for 90 s (bench/soak_client.py, a separate process). Then a fifth of them stay and
the rest close: once the grace, a sweep and METADATA_TTL have passed, the store holds exactly
the live users (online, in their rooms, one connection each; no record, registry field or
process-set member of anyone else) and no key its own names do not expect; then
everybody closes: nobody online, no user or room key, and no channel-layer group, reply channel
or layer key left (on either layer: the pub/sub layer's subscriptions beside the servers' own,
the core layer's keys).

Memory flatness is the bench row's figure, not asserted here.
"""

from __future__ import annotations

import json
import os

import pytest

from bench.soak import SoakConfig, exact, soak

from .settings import TIMERS

METADATA_TTL = 5


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("layer", ["pubsub", "core"])
async def test_soak_leaves_exactly_the_live_users(db, prefix, layer):
    cfg = SoakConfig(
        sockets=200,
        streams=50,
        seconds=int(os.environ.get("PRESENCE_SOAK_SECONDS", "90")),  # nox's soak: 30
        warmup=20,
        window=20,
        sample_every=5,
        mean_gap=5,
        rooms=20,
        ramp=10,
        heartbeat=TIMERS["HEARTBEAT_INTERVAL"],
        lease_ttl=TIMERS["LEASE_TTL"],
        grace=TIMERS["DISCONNECT_GRACE"],
        sweep=TIMERS["SWEEP_INTERVAL"],
        online_window=TIMERS["ONLINE_WINDOW"],
        metadata_ttl=METADATA_TTL,
    )
    env = {
        "PRESENCE_OVERRIDES": json.dumps({"METADATA_TTL": METADATA_TTL}),
        "RELIABILITY_LAYER": layer,
    }
    result = await soak(db, cfg, prefix=prefix, layer_prefix="asgi-" + prefix, env=env)
    print(json.dumps({"counts": result.counts, "stayers": result.stayers, "empty": result.empty}))
    assert result.counts["reconnect"] and result.counts["join"] and result.counts["status"]
    assert result.unsettled == 0
    assert len(result.live) >= 25, result.live  # the stayers
    assert exact(result.stayers), result.stayers
    assert exact(result.empty), result.empty
    assert result.empty["online_count"] == 0
    assert result.empty["stray_group_count"] == 0, result.empty
    assert result.empty["stray_channel_count"] == 0, result.empty
    assert result.empty["layer_key_count"] == 0, result.empty
    assert result.tracebacks == 0, "\n\n".join(result.traceback_texts)
