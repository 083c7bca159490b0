"""``{% load demo %}``: the demo's avatar colours and dashboard link (presence itself comes from
``presence``)."""

from django import template
from django.contrib import admin
from django.urls import reverse

from presence_app.models import LastSeen

register = template.Library()


@register.filter
def avatar_hue(user) -> int:
    """A stable hue per user, the same as demo.js' ``Demo.hue``."""
    pk = str(getattr(user, "pk", user))
    # A UUID (or any other key) by its characters: not one colour for every such user.
    number = int(pk) if pk.isdigit() else sum(map(ord, pk))
    return (number * 67 + 200) % 360


@register.simple_tag(takes_context=True)
def dashboard_url(context) -> str:
    """The live dashboard's address if this user may open it (the admin's own checks), else ""."""
    request = context.get("request")
    if request is None or not admin.site.is_registered(LastSeen):
        return ""
    model_admin = admin.site.get_model_admin(LastSeen)
    if not (admin.site.has_permission(request) and model_admin.has_dashboard_permission(request)):
        return ""
    return reverse(f"{admin.site.name}:presence_app_lastseen_dashboard")
