"""The room-authorization hook of the reliability servers (PRESENCE["CAN_JOIN"])."""


def can_join(user, room: str) -> bool:
    """``staff-*`` rooms admit staff only, ``closed-*`` rooms nobody; the rest everybody."""
    if room.startswith("closed-"):
        return False
    if room.startswith("staff-"):
        return bool(user.is_staff)
    return True
