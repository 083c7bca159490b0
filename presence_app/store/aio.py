"""The store's asynchronous face (redis.asyncio): consumers and async views."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aredis
from redis.exceptions import NoScriptError

from . import scripts
from .base import BaseStore, translate_error
from .plans import Plan
from .sync import _queue
from .types import StoreConfig, Transition


class AsyncStore(BaseStore):
    """Presence on a ``redis.asyncio.Redis`` or ``RedisCluster``; every method is awaited."""

    def __init__(self, client: aredis.Redis, config: StoreConfig | None = None) -> None:
        super().__init__(config)
        self.client = client

    async def _send(self, calls: list) -> list[Any]:
        for attempt in (1, 2):
            pipe = self.client.pipeline(transaction=False)
            for call in calls:
                _queue(pipe, call)
            replies = await pipe.execute(raise_on_error=False)
            if attempt == 1 and any(isinstance(r, NoScriptError) for r in replies):
                for name in {call.script for call in calls if call.script}:
                    await self.client.script_load(scripts.load()[name].source)
                continue
            for reply in replies:
                if isinstance(reply, Exception):
                    raise translate_error(reply)
            return replies
        raise AssertionError("unreachable")

    async def run(self, plan: Plan) -> Any:
        return plan.finish(await self._send(plan.calls))

    async def sweep(self, now: float | None = None) -> list[Transition]:
        out: list[Transition] = []
        more = True
        while more:
            more, transitions = await self.run(self.plans.sweep(now))
            out.extend(transitions)
        return out

    async def ping(self) -> bool:
        return bool(await self.client.ping())

    def sweep_lock(self, timeout: float):
        return self.client.lock(self.keys.lock(), timeout=timeout, blocking=False)

    async def aclose(self) -> None:
        await self.client.aclose()
