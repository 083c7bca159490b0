"""Waiting for the frames of a presence socket, the one way every test client does it: the
in-process socket (tests/ws.py), the scale-out tabs (tests/scaleout/client.py) and the
reliability clients (tests/reliability/clients.py).

A client mixes in :class:`FrameWaits` and gives ``name`` and ``next(timeout)``: the next frame
it received, in order, ``{"type": CLOSED, ...}`` once the socket closed, and ``TimeoutError``
when nothing came within ``timeout``. Frames a wait does not ask for (heartbeat acks, events of
other rooms) are skipped; a close ends a wait that does not ask for it at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

CLOSED = "<closed>"

Spec = tuple[str, dict[str, Any]]


def matches(frame: dict[str, Any], type: str, match: dict[str, Any]) -> bool:
    return frame["type"] == type and all(frame.get(k) == v for k, v in match.items())


class FrameWaits:
    #: Seconds a wait lasts unless it says otherwise: it ends when the frame comes, so a long
    #: one costs a passing test nothing, and a loaded machine may take seconds to deliver it.
    WAIT_TIMEOUT = 30.0

    name: str

    async def next(self, timeout: float) -> dict[str, Any]:
        raise NotImplementedError

    async def wait_for(
        self, type: str, /, timeout: float | None = None, **match: Any
    ) -> dict[str, Any]:
        """The next frame of ``type`` whose fields equal ``match``; other frames are skipped."""
        return (await self.wait_all((type, match), timeout=timeout))[0]

    async def wait_all(self, *specs: Spec, timeout: float | None = None) -> list[dict[str, Any]]:
        """One frame per ``(type, match)`` spec, in whatever order they come (events of
        different groups are not ordered among themselves); other frames are skipped."""
        timeout = self.WAIT_TIMEOUT if timeout is None else timeout
        loop = asyncio.get_running_loop()
        deadline, seen = loop.time() + timeout, []
        found: list[dict[str, Any] | None] = [None] * len(specs)
        while None in found:
            missing = [s for s, f in zip(specs, found, strict=True) if f is None]
            try:
                frame = await self.next(max(0.0, deadline - loop.time()))
            except TimeoutError:
                # (a refusal of the frame waited on hides behind later heartbeat acks)
                errors = [f for f in seen if f["type"] == "error"]
                raise AssertionError(
                    f"{self.name}: no {missing} within {timeout}s; "
                    f"saw {len(seen)} other frames, the last {seen[-10:]}, errors {errors}"
                ) from None
            for i, (type_, match) in enumerate(specs):
                if found[i] is None and matches(frame, type_, match):
                    found[i] = frame
                    break
            else:
                if frame["type"] == CLOSED:
                    raise AssertionError(
                        f"{self.name}: closed ({frame.get('code')}) waiting for "
                        f"{missing}; saw {seen[-10:]}"
                    )
                seen.append(frame)
        return found  # type: ignore[return-value]

    async def collect(self, seconds: float) -> list[dict[str, Any]]:
        """Every frame that arrives within ``seconds``."""
        loop = asyncio.get_running_loop()
        deadline, out = loop.time() + seconds, []
        while (left := deadline - loop.time()) > 0:
            try:
                out.append(await self.next(left))
            except TimeoutError:
                break
        return out


def about(frames: list[dict[str, Any]], user: str) -> list[dict[str, Any]]:
    """The presence events among ``frames`` that concern ``user``."""
    return [f for f in frames if f.get("user") == user and f["type"].startswith("presence.")]
