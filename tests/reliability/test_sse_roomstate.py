"""Live room state over SSE + REST against a real server (uvicorn, two processes): a socket
user and a stream user see each other's state both ways, across processes; the REST call meets
the socket's size limit; a closed stream's state goes."""

from __future__ import annotations

import pytest

from tests.sse_client import SseClient

from .clients import Client

pytestmark = pytest.mark.timeout(120)


async def next_state(client, user: str, timeout: float = 10.0, **data) -> dict:
    """The next state of ``user`` ``client`` hears with ``data`` (none given: a removal)."""
    while True:
        frame = await client.wait_for("presence.roomstate", timeout=timeout)
        for st in frame["states"]:
            if st["user"] == user and st["data"] == (data or None):
                return st


async def test_socket_and_sse_users_see_each_others_state(db, servers, store):
    users = db.users(["alice", "bob", "carol"])
    one = await servers.astart("one", server="uvicorn")
    two = await servers.astart("two", server="uvicorn")
    ws = await Client(one, users["alice"]).connect()
    ws.beat(0.5)
    sse = await SseClient(two, users["bob"]).connect()
    await ws.join("doc")
    await sse.join("doc")

    await ws.send(type="roomstate", room="doc", data={"cursor": [1, 2]})
    got = await next_state(sse, users["alice"].id, cursor=[1, 2])
    status, body = await sse.post("roomstate", room="doc", data={"cursor": [5, 6]})
    assert status == 200, body
    mine = await next_state(ws, users["bob"].id, cursor=[5, 6])
    assert got["conn"] != mine["conn"] and sse.hello["stream"] not in mine["conn"]

    # Over ROOM_STATE_MAX_BYTES: the socket's error, as a 400, and nothing changes.
    status, body = await sse.post("roomstate", room="doc", data={"x": "y" * 2000})
    assert (status, body["code"]) == (400, "too_large")
    # A joiner's snapshot carries both states.
    late = await SseClient(one, users["carol"]).connect()
    snapshot = await late.join("doc")
    assert sorted((s["user"], s["data"]["cursor"][0]) for s in snapshot["states"]) == sorted(
        [(users["alice"].id, 1), (users["bob"].id, 5)]
    )
    # The stream closes: its state goes (the socket hears the removal).
    await sse.close()
    await next_state(ws, users["bob"].id, timeout=15)
    assert [u for u, _, _ in store.room_states("doc")] == [users["alice"].id]
    await late.close()
    await ws.close()
