from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class PresenceConfig(AppConfig):
    name = "presence_app"
    verbose_name = _("Presence")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Register the checks and the setting_changed receivers (breaker, hooks, and the
        # stores: presence imports connection).
        from django.conf import settings
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
