"""The store's synchronous face (redis-py): views, middleware, commands, threads."""

from __future__ import annotations

from typing import Any

import redis
from redis.exceptions import NoScriptError

from . import scripts
from .base import BaseStore, translate_error
from .plans import Call, Plan
from .types import StoreConfig, Transition


def _queue(pipe: Any, call: Call) -> None:
    if call.script:
        pipe.evalsha(scripts.load()[call.script].sha, len(call.keys), *call.keys, *call.args)
    else:
        pipe.execute_command(*call.args)


class Store(BaseStore):
    """Presence on a ``redis.Redis`` or ``redis.RedisCluster`` client."""

    def __init__(self, client: redis.Redis, config: StoreConfig | None = None) -> None:
        super().__init__(config)
        self.client = client

    def _send(self, calls: list[Call]) -> list[Any]:
        """All calls in one round trip; after a Redis restart (NOSCRIPT) the scripts are
        loaded again and the calls repeated once."""
        for attempt in (1, 2):
            pipe = self.client.pipeline(transaction=False)
            for call in calls:
                _queue(pipe, call)
            replies = pipe.execute(raise_on_error=False)
            if attempt == 1 and any(isinstance(r, NoScriptError) for r in replies):
                for name in {call.script for call in calls if call.script}:
                    self.client.script_load(scripts.load()[name].source)
                continue
            for reply in replies:
                if isinstance(reply, Exception):
                    raise translate_error(reply)
            return replies
        raise AssertionError("unreachable")

    def run(self, plan: Plan) -> Any:
        return plan.finish(self._send(plan.calls))

    def sweep(self, now: float | None = None) -> list[Transition]:
        """Evicts expired leases and users and announces idle ones; returns the transitions."""
        out: list[Transition] = []
        more = True
        while more:
            more, transitions = self.run(self.plans.sweep(now))
            out.extend(transitions)
        return out

    def clear(self) -> int:
        """Deletes every key of this store's prefix; returns how many."""
        deleted = 0
        for pattern, extra in self.housekeeping_keys():
            for node in self._nodes():
                batch = list(node.scan_iter(match=pattern, count=1000))
                for i in range(0, len(batch), 500):
                    deleted += node.unlink(*batch[i : i + 500])
            deleted += sum(self.client.unlink(key) for key in extra)
        return deleted

    def _nodes(self) -> list[Any]:
        if isinstance(self.client, redis.RedisCluster):
            return [self.client.get_redis_connection(n) for n in self.client.get_primaries()]
        return [self.client]

    def ping(self) -> bool:
        return bool(self.client.ping())

    def sweep_lock(self, timeout: float):
        """A redis-py lock, so that one process at a time sweeps."""
        return self.client.lock(self.keys.lock(), timeout=timeout, blocking=False)
