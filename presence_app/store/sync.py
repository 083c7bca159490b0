"""The store's synchronous face (redis-py): views, middleware, commands, threads."""

from __future__ import annotations

from typing import Any

import redis
from redis.exceptions import AskError, NoScriptError, ResponseError

from . import scripts
from .base import BaseStore, translate_error
from .plans import Call, Plan
from .types import StoreConfig, Transition


def queue(pipe: Any, call: Call) -> None:
    if call.script:
        pipe.evalsha(scripts.load()[call.script].sha, len(call.keys), *call.keys, *call.args)
    else:
        pipe.execute_command(*call.args)


def missing_scripts(calls: list[Call], replies: list[Any]) -> set[str]:
    return {c.script for c, r in zip(calls, replies, strict=True) if isinstance(r, NoScriptError)}


def to_repeat(calls: list[Call], replies: list[Any]) -> list[int]:
    """After NOSCRIPT: the calls to run again once the scripts are loaded, in order. The failed
    ones, and every read after the first of them: a round trip's calls run in order, so a read
    that came after a write it missed (a status set, then the user read back) is read again,
    after it. A write that ran is not repeated."""
    failed = [i for i, r in enumerate(replies) if isinstance(r, NoScriptError)]
    if not failed:
        return []
    return [
        i
        for i in range(failed[0], len(calls))
        if isinstance(replies[i], NoScriptError)
        or not calls[i].script  # a plain command: a read, or a write as it was (idempotent)
        or calls[i].script in scripts.READS_ONLY
    ]


def raise_errors(replies: list[Any]) -> list[Any]:
    for reply in replies:
        if isinstance(reply, Exception):
            raise translate_error(reply)
    return replies


def single(client: Any, call: Call) -> Any:
    """One call through redis-py's own command path (a missing script loaded, the call
    repeated): a cluster client's calls, and a round trip of one call (a page of dots), which
    a pipeline's bookkeeping would slow."""
    if not call.script:
        return client.execute_command(*call.args)
    script = scripts.load()[call.script]
    try:
        return client.evalsha(script.sha, len(call.keys), *call.keys, *call.args)
    except NoScriptError:
        client.script_load(script.source)
        return client.evalsha(script.sha, len(call.keys), *call.keys, *call.args)


def pipeline(client: Any, calls: list[Call]) -> list[Any]:
    """All calls in one round trip on one (non-cluster) client. After a Redis restart or a
    SCRIPT FLUSH (NOSCRIPT) the scripts are loaded again and the calls that failed repeated."""
    if len(calls) == 1:
        try:
            return [single(client, calls[0])]
        except ResponseError as exc:  # as a pipeline answers it
            return [exc]
    pipe = client.pipeline(transaction=False)
    for call in calls:
        queue(pipe, call)
    replies = pipe.execute(raise_on_error=False)
    missing = missing_scripts(calls, replies)
    if missing:
        for name in missing:
            client.script_load(scripts.load()[name].source)
        again = to_repeat(calls, replies)
        for i, reply in zip(again, pipeline(client, [calls[i] for i in again]), strict=True):
            replies[i] = reply
    return replies


class Store(BaseStore):
    """Presence on a ``redis.Redis`` or ``redis.RedisCluster`` client."""

    def __init__(
        self,
        client: redis.Redis | redis.RedisCluster,
        config: StoreConfig | None = None,
        *,
        process: str | None = None,
    ) -> None:
        super().__init__(config, process)
        self.client = client
        self.cluster = isinstance(client, redis.RedisCluster)

    def _send(self, calls: list[Call]) -> list[Any]:
        if not self.cluster:
            return raise_errors(pipeline(self.client, calls))
        # Redis Cluster: one pipeline per node (the cluster pipeline refuses scripts); a call
        # whose slot moved meanwhile is sent again through the cluster client, which follows it.
        replies: list[Any] = [None] * len(calls)
        by_node: dict[str, tuple[Any, list[int]]] = {}
        for i, call in enumerate(calls):
            node = self.client.get_node_from_key(call.routing_key)
            by_node.setdefault(node.name, (node, []))[1].append(i)
        for node, indexes in by_node.values():
            node_replies = pipeline(
                self.client.get_redis_connection(node), [calls[i] for i in indexes]
            )
            for i, reply in zip(indexes, node_replies, strict=True):
                replies[i] = single(self.client, calls[i]) if isinstance(reply, AskError) else reply
        return raise_errors(replies)

    def run(self, plan: Plan) -> Any:
        return plan.finish(self._send(plan.calls))

    def sweep(self, now: float | None = None) -> list[Transition]:
        """Evicts expired leases and users and announces idle ones; returns the transitions."""
        out: list[Transition] = []
        more = True
        while more:
            more, transitions = self.sweep_round(now)
            out.extend(transitions)
        return out

    def clear(self) -> int:
        """Deletes every key of this store's prefix; returns how many."""
        deleted = 0
        nodes = (
            [self.client.get_redis_connection(n) for n in self.client.get_primaries()]
            if self.cluster
            else [self.client]
        )
        for pattern, extra in self.housekeeping_keys():
            for node in nodes:
                batch = list(node.scan_iter(match=pattern, count=1000))
                for i in range(0, len(batch), 500):
                    # one slot per UNLINK on a cluster: keys of a shard share a hash tag
                    for key in batch[i : i + 500]:
                        deleted += node.unlink(key)
            deleted += sum(self.client.unlink(key) for key in extra)
        return deleted

    def ping(self) -> bool:
        return bool(self.client.ping())

    def job_lock(self, job: str, timeout: float):
        """A redis-py lock so that one process at a time runs ``job`` ("sweep", "flush")."""
        return self.client.lock(self.keys.lock(job), timeout=timeout, blocking=False)
