import logging
from typing import Any

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _

logger = logging.getLogger("presence_app")


def on_user_logged_out(sender: Any, request: Any = None, user: Any = None, **kwargs: Any) -> None:
    """A browser signed out (``user_logged_out``, sent before the session is flushed). Its
    session is deleted, and its live connections end: each socket and stream opened with that
    sign-in closes (4402), and the browser connects again with its cookies as they are now
    (signed out: 4401). And its CSRF token changes, as Django changes it at sign-in:
    presence.js' tabs share a connection by it (docs/websocket.md), so a page opened from now
    on never joins one opened before."""
    if request is None or user is None:
        return
    from django.conf import settings
    from django.middleware.csrf import rotate_token

    from . import presence, tenants

    if not settings.CSRF_USE_SESSIONS:  # in the session, it goes with the session's flush
        rotate_token(request)
    session = getattr(request, "session", None)
    key = getattr(session, "session_key", None)
    if not key:
        return
    # The sign-in ends before its sockets are told. Django flushes the session only after this
    # signal, and presence.js connects again at once at 4402: a socket opened meanwhile would
    # sign in again with the old cookie. A fresh store's delete leaves ``request.session`` as
    # it is for the receivers after this one (and a signed cookie has nothing to delete).
    try:
        type(session)().delete(key)
    except Exception:  # the session store away: Django's flush reports it
        logger.warning("presence: a signed-out session not deleted", exc_info=True)
    try:
        # in the request's workspace (TENANT), where its sockets are, middleware or not
        with tenants.activate(tenants.resolve(request)):
            presence.end_session(user, key)
    except Exception:  # the channel layer away: the sign-out goes on
        logger.warning("presence: the connections of a signed-out session not ended", exc_info=True)


class PresenceConfig(AppConfig):
    name = "presence_app"
    verbose_name = _("Presence")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register the checks and the setting_changed receivers (breaker, hooks, and the
        # stores: presence imports connection).
        from django.conf import settings
        from django.contrib.auth.signals import user_logged_out
        from django.db.models.signals import post_delete

        from . import checks, failopen, presence  # noqa: F401
        from .core import hooks  # noqa: F401
        from .jobs.lastseen import on_user_deleted, on_user_forgotten, on_user_offline
        from .signals import user_forgotten, user_offline

        # Offline transitions make the last seen durable (LastSeen), whoever observed them.
        user_offline.connect(on_user_offline, dispatch_uid="presence_app.lastseen")
        # A deleted user is forgotten (presence.forget), and so are a forgotten user's rows.
        user_forgotten.connect(on_user_forgotten, dispatch_uid="presence_app.lastseen.erase")
        post_delete.connect(
            on_user_deleted, sender=settings.AUTH_USER_MODEL, dispatch_uid="presence_app.erase"
        )
        # A sign-out ends the live connections of that sign-in.
        user_logged_out.connect(on_user_logged_out, dispatch_uid="presence_app.signed_out")
