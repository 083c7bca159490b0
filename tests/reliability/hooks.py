"""The room-authorization hooks of the reliability servers (PRESENCE["CAN_JOIN"])."""

import time


def can_join(user, room: str) -> bool:
    """``staff-*`` rooms admit staff only, ``closed-*`` rooms nobody; the rest everybody."""
    if room.startswith("closed-"):
        return False
    if room.startswith("staff-"):
        return bool(user.is_staff)
    return True


def slow_can_join(user, room: str) -> bool:
    """``can_join``, which for ``slow-<ms>`` rooms takes that many milliseconds to answer."""
    if room.startswith("slow-"):
        time.sleep(int(room.removeprefix("slow-")) / 1000)
    return can_join(user, room)
