"""The suite's harness: a test may end while a cancelled task's database call still runs in its
thread (an offline's ``LastSeen`` write as ``shutdown()`` cancels the sweeper). Without
conftest's ``_threads_done_with_the_database`` the teardown's flush met that call's lock: CI's
``lowest`` cell failed once so ("database table is locked: auth_user")."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.db import transaction

from ..users import acreate_user

pytestmark = pytest.mark.django_db(transaction=True)


def read_users_slowly(inside: threading.Event) -> None:
    with transaction.atomic():  # holds the table's lock until the block ends
        list(get_user_model().objects.all())
        inside.set()
        time.sleep(0.5)


async def test_a_cancelled_database_call_ends_before_the_teardown():
    await acreate_user("ann")
    inside = threading.Event()
    call = asyncio.ensure_future(sync_to_async(read_users_slowly)(inside))
    assert await asyncio.to_thread(inside.wait, 30)
    call.cancel()
    await asyncio.gather(call, return_exceptions=True)  # the thread runs on; the flush follows
