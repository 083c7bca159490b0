"""The store's asynchronous face (redis.asyncio): consumers and async views."""

from __future__ import annotations

import asyncio
from typing import Any

import redis.asyncio as aredis
from redis.exceptions import NoScriptError, ResponseError

from . import scripts
from .base import BaseStore
from .plans import Call, Plan
from .sync import missing_scripts, queue, raise_errors, to_repeat
from .types import StoreConfig, Transition


async def single(client: Any, call: Call) -> Any:
    """The async twin of sync.single."""
    if not call.script:
        return await client.execute_command(*call.args)
    script = scripts.load()[call.script]
    try:
        return await client.evalsha(script.sha, len(call.keys), *call.keys, *call.args)
    except NoScriptError:
        await client.script_load(script.source)
        return await client.evalsha(script.sha, len(call.keys), *call.keys, *call.args)


async def pipeline(client: Any, calls: list[Call]) -> list[Any]:
    """The async twin of sync.pipeline: one round trip, scripts reloaded after NOSCRIPT."""
    if len(calls) == 1:
        try:
            return [await single(client, calls[0])]
        except ResponseError as exc:  # as a pipeline answers it
            return [exc]
    pipe = client.pipeline(transaction=False)
    for call in calls:
        queue(pipe, call)
    replies = await pipe.execute(raise_on_error=False)
    missing = missing_scripts(calls, replies)
    if missing:
        for name in missing:
            await client.script_load(scripts.load()[name].source)
        again = to_repeat(calls, replies)
        for i, reply in zip(again, await pipeline(client, [calls[i] for i in again]), strict=True):
            replies[i] = reply
    return replies


class AsyncStore(BaseStore):
    """Presence on a ``redis.asyncio.Redis`` or ``RedisCluster``; every method is awaited."""

    def __init__(
        self,
        client: aredis.Redis | aredis.RedisCluster,
        config: StoreConfig | None = None,
        *,
        process: str | None = None,
    ) -> None:
        super().__init__(config, process)
        self.client = client
        self.cluster = isinstance(client, aredis.RedisCluster)

    async def _send(self, calls: list[Call]) -> list[Any]:
        if not self.cluster:
            return raise_errors(await pipeline(self.client, calls))
        # Redis Cluster: the calls go out concurrently, each routed (and redirected) by the
        # cluster client, as the async cluster pipeline refuses scripts. The client learns the
        # topology first, once: left to the calls (lazily), a new client's first calls at once
        # meet it disconnecting connections under their feet.
        await self.client.initialize()
        replies = await asyncio.gather(
            *(single(self.client, call) for call in calls), return_exceptions=True
        )
        return raise_errors(list(replies))

    async def run(self, plan: Plan) -> Any:
        return plan.finish(await self._send(plan.calls))

    async def sweep(self, now: float | None = None) -> list[Transition]:
        out: list[Transition] = []
        more = True
        while more:
            more, transitions = await self.sweep_round(now)
            out.extend(transitions)
        return out

    async def ping(self) -> bool:
        return bool(await self.client.ping())

    def job_lock(self, job: str, timeout: float):
        return self.client.lock(self.keys.lock(job), timeout=timeout, blocking=False)

    async def aclose(self) -> None:
        await self.client.aclose()
