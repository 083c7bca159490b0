"""``delivery.start`` runs a send at once up to its first wait and finishes it in a task as the
coroutine itself would have run: results, errors and cancels reach it where it waits."""

from __future__ import annotations

import asyncio

import pytest

from presence_app.realtime import delivery


async def test_a_send_that_does_not_wait_needs_no_task():
    done = []

    async def send() -> None:
        done.append(1)

    assert delivery.start(send()) is None
    assert done == [1]


async def test_a_send_that_waits_is_finished_in_a_task_with_each_resumption():
    loop = asyncio.get_running_loop()
    first, second = loop.create_future(), loop.create_future()
    seen: list[object] = []

    async def send() -> None:
        seen.append(await first)
        await asyncio.sleep(0)  # a bare yield
        try:
            await second
        except ValueError as exc:
            seen.append(str(exc))

    task = delivery.start(send())
    assert task is not None and seen == []
    first.set_result("result")
    await asyncio.sleep(0.01)
    assert seen == ["result"] and not task.done()
    second.set_exception(ValueError("the future's error"))
    await asyncio.wait_for(task, 5)
    assert seen == ["result", "the future's error"]


@pytest.mark.parametrize("started", [True, False])
async def test_a_waiting_send_is_cancelled_where_it_waits(started):
    loop = asyncio.get_running_loop()
    never = loop.create_future()
    ended: list[str] = []

    async def send() -> None:
        try:
            await never
        except asyncio.CancelledError:
            ended.append("cancelled")
            raise
        finally:
            ended.append("cleaned up")

    task = delivery.start(send())
    assert task is not None
    if started:  # the task has taken over the wait
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0)
    # cancelled at its wait; or, before the task ran, closed there: its cleanup ran either way
    assert ended == (["cancelled", "cleaned up"] if started else ["cleaned up"])


async def test_a_writer_keeps_the_order_behind_a_waiting_send():
    gate = asyncio.Event()
    out: list[str] = []

    async def send_frame(frame: dict) -> None:
        out.append(frame["n"])

    async def send_text(text: str) -> None:
        if text == "1":
            await gate.wait()
        out.append(text)

    writer = delivery.Writer(send_frame, send_text)
    writer.put({"n": "0"}, "0")
    writer.put({"n": "1"}, "1")  # waits
    writer.put({"n": "2"}, "2")
    own = asyncio.ensure_future(writer.send({"n": "own"}))  # the session's own, after them
    await asyncio.sleep(0.01)
    assert out == ["0"] and not own.done()
    gate.set()
    await asyncio.wait_for(own, 5)
    writer.put({"n": "3"}, "3")
    assert out == ["0", "1", "2", "own", "3"]
