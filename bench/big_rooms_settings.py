"""Settings of the servers benchmark 17 starts (bench/big_rooms.py): benchmark 6's (the demo
project's as shipped, on the run's Redis and a SQLite file), with one count-only room
(``stadium``) and the per-socket frame rate of presence.js' room-state senders left as shipped.
"""

import json
import os

from bench.ws_settings import *  # noqa: F403

PRESENCE = {  # noqa: F405
    **PRESENCE,  # noqa: F405
    "MAX_FRAMES_PER_SECOND": 100,
    "COUNT_ONLY_ROOMS": [r"stadium"],
    # a side's variant (bench/big_rooms.py, VARIANTS)
    **json.loads(os.environ.get("PRESENCE_OVERRIDES") or "{}"),
}

if os.environ.get("BENCH_BIG_ROOMS_STALLS"):  # where this server stands still (bench/stalls.py)
    from bench.stalls import watch

    watch(os.environ["BENCH_BIG_ROOMS_STALLS"], "server")
