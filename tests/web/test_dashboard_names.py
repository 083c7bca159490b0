"""The admin dashboard shows people by name (their full name, else the user model's own
``__str__``), their login beside it, and finds them by any of name, login or email: a site whose
users log in with an email address (USERNAME_FIELD) no longer lists and searches addresses only."""

import pytest

from presence_app import presence
from presence_app.web import dashboard

from ..users import create_user

pytestmark = pytest.mark.django_db

URL = "/admin/presence_app/lastseen/dashboard/"


def has_names(model) -> bool:
    """Django's user model has first and last names; tests/accounts' (an email, a UUID) none."""
    return {"first_name", "last_name"} <= {f.name for f in model._meta.get_fields()}


@pytest.fixture
def named_model(django_user_model):
    if not has_names(django_user_model):
        pytest.skip("this user model has no names (its str() is shown: see the last test)")
    return django_user_model


@pytest.fixture
def agents(redis_client):
    """Two agents online with full names, one without (her login stands for her name)."""
    named = {"ann": ("Ann", "Lee"), "bob": ("Bob", "Marsh"), "cy": ("", "")}
    users = {}
    for login, (first, last) in named.items():
        user = create_user(login)
        user.first_name, user.last_name = first, last
        user.save()
        presence.connect(f"{login}-1", user.pk)
        users[login] = user
    return users


def rows(response):
    return [(row.name, row.login) for row in response.context["rows"]]


def test_rows_show_the_name_and_the_login(client, admin_user, named_model, agents):
    client.force_login(admin_user)
    response = client.get(URL, {"q": "Lee"})
    ann = agents["ann"]
    assert rows(response) == [("Ann Lee", ann.get_username())]
    html = response.content.decode()
    assert '<span class="presence-name">Ann Lee</span>' in html
    assert f'<span class="presence-login">{ann.get_username()}</span>' in html
    # No full name: the model's own str() (here the login), shown once.
    cy = client.get(URL, {"q": agents["cy"].get_username()})
    assert rows(cy) == [(str(agents["cy"]), agents["cy"].get_username())]
    assert "presence-login" not in cy.content.decode().split('class="presence-row"')[1]


@pytest.mark.parametrize(
    "query, found",
    [
        ("ann", ["ann"]),  # the login
        ("MARSH", ["bob"]),  # a last name, any case
        ("bob marsh", ["bob"]),  # every word, each in any field
        ("ann marsh", []),
        ("a", ["ann", "bob"]),  # first names, and cy's login has no "a"
    ],
)
def test_the_search_looks_in_names_and_logins(
    client, admin_user, named_model, agents, query, found
):
    client.force_login(admin_user)
    listed = {row.user_id for row in client.get(URL, {"q": query}).context["rows"]}
    listed &= {str(u.pk) for u in agents.values()}  # the admin's own visit may list them too
    expected = {str(agents[name].pk) for name in found}
    if query == "a":  # logins that hold an "a" (an email domain may) count too
        expected |= {str(u.pk) for u in agents.values() if "a" in u.get_username().lower()}
    assert listed == expected


def test_the_search_fields_are_the_models_text_fields(django_user_model):
    fields = dashboard._search_fields(django_user_model)
    assert fields[0] == django_user_model.USERNAME_FIELD
    assert ({"first_name", "last_name"} <= set(fields)) == has_names(django_user_model)
    assert "password" not in fields and "is_staff" not in fields


def test_a_model_without_names_shows_its_str_once(client, admin_user, agents, django_user_model):
    client.force_login(admin_user)
    user = agents["cy"]
    user.first_name = user.last_name = ""  # (no-ops on a model without them)
    if has_names(django_user_model):
        user.save()
    response = client.get(URL, {"q": user.get_username()})
    assert rows(response) == [(str(user), user.get_username())]
    assert "presence-login" not in response.content.decode().split('class="presence-row"')[1]
