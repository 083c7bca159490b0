"""{% load presence %}: each tag's HTML, invisible users, the LastSeen fallback, round trips."""

import re
import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import AnonymousUser
from django.db import connection
from django.http import HttpResponse
from django.template import Context, Template, engines
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.urls import path
from django.utils import timezone, translation
from django.utils.translation import gettext_lazy

from presence_app import presence
from presence_app.models import LastSeen

from ..users import create_user, login_name, names

pytestmark = pytest.mark.django_db


def render(source, viewer=None, **context):
    request = RequestFactory().get("/")
    request.user = viewer or AnonymousUser()
    return Template("{% load presence %}" + source).render(Context({"request": request, **context}))


def text(html):
    """What a reader sees: the HTML without its tags."""
    return re.sub(r"<[^>]*>", "", html)


def dot(user_id, state, label):
    return (
        f'<span class="presence-dot presence-{state}" data-presence-user="{user_id}" role="img" '
        f'title="{label}" aria-label="{label}"></span>'
    )


@pytest.fixture
def people(django_user_model, redis_client):
    """ann online, ben idle, cy busy with a message, di offline, eve invisible."""
    names = ("ann", "ben", "cy", "di", "eve")
    users = {n: create_user(n) for n in names}
    now = time.time()
    presence.touch(users["ann"].pk)
    presence.connect("ben-1", users["ben"].pk, now=now - 400)
    presence.heartbeat("ben-1", users["ben"].pk)  # a heartbeat is not activity: idle
    presence.idle(users["ben"].pk)  # announced by the process that saw the activity stop
    presence.touch(users["cy"].pk)
    presence.set_status(users["cy"].pk, "dnd", message="In a meeting", emoji="📅")
    presence.touch(users["eve"].pk)
    presence.set_status(users["eve"].pk, "invisible")
    return users


def test_presence_dot_for_each_state(people):
    p = people
    html = render(
        "{% for u in users %}{% presence_dot u %}{% endfor %}",
        users=[p["ann"], p["ben"], p["cy"], p["di"], p["eve"]],
    )
    assert html == "".join(
        [
            dot(p["ann"].pk, "online", "Online"),
            dot(p["ben"].pk, "idle", "Away"),
            dot(p["cy"].pk, "dnd", "Do not disturb: 📅 In a meeting"),
            dot(p["di"].pk, "offline", "Offline"),
            dot(p["eve"].pk, "offline", "Offline"),  # invisible reads offline to others
        ]
    )


def test_a_dot_s_label_follows_the_active_language(people, monkeypatch):
    """Labels are translated once per language and state (not once per dot), so a page in
    another language must still get its own. Django's catalog translates "Yes" ("Oui")."""
    from presence_app import markup as tags

    monkeypatch.setitem(tags.LABELS, "online", gettext_lazy("Yes"))
    tags._label.cache_clear()
    tags._dot_parts.cache_clear()
    source = "{% presence_dot u %}"
    try:
        with translation.override("fr"):
            assert render(source, u=people["ann"]) == dot(people["ann"].pk, "online", "Oui")
        with translation.override("en"):
            assert render(source, u=people["ann"]) == dot(people["ann"].pk, "online", "Yes")
            # a page that switches language part-way draws each dot in its own
            page = "{% load i18n %}{% presence_dot u %}{% language 'fr' %}{% presence_dot u %}"
            assert render(page + "{% endlanguage %}", u=people["ann"]) == dot(
                people["ann"].pk, "online", "Yes"
            ) + dot(people["ann"].pk, "online", "Oui")
    finally:
        tags._label.cache_clear()
        tags._dot_parts.cache_clear()


def test_a_dot_escapes_the_user_s_own_text(people):
    presence.set_status(people["ann"].pk, message="<b>\"hi\" & 'bye'</b>")
    assert render("{% presence_dot u %}", u=people["ann"]) == dot(
        people["ann"].pk,
        "online",
        "Online: &lt;b&gt;&quot;hi&quot; &amp; &#x27;bye&#x27;&lt;/b&gt;",
    )


def test_presence_of_gives_the_status_fields(people):
    html = render(
        "{% presence_of u as p %}{{ p.state }} {{ p.emoji }} {{ p.message }}|"
        "{% presence_of v as q %}{{ q.state }}",
        u=people["cy"],
        v=people["eve"],
    )
    assert html == "dnd 📅 In a meeting|offline"


def test_an_invisible_user_sees_their_own_state(people):
    eve = people["eve"]
    tag = "{% presence_dot u %}"
    assert render(tag, viewer=eve, u=eve) == dot(eve.pk, "invisible", "Invisible")
    assert render(tag, viewer=people["ann"], u=eve.pk) == dot(eve.pk, "offline", "Offline")


def test_last_seen_online_recent_durable_and_never(people, django_user_model):
    p = people
    presence.touch(p["di"].pk, now=time.time() - 200)  # its online window ended 140 s ago
    gone = create_user("gone")  # Redis forgot them long ago
    LastSeen.objects.create(user=gone, last_seen_at=timezone.now() - timedelta(hours=2, minutes=1))
    never = create_user("never")
    html = render(
        "{% for u in users %}[{% last_seen u %}]{% endfor %}",
        users=[p["ann"], p["di"], gone, never, p["eve"]],
    )
    assert text(html) == (
        "[online now][last seen 3\xa0minutes ago][last seen 2\xa0hours ago][not seen yet]"
        "[last seen now]"  # eve, invisible, reads as gone the moment she hid
    )


def test_online_count_online_users_and_room_members(people):
    p = people
    presence.connect("ann-1", p["ann"].pk)
    presence.connect("cy-1", p["cy"].pk)
    presence.join("lobby", "cy-1", p["cy"].pk)
    presence.join("lobby", "ann-1", p["ann"].pk)
    html = render(
        "{% online_count %}|{% online_users limit=2 as users %}"
        "{% for u in users %}{{ u.get_username }} {% endfor %}|"
        "{% room_members 'lobby' as members %}{% for u in members %}{{ u.get_username }} {% endfor %}|"
        "{% room_members 'nobody-here' as empty %}{{ empty|length }}"
    )
    # Most recently seen first: cy and ann just connected; eve (invisible) is never counted.
    cy, ann = names("cy", "ann")
    assert html == f"3|{cy} {ann} |{cy} {ann} |0"


def test_two_hundred_dots_cost_one_round_trip(django_user_model, redis_calls):
    field = django_user_model.USERNAME_FIELD
    users = django_user_model.objects.bulk_create(
        [django_user_model(**{field: login_name(f"user{i:03}")}) for i in range(200)]
    )
    for user in users[::10]:
        presence.touch(user.pk)
    page = (
        "{% presence_prefetch users %}"
        "{% for u in users %}{% presence_dot u %} {% last_seen u %}{% endfor %}"
    )
    redis_calls.reset()
    with CaptureQueriesContext(connection) as queries:
        html = render(page, users=users)
    assert html.count('class="presence-dot') == 200
    assert html.count("presence-online") == 20 and html.count(">online now<") == 20
    assert redis_calls.by_command() == {"evalsha": 1}  # one get_many for the whole page
    assert len(queries) == 1  # one LastSeen lookup for all 180 users Redis has no last seen of

    # Without the prefetch, each dot is a round trip of its own.
    redis_calls.reset()
    render("{% for u in users %}{% presence_dot u %}{% endfor %}", users=users[:20])
    assert redis_calls.total == 20


def test_prefetch_by_attribute(people, redis_calls):
    messages = [type("Message", (), {"author": u})() for u in people.values()]
    redis_calls.reset()
    html = render(
        "{% presence_prefetch messages 'author' %}"
        "{% for m in messages %}{% presence_dot m.author %}{% endfor %}",
        messages=messages,
    )
    assert html.count("presence-dot") == 5
    assert redis_calls.total == 1


def test_tags_render_with_redis_down(redis_down, django_user_model):
    user = create_user("ann")
    html = render(
        "{% presence_dot u %}|{% last_seen u %}|{% online_count %}|"
        "{% online_users as users %}{{ users|length }}|"
        "{% room_members 'lobby' as m %}{{ m|length }}",
        u=user,
    )
    assert text(html) == "|not seen yet|0|0|0"
    assert html.startswith(dot(user.pk, "offline", "Offline") + "|")


def test_the_stylesheet_styles_every_state():
    from django.contrib.staticfiles import finders

    css = open(finders.find("presence_app/css/presence.css")).read()
    for state in ("online", "idle", "dnd", "offline"):
        assert f".presence-dot.presence-{state}" in css


def test_last_seen_is_a_live_span_or_plain_text(people):
    ann, di = people["ann"], people["di"]
    html = render("{% last_seen u %}", u=di)
    assert html == (
        f'<span class="presence-last-seen" data-presence-last-seen="{di.pk}" '
        'data-presence-state="offline" data-presence-text-online="online now" '
        'data-presence-text-offline="last seen just now" '
        'data-presence-text-hidden="offline" '
        'data-presence-text-ago="last seen %(when)s">not seen yet</span>'
    )
    assert 'data-presence-state="online"' in render("{% last_seen u %}", u=ann)
    assert render('<b title="{% last_seen u live=False %}">', u=ann) == '<b title="online now">'


OWN_PAGE = (
    "{% load presence %}{% presence_dot request.user %}|{% last_seen request.user %}|"
    "{% presence_of request.user as p %}{{ p.state }}"
)


def own_page(request):
    return HttpResponse(engines["django"].from_string(OWN_PAGE).render({}, request))


urlpatterns = [path("own/", own_page)]


def test_the_requests_own_user_reads_online_on_the_page_it_renders(
    people, client, settings, django_user_model
):
    # PresenceMiddleware writes a request's touch after the response: the page must not draw
    # its own user offline meanwhile (the first page after logging in).
    settings.ROOT_URLCONF = __name__
    newcomer = people["di"]  # never seen
    offline = dot(newcomer.pk, "offline", "Offline")
    # Not through the middleware (a mail rendered by a task), the user reads as Redis has them.
    assert render("{% presence_dot u %}", viewer=newcomer, u=newcomer) == offline
    client.force_login(newcomer)
    mine, seen, state = client.get("/own/").content.decode().split("|")
    assert mine == dot(newcomer.pk, "online", "Online")
    assert text(seen) == "online now" and state == "online"
    assert presence.get(newcomer).state == "online"  # written, not only drawn
    # Somebody who went invisible before logging in stays invisible on their first page.
    hidden = django_user_model.objects.create_user("hidden")
    presence.set_status(hidden, "invisible")
    client.force_login(hidden)
    assert client.get("/own/").content.decode().endswith("|invisible")
    assert presence.get(hidden).state == "offline"  # to everybody else


def test_a_prefetch_of_a_page_reads_what_each_tag_then_shows(
    people, django_user_model, redis_calls
):
    """A list or a queryset of users is checked at once; a page with something that is no user
    in it (None, a visitor) is read key by key, skipping it, as before: one round trip either
    way, and each dot as if read alone."""
    from django.contrib.auth.models import AnonymousUser

    p = people
    alone = {n: render("{% presence_dot u %}", u=p[n]) for n in p}
    pks = [p[n].pk for n in ("ann", "cy", "di")]
    pages = {
        "list": ([p["ann"], p["cy"], p["di"]], ["ann", "cy", "di"]),
        "queryset": (
            django_user_model.objects.filter(pk__in=pks).order_by("pk"),
            # in the queryset's order: by key (a UUID's order is not the users' creation order)
            [n for _, n in sorted((p[n].pk, n) for n in ("ann", "cy", "di"))],
        ),
        "mixed": (
            [p["ann"], None, AnonymousUser(), p["eve"].pk, str(p["ben"].pk)],
            ["ann", "eve", "ben"],
        ),
    }
    for name, (users, shown) in pages.items():
        redis_calls.reset()
        html = render(
            "{% presence_prefetch users %}{% for u in users %}{% presence_dot u %}{% endfor %}",
            users=users,
        )
        assert redis_calls.by_command() == {"evalsha": 1}, name
        assert html == "".join(alone[n] for n in shown), name
