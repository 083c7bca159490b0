"""Is the sign-in a socket speaks for still valid? Django checks a request's session on every
request (its expiry, its deletion by a sign-out elsewhere, the password hash it was made with);
Channels checks a socket's once, when it connects. A socket open for hours would otherwise keep
receiving presence after a password change or a session deleted by the site (an admin's "sign
out everywhere", a flushed session store). A socket checks again every
``SESSION_CHECK_INTERVAL`` seconds, in the background of a frame it sent; a sign-out in the
browser ends its sockets at once anyway (``presence.end_session``).

An SSE stream needs none of this: its heartbeats are POSTs, each authenticated as a request,
and a stream whose heartbeats are refused is closed as silent after ``LEASE_TTL``."""

from __future__ import annotations

import logging
import time
from importlib import import_module
from typing import Any

from channels.auth import get_user
from django.conf import settings

from .. import conf

logger = logging.getLogger("presence_app")


class SignIn:
    """The sign-in of one socket's scope: ``due()`` says when it is to be checked again."""

    def __init__(self, scope: dict[str, Any]) -> None:
        self.key = getattr(scope.get("session"), "session_key", None)
        self.user_pk = getattr(scope.get("user"), "pk", None)
        self.checked = time.monotonic()
        self.checking = False

    def due(self) -> bool:
        interval = float(conf.get("SESSION_CHECK_INTERVAL"))
        if not self.key or not interval or self.checking:
            return False  # no session to check (a token's sign-in), or not asked for
        return time.monotonic() - self.checked >= interval

    async def valid(self) -> bool:
        """The session, read afresh, still signs in the same user (Channels' ``get_user``:
        Django's rules, the session auth hash included). A session store that cannot be read
        (its database away) leaves the socket as it is."""
        self.checking = True
        try:
            fresh = import_module(settings.SESSION_ENGINE).SessionStore(self.key)
            user = await get_user({"session": fresh})
            return bool(user.is_authenticated) and user.pk == self.user_pk
        except Exception:
            logger.warning("presence: a socket's session could not be checked", exc_info=True)
            return True
        finally:
            self.checked, self.checking = time.monotonic(), False
