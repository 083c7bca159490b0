"""The benchmark modules, in the order they run. Each registers its benchmarks on import with
``bench.common.benchmark``; to add one (e.g. 6. WebSockets end to end, 7. middleware cost),
write ``bench/<name>.py`` and list it here."""

MODULES = [
    "bench.front_door",  # 2: reads and page tags on 1 M users of every kind; 16: sync writes
    "bench.store_reads",  # 3
    "bench.sockets",  # 6 (uvicorn, daphne)
    "bench.middleware",  # 7
    "bench.peer",  # 8 (SQLite, PostgreSQL)
    "bench.channel_layer",  # 9: the channel layer for many workers (issue 8)
    "bench.fanout",  # 10: a status change to 10 k / 100 k watchers; a 10 k-member room (issue 16)
    "bench.sse",  # 11: SSE streams beside WebSockets (issue 15)
    "bench.rolling",  # 12: a rolling deploy of 2 uvicorn behind one address
    "bench.roomstate",  # 13: live room state, 100 cursors at 30 Hz, coalesced vs naive
    "bench.store_layout3",  # 14: the store's memory, heartbeats and sweep through Store
    "bench.soak",  # 15: 30 minutes of churn: memory flat, the key space exact (issue 31)
    "bench.big_rooms",  # 17: a storm of joins into one room, diffs vs a frame a join (issue 44)
]
