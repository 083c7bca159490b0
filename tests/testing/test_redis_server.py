"""presence_app.testing.RedisServer, the private Redis of the host projects' tests and of the
demo: it answers for its own process only."""

from __future__ import annotations

import pytest

from presence_app.testing import RedisServer, RedisUnavailable


def test_a_port_taken_meanwhile_by_another_redis_is_not_taken_for_ours():
    """The port is chosen free, then another process binds it before ours does (tests running
    side by side): the other server's answer is not ours; ours starts on another port."""
    other = RedisServer().start()
    ours = RedisServer()
    ours.port = other.port  # as if chosen free a moment before the other took it
    try:
        ours.start()
        assert ours.port != other.port
        with ours.client() as client:
            assert int(client.info("server")["process_id"]) == ours.process.pid
            client.set("mine", "1")
        with other.client() as client:
            assert client.get("mine") is None
    finally:
        ours.stop()
        other.stop()


def test_a_port_given_by_the_caller_is_kept():
    holder = RedisServer().start()
    try:
        with pytest.raises(RedisUnavailable, match="Address already in use"):
            RedisServer(port=holder.port).start(timeout=5)
    finally:
        holder.stop()
