"""Admin: LastSeen rows with their live status, and the live presence dashboard.

Who sees what (docs/admin.md):

- The ``LastSeen`` rows (change list, change view, history) are the truth: exact last seens
  and devices, whatever the ``AUDIENCE`` policy and the users' privacy choices say. Superusers
  only, like the dashboard's invisible users; no permission opens them to other staff.
- The dashboard is a view of ``LastSeenAdmin`` (``admin/presence_app/lastseen/dashboard/``) for
  staff with the view permission on LastSeen; the ``PresenceDashboard`` proxy only puts a link
  to it on the admin index. Staff who are not superusers read it through their own viewer (the
  front door's redaction: the policy, privacy choices, invisible users); its 24-hour chart,
  the site's own samples, is shown to them only where no ``AUDIENCE`` policy applies (then
  every viewer may see every visible user it counts).

Both read the current workspace (``TENANT``) only: the rows' manager reads no other.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from . import presence
from .failopen import breaker
from .markup import dot_html, state_label
from .models import LastSeen, PresenceDashboard, RoomMembership
from .store import UNAVAILABLE
from .web import dashboard
from .web.lookup import PresenceBatch


class ReadOnly(admin.ModelAdmin):
    """An admin that adds, changes and deletes nothing: the rows are written by the presence
    machinery only (like a log), for superusers too. No "Delete selected" either: a deleted row
    would only come back at the user's next sign of life (deleting the user deletes its row)."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def may_open_dashboard(request: HttpRequest) -> bool:
    """Staff with the view permission on LastSeen (the admin site checks is_staff)."""
    opts = LastSeen._meta
    return bool(request.user.has_perm(f"{opts.app_label}.view_{opts.model_name}"))


@admin.register(LastSeen)
class LastSeenAdmin(ReadOnly):
    list_display = ("user", "live_status", "last_seen_at", "device")
    list_filter = ("last_seen_at", "device")
    list_select_related = ("user",)
    date_hierarchy = "last_seen_at"
    readonly_fields = ("user", "last_seen_at", "device")
    dashboard_template = "admin/presence_app/dashboard.html"
    dashboard_body_template = "admin/presence_app/dashboard_body.html"

    def get_search_fields(self, request: HttpRequest) -> list[str]:
        User = get_user_model()
        fields = [f"user__{User.USERNAME_FIELD}"]
        email = User.get_email_field_name()
        if email != User.USERNAME_FIELD and any(f.name == email for f in User._meta.fields):
            fields.append(f"user__{email}")
        return fields

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """The rows are the truth (exact last seens, devices): superusers only."""
        return bool(request.user.is_active and request.user.is_superuser)

    def has_dashboard_permission(self, request: HttpRequest) -> bool:
        """May ``request``'s user open the live dashboard (read through their own viewer)?"""
        return may_open_dashboard(request)

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        """The page's live statuses in one round trip, kept on its rows for ``live_status``."""
        cl = super().get_changelist_instance(request)
        cl.result_list = list(cl.result_list)
        # Superusers only (has_view_permission): the truth, invisible users as such.
        batch = PresenceBatch(presence.TRUSTED)
        batch.prefetch(str(row.user_id) for row in cl.result_list)
        for row in cl.result_list:
            # Redis away: no status rather than everybody "Offline".
            row.live = batch.presences[str(row.user_id)] if batch.available else None
        return cl

    @admin.display(description=_("live status"))
    def live_status(self, obj: LastSeen) -> str:
        live = getattr(obj, "live", None)
        if live is None:
            return "—"
        return format_html("{} {}", dot_html(live), state_label(live))

    # -- the dashboard ----------------------------------------------------------------------------
    def get_urls(self) -> list:
        view = self.admin_site.admin_view(self.dashboard_view)
        name = f"{self.opts.app_label}_{self.opts.model_name}_dashboard"
        return [path("dashboard/", view, name=name), *super().get_urls()]

    def dashboard_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_dashboard_permission(request):
            raise PermissionDenied
        query = request.GET.get("q", "").strip()[:150]
        try:
            page = max(1, int(request.GET.get("page", 1)))
        except ValueError:
            page = 1
        context: dict[str, Any] = {
            **self.admin_site.each_context(request),
            "title": _("Live presence"),
            "opts": self.opts,
            "query": query,
            "partial": request.GET.get("partial") == "1",
            "dashboard_body_template": self.dashboard_body_template,
            "updated": timezone.localtime(),
        }
        try:
            context.update(dashboard.build(request, page, query))
        except UNAVAILABLE as exc:
            breaker.trip(exc, "the admin dashboard")
            context["unavailable"] = True
        if not request.user.is_superuser and presence.viewer(request.user).filtered:
            # The chart's samples count the whole site: under a policy, users outside this
            # viewer's audience too. No chart rather than one per viewer it cannot be.
            context["chart"] = None
            context["chart_withheld"] = True
        template = self.dashboard_body_template if context["partial"] else self.dashboard_template
        return TemplateResponse(request, template, context)


@admin.register(PresenceDashboard)
class PresenceDashboardAdmin(ReadOnly):
    """The admin index's "Live dashboard" entry: it opens LastSeenAdmin's dashboard."""

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return may_open_dashboard(request)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self.has_view_permission(request)

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        opts = LastSeen._meta
        url = reverse(f"{self.admin_site.name}:{opts.app_label}_{opts.model_name}_dashboard")
        return HttpResponseRedirect(url)


@admin.register(RoomMembership)
class RoomMembershipAdmin(admin.ModelAdmin):
    """Who belongs to which permanent room of the current workspace; added here (in it), each of
    the user's connections joins the room the next time it opens."""

    list_display = ("room", "user", "joined_at")
    list_filter = ("room",)
    list_select_related = ("user",)
    search_fields = ("room",)
    raw_id_fields = ("user",)
    readonly_fields = ("joined_at",)
