"""``{% load demo %}``: the demo's avatar colours (presence itself comes from ``presence``)."""

from django import template

register = template.Library()


@register.filter
def avatar_hue(user) -> int:
    """A stable hue per user, the same as demo.js' ``Demo.hue``."""
    pk = str(getattr(user, "pk", user))
    return (int(pk) * 67 + 200) % 360 if pk.isdigit() else 210
